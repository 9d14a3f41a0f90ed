"""Two clusters, one Prometheus, one fleet: the real programs, started once per module.

Two control planes (kube-apiserver + etcd each: the session's and one of our own), a `stalewatch
run` watching each, one Prometheus scraping both with a distinct `cluster` label and evaluating
the shipped rule file, and `stalewatch fleet` asking that Prometheus. The same namespace name is
used in both clusters, so the same object is the same row of the version matrix.

`prod` gets the tofu-controller incident (tests/e2e/scenarios.py) on revision A; `staging` the
same stack, healthy, on revision B. A third target, `broken`, is no stalewatch but an exporter of
stalewatch's series with values no stalewatch writes (up NaN, synced 0.5): the fleet cannot read
them, so it must show that cluster unknown.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

from tests.app.test_incidents import REV_A
from tests.e2e.rig import RULES, run_args
from tests.e2e.scenarios import tofu_controller_down
from tests.export.promstack import PROMETHEUS, free_port, get_json, loopback, process_running
from tests.kube.support import poll
from tests.kubeclient import Kube

PROD, STAGING, BROKEN = "prod", "staging", "broken"
UNREADABLE_SERIES = b"""# TYPE stalewatch_up gauge
stalewatch_up NaN
# TYPE stalewatch_synced gauge
stalewatch_synced 0.5
"""
"""What `broken` exports: Prometheus stores both; neither is a value a stalewatch writes."""
WITHIN = 60.0
"""Deadline for a change in a cluster to travel stalewatch -> scrape -> query -> fleet."""
STALENESS_WINDOW = 300.0
"""Prometheus' lookback: the longest a series that stopped being scraped can still be seen."""
RESTORE_EVALUATION = 15
"""Seconds between evaluations of the restarted Prometheus (`FleetRig.restart_prometheus_remembering`)."""
RESTORED_WITHIN = 180.0
"""Deadline for the restarted Prometheus to restore an alert and evaluate it firing (3 evaluations)."""


def healthy_stack(ns: str, revision: str) -> list[dict[str, Any]]:
    """The tofu incident's objects before anything goes wrong, every revision replaced by `revision`."""
    objects = tofu_controller_down(ns).setup(ns)
    return [json.loads(json.dumps(obj).replace(REV_A, revision)) for obj in objects]


@dataclass
class Cluster:
    name: str
    kube: Kube
    stalewatch: str
    """host:port of its `stalewatch run`."""
    log: Path
    running: ExitStack = field(default_factory=ExitStack)

    @property
    def url(self) -> str:
        return f"http://{self.stalewatch}/"

    def stop_stalewatch(self) -> None:
        self.running.close()


@dataclass
class FleetRig:
    namespace: str
    clusters: dict[str, Cluster]
    store: Store
    fleet: str
    """Base URL of `stalewatch fleet`."""
    logs: Path

    @property
    def prometheus(self) -> str:
        return self.store.url

    def document(self, query: str = "") -> dict[str, Any]:
        result: dict[str, Any] = get_json(f"{self.fleet}/api/v1/fleet{query}")
        return result

    def page(self, query: str = "") -> str:
        with urllib.request.urlopen(f"{self.fleet}/{query}", timeout=5) as response:
            text: str = response.read().decode()
            return text

    def cluster(self, name: str, document: dict[str, Any] | None = None) -> dict[str, Any]:
        [found] = [c for c in (document or self.document())["clusters"] if c["name"] == name]
        return found

    def alerts(self, alertname: str) -> list[dict[str, Any]]:
        alerts = get_json(f"{self.prometheus}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alertname]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector Prometheus answers for `promql` now."""
        answer = get_json(f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def rule_groups(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = get_json(f"{self.prometheus}/api/v1/rules")["data"]["groups"]
        return groups

    def restart_prometheus_remembering(self, alert: dict[str, str], *, active_since: int) -> None:
        """Stops Prometheus, gives its data dir the `ALERTS_FOR_STATE` series it would have written
        had `alert` (its exact label set) been active since `active_since` (Unix seconds), and
        starts it again on the same data dir, port and shipped rule file.

        Prometheus restores an alert's `for` state once, after its second evaluation from start,
        for the alerts active then, from the last sample of `ALERTS_FOR_STATE{<the alert's labels>}`
        within `--rules.alert.for-outage-tolerance` (1h by default). The block written here ends
        after the head's last sample, so Prometheus drops the head's older samples on replay: the
        restarted one sees both clusters only once it scrapes them, which starts some 5s after it
        does. It evaluates every RESTORE_EVALUATION so that its second evaluation comes after that.
        """
        self.store.stop()
        until = time.time()  # after the last sample the stopped Prometheus wrote
        self.store.backfill(for_state_openmetrics(alert, active_since=active_since, until=until))
        self.store.start(evaluate_every=RESTORE_EVALUATION)

    async def until_fleet(self, check: Any, *, what: str, within: float = WITHIN) -> dict[str, Any]:
        """The first fleet document for which `check(document)` holds."""

        def current() -> dict[str, Any] | None:
            document = self.document()
            return document if check(document) else None

        try:
            found: dict[str, Any] = await poll(current, within=within, what=what)
        except AssertionError as error:
            error.add_note(self.diagnosis())
            raise
        return found

    def diagnosis(self) -> str:
        lines = [f"fleet: {json.dumps(self.document(), indent=1)[:4000]}"]
        for log in sorted(self.logs.glob("*.log")):
            lines.append(f"{log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(lines)


def prometheus_config(targets: dict[str, str], *, evaluate_every: int) -> dict[str, Any]:
    """One job, one static target per cluster labelled with its name; the shipped rule file."""
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": f"{evaluate_every}s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "stalewatch",
                "static_configs": [
                    {"targets": [target], "labels": {"cluster": name}} for name, target in targets.items()
                ],
            }
        ],
    }


def for_state_openmetrics(alert: dict[str, str], *, active_since: int, until: float) -> str:
    """`ALERTS_FOR_STATE{<alert's labels>}` as Prometheus writes it while the alert is active: one
    sample an evaluation (every RESTORE_EVALUATION here), valued at the alert's activeAt in Unix
    seconds, from `active_since` up to `until`; in the OpenMetrics text promtool reads."""
    labels = ",".join(f'{name}="{_escaped(value)}"' for name, value in sorted(alert.items()))
    count = int((until - active_since) // RESTORE_EVALUATION)
    times = (until - k * RESTORE_EVALUATION for k in range(count, -1, -1))
    lines = [f"ALERTS_FOR_STATE{{{labels}}} {active_since} {at:.3f}" for at in times]
    return "\n".join(["# TYPE ALERTS_FOR_STATE gauge", *lines, "# EOF", ""])


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class Store:
    """The one Prometheus, which can be stopped and started again on the same port and data dir."""

    workdir: Path
    targets: dict[str, str]
    port: int = field(default_factory=free_port)
    starts: int = 0
    running: ExitStack = field(default_factory=ExitStack)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data(self) -> Path:
        return self.workdir / "prometheus-data"

    def start(self, *, evaluate_every: int = 1) -> None:
        self.starts += 1
        config = self.workdir / f"prometheus-{self.starts}.yaml"
        config.write_text(yaml.safe_dump(prometheus_config(self.targets, evaluate_every=evaluate_every)))
        command = [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        log = self.workdir / f"prometheus-{self.starts}.log"
        self.running.enter_context(process_running(command, f"{self.url}/-/ready", log))

    def stop(self) -> None:
        self.running.close()

    def backfill(self, openmetrics: str) -> None:
        """Writes the samples as TSDB blocks into the (stopped) Prometheus' data dir."""
        source = self.workdir / f"backfill-{self.starts}.om"
        source.write_text(openmetrics)
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(self.data)],
            check=True,
            capture_output=True,
        )


@contextmanager
def prometheus_running(workdir: Path, targets: dict[str, str]) -> Iterator[Store]:
    store = Store(workdir, targets)
    with store.running:
        store.start()
        yield store


@contextmanager
def fleet_running(workdir: Path, prometheus: str, clusters: dict[str, Cluster]) -> Iterator[str]:
    listen = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "watcher", "fleet", "--prometheus", prometheus, "--listen", listen]
    for cluster in clusters.values():
        command += ["--cluster-url", f"{cluster.name}={cluster.url}"]
    with process_running(command, f"http://{listen}/healthz", workdir / "fleet.log"):
        yield f"http://{listen}"


@contextmanager
def unreadable_exporter_running() -> Iterator[str]:
    """host:port of a /metrics serving UNREADABLE_SERIES, for Prometheus to scrape as `broken`."""

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(UNREADABLE_SERIES)

        def log_message(self, *args: object) -> None:
            pass

    with loopback(Metrics) as port:
        yield f"127.0.0.1:{port}"


def start_stalewatch(cluster: Cluster, kubeconfig: Path, namespace: str) -> None:
    args = run_args(kubeconfig=kubeconfig, listen=cluster.stalewatch, namespaces=[namespace])
    cluster.running.enter_context(process_running(args, f"{cluster.url}readyz", cluster.log))


def new_cluster(name: str, kube: Kube, workdir: Path) -> Cluster:
    return Cluster(name, kube, f"127.0.0.1:{free_port()}", workdir / f"stalewatch-{name}.log")
