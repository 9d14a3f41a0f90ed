"""A hostile status in the real API server: the object is rejected, the rest is still judged.

Anyone who may write one custom resource's status can write a timestamp that is valid RFC3339
but no moment in UTC (9999-12-31T23:59:59-01:00). It used to make every evaluation raise, so
`stalewatch run` served "all healthy" next to a Stalled Kustomization. Here both live in etcd
(the Flux CRD keeps any status, written through its /status subresource), one before stalewatch
starts (the list path) and one created while it runs (the watch path).
"""

from __future__ import annotations

import logging

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import ago, cond, flux
from tests.kube.support import metric, settings_for, until_no_problem
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

FAR_FUTURE = "9999-12-31T23:59:59-01:00"
YEAR_ONE = "0001-01-01T00:00:00+01:00"
KUSTOMIZATIONS = {"group": "kustomize.toolkit.fluxcd.io", "kind": "Kustomization"}


def hostile(namespace: str, name: str, when: str) -> dict[str, object]:
    ready = cond("Ready", "True", "ReconciliationSucceeded", "Applied revision: main@sha1:0123")
    return flux(
        "Kustomization", namespace, name, status={"conditions": [ready | {"lastTransitionTime": when}]}
    )


def stalled(namespace: str, name: str) -> dict[str, object]:
    since = ago(hours=1)
    failed = "kustomize build failed: accumulating resources"
    return flux(
        "Kustomization",
        namespace,
        name,
        status={
            "conditions": [
                cond("Ready", "False", "BuildFailed", failed, since=since),
                cond("Stalled", "True", "BuildFailed", failed, since=since),
            ]
        },
    )


async def test_a_far_future_offset_time_is_rejected_and_the_stalled_object_beside_it_still_served(
    control_plane: ControlPlane, kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    await kube.create(hostile(namespace, "far-future", FAR_FUTURE))
    await kube.create(stalled(namespace, "broken-build"))
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace])
    caplog.set_level(logging.WARNING, logger="stalewatch")
    async with stalewatch_running(settings) as service:
        await kube.create(hostile(namespace, "year-one", YEAR_ONE))

        async def served() -> str:
            document = await service.findings()
            stalled_ids = [f["id"] for f in document["findings"] if f["type"] == "Stalled"]
            rejected = sorted((r["subject"]["name"], r["value"]) for r in document["rejected"])
            seen = (stalled_ids, rejected, document["summary"]["rejected"])
            wanted = (
                [f"Stalled/Kustomization/{namespace}/broken-build"],
                [("far-future", FAR_FUTURE), ("year-one", YEAR_ONE)],
                2,
            )
            return "" if seen == wanted else f"(stalled, rejected, count) = {seen} != {wanted}"

        await until_no_problem(
            served, within=20, what="the Stalled finding served, both bad objects rejected"
        )

        document = await service.findings()
        [entry] = [r for r in document["rejected"] if r["subject"]["name"] == "far-future"]
        assert entry == {
            "subject": {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "namespace": namespace,
                "name": "far-future",
            },
            "reason": "TimeOutOfRange",
            "field": "status.conditions[0].lastTransitionTime",
            "value": FAR_FUTURE,
            "evaluated": True,
            "message": (
                f"Kustomization {namespace}/far-future: status.conditions[0].lastTransitionTime {FAR_FUTURE}"
                " is out of range (TimeOutOfRange): left out, the rest of the object evaluated"
            ),
        }
        summary = document["summary"]
        assert (summary["stale"], summary["evaluation_error"]) == (False, "")

        samples = await service.metrics()
        assert metric(samples, "stalewatch_objects_rejected", **KUSTOMIZATIONS, reason="TimeOutOfRange") == 2
        assert metric(samples, "stalewatch_objects_rejected", **KUSTOMIZATIONS, reason="RuleError") == 0
        assert metric(samples, "stalewatch_evaluation_failures_total") == 0

        # Rejected objects do not fail the evaluation: ready, and the probe says what was set aside.
        status, body = await service.get("/readyz")
        assert (status, body) == (
            200,
            "ok; 2 objects set aside (rejected or malformed, see /api/v1/findings)\n",
        )

        status, page = await service.get("/")
        assert status == 200
        rejected_section = page.split('<section id="rejected">', 1)[1].split("</section>", 1)[0]
        assert "far-future" in rejected_section
        assert FAR_FUTURE in rejected_section
        assert "all healthy" not in page

        # The owner fixes the status: the object is judged in full again and no longer listed.
        await kube.patch_status(
            hostile(namespace, "far-future", FAR_FUTURE),
            {"conditions": [cond("Ready", "True", "ReconciliationSucceeded", "ok", since=ago(minutes=5))]},
        )

        async def healed() -> str:
            names = [r["subject"]["name"] for r in (await service.findings())["rejected"]]
            samples = await service.metrics()
            gauge = metric(samples, "stalewatch_objects_rejected", **KUSTOMIZATIONS, reason="TimeOutOfRange")
            return "" if (names, gauge) == (["year-one"], 1) else f"rejected {names}, gauge {gauge}"

        await until_no_problem(healed, within=10, what="a repaired object is taken in")

    logged = [r for r in caplog.records if r.getMessage() == "object rejected"]
    names = [r.stalewatch_fields["name"] for r in logged]  # type: ignore[attr-defined]
    assert sorted(names) == ["far-future", "year-one"], "each rejected object is logged once while it lasts"


async def test_wrong_typed_fields_in_the_api_server_are_rejected_on_the_list_and_watch_paths(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    """A field of the wrong type used to be left out without a word: an inventory that is a
    string read as no inventory, and a time that is no time as no time, while the page said
    all healthy."""
    ready = cond("Ready", "True", "ReconciliationSucceeded", "Applied revision: main@sha1:0123")
    status = {"conditions": [ready], "inventory": {"entries": "web"}}
    await kube.create(flux("Kustomization", namespace, "inventory-a-string", status=status))
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace])
    async with stalewatch_running(settings) as service:
        await kube.create(hostile(namespace, "time-no-time", "yesterday"))

        async def served() -> str:
            document = await service.findings()
            seen = sorted((r["subject"]["name"], r["reason"], r["field"]) for r in document["rejected"])
            wanted = [
                ("inventory-a-string", "WrongType", "status.inventory.entries"),
                ("time-no-time", "TimeUnparseable", "status.conditions[0].lastTransitionTime"),
            ]
            return "" if seen == wanted else f"rejected {seen} != {wanted}"

        await until_no_problem(served, within=20, what="both wrong-typed objects rejected by field")

        samples = await service.metrics()
        assert metric(samples, "stalewatch_objects_rejected", **KUSTOMIZATIONS, reason="WrongType") == 1
        assert metric(samples, "stalewatch_objects_rejected", **KUSTOMIZATIONS, reason="TimeUnparseable") == 1
        status, page = await service.get("/")
        assert status == 200
        assert "all healthy" not in page
