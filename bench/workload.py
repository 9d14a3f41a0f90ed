"""The benchmark cluster: realistic objects at a given size, as plain dicts, in creation order.

Shapes follow what a busy GitOps cluster's API server returns (a kubelet-written Pod
status with conditions and containerStatuses, Flux status with artifacts, inventories
and history), because the cost being measured is decoding and projecting real bytes.
The mix per size is fixed (`MIX`): Pods are about three quarters, as in a real cluster, and 6%
are what the stacks apply besides workloads and Flux objects (bench/stack.py: Certificates of a
third-party custom kind and Jobs, listed in the Kustomizations' inventories).

Creation is in `PHASES`: owners first, so each dependent can carry its owner's real
uid (ownerReferences are what the model follows from a Pod to its Deployment).
Everything is deterministic for a size and seed, so runs compare like with like.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bench.gitops import GitOps
from bench.kinds import API_VERSIONS, CONTROLLERS, FLUX_NS, STACK_KINDS, Obj, rfc3339, sha
from bench.stack import Stack

MIX: dict[str, float] = {
    "Pod": 0.74,
    "Deployment": 0.04,
    "ReplicaSet": 0.04,
    "Event": 0.04,
    "Lease": 0.01,
    "GitRepository": 0.003,
    "OCIRepository": 0.001,
    "HelmRepository": 0.001,
    "Bucket": 0.0005,
    "HelmChart": 0.0145,
    "Kustomization": 0.025,
    "HelmRelease": 0.0145,
    "Terraform": 0.01,
    "Certificate": 0.03,
    "Job": 0.03,
}
"""Share of each kind in the total (before the fixed flux-system controllers and namespaces)."""


PHASES: tuple[tuple[str, ...], ...] = (
    ("Namespace",),
    ("Deployment",),
    ("ReplicaSet",),
    ("Pod", "Lease", "Event", "GitRepository", "OCIRepository", "HelmRepository", "Bucket", *STACK_KINDS),
    ("HelmChart", "Kustomization", "HelmRelease", "Terraform"),
)
"""Creation order: a phase may reference the uids of objects created in earlier phases."""

FIELD_MANAGERS: dict[str, tuple[str, str]] = {
    "Pod": ("kube-controller-manager", "kubelet"),
    "Deployment": ("kustomize-controller", "kube-controller-manager"),
    "ReplicaSet": ("kube-controller-manager", "kube-controller-manager"),
    "Event": ("kubelet", "kubelet"),
    "Lease": ("source-controller", "source-controller"),
    "Namespace": ("kustomize-controller", "kube-controller-manager"),
    "Certificate": ("kustomize-controller", "cert-manager-certificates-readiness"),
    "Job": ("kustomize-controller", "kube-controller-manager"),
}
"""(create, status) field managers, so managedFields look like a real cluster's."""
FLUX_MANAGER = ("kustomize-controller", "gotk-controller")


GITOPS_KINDS = (
    "GitRepository",
    "OCIRepository",
    "HelmRepository",
    "Bucket",
    "HelmChart",
    "Kustomization",
    "HelmRelease",
    "Terraform",
)
"""The Flux kinds and Terraform: the GitOps objects of the mix."""

FAILING_PODS: dict[str, tuple[int, int]] = {
    "ImagePullBackOff": (150, 75),
    "CrashLoopBackOff": (200, 33),
    "OOMKilled": (500, 111),
    "Unschedulable": (500, 222),
}
"""In a cluster built with `failing`, one application Pod in N is in each of these states:
(N, which one of each N); about 1.6% of the Pods in all."""


def counts(size: int) -> dict[str, int]:
    """Objects per kind for a cluster of about `size` objects (at least one of each)."""
    return {kind: max(1, round(size * share)) for kind, share in MIX.items()}


def envelope(pods: int, gitops: int) -> dict[str, int]:
    """Objects per kind for `pods` Pods and `gitops` GitOps objects: the GitOps kinds in MIX's
    proportions among themselves, the Pods' Deployments, ReplicaSets, Events and Leases in
    MIX's proportions to the Pods."""
    flux = sum(MIX[kind] for kind in GITOPS_KINDS)
    return {
        kind: max(1, round((gitops * share / flux) if kind in GITOPS_KINDS else pods * share / MIX["Pod"]))
        for kind, share in MIX.items()
    }


@dataclass
class Cluster(Stack, GitOps):
    """Builds the objects of one benchmark cluster; `uids` is filled in as phases are created."""

    size: int
    now: datetime
    seed: int = 7
    mix: dict[str, int] | None = None
    """Objects per kind, instead of counts(size) (bench/synthetic.py: envelope())."""
    failing: bool = False
    """Some Pods and GitOps objects failing (FAILING_PODS, FAILING_GITOPS); the clusters created
    in the API server start healthy, and churn breaks their Pods."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.count = self.mix or counts(self.size)
        self.namespaces = [f"team-{i:03d}" for i in range(max(1, self.size // 250))]
        self.uids: dict[tuple[str, str, str], str] = {}

    def ago(self, **delta: float) -> str:
        return rfc3339(self.now - timedelta(**delta))

    def ns(self, index: int) -> str:
        return self.namespaces[index % len(self.namespaces)]

    def owner(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSIONS[kind],
            "kind": kind,
            "name": name,
            "uid": self.uids[(kind, namespace, name)],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def phase(self, kinds: tuple[str, ...]) -> Iterator[Obj]:
        for kind in kinds:
            for index, obj in enumerate(getattr(self, f"_{kind.lower()}s")()):
                yield self.judged(obj, index)

    # -- Workloads ---------------------------------------------------------------------------

    def _deployment_names(self) -> list[tuple[str, str, int]]:
        """(namespace, name, replicas): the controllers first, then app Deployments sharing the Pods."""
        apps = self.count["Deployment"]
        pods = max(0, self.count["Pod"] - len(CONTROLLERS))
        out = [(FLUX_NS, name, 1) for name in CONTROLLERS]
        for i in range(apps):
            out.append((self.ns(i), f"app-{i:05d}", pods // apps + (1 if i < pods % apps else 0)))
        return out

    def _namespaces(self) -> Iterator[Obj]:
        for name in (FLUX_NS, *self.namespaces):
            yield {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            }

    def _deployments(self) -> Iterator[Obj]:
        for namespace, name, replicas in self._deployment_names():
            labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": namespace}
            yield {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {**labels, "kustomize.toolkit.fluxcd.io/name": "apps"},
                    "annotations": {"deployment.kubernetes.io/revision": "3"},
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
                    "template": {"metadata": {"labels": labels}, "spec": self._pod_spec(name)},
                },
                "status": {
                    "observedGeneration": 1,
                    "replicas": replicas,
                    "updatedReplicas": replicas,
                    "readyReplicas": replicas,
                    "availableReplicas": replicas,
                    "conditions": [
                        self._cond(
                            "Available", "True", "MinimumReplicasAvailable", "has minimum availability."
                        ),
                        self._cond(
                            "Progressing",
                            "True",
                            "NewReplicaSetAvailable",
                            f'ReplicaSet "{name}-{sha(name)[:10]}" has successfully progressed.',
                        ),
                    ],
                },
            }

    def _replicasets(self) -> Iterator[Obj]:
        for namespace, name, replicas in self._deployment_names():
            template_hash = sha(name)[:10]
            yield {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-{template_hash}",
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/name": name, "pod-template-hash": template_hash},
                    "annotations": {"deployment.kubernetes.io/desired-replicas": str(replicas)},
                    "ownerReferences": [self.owner("Deployment", namespace, name)],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {
                        "matchLabels": {"app.kubernetes.io/name": name, "pod-template-hash": template_hash}
                    },
                    "template": {
                        "metadata": {
                            "labels": {"app.kubernetes.io/name": name, "pod-template-hash": template_hash}
                        },
                        "spec": self._pod_spec(name),
                    },
                },
                "status": {
                    "observedGeneration": 1,
                    "replicas": replicas,
                    "fullyLabeledReplicas": replicas,
                    "readyReplicas": replicas,
                    "availableReplicas": replicas,
                },
            }

    def _pod_spec(self, app: str) -> Obj:
        image = f"ghcr.io/acme/{app}:v1.{sha(app)[:2]}.0"
        return {
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "APP", "value": app}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 10},
                    "volumeMounts": [
                        {
                            "name": "kube-api-access",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                }
            ],
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "volumes": [
                {
                    "name": "kube-api-access",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]
                    },
                }
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
            ],
        }

    def app_pods(self) -> list[tuple[str, str]]:
        """(namespace, name) of every application Pod (not the controllers'): what churn breaks."""
        return [
            (namespace, f"{app}-{sha(app)[:10]}-{sha(app, r)[:5]}")
            for namespace, app, replicas in self._deployment_names()[len(CONTROLLERS) :]
            for r in range(replicas)
        ]

    def pod_failure(self, index: int) -> str | None:
        """The failing state of the index-th application Pod, if it is one (FAILING_PODS)."""
        if self.failing:
            for state, (every, which) in FAILING_PODS.items():
                if index % every == which:
                    return state
        return None

    def _pods(self) -> Iterator[Obj]:
        index = -len(CONTROLLERS)
        for namespace, app, replicas in self._deployment_names():
            template_hash = sha(app)[:10]
            spec = self._pod_spec(app)
            for r in range(replicas):
                name = f"{app}-{template_hash}-{sha(app, r)[:5]}"
                node = f"node-{self.rng.randrange(200):03d}"
                failing = self.pod_failure(index) if index >= 0 else None
                index += 1
                image = spec["containers"][0]["image"]
                yield {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": {"app.kubernetes.io/name": app, "pod-template-hash": template_hash},
                        "ownerReferences": [self.owner("ReplicaSet", namespace, f"{app}-{template_hash}")],
                    },
                    "spec": spec if failing == "Unschedulable" else {**spec, "nodeName": node},
                    "status": self.pod_status(image, ready=failing is None, ip=r, failing=failing),
                }

    def pod_status(
        self, image: str, *, ready: bool, ip: int = 0, since: str | None = None, failing: str | None = None
    ) -> Obj:
        """A kubelet-written status: Running and Ready, or failing (ImagePullBackOff unless
        `failing` names another of FAILING_PODS; an Unschedulable Pod has only the scheduler's
        condition)."""
        started = self.ago(hours=20)
        if failing == "Unschedulable":
            return self._unschedulable(since or self.ago(hours=1))
        flag = "True" if ready else "False"
        when = since or started
        restarts, last = 0, {}
        if ready:
            state: Obj = {"running": {"startedAt": started}}
        elif failing in ("CrashLoopBackOff", "OOMKilled"):
            restarts = 14
            finished = self.ago(minutes=3)
            state = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 5m0s restarting failed container=app",
                }
            }
            oom = failing == "OOMKilled"
            last = {
                "terminated": {
                    "exitCode": 137 if oom else 1,
                    "reason": "OOMKilled" if oom else "Error",
                    "startedAt": self.ago(minutes=4),
                    "finishedAt": finished,
                    "containerID": f"containerd://{sha(image, ip, 'last')}{sha(ip)[:24]}",
                }
            }
        else:
            state = {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": f'Back-off pulling image "{image}": ErrImagePull: not found',
                }
            }
        not_ready = (
            {}
            if ready
            else {"reason": "ContainersNotReady", "message": "containers with unready status: [app]"}
        )
        return {
            "phase": "Running",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": started},
                {"type": "Initialized", "status": "True", "lastTransitionTime": started},
                {"type": "Ready", "status": flag, "lastTransitionTime": when, **not_ready},
                {"type": "ContainersReady", "status": flag, "lastTransitionTime": when, **not_ready},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
            ],
            "hostIP": f"10.1.{ip % 250}.1",
            "hostIPs": [{"ip": f"10.1.{ip % 250}.1"}],
            "podIP": f"10.244.{ip % 250}.{ip // 250 % 250 + 2}",
            "podIPs": [{"ip": f"10.244.{ip % 250}.{ip // 250 % 250 + 2}"}],
            "startTime": started,
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": "app",
                    "image": image,
                    "imageID": f"{image.split(':')[0]}@sha256:{sha(image) * 2}"[:120],
                    "containerID": f"containerd://{sha(image, ip)}{sha(ip)[:24]}",
                    "ready": ready,
                    "started": ready,
                    "restartCount": restarts,
                    "state": state,
                    "lastState": last,
                }
            ],
        }

    def _unschedulable(self, since: str) -> Obj:
        """What the scheduler writes for a Pod no node can take: phase Pending, PodScheduled False."""
        message = (
            "0/200 nodes are available: 200 Insufficient memory. preemption: 0/200 nodes are "
            "available: 200 No preemption victims found for incoming pod."
        )
        scheduled = {"type": "PodScheduled", "status": "False", "lastTransitionTime": since}
        return {
            "phase": "Pending",
            "conditions": [{**scheduled, "reason": "Unschedulable", "message": message}],
            "qosClass": "Burstable",
        }

    def _leases(self) -> Iterator[Obj]:
        renewed = self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for name in CONTROLLERS:
            yield lease(
                FLUX_NS, f"{name}-leader-election", f"{name}-{sha(name)[:10]}-{sha(name, 0)[:5]}", renewed
            )
        for i in range(max(0, self.count["Lease"] - len(CONTROLLERS))):
            yield lease(self.ns(i), f"app-{i:05d}-leader", f"app-{i:05d}-{sha(i)[:5]}", renewed)

    def _events(self) -> Iterator[Obj]:
        apps = self._deployment_names()
        for i in range(self.count["Event"]):
            namespace, app, _ = apps[len(CONTROLLERS) + i % (len(apps) - len(CONTROLLERS))]
            pod = f"{app}-{sha(app)[:10]}-{sha(app, 0)[:5]}"
            warning = i % 5 == 0
            reason, message = (
                ("BackOff", f'Back-off pulling image "ghcr.io/acme/{app}:v0"')
                if warning
                else ("Pulled", f'Successfully pulled image "ghcr.io/acme/{app}" in 1.2s')
            )
            yield {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{pod}.{sha(i)[:16]}", "namespace": namespace},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod,
                    "namespace": namespace,
                    "fieldPath": "spec.containers{app}",
                },
                "reason": reason,
                "message": message,
                "type": "Warning" if warning else "Normal",
                "count": 3 if warning else 1,
                "firstTimestamp": self.ago(minutes=4),
                "lastTimestamp": self.ago(minutes=1),
                "source": {"component": "kubelet", "host": f"node-{i % 200:03d}"},
                "reportingComponent": "kubelet",
                "reportingInstance": f"node-{i % 200:03d}",
            }


def lease(namespace: str, name: str, holder: str, renewed: str) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": f"{holder}_{sha(holder)[:8]}-{sha(holder)[8:12]}",
            "leaseDurationSeconds": 40,
            "acquireTime": renewed,
            "renewTime": renewed,
            "leaseTransitions": 1,
        },
    }
