"""Every kind a Kustomization's inventory lists is watched and judged, live, on the real API server.

A Widget (a third party's custom kind, tests/app/crds/widgets.yaml) is reconciled by no controller
stalewatch knows: it is watched only because Kustomization `apps` lists two of them, one failing.
`stalewatch run` must start watching the kind when the inventory names it, report the failing
Widget tied to `apps` (which says Ready=True: it has no health checks) and not the healthy one,
and stop the watch when no inventory lists the kind any more. An account that may not list
Widgets must count the listed Widgets as not read, never call them healthy.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import ALWAYS_READ, ago, cond, flux, read_access, ready
from tests.kube.support import Service, metric, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

CRD = Path(__file__).resolve().parent / "crds" / "widgets.yaml"
GROUP = "lab.stalewatch.example"
KIND = {"group": GROUP, "kind": "Widget"}


def widget(namespace: str, name: str, *, failing: bool) -> dict[str, Any]:
    """A Widget the Kustomization `apps` applied (kustomize-controller's labels), with its status."""
    since = ago(hours=2)
    condition = (
        cond("Ready", "False", "ProvisioningFailed", "quota exceeded for widgets in zone b", since=since)
        if failing
        else cond("Ready", "True", "Provisioned", "widget is serving", since=since)
    )
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "kustomize.toolkit.fluxcd.io/name": "apps",
                "kustomize.toolkit.fluxcd.io/namespace": namespace,
            },
        },
        "spec": {"size": 3},
        "status": {"observedGeneration": 1, "conditions": [condition]},
    }


def inventory(namespace: str, *names: str) -> dict[str, Any]:
    entries = [{"id": f"{namespace}_{name}_{GROUP}_Widget", "v": "v1"} for name in names]
    entries.append({"id": f"{namespace}_settings__ConfigMap", "v": "v1"})  # no state: never watched
    return {"entries": entries}


def apps(namespace: str, *names: str) -> dict[str, Any]:
    return flux("Kustomization", namespace, "apps", status=ready(inventory=inventory(namespace, *names)))


async def _widget_findings(service: Service) -> dict[str, dict[str, Any]]:
    found = await service.findings()
    return {f["subject"]["name"]: f for f in found["findings"] if f["subject"]["kind"] == "Widget"}


async def test_a_listed_kind_is_watched_its_failing_object_reported_and_the_watch_stops_when_unlisted(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    control_plane.install_crds(CRD)
    for name, failing in (("broken", True), ("fine", False)):
        await kube.create(widget(namespace, name, failing=failing))
    kustomization = await kube.create(apps(namespace, "broken", "fine"))
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace])
    async with stalewatch_running(settings) as service:
        found = await poll(lambda: _widget_findings(service), within=20, what="ObjectFailing on a Widget")
        assert list(found) == ["broken"]
        broken = found["broken"]
        assert broken["type"] == "ObjectFailing"
        assert broken["root_cause"] is None
        assert broken["evidence"]["applied_by"] == f"Kustomization/{namespace}/apps"
        assert "ProvisioningFailed" in broken["message"]
        samples = await service.metrics()
        assert metric(samples, "stalewatch_kind_synced", **KIND) == 1
        assert metric(samples, "stalewatch_listed_kinds", state="watched") == 1
        assert (await service.findings())["summary"]["unread"] == {}

        await kube.patch_status(kustomization, {"inventory": inventory(namespace)})

        async def unwatched() -> bool:
            samples = await service.metrics()
            return metric(samples, "stalewatch_kind_synced", **KIND) is None and not await _widget_findings(
                service
            )

        await poll(unwatched, within=20, what="the Widget watch stopped and its finding gone")
        samples = await service.metrics()
        assert metric(samples, "stalewatch_listed_kinds", state="watched") == 0
        summary = (await service.findings())["summary"]
        assert summary["unread"] == {}
        assert KIND not in summary["forbidden_kinds"]


@pytest.fixture
async def without_widgets(
    control_plane: ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> AsyncIterator[Path]:
    name = f"stalewatch-{uuid.uuid4().hex[:8]}"
    access = read_access(namespace, name, ALWAYS_READ)  # and not the Widgets
    for obj in access:
        await kube.create(obj)
    token = control_plane.service_account_token(namespace, name)
    yield control_plane.write_kubeconfig(tmp_path / "limited", user={"token": token})
    for obj in reversed(access[1:]):
        await kube.delete(obj)


async def test_a_listed_kind_the_account_may_not_list_is_counted_not_read_never_healthy(
    control_plane: ControlPlane, kube: Kube, namespace: str, without_widgets: Path
) -> None:
    control_plane.install_crds(CRD)
    for name, failing in (("broken", True), ("fine", False)):
        await kube.create(widget(namespace, name, failing=failing))
    await kube.create(apps(namespace, "broken", "fine"))
    settings = settings_for(without_widgets, include_namespaces=[namespace])
    async with stalewatch_running(settings) as service:

        async def unread() -> dict[str, Any]:
            summary: dict[str, Any] = (await service.findings())["summary"]
            return summary if summary["unread"] and summary["forbidden_kinds"] else {}

        summary = await poll(unread, within=20, what="the listed Widgets counted as not read")
        assert summary["unread"] == {f"Widget.{GROUP}": 2}
        assert KIND in summary["forbidden_kinds"]
        samples = await service.metrics()
        assert metric(samples, "stalewatch_listed_objects_unread", **KIND) == 2
        assert metric(samples, "stalewatch_kind_forbidden", **KIND) == 1
        status, page = await service.get("/")
        assert status == 200
        assert "all healthy" not in page
        assert f"listed by Kustomizations not read: Widget.{GROUP} (2)" in page


def lost_claim(namespace: str) -> dict[str, Any]:
    """A PersistentVolumeClaim whose volume is gone (phase Lost), applied by `apps`."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": namespace,
            "labels": {
                "kustomize.toolkit.fluxcd.io/name": "apps",
                "kustomize.toolkit.fluxcd.io/namespace": namespace,
            },
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Lost"},
    }


async def test_listed_kinds_beyond_the_limit_are_named_and_counted_not_read_and_a_built_in_kind_is_watched(
    control_plane: ControlPlane, kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With room for one listed kind: the PersistentVolumeClaims (a built-in kind, first in order)
    are watched and the lost claim reported; the Widgets are over the limit, said and counted."""
    control_plane.install_crds(CRD)
    await kube.create(lost_claim(namespace))
    for name, failing in (("broken", True), ("fine", False)):
        await kube.create(widget(namespace, name, failing=failing))
    listed = inventory(namespace, "broken", "fine")
    listed["entries"].append({"id": f"{namespace}_data__PersistentVolumeClaim", "v": "v1"})
    await kube.create(flux("Kustomization", namespace, "apps", status=ready(inventory=listed)))
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace], listed_kinds_limit=1)
    caplog.set_level(logging.WARNING, logger="stalewatch")
    async with stalewatch_running(settings) as service:

        async def claim_reported() -> dict[str, Any]:
            document = await service.findings()
            found = [f for f in document["findings"] if f["subject"]["kind"] == "PersistentVolumeClaim"]
            return document if found and document["summary"]["unread"] else {}

        document = await poll(claim_reported, within=20, what="the lost claim reported")
        [claim] = [f for f in document["findings"] if f["subject"]["kind"] == "PersistentVolumeClaim"]
        assert (claim["type"], claim["evidence"]["applied_by"]) == (
            "ObjectFailing",
            f"Kustomization/{namespace}/apps",
        )
        assert document["summary"]["unread"] == {f"Widget.{GROUP}": 2}
        assert not [f for f in document["findings"] if f["subject"]["kind"] == "Widget"]
        samples = await service.metrics()
        assert metric(samples, "stalewatch_listed_kinds", state="watched") == 1
        assert metric(samples, "stalewatch_listed_kinds", state="over_limit") == 1
        assert metric(samples, "stalewatch_listed_objects_unread", **KIND) == 2
    [warning] = [r for r in caplog.records if "listed_kinds_limit" in r.getMessage()]
    assert warning.stalewatch_fields["kinds"] == [f"Widget.{GROUP}"]  # type: ignore[attr-defined]
