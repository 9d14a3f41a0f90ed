"""The API server goes away under a running stalewatch, on a control plane of these tests' own.

Stopping kube-apiserver would disturb every other test, so this module starts its own etcd +
kube-apiserver. Both tests restart the API server on the same etcd, as an upgrade or a crash
of the control plane would.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.conftest import client_for
from tests.controlplane.harness import CRDS, ControlPlane, running_control_plane
from tests.kube.objects import ago, cond, deployment, flux, lease, micro_stamp, pod, ready
from tests.kube.support import Service, metric, poll, settings_for, until_no_problem
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube
from watcher.config import Settings, build_model_config
from watcher.model.engine import evaluate
from watcher.model.projection import MalformedObject, project

pytestmark = pytest.mark.cluster

THRESHOLDS = {"stuck_reconciling_min": "1s", "stuck_reconciling_interval_factor": 0.0001}


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with running_control_plane(CRDS) as own:
        yield own


@pytest.fixture
async def own_kube(plane: ControlPlane) -> AsyncIterator[Kube]:
    """A client of our own plane, opened after any restart a previous test did."""
    async with await client_for(plane.kubeconfig) as api:
        yield Kube(api)


@pytest.fixture
async def own_namespace(own_kube: Kube) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    await own_kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def stuck(namespace: str, name: str) -> dict[str, Any]:
    """A Kustomization that has said Reconciling=True next to Ready=True for an hour."""
    status = {
        "conditions": [
            cond("Ready", "True", "ReconciliationSucceeded", "Applied revision", since=ago(hours=2)),
            cond("Reconciling", "True", "Progressing", "Reconciliation in progress", since=ago(hours=1)),
        ]
    }
    return flux("Kustomization", namespace, name, status=status)


def etcd_delete(plane: ControlPlane, key: str) -> None:
    """Delete one key straight in etcd (etcd's v3 JSON gateway), behind the API server's back."""
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    request = urllib.request.Request(f"{plane.etcd_url}/v3/kv/deleterange", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read()).get("deleted") == "1", key


async def test_a_watch_expired_by_compaction_relists_and_drops_objects_deleted_while_it_was_away(
    plane: ControlPlane, own_kube: Kube, own_namespace: str
) -> None:
    names = ["k1", "k2", "k3", "k4", "k5"]
    for name in names:
        await own_kube.create(stuck(own_namespace, name))
    settings = settings_for(plane.kubeconfig, include_namespaces=[own_namespace], thresholds=THRESHOLDS)
    async with stalewatch_running(settings) as service:

        async def all_five() -> bool:
            return await _stuck_names(service) == set(names)

        await poll(all_five, within=5, what="five stuck Kustomizations")

        await asyncio.to_thread(plane.stop_apiserver)
        for gone in ("k2", "k4"):
            etcd_delete(plane, f"/registry/kustomize.toolkit.fluxcd.io/kustomizations/{own_namespace}/{gone}")
        await asyncio.to_thread(plane.etcd_compact)
        await asyncio.to_thread(plane.start_apiserver)

        async def relisted() -> str:
            names_now = await _stuck_names(service)
            samples = await service.metrics()
            where = {"group": "kustomize.toolkit.fluxcd.io", "kind": "Kustomization"}
            if names_now != {"k1", "k3", "k5"}:
                return f"stuck findings for {sorted(names_now)}"
            if metric(samples, "stalewatch_watched_objects", **where) != 3:
                return f"watched objects {metric(samples, 'stalewatch_watched_objects', **where)}"
            if not metric(samples, "stalewatch_relists_total", **where, reason="gone"):
                return "no relist counted as gone"
            if not metric(samples, "stalewatch_watch_gone_total", **where):
                return "no 410 Gone counted"
            return ""

        await until_no_problem(relisted, within=30, what="relist after 410 Gone")


async def test_while_the_api_server_is_down_stalewatch_is_not_ready_and_stale_and_invents_nothing(
    plane: ControlPlane, own_kube: Kube, own_namespace: str
) -> None:
    ns = own_namespace
    holder = "kustomize-controller-5d4f8b7c9-x7k2p_1f2e"
    objects = [
        deployment(ns, "kustomize-controller"),
        pod(ns, "kustomize-controller"),
        lease(ns, "kustomize-controller-leader-election", holder=holder, duration=3),
        stuck(ns, "apps"),
        flux("Kustomization", ns, "infra", status=ready()),
    ]
    for obj in objects:
        await own_kube.create(obj)
    the_lease = objects[2]

    async def renew(kube: Kube) -> None:
        await kube.patch(the_lease, {"spec": {"renewTime": micro_stamp()}})

    async def keep_renewing() -> None:  # the controller is alive and leading
        while True:
            await renew(own_kube)
            await asyncio.sleep(0.5)

    settings = settings_for(plane.kubeconfig, include_namespaces=[ns], thresholds=THRESHOLDS)
    renewer = asyncio.create_task(keep_renewing())
    async with stalewatch_running(settings) as service:
        before = await poll(lambda: _findings_with(service, "StuckReconciling"), within=5, what="stuck")
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)

        await asyncio.to_thread(plane.stop_apiserver)
        down = await poll(lambda: _summary_says(service, up=False), within=5, what="up=false")
        assert down["summary"]["stale"] is True
        assert not await service.ready()
        assert (await service.get("/healthz"))[0] == 200
        assert metric(await service.metrics(), "stalewatch_up") == 0
        # The Lease (3 s) runs out while we cannot see it renewed: that must not become a finding.
        for _ in range(10):
            assert (await service.findings())["findings"] == before
            await asyncio.sleep(0.5)

        await asyncio.to_thread(plane.start_apiserver)
        async with await client_for(plane.kubeconfig) as api:
            kube = Kube(api)
            await renew(kube)  # the controller is back too
            await poll(service.ready, within=30, what="ready again")
            await poll(lambda: _summary_says(service, up=True, stale=False), within=10, what="live again")

            async def same_as_a_fresh_list() -> str:
                document = await service.findings()
                ids = [f["id"] for f in document["findings"]]
                if len(ids) != len(set(ids)):
                    return f"duplicate findings: {ids}"
                latest = service.runtime.live.latest
                assert latest is not None
                fresh = await fresh_evaluation(kube, service, settings, ns, now=latest.now)
                mine = [f.to_dict() for f in latest.findings]
                return "" if mine == fresh else f"live {mine} != fresh {fresh}"

            await until_no_problem(same_as_a_fresh_list, within=10, what="findings equal a fresh evaluate")
            assert [f["type"] for f in (await service.findings())["findings"]] == ["StuckReconciling"]


async def fresh_evaluation(
    kube: Kube, service: Service, settings: Settings, namespace: str, *, now: Any
) -> Any:
    """What `evaluate` says about a plain list of everything stalewatch watches, right now."""
    objects = []
    for resource in service.runtime.watcher.watched():
        listed = await kube.list(
            resource.api_version, resource.kind, namespace if resource.namespaced else None
        )
        for item in listed:
            if not settings.watches_namespace(item["metadata"].get("namespace", "")):
                continue
            if resource.kind == "Event" and item.get("type") != "Warning":
                continue
            try:
                objects.append(project(item))
            except MalformedObject:
                continue
    return [f.to_dict() for f in evaluate(objects, now=now, config=build_model_config(settings)).findings]


async def _stuck_names(service: Service) -> set[str]:
    found = await _findings_with(service, "StuckReconciling")
    return {f["subject"]["name"] for f in found}


async def _findings_with(service: Service, kind: str) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = (await service.findings())["findings"]
    return findings if any(f["type"] == kind for f in findings) else []


async def _summary_says(service: Service, **expected: bool) -> dict[str, Any] | None:
    document = await service.findings()
    return document if all(document["summary"][k] == v for k, v in expected.items()) else None
