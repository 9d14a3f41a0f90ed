"""Releases whose workloads keep breaking and healing: the live model answers what evaluate() does.

The shape of the benchmark's churn, in small: HelmReleases and Kustomizations say Ready=True
while Pods of what they installed go into back-off and recover, a release's own Ready flips or
its message changes, a Deployment loses its replicas, Pods are deleted and come back, and time
passes. Correlation keeps what it built for a release from one pass to the next (its message,
the failing state it quotes) only while the release, its workload and its first failing Pod
stay the same; each Evaluation is compared whole with evaluate() of the same objects.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from tests.model.builders import MIN, NOW, SEC, Obj, cond, deployment, flux, helm_release, kustomization, pod
from tests.model.test_engine import snapshot
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.objects import Key, key_of
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig

APPS = ("podinfo", "billing", "search")
"""Installed by HelmReleases of the same name (helm-controller's labels)."""
KUSTOMIZED = ("frontend", "worker")
"""Installed by Kustomizations of the same name (kustomize-controller's labels)."""


def _labels(app: str) -> dict[str, str]:
    group = "helm.toolkit.fluxcd.io" if app in APPS else "kustomize.toolkit.fluxcd.io"
    return {f"{group}/name": app, f"{group}/namespace": "apps"}


def _pods(app: str, index: int) -> list[Obj]:
    name = f"{app}-7d9f-p{index}"
    image = f"ghcr.io/acme/{app}:1.{index}"
    return [
        pod(name, "apps", app=app, image=image),
        pod(name, "apps", app=app, image=image, ready=False, waiting="ImagePullBackOff",
            waiting_message=f'Back-off pulling image "{image}"', not_ready_since=12 * MIN),
        pod(name, "apps", app=app, image=image, ready=False, waiting="CrashLoopBackOff",
            waiting_message="back-off 5m0s restarting failed container", restarts=4 + index,
            last_terminated="Error", created=30 * MIN),
        pod(name, "apps", app=app, image=image, ready=False, waiting="CrashLoopBackOff",
            waiting_message="back-off 5m0s restarting failed container", restarts=9 + index,
            last_terminated="OOMKilled", created=30 * MIN),
    ]  # fmt: skip


def _releases(app: str) -> list[Obj]:
    if app in APPS:
        return [
            helm_release(app, "apps", chart_version="6.5.0"),
            helm_release(app, "apps", chart_version="6.5.1"),
            helm_release(app, "apps", conditions=[cond("Ready", "False", "UpgradeFailed", "upgrade failed")]),
        ]
    return [
        kustomization(app, "apps"),
        kustomization(app, "apps", applied="main@sha1:" + "1" * 40),
        kustomization(app, "apps", conditions=[cond("Ready", "False", "HealthCheckFailed", "timeout")]),
    ]


def variants() -> dict[Key, list[dict[str, Any]]]:
    found: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    pool: list[Obj] = list(flux())
    for app in (*APPS, *KUSTOMIZED):
        pool += _releases(app)
        pool += [
            deployment(app, "apps", replicas=3, labels=_labels(app)),
            deployment(app, "apps", replicas=3, available=0, labels=_labels(app)),
        ]
        for index in range(3):
            pool += _pods(app, index)
    for obj in pool:
        projected = project(obj)
        if projected not in found[key_of(projected)]:
            found[key_of(projected)].append(projected)
    return found


def play(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    pool = variants()
    keys = sorted(pool)
    pods = [key for key in keys if key.kind == "Pod"]
    model = HealthModel(ModelConfig())
    live: dict[Key, dict[str, Any]] = {}
    now = NOW

    def upsert(obj: dict[str, Any]) -> None:
        live[key_of(obj)] = obj
        model.upsert(obj, now=now)

    for key in keys:
        upsert(pool[key][0])
    for step in range(steps):
        roll = rng.random()
        if roll < 0.55:  # a Pod breaks, heals or fails differently (what the kubelet writes)
            key = rng.choice(pods)
            upsert(rng.choice(pool[key]))
        elif roll < 0.75:  # a release or a workload changes
            key = rng.choice([k for k in keys if k.kind != "Pod"])
            upsert(rng.choice(pool[key]))
        elif roll < 0.85:
            key = rng.choice(pods)
            if key in live:
                model.delete(live.pop(key), now=now)
        else:
            now += rng.choice((SEC, 20 * SEC, 2 * MIN, 6 * MIN))
        if rng.random() < 0.5 or step == steps - 1:
            incremental = model.evaluate(now)
            scratch = evaluate(live.values(), now=now, config=ModelConfig())
            assert snapshot(incremental) == snapshot(scratch), f"seed {seed}, step {step}"


@pytest.mark.parametrize("seed", range(8))
def test_releases_whose_pods_churn_evaluate_like_a_snapshot_of_the_same_objects(seed: int) -> None:
    play(seed, steps=200)
