"""Heartbeats read through a real Prometheus: it scrapes the lab's recorded real Flux controllers'
/metrics (served in-process on loopback, one server per controller Pod, labelled with the Pod's
namespace and name as a PodMonitor labels them), and the reader asks it for each controller.

What comes back must be exactly what reading the recording directly gives (the strict parser sees
the same exposition, Prometheus' renaming of the gotk `namespace` label undone), dated by the
scrape; a target Prometheus cannot scrape is unknown, naming why.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.export.promstack import PROMETHEUS, free_port, get_json, loopback, process_running, wait_for
from watcher.kube.heartbeat_prometheus import PrometheusReads
from watcher.kube.heartbeats import Read
from watcher.model.ingest.controller_metrics import ControllerMetrics, Unreadable, parse_controller_metrics
from watcher.model.rules.metrics_targets import MetricsTarget

RECORDINGS = Path(__file__).parents[1] / "lab" / "recordings" / "metrics" / "recovered"
CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller")
DOWN = "notification-controller"
"""A controller whose Pod Prometheus cannot scrape (nothing listens on its port)."""
NAMESPACE = "flux-controllers"
"""The controllers' Pods' namespace: not their objects' (flux-system), so the gotk series' own
`namespace`, which Prometheus renames `exported_namespace`, must come back as it was."""


def pod_of(controller: str) -> str:
    return f"{controller}-7d9f8c-x2x4q"


def target_of(controller: str, *, pods: tuple[str, ...] | None = None) -> MetricsTarget:
    names = pods if pods is not None else (pod_of(controller),)
    return MetricsTarget(
        controller,
        f"Deployment/{NAMESPACE}/{controller}",
        None,  # no port known: Prometheus needs none
        "",
        tuple((name, "10.0.0.1") for name in names),
        None,
        "no metrics port" if pods is None else "",
    )


@dataclass
class Scraped:
    url: str
    """Prometheus' base URL."""
    started: datetime
    """Before Prometheus started: no scrape is older."""


def _handler(body: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    return Handler


@contextmanager
def prometheus_scraping(workdir: Path, targets: Sequence[tuple[int, dict[str, str]]]) -> Iterator[str]:
    """A real Prometheus scraping each loopback port every second with its target labels, once
    it has scraped them all; yields its URL."""
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
        "scrape_configs": [
            {
                "job_name": "flux-system/flux",
                "static_configs": [
                    {"targets": [f"127.0.0.1:{port}"], "labels": labels} for port, labels in targets
                ],
            }
        ],
    }
    (workdir / "prometheus.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        PROMETHEUS,
        f"--config.file={workdir / 'prometheus.yaml'}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with process_running(command, f"{url}/-/ready", workdir / "prometheus.log"):
        wait_for(
            lambda: len(get_json(f"{url}/api/v1/query?query=up")["data"]["result"]) == len(targets),
            what="Prometheus to scrape every target",
        )
        yield url


@pytest.fixture(scope="module")
def prometheus() -> Iterator[Scraped]:
    """The recorded controllers, and DOWN's closed port."""
    started = datetime.now(UTC)
    with ExitStack() as running:
        workdir = Path(running.enter_context(tempfile.TemporaryDirectory(prefix="prom-heartbeats-")))
        targets = []
        for controller in [*CONTROLLERS, DOWN]:
            if controller == DOWN:
                port = free_port()
            else:
                body = (RECORDINGS / f"{controller}.txt").read_bytes()
                port = running.enter_context(loopback(_handler(body)))
            targets.append((port, {"namespace": NAMESPACE, "pod": pod_of(controller)}))
        yield Scraped(running.enter_context(prometheus_scraping(workdir, targets)), started)


async def read(scraped: Scraped, target: MetricsTarget, **options: Any) -> tuple[str, Read, datetime | None]:
    async with PrometheusReads(scraped.url, timeout=10.0, stale_after=90.0, **options) as reads:
        return await reads.read(target)


@pytest.mark.parametrize("controller", CONTROLLERS)
async def test_a_controller_read_through_prometheus_is_its_recording_read_directly_dated_by_the_scrape(
    prometheus: Scraped, controller: str
) -> None:
    result, got, at = await read(prometheus, target_of(controller))
    expected = parse_controller_metrics((RECORDINGS / f"{controller}.txt").read_bytes())
    assert isinstance(expected, ControllerMetrics)
    assert expected.objects
    assert (result, got) == ("ok", expected)
    assert at is not None
    assert prometheus.started <= at <= datetime.now(UTC)


async def test_a_controller_selected_by_its_heartbeat_selector_reads_the_same(prometheus: Scraped) -> None:
    controller = "kustomize-controller"
    selector = f'{{job="flux-system/flux", pod="{pod_of(controller)}"}}'
    result, got, _ = await read(prometheus, target_of(controller, pods=()), selectors={controller: selector})
    assert (result, got) == ("ok", parse_controller_metrics((RECORDINGS / f"{controller}.txt").read_bytes()))


async def test_a_pod_prometheus_cannot_scrape_is_unknown_naming_why(prometheus: Scraped) -> None:
    result, got, at = await read(prometheus, target_of(DOWN))
    assert result == "not_scraped"
    assert at is None
    assert got == Unreadable(
        f"Prometheus {prometheus.url} could not scrape pod {NAMESPACE}/{pod_of(DOWN)} (up 0)"
    )


async def test_a_pod_prometheus_has_no_series_of_is_unknown(prometheus: Scraped) -> None:
    result, got, _ = await read(prometheus, target_of("image-reflector-controller"))
    assert result == "not_scraped"
    assert got == Unreadable(
        f"Prometheus {prometheus.url} has no series of pod {NAMESPACE}/{pod_of('image-reflector-controller')}"
    )


async def test_without_a_leader_every_ready_pod_must_be_scraped(prometheus: Scraped) -> None:
    """Two Ready Pods, one never scraped: it could be the leader, so the read is unknown."""
    pods = (pod_of("kustomize-controller"), "kustomize-controller-7d9f8c-other")
    result, got, _ = await read(prometheus, target_of("kustomize-controller", pods=pods))
    assert result == "not_scraped"
    assert isinstance(got, Unreadable)
    assert "kustomize-controller-7d9f8c-other" in got.reason
