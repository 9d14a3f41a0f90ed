"""Times /metrics renders of a synthetic evaluation, in process, without HTTP.

`python -m bench.scrape [--objects N] [--findings N] [--against PATH]` builds an Evaluation shaped
like a large incident (N GitOps objects, every fifth one a Kustomization with a revision, a
controller down and N findings pointing at it) and renders it the way a scrape does, in the
states a scrape meets: the first one, an unchanged model, one object changed, the findings
rebuilt (every evaluation during an incident), and an OpenMetrics scrape. `--against` names a
copy of another version's watcher/export/metrics.py: both render the same evaluation in turn and
must produce the same bytes. Times are CPU time of this process (time.process_time), the median
of `--runs`, so that other work on a shared machine counts as little as it can. Prints one line per case.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.util
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from watcher.export import metrics
from watcher.export.watcher_metrics import WatcherCollector
from watcher.model.evaluation import Evaluation
from watcher.model.types import (
    ControllerHealth,
    Finding,
    FindingType,
    ObjectHealth,
    RevisionInfo,
    Severity,
    Status,
    Subject,
)
from watcher.telemetry import Telemetry

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
KINDS = ("Kustomization", "HelmRelease", "GitRepository", "HelmChart", "Terraform")
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"


def subject(kind: str, namespace: str, name: str) -> Subject:
    return {"apiVersion": "v1", "kind": kind, "namespace": namespace, "name": name}


def evaluation(objects: int, findings: int) -> Evaluation:
    statuses = list(Status)
    health, revisions = [], []
    for i in range(objects):
        about = subject(KINDS[i % len(KINDS)], f"team-{i % 200}", f"app-{i}")
        moment = None if i % 3 == 0 else NOW - timedelta(seconds=i)
        health.append(ObjectHealth(about, statuses[i % len(statuses)], "", i % 7 == 0, "c", moment))
        if i % 5 == 0:
            revisions.append(
                RevisionInfo(about, f"GitRepository/team-{i % 200}/repo", f"main@sha1:{i:040x}", "v")
            )
    controllers = [
        ControllerHealth(
            subject("Deployment", "flux-system", f"c{i}"), i % 2 == 0, "LeaseExpired", ("a.io",), None
        )
        for i in range(8)
    ]
    root = Finding(
        "root", FindingType.CONTROLLER_DOWN, Severity.CRITICAL, controllers[1].subject, "", NOW, {}
    )
    symptoms = [
        Finding(
            f"f{i}",
            FindingType.STATUS_STALE,
            Severity.INFO,
            health[i % objects].subject,
            "",
            None if i % 2 else NOW,
            {},
            root_cause="root",
        )
        for i in range(findings - 1)
    ]
    return Evaluation(
        now=NOW, findings=[root, *symptoms], objects=health, controllers=controllers, revisions=revisions
    )


def registry(module: Any, current: list[Evaluation]) -> Any:
    built = module.build_registry(lambda: current[0])
    telemetry = Telemetry(up=True, started=True)
    for kind in ("Pod", "ReplicaSet", "Deployment", *KINDS):
        stats = telemetry.kind("", kind)
        stats.synced, stats.objects = True, 1000
        stats.events.update(ADDED=5, MODIFIED=3)
    built.register(WatcherCollector(telemetry))
    return built


def scrapes(module: Any, base: Evaluation) -> tuple[dict[str, float], bytes]:
    """CPU milliseconds of each kind of scrape, and the first body."""
    current = [base]
    served = registry(module, current)
    changed = dataclasses.replace(base.objects[10], stale=not base.objects[10].stale)
    steps: list[tuple[str, Callable[[], None], str | None]] = [
        ("first", lambda: None, None),
        ("unchanged", lambda: None, None),
        (
            "one_object_changed",
            lambda: current.__setitem__(
                0, dataclasses.replace(base, objects=[*base.objects[:10], changed, *base.objects[11:]])
            ),
            None,
        ),
        (
            "findings_rebuilt",
            lambda: current.__setitem__(
                0, dataclasses.replace(current[0], findings=[*base.findings], now=NOW + timedelta(seconds=1))
            ),
            None,
        ),
        ("openmetrics", lambda: None, OPENMETRICS),
    ]
    times, first = {}, b""
    for name, change, accept in steps:
        change()
        gc.collect()
        start = time.process_time()
        body, _ = module.render(served, accept=accept)
        times[name] = (time.process_time() - start) * 1000
        first = first or body
    return times, first


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("other_metrics", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--objects", type=int, default=50_000)
    parser.add_argument("--findings", type=int, default=2_400)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", help="a copy of another version's watcher/export/metrics.py")
    args = parser.parse_args()
    base = evaluation(args.objects, args.findings)
    versions: dict[str, Any] = {"this": metrics}
    if args.against:
        versions["against"] = load(args.against)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
    bodies = {}
    for run in range(args.runs):
        for name in sorted(versions, reverse=run % 2 == 1):  # alternate which goes first
            times, bodies[name] = scrapes(versions[name], base)
            runs[name].append(times)
    if len(set(bodies.values())) != 1:
        raise SystemExit("the versions render different bytes")
    size = len(bodies["this"]) / 1e6
    print(
        f"{args.objects} objects, {len(base.findings)} findings, {size:.1f} MB,",
        f"median of {args.runs} runs (CPU ms)",
    )
    for case in runs["this"][0]:
        line = f"{case:20s}" + "".join(
            f"  {name} {statistics.median(r[case] for r in runs[name]):8.1f}" for name in versions
        )
        print(line)


if __name__ == "__main__":
    main()
