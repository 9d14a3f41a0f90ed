"""Kinds come and go while stalewatch runs: a CRD appears, is watched; is deleted, is reported."""

from __future__ import annotations

import logging
import uuid

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import crd, ready
from tests.kube.support import Service, metric, poll, settings_for, until_no_problem
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster


def widget(group: str, namespace: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": f"{group}/v1beta1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"interval": "5m"},
        "status": {"observedGeneration": 1, **ready("Widget is ready")},
    }


async def test_a_crd_created_while_running_is_watched_and_its_deletion_is_reported_with_its_orphans(
    control_plane: ControlPlane, kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    group = f"w{uuid.uuid4().hex[:8]}.example.com"
    controllers = [{"name": "widget-operator", "groups": [group]}]
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace], controllers=controllers)
    where = {"group": group, "kind": "Widget"}
    definition = crd(group, "Widget", "widgets")
    with caplog.at_level(logging.INFO, logger="stalewatch"):
        async with stalewatch_running(settings) as service:
            assert metric(await service.metrics(), "stalewatch_kind_synced", **where) is None

            await kube.create(definition)
            await poll(lambda: _synced(service, where), within=15, what="Widget watched without a restart")
            for name in ("blue", "green", "red"):
                await kube.create(widget(group, namespace, name))

            async def three_watched() -> bool:
                return metric(await service.metrics(), "stalewatch_watched_objects", **where) == 3

            await poll(three_watched, within=2, what="three Widgets in the cache")

            await kube.delete(definition)

            async def removal_reported() -> str:
                document = await service.findings()
                removed = [f for f in document["findings"] if f["type"] == "CRDRemoved"]
                if not removed:
                    return f"no CRDRemoved in {[f['id'] for f in document['findings']]}"
                finding = removed[0]
                orphans = sorted(s["name"] for s in finding["affected"])
                if finding["subject"]["name"] != f"widgets.{group}" or orphans != ["blue", "green", "red"]:
                    return f"wrong CRDRemoved: {finding}"
                if finding["root_cause"] is not None or finding["severity"] != "critical":
                    return f"not a critical root: {finding}"
                if metric(await service.metrics(), "stalewatch_kind_synced", **where) is not None:
                    return "the Widget watch is still running"
                return ""

            await until_no_problem(removal_reported, within=15, what="CRDRemoved with its orphans")
            assert await service.ready(), "a removed kind does not make stalewatch unready"

    about_widgets = [r for r in caplog.records if getattr(r, "stalewatch_fields", {}).get("kind") == "Widget"]
    said = [(r.getMessage(), r.stalewatch_fields.get("reason")) for r in about_widgets]  # type: ignore[attr-defined]
    assert ("watching", None) in said
    assert said[-1] == ("stopped watching", "its CRD was deleted")


async def _synced(service: Service, where: dict[str, str]) -> bool:
    return metric(await service.metrics(), "stalewatch_kind_synced", **where) == 1
