"""For the outage tests: what stalewatch serves, sampled while a fault lasts, and `analyze` of
a kubectl snapshot of the cluster to compare with once it is over."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.controlplane.harness import ControlPlane
from tests.kube.support import Samples, Service

Root = tuple[str, str, str, str]
"""(type, kind, namespace, name) of a root finding."""


def served_roots(document: dict[str, Any]) -> set[Root]:
    return {
        (f["type"], f["subject"]["kind"], f["subject"].get("namespace", ""), f["subject"]["name"])
        for f in document["findings"]
        if f.get("root_cause") is None
    }


def metric_roots(samples: Samples) -> set[Root]:
    roots = set()
    for (name, labels), value in samples.items():
        found = dict(labels)
        if name == "stalewatch_finding" and found.get("root") == "true" and value == 1:
            roots.add((found["type"], found["kind"], found["namespace"], found["name"]))
    return roots


async def missing_roots(service: Service, roots: set[Root]) -> str:
    """What of `roots` /api/v1/findings or /metrics does not serve ("" when both serve all)."""
    served = served_roots(await service.findings())
    in_metrics = metric_roots(await service.metrics())
    if roots <= served and roots <= in_metrics:
        return ""
    return f"not served {sorted(roots - served)}, not in /metrics {sorted(roots - in_metrics)}"


@dataclass
class Sample:
    served: set[Root]
    in_metrics: set[Root]
    stale: bool
    readyz: int
    ready_while_stale: bool


@dataclass
class Sampler:
    """Reads /api/v1/findings, /metrics and /readyz over and over until stopped."""

    service: Service
    samples: list[Sample] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            document = await self.service.findings()
            in_metrics = metric_roots(await self.service.metrics())
            readyz, _ = await self.service.get("/readyz")
            telemetry = self.service.runtime.telemetry
            ready_while_stale = telemetry.ready()[0] and telemetry.stale  # one instant of the event loop
            self.samples.append(
                Sample(
                    served_roots(document),
                    in_metrics,
                    document["summary"]["stale"],
                    readyz,
                    ready_while_stale,
                )
            )
            await asyncio.sleep(0.1)


def snapshot(plane: ControlPlane, service: Service, namespace: str, into: Path) -> Path:
    """What stalewatch watches in `namespace` (and the cluster-scoped kinds), saved with kubectl."""
    items: list[dict[str, Any]] = []
    for resource in service.runtime.watcher.watched():
        name = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        where = [f"--namespace={namespace}"] if resource.namespaced else []
        if resource.field_selector and resource.namespaced:
            where.append(f"--field-selector={resource.field_selector}")
        items += json.loads(plane.kubectl("get", name, *where, "--output=json"))["items"]
    path = into / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def analyze(snapshot_file: Path, *, now: str) -> list[dict[str, Any]]:
    """The findings of `stalewatch analyze --output json` on a snapshot."""
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "stalewatch"),
            "analyze",
            "--output=json",
            f"--now={now}",
            str(snapshot_file),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    findings: list[dict[str, Any]] = json.loads(done.stdout)["findings"]
    return findings
