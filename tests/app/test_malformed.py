"""A thousand objects with malformed status in the real API server: counted, logged once, skipped,
and listed under `rejected` (on /api/v1/findings and the page) until fixed or deleted.

The Flux test CRDs accept any status (as a controller bug or a hand edit can write), so the
objects below really exist in etcd. Half are there before stalewatch starts (the list path),
half are created while it runs (the watch path).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import ago, cond, flux
from tests.kube.support import metric, poll, settings_for, until_no_problem
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

COUNT = 1000
UNICODE = "déploiement échoué — 失败 — ошибка 🚀 "


def odd_object(namespace: str, index: int) -> dict[str, Any]:
    """Five flavours: three the model cannot use, two odd but usable."""
    flavour = index % 5
    name = f"k-{index:04d}"
    if flavour == 0:  # wrong type: conditions is a string
        status: dict[str, Any] = {"conditions": "Ready"}
    elif flavour == 1:  # wrong type: observedGeneration is a word
        status = {"observedGeneration": "one", "conditions": []}
    elif flavour == 2:  # absurd size: more conditions than any controller writes
        status = {"conditions": [cond(f"C{i}", "True", "X") for i in range(70)]}
    elif flavour == 3:  # usable: bad entries are dropped, a huge unicode message is cut
        status = {
            "conditions": [
                {"type": 5, "status": True},
                {"status": "True"},
                cond("Ready", "True", "ReconciliationSucceeded", "ok", since=ago(hours=2))
                | {"lastUpdateTime": "not a time"},
                cond("Reconciling", "True", "Progressing", UNICODE * 100, since=ago(hours=1)),
            ]
        }
    else:  # usable: fields missing altogether
        return {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {},
        }
    return flux("Kustomization", namespace, name, status=status)


MALFORMED = sum(1 for i in range(COUNT) if i % 5 in (0, 1, 2))
MALFORMED_NAMES = {f"k-{i:04d}" for i in range(COUNT) if i % 5 in (0, 1, 2)}
PROBLEMS = {
    "status.conditions is not a list",
    "status.observedGeneration is not an integer",
    "status.conditions has 70 entries (more than 64)",
}
STUCK = sum(1 for i in range(COUNT) if i % 5 == 3)


async def create_all(kube: Kube, objects: list[dict[str, Any]]) -> None:
    gate = asyncio.Semaphore(32)

    async def one(obj: dict[str, Any]) -> None:
        async with gate:
            await kube.create(obj)

    await asyncio.gather(*(one(obj) for obj in objects))


async def test_a_thousand_malformed_objects_are_each_counted_and_logged_once_and_the_rest_evaluated(
    control_plane: ControlPlane, kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    objects = [odd_object(namespace, i) for i in range(COUNT)]
    await create_all(kube, objects[: COUNT // 2])
    settings = settings_for(
        control_plane.kubeconfig,
        include_namespaces=[namespace],
        thresholds={"stuck_reconciling_min": "1s", "stuck_reconciling_interval_factor": 0.0001},
    )
    where = {"group": "kustomize.toolkit.fluxcd.io", "kind": "Kustomization"}
    with caplog.at_level(logging.WARNING, logger="stalewatch"):
        async with stalewatch_running(settings) as service:
            await create_all(kube, objects[COUNT // 2 :])

            async def all_seen() -> str:
                document = await service.findings()
                samples = await service.metrics()
                seen = (
                    metric(samples, "stalewatch_malformed_objects_total", **where),
                    metric(samples, "stalewatch_watched_objects", **where),
                    document["summary"]["load_errors"],
                    document["summary"]["by_type"]["StuckReconciling"],
                )
                wanted = (MALFORMED, COUNT - MALFORMED, MALFORMED, STUCK)
                return (
                    "" if seen == wanted else f"(malformed, watched, load_errors, stuck) = {seen} != {wanted}"
                )

            await until_no_problem(all_seen, within=30, what="every object judged or skipped")
            document = await service.findings()
            assert await service.ready()
            assert max(len(f["message"]) for f in document["findings"]) < 4000, "huge messages are cut"
            listed = _unreadable(document)
            assert set(listed) == MALFORMED_NAMES, "each malformed object is listed by name"
            assert {r["value"] for r in listed.values()} == PROBLEMS, "with its problem"
            one = listed["k-0000"]
            assert one["subject"] == {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "namespace": namespace,
                "name": "k-0000",
            }
            assert (one["field"], one["evaluated"]) == ("", False)
            assert one["message"] == (
                f"Kustomization {namespace}/k-0000: not evaluated, it could not be read "
                "(status.conditions is not a list)"
            )
            status, page = await service.get("/")
            assert status == 200
            assert '<section id="rejected">' in page
            assert f"Kustomization {namespace}/k-0000" in page

            healed, deleted = objects[0], objects[1]
            await kube.patch_status(healed, {"conditions": []})
            await kube.delete(deleted)
            fixed = MALFORMED_NAMES - {"k-0000", "k-0001"}
            await poll(
                lambda: _set_aside(service, MALFORMED - 2, fixed),
                within=2,
                what="a repaired object is taken in, a deleted one forgotten: neither counted nor listed",
            )

    skipped = [r for r in caplog.records if r.getMessage() == "malformed object skipped"]
    names = [r.stalewatch_fields["name"] for r in skipped]  # type: ignore[attr-defined]
    assert len(names) == MALFORMED, "each malformed object is logged"
    assert len(set(names)) == MALFORMED, "and only once"
    problems = {r.stalewatch_fields["error"].split(": ", 1)[1] for r in skipped}  # type: ignore[attr-defined]
    assert problems == PROBLEMS


async def _set_aside(service: Any, count: int, names: set[str]) -> bool:
    document = await service.findings()
    return bool(document["summary"]["load_errors"] == count and set(_unreadable(document)) == names)


def _unreadable(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The objects listed as malformed under `rejected`, by name."""
    return {r["subject"]["name"]: r for r in document["rejected"] if r["reason"] == "Malformed"}
