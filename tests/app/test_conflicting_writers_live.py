"""ConflictingWriters, proven live: two scripted writers PUT the same custom resource in turn.

In the real API server, an EdgeGateway (a custom kind no configured controller reconciles, so it is
watched only because `conflict_watch_kinds` names it) is created by `edge-operator`; then, round
after round, `mesh-controller` reads it, adds `spec.sidecar` and PUTs it back, and `edge-operator`
PUTs its typed struct, which has no sidecar. The API server, not the test, computes managedFields:
the sidecar appears in mesh-controller's fieldsV1 and vanishes with its entry. A real `stalewatch
run` (in process, through its reflectors) must report ConflictingWriters naming both managers and
the sidecar's fields. Beside it, another EdgeGateway that edge-operator alone rewrites just as
often must not be reported: it is judged by the same watch, whose events arrive in order, so once
the fight's last write is judged every write of the lone one has been judged too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.support import Service, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

CRD = Path(__file__).resolve().parents[1] / "cli" / "crds" / "edgegateways.yaml"
API = "edge.acme.io/v1alpha1"
OPERATOR, MESH = "edge-operator", "mesh-controller"


def gateway(namespace: str, name: str, replicas: int) -> dict[str, Any]:
    """What edge-operator's typed struct holds: no sidecar."""
    return {
        "apiVersion": API,
        "kind": "EdgeGateway",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hostname": f"{name}.shop.example.com", "replicas": replicas},
    }


async def put(kube: Kube, obj: dict[str, Any], manager: str) -> dict[str, Any]:
    """A full-object Update (HTTP PUT) under `manager`, as a typed client's Update() sends it."""
    path = await kube.object_path(obj)
    result: dict[str, Any] = await kube.request("PUT", path, body=obj, query={"fieldManager": manager})
    return result


async def operator_writes(kube: Kube, namespace: str, name: str, replicas: int) -> None:
    """edge-operator's reconcile: its struct, on the latest resourceVersion, nothing else kept."""
    current = await kube.get(gateway(namespace, name, replicas))
    desired = gateway(namespace, name, replicas)
    desired["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await put(kube, desired, OPERATOR)


async def mesh_writes(kube: Kube, namespace: str, name: str) -> None:
    """mesh-controller's reconcile: read the object, add its sidecar, write it all back."""
    current = await kube.get(gateway(namespace, name, 0))
    current["spec"]["sidecar"] = {"image": "mesh/proxy:1.22.3", "port": 15001}
    await put(kube, current, MESH)


def fights(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["subject"]["name"]: f for f in document["findings"] if f["type"] == "ConflictingWriters"}


async def test_two_writers_putting_the_same_resource_in_turn_are_reported_and_a_lone_writer_is_not(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    control_plane.install_crds(CRD)
    settings = settings_for(
        control_plane.kubeconfig,
        include_namespaces=[namespace],
        conflict_watch_kinds=["EdgeGateway.edge.acme.io"],
    )
    async with stalewatch_running(settings) as service:
        for name in ("lone", "storefront"):
            created = gateway(namespace, name, 2)
            await kube.request(
                "POST",
                await kube.path(API, "EdgeGateway", namespace),
                body=created,
                query={"fieldManager": OPERATOR},
            )
        for replicas in range(3, 10):
            await operator_writes(kube, namespace, "lone", replicas)
        for _ in range(3):
            await mesh_writes(kube, namespace, "storefront")
            await operator_writes(kube, namespace, "storefront", 2)

        found = await poll(lambda: _fights(service), within=20, what="ConflictingWriters on storefront")
        fight = found["storefront"]
        assert fight["evidence"]["managers"] == [OPERATOR, MESH]
        assert set(fight["evidence"]["writers"]) == {OPERATOR, MESH}
        assert "spec.sidecar.image" in fight["evidence"]["fields"]
        assert "spec.sidecar.port" in fight["evidence"]["fields"]
        assert fight["root_cause"] is None
        assert "lone" not in found


async def _fights(service: Service) -> dict[str, dict[str, Any]]:
    """The fights once storefront's last write is judged: its finding counts all five flips (the
    finding itself is there from the fourth, the threshold)."""
    found = fights(await service.findings())
    return found if "storefront" in found and found["storefront"]["evidence"]["flips"] == 5 else {}


async def test_a_conflict_watch_kind_no_crd_serves_is_named_in_a_warning_not_passed_over(
    control_plane: ControlPlane, kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A typo (EdgeGateways for EdgeGateway) would leave the kind unwatched without a word, and
    ConflictingWriters silent about it."""
    settings = settings_for(
        control_plane.kubeconfig,
        include_namespaces=[namespace],
        conflict_watch_kinds=["EdgeGateways.edge.acme.io"],
    )
    caplog.set_level(logging.WARNING, logger="stalewatch")
    async with stalewatch_running(settings):

        def warned() -> list[Any]:
            return [
                r for r in caplog.records if r.getMessage().startswith("conflict_watch_kinds or watch_kinds")
            ]

        [record] = await poll(warned, within=20, what="a warning naming the unserved kind")
    assert record.stalewatch_fields["kinds"] == ["EdgeGateways.edge.acme.io"]  # type: ignore[attr-defined]
