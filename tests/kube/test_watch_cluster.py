"""The reflector against the real kube-apiserver: paginated list, then every change by watch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from kubernetes_asyncio.client import ApiClient

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import cond, flux, ready
from tests.kube.support import FAST, MemorySink, poll
from tests.kubeclient import Kube
from watcher.kube.client import load_client
from watcher.kube.link import Link
from watcher.kube.reflector import Reflector
from watcher.kube.resources import Resource
from watcher.model.ingest.objects import condition
from watcher.telemetry import Telemetry

pytestmark = pytest.mark.cluster

KUSTOMIZATIONS = Resource("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations")


@pytest.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[ApiClient]:
    """stalewatch's own client, loaded from the kubeconfig the way `run` loads it."""
    async with await load_client(kubeconfig=str(control_plane.kubeconfig)) as client:
        yield client


async def test_a_paginated_list_then_the_watch_keep_the_sink_equal_to_the_cluster(
    api: ApiClient, kube: Kube, namespace: str
) -> None:
    names = [f"k{i:02d}" for i in range(12)]
    for name in names:
        await kube.create(flux("Kustomization", namespace, name, status=ready()))
    telemetry, sink = Telemetry(), MemorySink()
    reflector = Reflector(
        api,
        KUSTOMIZATIONS,
        sink,
        telemetry,
        Link(telemetry, lambda up: None),
        options=replace(FAST, page_size=5),
        keep_namespace=lambda ns: ns == namespace,
    )
    task = asyncio.create_task(reflector.run())
    try:
        await poll(lambda: reflector.stats.synced, within=10)
        assert sink.names("Kustomization", namespace) == set(names)
        assert reflector.stats.list_requests["ok"] >= 3, "12 objects at 5 per page need 3 pages"
        assert telemetry.up

        await kube.create(flux("Kustomization", namespace, "late", status=ready()))
        await poll(lambda: "late" in sink.names("Kustomization"), what="ADDED")

        failing = {"conditions": [cond("Ready", "False", "BuildFailed", "kustomize build failed")]}
        await kube.patch_status(flux("Kustomization", namespace, "k03"), failing)

        def k03_failing() -> bool:
            found = condition(sink.objects["Kustomization", namespace, "k03"], "Ready")
            return found is not None and found["status"] == "False"

        await poll(k03_failing, what="MODIFIED")

        await kube.delete(flux("Kustomization", namespace, "k07"))
        await poll(lambda: "k07" not in sink.names("Kustomization"), what="DELETED")
        assert sink.names("Kustomization", namespace) == (set(names) | {"late"}) - {"k07"}
        assert reflector.stats.objects == 12
        assert {"ADDED", "MODIFIED", "DELETED"} <= (+reflector.stats.events).keys()
        assert +reflector.stats.relists == {"initial": 1}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
