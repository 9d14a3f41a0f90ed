"""Two clusters, one Prometheus, one fleet: the real programs, started once per module.

Two control planes (kube-apiserver + etcd each: the session's and one of our own), a `stalewatch
run` watching each, one Prometheus scraping both with a distinct `cluster` label and evaluating
the shipped rule file, and `stalewatch fleet` asking that Prometheus. The same namespace name is
used in both clusters, so the same object is the same row of the version matrix.

`prod` gets the tofu-controller incident (tests/e2e/scenarios.py) on revision A; `staging` the
same stack, healthy, on revision B.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.app.test_incidents import REV_A
from tests.e2e.rig import RULES, run_args
from tests.e2e.scenarios import tofu_controller_down
from tests.export.promstack import PROMETHEUS, free_port, get_json, process_running
from tests.kube.support import poll
from tests.kubeclient import Kube

PROD, STAGING = "prod", "staging"
WITHIN = 60.0
"""Deadline for a change in a cluster to travel stalewatch -> scrape -> query -> fleet."""
STALENESS_WINDOW = 300.0
"""Prometheus' lookback: the longest a series that stopped being scraped can still be seen."""


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
    prometheus: str
    fleet: str
    """Base URL of `stalewatch fleet`."""
    rules: Path
    """The rule file Prometheus loads: the shipped one, until `shorten_for` rewrites it."""
    logs: Path

    def document(self, query: str = "") -> dict[str, Any]:
        result: dict[str, Any] = get_json(f"{self.fleet}/api/v1/fleet{query}")
        return result

    def cluster(self, name: str, document: dict[str, Any] | None = None) -> dict[str, Any]:
        [found] = [c for c in (document or self.document())["clusters"] if c["name"] == name]
        return found

    def alerts(self, alertname: str) -> list[dict[str, Any]]:
        alerts = get_json(f"{self.prometheus}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alertname]

    def shorten_for(self, alertname: str, duration: str) -> None:
        """Rewrites only that alert's `for:` in the loaded rule file and has Prometheus reload it."""
        rules = yaml.safe_load(self.rules.read_text())
        for group in rules["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == alertname:
                    rule["for"] = duration
        self.rules.write_text(yaml.safe_dump(rules))
        request = urllib.request.Request(f"{self.prometheus}/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

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


def prometheus_config(targets: dict[str, str], rules: Path) -> dict[str, Any]:
    """One job, one static target per cluster labelled with its name."""
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": "stalewatch",
                "static_configs": [
                    {"targets": [target], "labels": {"cluster": name}} for name, target in targets.items()
                ],
            }
        ],
    }


@contextmanager
def prometheus_running(workdir: Path, targets: dict[str, str]) -> Iterator[tuple[str, Path]]:
    rules = workdir / "stalewatch.rules.yaml"
    rules.write_text(RULES.read_text())  # as shipped
    config = workdir / "prometheus.yaml"
    config.write_text(yaml.safe_dump(prometheus_config(targets, rules)))
    port = free_port()
    command = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'prometheus-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
    ]
    url = f"http://127.0.0.1:{port}"
    with process_running(command, f"{url}/-/ready", workdir / "prometheus.log"):
        yield url, rules


@contextmanager
def fleet_running(workdir: Path, prometheus: str, clusters: dict[str, Cluster]) -> Iterator[str]:
    listen = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "watcher", "fleet", "--prometheus", prometheus, "--listen", listen]
    for cluster in clusters.values():
        command += ["--cluster-url", f"{cluster.name}={cluster.url}"]
    with process_running(command, f"http://{listen}/healthz", workdir / "fleet.log"):
        yield f"http://{listen}"


def start_stalewatch(cluster: Cluster, kubeconfig: Path, namespace: str) -> None:
    args = run_args(kubeconfig=kubeconfig, listen=cluster.stalewatch, namespaces=[namespace])
    cluster.running.enter_context(process_running(args, f"{cluster.url}readyz", cluster.log))


def new_cluster(name: str, kube: Kube, workdir: Path) -> Cluster:
    return Cluster(name, kube, f"127.0.0.1:{free_port()}", workdir / f"stalewatch-{name}.log")
