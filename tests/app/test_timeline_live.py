"""The timeline against the real API server, read back from `stalewatch run`'s /api/v1/timeline.

No kube-controller-manager runs against the test API server, so the test plays the deployment
controller's part the way it does it: the Deployment's image is changed through the API server,
then a new ReplicaSet is created, controlled by the Deployment, carrying the next
`deployment.kubernetes.io/revision`, and the Deployment's own revision annotation follows.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import POD_HASH, cond, deployment, deployment_status, flux, pod, ready, waiting
from tests.kube.support import Service, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

OLD = "ghcr.io/flux-iac/tofu-controller:v0.15.1"
NEW = "ghcr.io/flux-iac/tofu-controller:v0.16.0-rc.5"
REV_A = "main@sha1:" + "a" * 40
NEW_HASH = "6f8d7c9b4d"


def replicaset(
    namespace: str, owner: dict[str, Any], template_hash: str, *, revision: int, image: str
) -> dict[str, Any]:
    """What the deployment controller creates for a rollout (pkg/controller/deployment/sync.go):
    named after the Deployment and the pod-template-hash, controlled by it, its revision annotated."""
    name = owner["metadata"]["name"]
    labels = {"app": name, "pod-template-hash": template_hash}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{name}-{template_hash}",
            "namespace": namespace,
            "labels": labels,
            "annotations": {
                "deployment.kubernetes.io/desired-replicas": "1",
                "deployment.kubernetes.io/max-replicas": "2",
                "deployment.kubernetes.io/revision": str(revision),
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": image}]},
            },
        },
    }


async def timeline(service: Service, query: str) -> list[dict[str, Any]]:
    status, body = await service.get("/api/v1/timeline" + query)
    assert status == 200, body
    entries: list[dict[str, Any]] = orjson.loads(body)["entries"]
    return entries


async def test_an_image_rollout_and_a_ready_flip_in_the_api_server_are_on_the_timeline(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    workload = await kube.create(deployment(namespace, "tofu-controller", image=OLD))
    await kube.create(pod(namespace, "tofu-controller", image=OLD))
    await kube.create(replicaset(namespace, workload, POD_HASH, revision=6, image=OLD))
    terraform = flux(
        "Terraform",
        namespace,
        "vpc",
        spec={"sourceRef": {"kind": "GitRepository", "name": "infra"}, "path": "./vpc"},
        status=ready(lastAppliedRevision=REV_A),
    )
    await kube.create(terraform)
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace])
    async with stalewatch_running(settings) as service:
        await poll(lambda: _comparing(service), within=5, what="the first evaluation to compare with")
        assert await timeline(service, "") == []  # what was there before it started is no change

        # kubectl set image deployment/tofu-controller manager=...:v0.16.0-rc.5, and the rollout
        template = {"spec": {"containers": [{"name": "manager", "image": NEW}]}}
        await kube.patch(workload, {"spec": {"template": template}})
        await kube.create(replicaset(namespace, workload, NEW_HASH, revision=7, image=NEW))
        await kube.patch(workload, {"metadata": {"annotations": {"deployment.kubernetes.io/revision": "7"}}})
        subject = f"?subject=Deployment/{namespace}/tofu-controller"
        (change,) = await poll(lambda: timeline(service, subject), within=5, what="the image change")
        undo = f"kubectl rollout undo deployment/tofu-controller -n {namespace}"
        assert (change["type"], change["before"], change["after"]) == ("image_changed", OLD, NEW)
        assert change["controller"] == "tofu-controller"
        assert change["details"]["revision"] == "7"
        assert change["details"]["previous_revision"] == "6"
        assert change["details"]["undo"] == undo
        assert change["message"] == (
            f"Deployment {namespace}/tofu-controller: image {OLD} -> v0.16.0-rc.5 (ReplicaSet revision 7)"
        )

        # the new Pod cannot pull its image: the controller is down, the root cause opens
        await kube.patch_status(
            pod(namespace, "tofu-controller"),
            waiting("ImagePullBackOff", f'Back-off pulling image "{NEW}"', image=NEW),
        )
        await kube.patch_status(workload, deployment_status(0))
        down = await poll(
            lambda: _types(timeline(service, subject), "finding_opened", "controller_down"),
            within=5,
            what="the controller down and its root cause opened",
        )
        assert down[0]["details"]["finding"] == f"ControllerDown/Deployment/{namespace}/tofu-controller"

        # tofu-controller is back and sets the Terraform object's Ready to False
        failed = {"conditions": [cond("Ready", "False", "PlanFailed", "error running Plan: exit status 1")]}
        await kube.patch_status(terraform, failed)
        flips = await poll(
            lambda: timeline(service, f"?subject=Terraform/{namespace}/vpc"), within=5, what="the Ready flip"
        )
        assert [(e["type"], e["before"], e["after"]) for e in flips] == [("ready_changed", "True", "False")]
        assert flips[0]["controller"] == "tofu-controller"
        assert "PlanFailed: error running Plan: exit status 1" in flips[0]["message"]

        everything = await timeline(service, "")
        assert [e["type"] for e in everything] == [
            "ready_changed",
            "finding_opened",
            "controller_down",
            "image_changed",
        ]
        assert everything == sorted(everything, key=lambda e: e["time"], reverse=True)


async def _types(entries: Any, *expected: str) -> list[dict[str, Any]]:
    """The entries, once their types (newest first) start with `expected`; else []."""
    found: list[dict[str, Any]] = await entries
    return found if [e["type"] for e in found[: len(expected)]] == list(expected) else []


async def _comparing(service: Service) -> bool:
    status, body = await service.get("/api/v1/timeline")
    return status == 200 and orjson.loads(body)["summary"]["comparing_since"] is not None
