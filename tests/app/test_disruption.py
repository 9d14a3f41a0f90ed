"""The API server goes away under a running stalewatch, on a control plane of these tests' own.

Stopping kube-apiserver would disturb every other test, so this module starts its own etcd +
kube-apiserver. The tests restart, pause or expire the API server on the same etcd, as an
upgrade, a crash or a hang of the control plane would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.outage import Root, Sampler, analyze, metric_roots, missing_roots, served_roots, snapshot
from tests.conftest import client_for
from tests.controlplane.harness import CRDS, ControlPlane, running_control_plane
from tests.kube.objects import ago, cond, deployment, flux, lease, micro_stamp, pod, ready, waiting
from tests.kube.support import Service, metric, poll, settings_for, until_no_problem
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube
from watcher.config import Settings, build_model_config
from watcher.model.engine import evaluate
from watcher.model.ingest.projection import MalformedObject, project

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


def stalled(namespace: str, name: str) -> dict[str, Any]:
    """A Kustomization its controller gave up on: Stalled=True, Ready=False."""
    status = {
        "conditions": [
            cond("Ready", "False", "BuildFailed", "kustomize build failed", since=ago(minutes=5)),
            cond("Stalled", "True", "BuildFailed", "kustomize build failed", since=ago(minutes=5)),
        ]
    }
    return flux("Kustomization", namespace, name, status=status)


def kustomization_key(namespace: str, name: str) -> str:
    return f"/registry/kustomize.toolkit.fluxcd.io/kustomizations/{namespace}/{name}"


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
            plane.etcd_delete(kustomization_key(own_namespace, gone))
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


Fault = Callable[[ControlPlane, str], Awaitable[None]]
"""Breaks the API server under stalewatch, changes the cluster meanwhile, and returns once the
API server serves again."""


def change_in_etcd(plane: ControlPlane, namespace: str) -> None:
    """While no API server runs only etcd can be written: delete `gone`, make `infra` stall."""
    plane.etcd_delete(kustomization_key(namespace, "gone"))
    key = kustomization_key(namespace, "infra")
    infra = plane.etcd_get(key)
    infra["status"] = stalled(namespace, "infra")["status"]
    plane.etcd_put(key, infra)


async def sigterm_and_restart(plane: ControlPlane, ns: str) -> None:
    await asyncio.to_thread(plane.stop_apiserver)
    change_in_etcd(plane, ns)
    await asyncio.to_thread(plane.start_apiserver)


async def sigstop_for_40s(plane: ControlPlane, ns: str) -> None:
    """The API server stalewatch watches hangs; a second one on the same etcd takes the writes."""
    loop = asyncio.get_running_loop()
    paused = loop.time()
    plane.pause_apiserver()
    second = plane.second_apiserver()
    other = await asyncio.to_thread(second.__enter__)
    try:
        async with await client_for(other.kubeconfig) as api:
            kube = Kube(api)
            await kube.delete(flux("Kustomization", ns, "gone"))
            await kube.patch_status(flux("Kustomization", ns, "infra"), stalled(ns, "infra")["status"])
    finally:
        await asyncio.to_thread(second.__exit__, None, None, None)
    await asyncio.sleep(max(0.0, 40 - (loop.time() - paused)))
    plane.resume_apiserver()


async def compaction_and_restart(plane: ControlPlane, ns: str) -> None:
    await asyncio.to_thread(plane.stop_apiserver)
    change_in_etcd(plane, ns)
    await asyncio.to_thread(plane.etcd_compact)  # the watch's resourceVersion is history now: 410
    await asyncio.to_thread(plane.start_apiserver)


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(sigterm_and_restart, id="sigterm-then-restart-on-the-same-etcd"),
        pytest.param(sigstop_for_40s, id="sigstop-40s-then-sigcont"),
        pytest.param(compaction_and_restart, id="etcd-compaction-then-restart"),
    ],
)
async def test_through_an_api_server_fault_every_root_stays_served_stale_and_after_it_findings_equal_analyze(
    plane: ControlPlane, own_kube: Kube, own_namespace: str, fault: Fault, tmp_path: Path
) -> None:
    ns = own_namespace
    for obj in (
        deployment(ns, "helm-controller", available=0),
        pod(ns, "helm-controller", status=waiting("ImagePullBackOff", "Back-off pulling image")),
        stalled(ns, "apps"),
        stalled(ns, "gone"),
        flux("Kustomization", ns, "infra", status=ready()),
    ):
        await own_kube.create(obj)
    roots: set[Root] = {
        ("ControllerDown", "Deployment", ns, "helm-controller"),
        ("Stalled", "Kustomization", ns, "apps"),
        ("Stalled", "Kustomization", ns, "gone"),
    }
    settings = settings_for(plane.kubeconfig, include_namespaces=[ns])
    async with stalewatch_running(settings) as service:
        await until_no_problem(lambda: missing_roots(service, roots), within=10, what="every root served")

        async def same_as_analyze() -> str:
            document = await service.findings()
            if document["summary"]["stale"]:
                return "still stale"
            taken = await asyncio.to_thread(snapshot, plane, service, ns, tmp_path)
            fresh = await asyncio.to_thread(analyze, taken, now=document["summary"]["now"])
            if document["findings"] != fresh:
                return f"served {document['findings']} != analyze {fresh}"
            in_metrics = metric_roots(await service.metrics())
            return "" if in_metrics == served_roots(document) else f"metrics roots {sorted(in_metrics)}"

        sampler = Sampler(service)
        sampling = asyncio.create_task(sampler.run())
        try:
            await fault(plane, ns)
            await until_no_problem(
                same_as_analyze, within=30, what="findings equal analyze of a fresh snapshot"
            )
        finally:
            sampling.cancel()
            await asyncio.gather(sampling, return_exceptions=True)
        after = served_roots(await service.findings())
    assert after == roots - {("Stalled", "Kustomization", ns, "gone")} | {
        ("Stalled", "Kustomization", ns, "infra")
    }
    # From the fault to the end of the recovery, what stayed true was never dropped, not even for a moment.
    kept = roots & after
    lost = [(i, sorted(kept - s.served), sorted(kept - s.in_metrics)) for i, s in enumerate(sampler.samples)]
    assert not [x for x in lost if x[1] or x[2]], f"roots missing during the fault or the recovery: {lost}"
    assert any(s.stale for s in sampler.samples), "never marked stale"
    assert 503 in {s.readyz for s in sampler.samples}
    assert not any(s.ready_while_stale for s in sampler.samples), (
        "/readyz said ready while the data was stale"
    )
