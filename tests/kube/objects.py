"""Builders for the objects the watcher tests create in the real API server.

No controller runs against the test API server, so each builder also returns the `status`
its controller (kubelet, kube-controller-manager, Flux) would have written; Kube.create
writes it through the /status subresource, and steps patch it the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

Obj = dict[str, Any]

API = {
    "Kustomization": "kustomize.toolkit.fluxcd.io/v1",
    "HelmRelease": "helm.toolkit.fluxcd.io/v2",
    "GitRepository": "source.toolkit.fluxcd.io/v1",
    "Terraform": "infra.contrib.fluxcd.io/v1alpha2",
}
POD_HASH = "5d4f8b7c9"


def stamp(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_stamp(moment: datetime | None = None) -> str:
    """Lease times are MicroTime: six fractional digits."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ago(**delta: float) -> datetime:
    return datetime.now(UTC) - timedelta(**delta)


def cond(kind: str, status: str, reason: str, message: str = "", *, since: datetime | None = None) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp(since),
        "observedGeneration": 1,
    }


def flux(kind: str, namespace: str, name: str, *, spec: Obj | None = None, status: Obj | None = None) -> Obj:
    found: Obj = {
        "apiVersion": API[kind],
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"interval": "10m", **(spec or {})},
    }
    if status is not None:
        found["status"] = {"observedGeneration": 1, **status}
    return found


def ready(message: str = "Applied revision", *, since: datetime | None = None, **extra: Any) -> Obj:
    return {"conditions": [cond("Ready", "True", "ReconciliationSucceeded", message, since=since)], **extra}


def deployment(
    namespace: str,
    name: str,
    *,
    available: int = 1,
    labels: dict[str, str] | None = None,
    image: str = "registry.example/app:1.0",
) -> Obj:
    selector = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "manager", "image": image}]},
            },
        },
        "status": deployment_status(available),
    }


def deployment_status(available: int, *, since: datetime | None = None) -> Obj:
    up = "True" if available else "False"
    reason = "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable"
    return {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": available,
        "availableReplicas": available,
        "conditions": [cond("Available", up, reason, since=since)],
    }


def pod(
    namespace: str, workload: str, *, image: str = "registry.example/app:1.0", status: Obj | None = None
) -> Obj:
    """A Pod of Deployment `workload`, owned through its ReplicaSet as kube-controller-manager does."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{workload}-{POD_HASH}-x7k2p",
            "namespace": namespace,
            "labels": {"app": workload, "pod-template-hash": POD_HASH},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{workload}-{POD_HASH}",
                    "uid": "6b0c2a55-0000-4000-8000-000000000001",
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "manager", "image": image}]},
        "status": status or running(image),
    }


def running(image: str = "registry.example/app:1.0", *, since: datetime | None = None) -> Obj:
    return {
        "phase": "Running",
        "startTime": stamp(since),
        "conditions": [cond("Ready", "True", "", since=since), cond("PodScheduled", "True", "", since=since)],
        "containerStatuses": [
            {
                "name": "manager",
                "image": image,
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": stamp(since)}},
            }
        ],
    }


def waiting(
    reason: str,
    message: str,
    *,
    image: str = "registry.example/app:1.0",
    started: datetime | None = None,
    restarts: int = 0,
) -> Obj:
    """A Pod whose container kubelet cannot run: ImagePullBackOff, CrashLoopBackOff, ..."""
    status: Obj = {
        "phase": "Running" if restarts else "Pending",
        "startTime": stamp(started),
        "conditions": [
            cond(
                "Ready",
                "False",
                "ContainersNotReady",
                "containers with unready status: [manager]",
                since=started,
            ),
            cond("PodScheduled", "True", "", since=started),
        ],
        "containerStatuses": [
            {
                "name": "manager",
                "image": image,
                "imageID": "",
                "ready": False,
                "restartCount": restarts,
                "started": False,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
        ],
    }
    if restarts:
        status["containerStatuses"][0]["lastState"] = {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "startedAt": stamp(started),
                "finishedAt": stamp(),
            }
        }
    return status


def lease(namespace: str, name: str, *, holder: str, duration: int, renewed: datetime | None = None) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": micro_stamp(renewed),
            "renewTime": micro_stamp(renewed),
        },
    }


def crd(group: str, kind: str, plural: str, *, scope: str = "Namespaced") -> Obj:
    """A CRD with a permissive schema and a status subresource, like the Flux test CRDs."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def policy_report(namespace: str, deployment: str, *, policy: str, **result: str) -> Obj:
    """Kyverno's per-resource wgpolicyk8s.io/v1alpha2 PolicyReport on one Deployment, failing one
    rule of `policy` (`result`: the result's other fields, e.g. rule, severity)."""
    return {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {"name": deployment, "namespace": namespace},
        "scope": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace, "name": deployment},
        "summary": {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0},
        "results": [{"source": "kyverno", "policy": policy, "result": "fail", **result}],
    }


ALWAYS_READ: dict[str, list[str]] = {
    "": ["pods", "events"],
    "apps": ["deployments", "replicasets", "statefulsets", "daemonsets"],
    "coordination.k8s.io": ["leases"],
    "apiextensions.k8s.io": ["customresourcedefinitions"],
    "source.toolkit.fluxcd.io": [
        "gitrepositories",
        "ocirepositories",
        "helmrepositories",
        "helmcharts",
        "buckets",
    ],
    "kustomize.toolkit.fluxcd.io": ["kustomizations"],
    "helm.toolkit.fluxcd.io": ["helmreleases"],
    "infra.contrib.fluxcd.io": ["terraforms"],
}
"""The resources (group -> plural) stalewatch reads whatever the inventories list (read_access)."""


def read_access(namespace: str, name: str, read: dict[str, list[str]]) -> list[Obj]:
    """A ServiceAccount bound to a ClusterRole that may read `read` (group -> resources)."""
    rules = [{"apiGroups": [g], "resources": r, "verbs": ["get", "list", "watch"]} for g, r in read.items()]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
