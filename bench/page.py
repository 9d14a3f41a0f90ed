"""The page's server-side cost at 5,000 stack rows and 500 findings (issue 17's target: 300 ms).

A synthetic cluster, fed to the real HealthModel as `stalewatch run` feeds it: ROOTS root
Kustomizations, each applying CHILDREN Kustomizations, each of those applying Terraforms,
HelmReleases (with their HelmCharts) and Deployments, all from their GitRepository; tofu-controller
is down, so every Terraform is stale (StatusStale, one finding each) under one ControllerDown.

Measured, each REPEAT times (median and worst reported), in this process, one thread:
  * snapshot: the objects the stacks read, copied by reference on the event loop;
  * forest: the stacks built from that snapshot and the evaluation (once per generation);
  * each view rendered from the built forest (the parts and the page around them), and the same
    view for a new generation (snapshot + forest + render: the first request after a change).

Usage: python -m bench.page [--roots 102] [--children 4] [--repeat 7]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig
from watcher.model.views.stacks import STACK_KINDS
from watcher.web.page import PageState, render_page
from watcher.web.query import Query, parse_query
from watcher.web.stacks import Stacks

Obj = dict[str, Any]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NS = "flux-system"
RELEASES = 3
"""Per child Kustomization, each with the Deployment it installed (two rows); with a Terraform
(two for the first child) and Deployments, 12 rows a child, 49 a stack: 102 roots make 4,998
rows and 510 stale Terraforms (510 StatusStale findings and their ControllerDown)."""
TOFU_IMAGE = "ghcr.io/flux-iac/tofu-controller:v0.16.0-rc.5"


def stamp(ago: timedelta = timedelta(hours=1)) -> str:
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def ready(message: str) -> list[Obj]:
    return [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Succeeded",
            "message": message,
            "lastTransitionTime": stamp(),
            "observedGeneration": 1,
        }
    ]


def meta(name: str, namespace: str = NS, **extra: Any) -> Obj:
    return {"name": name, "namespace": namespace, "generation": 1, "uid": f"uid-{namespace}-{name}", **extra}


def controllers() -> Iterator[Obj]:
    for name in ("source-controller", "kustomize-controller", "helm-controller", "tofu-controller"):
        down = name == "tofu-controller"
        image = TOFU_IMAGE if down else f"ghcr.io/fluxcd/{name}:v1.4.0"
        labels = {"app": name}
        yield {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(name, labels=labels),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"spec": {"containers": [{"name": "manager", "image": image}]}},
            },
            "status": {
                "observedGeneration": 1,
                "replicas": 1,
                "readyReplicas": 0 if down else 1,
                "availableReplicas": 0 if down else 1,
                "updatedReplicas": 1,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "False" if down else "True",
                        "reason": "MinimumReplicasUnavailable" if down else "MinimumReplicasAvailable",
                        "lastTransitionTime": stamp(timedelta(hours=3)),
                    }
                ],
            },
        }
        state = (
            {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}}
            if down
            else {"running": {"startedAt": stamp(timedelta(days=1))}}
        )
        yield {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta(
                f"{name}-7d9f-x2x4z", labels=labels, creationTimestamp=stamp(timedelta(hours=3))
            ),
            "spec": {"containers": [{"name": "manager", "image": image}]},
            "status": {
                "phase": "Pending" if down else "Running",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False" if down else "True",
                        "lastTransitionTime": stamp(timedelta(hours=3)),
                    }
                ],
                "containerStatuses": [
                    {"name": "manager", "image": image, "ready": not down, "restartCount": 0, "state": state}
                ],
            },
        }


def revision(i: int) -> str:
    return f"main@sha1:{i:08x}" + "0" * 32


def kustomization(name: str, source: str, rev: str, entries: list[str]) -> Obj:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": meta(name),
        "spec": {
            "interval": "10m",
            "path": f"./{name}",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": source},
        },
        "status": {
            "observedGeneration": 1,
            "conditions": ready(f"Applied revision: {rev}"),
            "lastAppliedRevision": rev,
            "lastAttemptedRevision": rev,
            "inventory": {"entries": [{"id": e, "v": "v1"} for e in entries]},
        },
    }


def cluster(roots: int, children: int) -> Iterator[Obj]:
    yield from controllers()
    for r in range(roots):
        repo, rev = f"repo-{r:03d}", revision(r)
        yield {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": meta(repo),
            "spec": {"interval": "1m", "url": f"ssh://git@github.com/acme/{repo}"},
            "status": {
                "observedGeneration": 1,
                "conditions": ready(f"stored artifact for revision '{rev}'"),
                "artifact": {"revision": rev, "lastUpdateTime": stamp()},
            },
        }
        kids = [f"stack-{r:03d}-{c}" for c in range(children)]
        yield kustomization(
            f"stack-{r:03d}", repo, rev, [f"{NS}_{k}_kustomize.toolkit.fluxcd.io_Kustomization" for k in kids]
        )
        for c, kid in enumerate(kids):
            entries = []
            terraforms = 2 if c == 0 else 1
            for t in range(terraforms):
                name = f"{kid}-tf-{t}"
                entries.append(f"{NS}_{name}_infra.contrib.fluxcd.io_Terraform")
                yield {
                    "apiVersion": "infra.contrib.fluxcd.io/v1alpha2",
                    "kind": "Terraform",
                    "metadata": meta(name),
                    "spec": {
                        "interval": "10m",
                        "path": f"./{name}",
                        "sourceRef": {"kind": "GitRepository", "name": repo},
                    },
                    "status": {
                        "observedGeneration": 1,
                        "conditions": ready(f"Applied successfully: {rev}"),
                        "lastAppliedRevision": rev,
                        "lastAttemptedRevision": rev,
                    },
                }
            for h in range(RELEASES):
                name = f"{kid}-hr-{h}"
                entries.append(f"{NS}_{name}_helm.toolkit.fluxcd.io_HelmRelease")
                yield from release(name)
            for d in range(11 - 2 * RELEASES - terraforms):
                name = f"{kid}-app-{d}"
                entries.append(f"{NS}_{name}_apps_Deployment")
                yield workload(name, {})
            yield kustomization(kid, repo, rev, entries)


def release(name: str) -> Iterator[Obj]:
    chart = f"{NS}-{name}"
    yield {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmChart",
        "metadata": meta(chart),
        "spec": {
            "chart": "podinfo",
            "version": "6.x",
            "sourceRef": {"kind": "HelmRepository", "name": "charts"},
        },
        "status": {
            "observedGeneration": 1,
            "conditions": ready("pulled 'podinfo' chart with version '6.5.4'"),
            "artifact": {"revision": "6.5.4", "lastUpdateTime": stamp()},
        },
    }
    yield {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": meta(name),
        "spec": {
            "interval": "10m",
            "chart": {
                "spec": {
                    "chart": "podinfo",
                    "version": "6.x",
                    "sourceRef": {"kind": "HelmRepository", "name": "charts"},
                }
            },
        },
        "status": {
            "observedGeneration": 1,
            "conditions": ready("Helm upgrade succeeded"),
            "helmChart": f"{NS}/{chart}",
            "lastAttemptedRevision": "6.5.4",
            "history": [
                {
                    "name": name,
                    "namespace": NS,
                    "version": 2,
                    "status": "deployed",
                    "chartName": "podinfo",
                    "chartVersion": "6.5.4",
                }
            ],
        },
    }
    yield workload(name, {"helm.toolkit.fluxcd.io/name": name, "helm.toolkit.fluxcd.io/namespace": NS})


def workload(name: str, labels: dict[str, str]) -> Obj:
    selector = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(name, labels={**selector, **labels}),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {"spec": {"containers": [{"name": "app", "image": "ghcr.io/acme/app:1.0"}]}},
        },
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
            "updatedReplicas": 1,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "lastTransitionTime": stamp(),
                }
            ],
        },
    }


def timed(action: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    """(median, worst) CPU milliseconds of this thread, and the median wall milliseconds: on a
    shared machine the wall time also counts the other processes' turns on the cores."""
    cpu, wall = [], []
    for _ in range(repeat):
        started, clock = time.thread_time(), time.perf_counter()
        action()
        cpu.append((time.thread_time() - started) * 1000)
        wall.append((time.perf_counter() - clock) * 1000)
    return statistics.median(cpu), max(cpu), statistics.median(wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=int, default=102)
    parser.add_argument("--children", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    model = HealthModel(ModelConfig())
    for obj in cluster(args.roots, args.children):
        model.upsert(project(obj), now=NOW)
    evaluation = model.evaluate(NOW)
    gc.collect()
    gc.freeze()  # as `stalewatch run` does once synced (kube/live.py SyncCollections)
    stacks = Stacks(model.snapshot(STACK_KINDS), evaluation)
    forest = stacks.forest()
    rows = sum(len(s.rows) for s in forest.stacks)
    biggest = forest.stacks[0].root
    print(
        f"{len(forest.stacks)} stacks, {rows} rows, {len(evaluation.findings)} findings "
        f"({len(evaluation.roots)} root), {len(evaluation.objects)} GitOps objects"
    )
    status = {"up": True, "synced": True, "stale": False}
    views: list[tuple[str, Query]] = [
        ("/ (collapsed: 50 stack headers)", Query()),
        ("/?status=stale (every stale row: 50 stacks open)", parse_query({"status": "stale"})),
        ("/?q=tf-1 (a search over every row)", parse_query({"q": "tf-1"})),
        (f"/stacks/{biggest.namespace}/{biggest.name}", Query(stack=biggest)),
    ]
    print("| step | CPU ms, median | CPU ms, worst | wall ms, median | page |")
    print("| --- | ---: | ---: | ---: | ---: |")

    def line(label: str, times: tuple[float, float, float], size: str = "") -> None:
        print(f"| {label} | {times[0]:.1f} | {times[1]:.1f} | {times[2]:.1f} | {size} |")

    line("snapshot (on the event loop)", timed(lambda: model.snapshot(STACK_KINDS), args.repeat))
    line(
        "snapshot + forest (once per generation)",
        timed(lambda: Stacks(model.snapshot(STACK_KINDS), evaluation).forest(), args.repeat),
    )
    state = PageState(evaluation, status, objects=len(evaluation.objects), stacks=stacks)
    for label, query in views:
        size = len(render_page(state, query, now=NOW))
        line(
            f"render {label}, forest built",
            timed(lambda q=query: render_page(state, q, now=NOW), args.repeat),
            f"{size // 1024} KiB",
        )

    def fresh(query: Query) -> bytes:
        new = PageState(evaluation, status, stacks=Stacks(model.snapshot(STACK_KINDS), evaluation))
        return render_page(new, query, now=NOW)

    for label, query in views:
        line(
            f"{label}, new generation (snapshot + forest + render)",
            timed(lambda q=query: fresh(q), args.repeat),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
