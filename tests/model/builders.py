"""Realistic object builders for the model's tests: small functions, keyword arguments.

Shapes follow what the API server returns for Flux (kustomize/helm/source controllers),
tofu-controller, apps/v1, core/v1 and coordination.k8s.io/v1 objects. Times are given
as "how long before NOW" so a test reads as a timeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from watcher.model.engine import evaluate
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.projection import project
from watcher.model.types import Finding, ModelConfig

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
SEC = timedelta(seconds=1)
SHA_N = "a" * 40
SHA_N1 = "b" * 40
FLUX_NS = "flux-system"

Obj = dict[str, Any]


def ts(ago: timedelta = timedelta(0)) -> str:
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(
    kind: str,
    status: str = "True",
    reason: str = "",
    message: str = "",
    *,
    ago: timedelta = 60 * MIN,
    generation: int = 1,
) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": ts(ago),
        "observedGeneration": generation,
    }


def ready(revision: str = f"main@sha1:{SHA_N}", *, ago: timedelta = 60 * MIN) -> Obj:
    return cond("Ready", "True", "ReconciliationSucceeded", f"Applied revision: {revision}", ago=ago)


def meta(
    name: str,
    namespace: str | None,
    *,
    generation: int | None = 1,
    created: timedelta = 24 * 60 * MIN,
    **extra: Any,
) -> Obj:
    out: Obj = {"name": name, "uid": f"uid-{namespace}-{name}", "creationTimestamp": ts(created)}
    if namespace is not None:
        out["namespace"] = namespace
    if generation is not None:
        out["generation"] = generation
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


# -- Flux sources -----------------------------------------------------------------------------


def git_repository(
    name: str = "flux-system",
    namespace: str = FLUX_NS,
    *,
    revision: str = f"main@sha1:{SHA_N}",
    updated: timedelta = 60 * MIN,
) -> Obj:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": meta(name, namespace),
        "spec": {"interval": "1m", "url": f"ssh://git@github.com/acme/{name}", "ref": {"branch": "main"}},
        "status": {
            "observedGeneration": 1,
            "conditions": [cond("Ready", "True", "Succeeded", f"stored artifact for revision '{revision}'")],
            "artifact": {
                "revision": revision,
                "digest": "sha256:" + "c" * 64,
                "lastUpdateTime": ts(updated),
                "path": f"gitrepository/{namespace}/{name}/{SHA_N}.tar.gz",
                "url": f"http://source-controller.{FLUX_NS}.svc.cluster.local./gitrepository/{namespace}/{name}.tar.gz",
                "size": 4096,
            },
        },
    }


def helm_chart(
    name: str, namespace: str = FLUX_NS, *, version: str = "6.5.0", updated: timedelta = 60 * MIN
) -> Obj:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmChart",
        "metadata": meta(name, namespace),
        "spec": {
            "chart": "podinfo",
            "version": "6.x",
            "sourceRef": {"kind": "HelmRepository", "name": "podinfo"},
        },
        "status": {
            "observedGeneration": 1,
            "conditions": [
                cond(
                    "Ready", "True", "ChartPullSucceeded", f"pulled 'podinfo' chart with version '{version}'"
                )
            ],
            "artifact": {"revision": version, "digest": "sha256:" + "d" * 64, "lastUpdateTime": ts(updated)},
        },
    }


# -- Flux appliers -------------------------------------------------------------------------------


def kustomization(
    name: str,
    namespace: str = FLUX_NS,
    *,
    conditions: Sequence[Obj] | None = None,
    applied: str = f"main@sha1:{SHA_N}",
    attempted: str | None = None,
    source: str = "flux-system",
    interval: str = "10m",
    depends_on: Iterable[str | Mapping[str, str]] = (),
    inventory: Iterable[str] = (),
    generation: int = 1,
    observed_generation: int = 1,
    requested_at: str | None = None,
    handled_at: str | None = None,
    suspend: bool = False,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    annotations = {"reconcile.fluxcd.io/requestedAt": requested_at} if requested_at else None
    status: Obj = {
        "observedGeneration": observed_generation,
        "conditions": list(conditions) if conditions is not None else [ready(applied)],
        "lastAppliedRevision": applied,
        "lastAttemptedRevision": attempted or applied,
        "inventory": {"entries": [{"id": entry, "v": "v1"} for entry in inventory]},
    }
    if handled_at:
        status["lastHandledReconcileAt"] = handled_at
    spec: Obj = {
        "interval": interval,
        "path": f"./clusters/prod/{name}",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": source},
    }
    if suspend:
        spec["suspend"] = True
    deps = [d if isinstance(d, Mapping) else {"name": d} for d in depends_on]
    if deps:
        spec["dependsOn"] = deps
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": meta(name, namespace, generation=generation, annotations=annotations, labels=labels),
        "spec": spec,
        "status": status,
    }


def waiting_on(name: str, dependency: str, *, ago: timedelta, namespace: str = FLUX_NS) -> Obj:
    """A Kustomization that dependsOn `dependency` and says Ready=False/DependencyNotReady."""
    message = f"dependency '{namespace}/{dependency}' is not ready"
    return kustomization(
        name,
        namespace,
        depends_on=[dependency],
        conditions=[cond("Ready", "False", "DependencyNotReady", message, ago=ago)],
    )


def helm_release(
    name: str,
    namespace: str = FLUX_NS,
    *,
    conditions: Sequence[Obj] | None = None,
    chart_version: str = "6.5.0",
    attempted: str | None = None,
    history_status: str = "deployed",
    target_namespace: str | None = None,
) -> Obj:
    release_ns = target_namespace or namespace
    spec: Obj = {
        "interval": "10m",
        "chart": {
            "spec": {
                "chart": "podinfo",
                "version": "6.x",
                "sourceRef": {"kind": "HelmRepository", "name": "podinfo"},
            }
        },
    }
    if target_namespace:
        spec["targetNamespace"] = target_namespace
    release_name = f"{target_namespace}-{name}" if target_namespace else name
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": meta(name, namespace),
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "conditions": list(conditions)
            if conditions is not None
            else [
                cond(
                    "Ready",
                    "True",
                    "UpgradeSucceeded",
                    f"Helm upgrade succeeded for release {release_ns}/{release_name}.v3 "
                    f"with chart podinfo@{chart_version}",
                )
            ],
            "helmChart": f"{namespace}/{namespace}-{name}",
            "lastAttemptedRevision": attempted or chart_version,
            "lastAttemptedConfigDigest": "sha256:" + "e" * 64,
            "history": [
                {
                    "name": release_name,
                    "namespace": release_ns,
                    "version": 3,
                    "status": history_status,
                    "chartName": "podinfo",
                    "chartVersion": chart_version,
                    "appVersion": chart_version,
                    "configDigest": "sha256:" + "e" * 64,
                    "digest": "sha256:" + "f" * 64,
                    "firstDeployed": ts(48 * 60 * MIN),
                    "lastDeployed": ts(30 * MIN),
                }
            ],
        },
    }


def terraform(
    name: str,
    namespace: str = FLUX_NS,
    *,
    conditions: Sequence[Obj] | None = None,
    applied: str = f"main@sha1:{SHA_N}",
    source: str = "infra",
    interval: str = "10m",
    approve_plan: str = "auto",
) -> Obj:
    return {
        "apiVersion": "infra.contrib.fluxcd.io/v1alpha2",
        "kind": "Terraform",
        "metadata": meta(name, namespace),
        "spec": {
            "interval": interval,
            "approvePlan": approve_plan,
            "path": f"./terraform/{name}",
            "sourceRef": {"kind": "GitRepository", "name": source, "namespace": namespace},
        },
        "status": {
            "observedGeneration": 1,
            "conditions": list(conditions)
            if conditions is not None
            else [cond("Ready", "True", "TerraformAppliedSucceed", f"Applied successfully: {applied}")],
            "lastAppliedRevision": applied,
            "lastAttemptedRevision": applied,
            "lastPlannedRevision": applied,
            "plan": {"lastApplied": f"plan-{applied}"},
        },
    }


# -- Workloads ---------------------------------------------------------------------------------


def deployment(
    name: str,
    namespace: str = FLUX_NS,
    *,
    replicas: int = 1,
    available: int | None = None,
    image: str = "ghcr.io/fluxcd/kustomize-controller:v1.3.0",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    conditions: Sequence[Obj] | None = None,
    generation: int = 1,
    observed_generation: int = 1,
) -> Obj:
    available = replicas if available is None else available
    default_conditions = [
        cond(
            "Available",
            "True" if available else "False",
            "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
            "",
            ago=60 * MIN,
        ),
        cond(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            f'ReplicaSet "{name}-7d9f" has successfully progressed.',
        ),
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(
            name,
            namespace,
            generation=generation,
            labels=labels or {"app.kubernetes.io/name": name},
            annotations=annotations,
        ),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "manager", "image": image, "args": ["--log-level=info"]}]},
            },
        },
        "status": {
            "observedGeneration": observed_generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": available,
            "availableReplicas": available,
            "conditions": list(conditions) if conditions is not None else default_conditions,
        },
    }


def pod(
    name: str,
    namespace: str = FLUX_NS,
    *,
    app: str,
    template_hash: str = "7d9f",
    image: str = "ghcr.io/fluxcd/kustomize-controller:v1.3.0",
    phase: str = "Running",
    ready: bool = True,
    waiting: str | None = None,
    waiting_message: str = "",
    restarts: int = 0,
    last_terminated: str | None = None,
    created: timedelta = 60 * MIN,
    not_ready_since: timedelta | None = None,
    unschedulable: bool = False,
) -> Obj:
    state: Obj = {"running": {"startedAt": ts(created)}}
    if waiting:
        state = {"waiting": {"reason": waiting, "message": waiting_message}}
    container: Obj = {
        "name": "manager",
        "image": image,
        "imageID": "" if waiting else f"{image}@sha256:" + "9" * 64,
        "ready": ready,
        "started": ready,
        "restartCount": restarts,
        "state": state,
        "lastState": {},
    }
    if last_terminated:
        container["lastState"] = {
            "terminated": {
                "reason": last_terminated,
                "exitCode": 137 if last_terminated == "OOMKilled" else 1,
                "startedAt": ts(3 * MIN),
                "finishedAt": ts(2 * MIN),
            }
        }
    transition = not_ready_since if not_ready_since is not None else created
    conditions = [
        cond("PodReadyToStartContainers", "True", ago=created),
        cond("Initialized", "True", ago=created),
        cond(
            "Ready",
            "True" if ready else "False",
            "" if ready else "ContainersNotReady",
            "" if ready else "containers with unready status: [manager]",
            ago=transition,
        ),
        cond("ContainersReady", "True" if ready else "False", ago=transition),
        cond(
            "PodScheduled",
            "False" if unschedulable else "True",
            "Unschedulable" if unschedulable else "",
            "0/3 nodes are available: 3 Insufficient memory." if unschedulable else "",
            ago=created,
        ),
    ]
    for c in conditions:
        c.pop("observedGeneration")
    status: Obj = {
        "phase": "Pending" if unschedulable else phase,
        "conditions": conditions,
        "qosClass": "Burstable",
    }
    if not unschedulable:
        status.update(
            startTime=ts(created), hostIP="10.0.0.5", podIP="10.244.1.7", containerStatuses=[container]
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta(
            name,
            namespace,
            generation=None,
            created=created,
            labels={"app": app, "pod-template-hash": template_hash},
            ownerReferences=[
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-{template_hash}",
                    "uid": f"rs-{app}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        ),
        "spec": {
            "containers": [{"name": "manager", "image": image, "resources": {"limits": {"memory": "1Gi"}}}],
            "nodeName": "node-1",
            "serviceAccountName": app,
        },
        "status": status,
    }


def lease(
    name: str, namespace: str = FLUX_NS, *, holder: str, renewed: timedelta = 2 * SEC, duration: int = 35
) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta(name, namespace, generation=None),
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": ts(2 * 60 * MIN),
            "renewTime": ts(renewed).replace("Z", ".123456Z"),
            "leaseTransitions": 3,
        },
    }


def controller(
    name: str,
    namespace: str = FLUX_NS,
    *,
    image: str | None = None,
    lease_renewed: timedelta | None = 2 * SEC,
) -> list[Obj]:
    """A healthy controller: Deployment, its Running+Ready Pod and a fresh leader Lease."""
    image = image or f"ghcr.io/fluxcd/{name}:v1.3.0"
    pod_name = f"{name}-7d9f-x2x4z"
    objs = [deployment(name, namespace, image=image), pod(pod_name, namespace, app=name, image=image)]
    if lease_renewed is not None:
        objs.append(
            lease(f"{name}-leader-election", namespace, holder=f"{pod_name}_0c1f3a", renewed=lease_renewed)
        )
    return objs


FLUX_CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller", "notification-controller")


def flux(*, leases: bool = True) -> list[Obj]:
    """The four default Flux controllers, all healthy.

    Without leases they stay healthy however far a test moves the clock (a Lease is only
    fresh while someone renews it).
    """
    return [
        obj
        for name in FLUX_CONTROLLERS
        for obj in controller(name, lease_renewed=2 * SEC if leases else None)
    ]


def event(
    name: str,
    namespace: str = FLUX_NS,
    *,
    kind: str,
    involved: str,
    reason: str,
    message: str,
    count: int,
    first: timedelta,
    last: timedelta,
    api_version: str | None = None,
    type_: str = "Warning",
) -> Obj:
    involved_object = {"kind": kind, "namespace": namespace, "name": involved, "uid": f"uid-{involved}"}
    if api_version:
        involved_object["apiVersion"] = api_version
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": meta(name, namespace, generation=None),
        "involvedObject": involved_object,
        "reason": reason,
        "message": message,
        "type": type_,
        "count": count,
        "firstTimestamp": ts(first),
        "lastTimestamp": ts(last),
        "source": {"component": "kubelet", "host": "node-1"},
        "reportingComponent": "kubelet",
    }


def warning_about(
    kustomization_name: str,
    *,
    count: int,
    first: timedelta,
    last: timedelta,
    reason: str = "BuildFailed",
    message: str = "accumulating resources: failed to read kustomization.yaml",
    name: str | None = None,
    type_: str = "Warning",
) -> Obj:
    """An Event kustomize-controller writes about a Kustomization."""
    return event(
        name or f"{kustomization_name}.17c2",
        kind="Kustomization",
        involved=kustomization_name,
        api_version="kustomize.toolkit.fluxcd.io/v1",
        reason=reason,
        message=message,
        count=count,
        first=first,
        last=last,
        type_=type_,
    )


def crd(plural: str, group: str, kind: str, *, deleting: bool = False) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": meta(f"{plural}.{group}", None, deletionTimestamp=ts(MIN) if deleting else None),
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "listKind": f"{kind}List", "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
        "status": {
            "conditions": [
                cond("Established", "True", "InitialNamesAccepted", "the initial names have been accepted")
            ]
        },
    }


# -- Running the model ------------------------------------------------------------------------


def run(*objs: Obj | Iterable[Obj], now: datetime = NOW, config: ModelConfig | None = None) -> Evaluation:
    """Project every object (as analyze and the watcher do) and evaluate the snapshot."""
    flat: list[Obj] = []
    for item in objs:
        flat.extend([item] if isinstance(item, dict) else item)
    return evaluate([project(o) for o in flat], now=now, config=config or ModelConfig())


def by_id(evaluation: Evaluation) -> dict[str, Finding]:
    return {f.id: f for f in evaluation.findings}


def names(subjects: Iterable[Mapping[str, str]]) -> set[str]:
    """Subjects as "Kind/namespace/name" for readable set assertions."""
    return {f"{s['kind']}/{s['namespace']}/{s['name']}" for s in subjects}


def controller_down(name: str, image: str, namespace: str = FLUX_NS) -> list[Obj]:
    """A controller whose new image cannot be pulled: no replica available, its Pod in
    ImagePullBackOff (as kubelet reports it)."""
    return [
        deployment(name, namespace, available=0, image=image),
        pod(
            f"{name}-7d9f-abcde",
            namespace,
            app=name,
            image=image,
            ready=False,
            waiting="ImagePullBackOff",
            waiting_message=f'Back-off pulling image "{image}"',
            created=45 * MIN,
        ),
    ]


def helm_upgrade_failed(
    name: str, *, attempted: str, deployed: str = "6.5.0", message: str = "timed out"
) -> Obj:
    """helm-controller after a failed upgrade to `attempted`: the newest history entry failed,
    the one before is what Helm still has deployed."""
    release = helm_release(
        name,
        chart_version=deployed,
        attempted=attempted,
        conditions=[cond("Ready", "False", "UpgradeFailed", f"Helm upgrade failed: {message}", ago=30 * MIN)],
    )
    before = dict(release["status"]["history"][0], version=2)
    failed = dict(before, version=3, status="failed", chartVersion=attempted, appVersion=attempted)
    release["status"]["history"] = [failed, before]
    return release
