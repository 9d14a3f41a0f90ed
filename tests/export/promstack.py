"""A real Prometheus + Alertmanager on loopback ports, and a webhook that records notifications.

Reusable by any test that wants to see stalewatch's metrics scraped, its rules evaluated and
its alerts routed and inhibited by the real programs:

    def test_x(prom_stack: StackFactory, tmp_path: Path) -> None:
        stack = prom_stack(targets=["127.0.0.1:8080"], rule_files=[RULES],
                           alertmanager_config=yaml.safe_load(EXAMPLE.read_text()))
        stack.wait_for(lambda: stack.firing("StalewatchControllerDown"), what="the alert")

Everything is polled with a deadline (no sleeps that assume a speed). Prometheus scrapes and
evaluates every second; Alertmanager groups for a second.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import yaml
from prometheus_client.registry import CollectorRegistry

from tests.controlplane.harness import stop_process
from watcher.export.metrics import render

T = TypeVar("T")

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager") or "alertmanager"
STARTUP_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(check: Callable[[], T | None], *, what: str, timeout: float = 60.0) -> T:
    """Polls `check` until it returns something truthy; fails naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@dataclass
class Webhook:
    """Records Alertmanager webhook payloads, by receiver (the last path segment)."""

    port: int = field(default_factory=free_port)
    notifications: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def url(self, receiver: str) -> str:
        return f"http://127.0.0.1:{self.port}/{urllib.parse.quote(receiver)}"

    def alertnames(self, receiver: str | None = None) -> list[str]:
        return [
            alert["labels"].get("alertname", "")
            for to, payload in list(self.notifications)
            if receiver in (None, to)
            for alert in payload.get("alerts", [])
        ]

    @contextmanager
    def serving(self) -> Iterator[Webhook]:
        notifications = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                notifications.append((urllib.parse.unquote(self.path.lstrip("/")), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test output is for the test."""

        with loopback(Handler, port=self.port):
            yield self


@contextmanager
def serve_registry(registry: CollectorRegistry) -> Iterator[str]:
    """Serves a registry's /metrics on a loopback port as stalewatch serves it (`render`, which
    picks the format from the scraper's Accept header); yields the scrape target host:port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, content_type = render(registry, accept=self.headers.get("Accept"))
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with loopback(Handler) as port:
        yield f"127.0.0.1:{port}"


@contextmanager
def loopback(handler: type[BaseHTTPRequestHandler], *, port: int = 0) -> Iterator[int]:
    """A threaded HTTP server with `handler` on 127.0.0.1 (`port`, or a free one) for as long as
    the block runs; yields its port."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def route_to_webhook(config: dict[str, Any], webhook: Webhook) -> dict[str, Any]:
    """An Alertmanager config with every receiver posting to the webhook and one-second grouping.

    Routes and inhibit_rules are kept as they are: they are what a test wants to exercise.
    """
    config = json.loads(json.dumps(config))
    config["receivers"] = [
        {"name": r["name"], "webhook_configs": [{"url": webhook.url(r["name"]), "send_resolved": False}]}
        for r in config.get("receivers", [])
    ]
    config["route"].update(group_wait="1s", group_interval="1s", repeat_interval="1h")
    return config


@dataclass
class PromStack:
    prometheus_url: str
    alertmanager_url: str
    webhook: Webhook

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        body = get_json(url)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def firing(self, alertname: str) -> list[dict[str, Any]]:
        """Prometheus' firing alerts of that name."""
        alerts = get_json(f"{self.prometheus_url}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"]

    def alertmanager_alerts(self, alertname: str) -> list[dict[str, Any]]:
        """Alertmanager's view, with status.state active|suppressed and status.inhibitedBy."""
        alerts: list[dict[str, Any]] = get_json(f"{self.alertmanager_url}/api/v2/alerts")
        return [a for a in alerts if a["labels"].get("alertname") == alertname]

    wait_for = staticmethod(wait_for)


@contextmanager
def process_running(command: Sequence[str], ready_url: str, log: Path) -> Iterator[None]:
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not _ready(ready_url):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{command[0]} did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
            yield
        finally:
            stop_process(process, patience=10)


@contextmanager
def prom_stack_running(
    workdir: Path,
    *,
    targets: Sequence[str],
    rule_files: Sequence[Path] = (),
    alertmanager_config: dict[str, Any] | None = None,
    external_labels: dict[str, str] | None = None,
    job: str = "stalewatch",
) -> Iterator[PromStack]:
    """Starts Alertmanager (receivers rewritten to a webhook) and a Prometheus scraping `targets`."""
    webhook = Webhook()
    am_port, prom_port = free_port(), free_port()
    am_config = route_to_webhook(
        alertmanager_config or {"route": {"receiver": "default"}, "receivers": [{"name": "default"}]},
        webhook,
    )
    (workdir / "alertmanager.yaml").write_text(yaml.safe_dump(am_config))
    prom_config = {
        "global": {
            "scrape_interval": "1s",
            "evaluation_interval": "1s",
            "external_labels": external_labels or {},
        },
        "rule_files": [str(p) for p in rule_files],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(targets)}]}],
    }
    (workdir / "prometheus.yaml").write_text(yaml.safe_dump(prom_config))
    alertmanager = [
        ALERTMANAGER,
        f"--config.file={workdir / 'alertmanager.yaml'}",
        f"--storage.path={workdir / 'alertmanager-data'}",
        f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",
    ]
    prometheus = [
        PROMETHEUS,
        f"--config.file={workdir / 'prometheus.yaml'}",
        f"--storage.tsdb.path={workdir / 'prometheus-data'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
    ]
    am_url, prom_url = f"http://127.0.0.1:{am_port}", f"http://127.0.0.1:{prom_port}"
    with (
        webhook.serving(),
        process_running(alertmanager, f"{am_url}/-/ready", workdir / "alertmanager.log"),
        process_running(prometheus, f"{prom_url}/-/ready", workdir / "prometheus.log"),
    ):
        yield PromStack(prometheus_url=prom_url, alertmanager_url=am_url, webhook=webhook)


class StackFactory(Protocol):
    def __call__(
        self,
        *,
        targets: Sequence[str],
        rule_files: Sequence[Path] = (),
        alertmanager_config: dict[str, Any] | None = None,
        external_labels: dict[str, str] | None = None,
    ) -> PromStack: ...


@pytest.fixture
def prom_stack(tmp_path: Path) -> Iterator[StackFactory]:
    """Starts stacks on demand; stops them all when the test ends."""
    with ExitStack() as running:

        def start(
            *,
            targets: Sequence[str],
            rule_files: Sequence[Path] = (),
            alertmanager_config: dict[str, Any] | None = None,
            external_labels: dict[str, str] | None = None,
        ) -> PromStack:
            workdir = Path(tempfile.mkdtemp(prefix="promstack-", dir=tmp_path))
            return running.enter_context(
                prom_stack_running(
                    workdir,
                    targets=targets,
                    rule_files=rule_files,
                    alertmanager_config=alertmanager_config,
                    external_labels=external_labels,
                )
            )

        yield start
