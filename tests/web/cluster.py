"""A cluster for the page tests, as the real model sees it: objects built as Flux, helm-controller
and tofu-controller write them (tests/model/builders), projected, fed to a HealthModel, and
rendered from its evaluation and snapshot exactly as the server does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from aiohttp import web
from multidict import MultiDict

from tests.model.builders import (
    MIN,
    NOW,
    SHA_N,
    SHA_N1,
    Obj,
    cond,
    controller_down,
    event,
    flux,
    git_repository,
    helm_chart,
    helm_upgrade_failed,
    kustomization,
    terraform,
)
from tests.web.dom import Node, parse
from watcher.export.metrics import build_registry
from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig
from watcher.telemetry import Telemetry
from watcher.web.objects import around_kinds, kind_key, object_parts
from watcher.web.page import PageState, render_object, render_page, stack_key
from watcher.web.query import parse_query
from watcher.web.server import create_app
from watcher.web.stacks import StacksCache

HOSTILE = "<img src=x onerror=alert(1)>"
REV_A, REV_B = f"main@sha1:{SHA_N}", f"main@sha1:{SHA_N1}"
TOFU_IMAGE = "ghcr.io/flux-iac/tofu-controller:v0.16.0-rc.5"
LIVE: dict[str, Any] = {"up": True, "synced": True, "stale": False}
LATER = NOW + timedelta(seconds=30)


def entry(kind: str, name: str, namespace: str = "flux-system") -> str:
    group = {
        "Kustomization": "kustomize.toolkit.fluxcd.io",
        "Terraform": "infra.contrib.fluxcd.io",
        "HelmRelease": "helm.toolkit.fluxcd.io",
        "Deployment": "apps",
    }[kind]
    return f"{namespace}_{name}_{group}_{kind}"


def incident(*, message: str = "Applied successfully", revision: str = REV_A) -> list[Obj]:
    """flux-system (applying itself, as Flux's bootstrap does) applies infra (two Terraforms,
    tofu-controller down) and apps (a HelmRelease whose upgrade failed, behind its source)."""
    stuck = [
        cond("Ready", "True", "TerraformAppliedSucceed", f"{message}: {revision}", ago=50 * MIN),
        cond("Reconciling", "True", "Progressing", "Reconciliation in progress", ago=40 * MIN),
    ]
    return [
        *flux(leases=False),
        *controller_down("tofu-controller", TOFU_IMAGE),
        git_repository("flux-system", revision=REV_B),
        git_repository("infra", revision=revision),
        helm_chart("flux-system-podinfo", version="6.6.0"),
        kustomization(
            "flux-system",
            applied=REV_B,
            inventory=[entry("Kustomization", n) for n in ("flux-system", "infra", "apps")],
        ),
        kustomization(
            "infra",
            source="infra",
            applied=revision,
            inventory=[entry("Terraform", "vpc"), entry("Terraform", "dns")],
        ),
        kustomization("apps", applied=REV_A, inventory=[entry("HelmRelease", "podinfo")]),
        *(terraform(name, conditions=stuck, applied=revision) for name in ("vpc", "dns")),
        helm_upgrade_failed("podinfo", attempted="6.6.0", message=message),
        event(
            "vpc.17c2",
            kind="Terraform",
            involved="vpc",
            reason="ReconciliationFailed",
            message=message,
            count=3,
            first=30 * MIN,
            last=2 * MIN,
        ),
    ]


@dataclass
class Cluster:
    model: HealthModel
    cache: StacksCache

    def state(self) -> PageState:
        evaluation = self.model.evaluate(NOW)
        return PageState(evaluation, LIVE, objects=30, stacks=self.cache.current(evaluation))

    def page(self, params: Mapping[str, Any] | None = None, *, stack: tuple[str, str] | None = None) -> Node:
        query = parse_query(_multi(params or {}))
        if stack is not None:
            query = replace(query, stack=stack_key(*stack))
        return parse(render_page(self.state(), query, now=LATER).decode())

    def app(self) -> web.Application:
        """The real aiohttp app serving this cluster's evaluation at NOW, its Kustomizations
        listed and live."""
        telemetry = Telemetry(up=True, started=True)
        stats = telemetry.kind("kustomize.toolkit.fluxcd.io", "Kustomization")
        stats.synced = stats.live = True
        evaluation = self.model.evaluate(NOW)
        return create_app(
            telemetry=telemetry,
            source=lambda: evaluation,
            registry=build_registry(lambda: evaluation),
            model=self.model,
        )

    def object(self, kind: str, namespace: str, name: str) -> Node | None:
        key = kind_key(kind, namespace, name)
        assert key is not None
        state = self.state()
        assert state.stacks is not None
        assert state.evaluation is not None
        around = self.model.snapshot(around_kinds(key), namespace=namespace)
        parts = object_parts(key, around, state.stacks.forest(), state.evaluation, now=LATER)
        if not parts:
            return None
        return parse(render_object(state, parts, title=name, now=LATER).decode())


def cluster(*objs: Obj | Iterable[Obj]) -> Cluster:
    model = HealthModel(ModelConfig())
    for item in objs:
        for obj in [item] if isinstance(item, dict) else item:
            model.upsert(project(obj), now=NOW)
    return Cluster(model, StacksCache(model))


def _multi(params: Mapping[str, Any]) -> MultiDict[str]:
    pairs = []
    for name, value in params.items():
        for one in value if isinstance(value, list) else [value]:
            pairs.append((name, one))
    return MultiDict(pairs)
