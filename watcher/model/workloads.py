"""Is a Pod or a Deployment/StatefulSet failing, why (from a fixed set) and since when.

Kubelet reports a failing container as a *waiting* state with a reason but no time, so
`since` is taken from the nearest timestamp that bounds the failure (documented per
case in `pod_state`). A transient state is still returned here; whether it has lasted
long enough to be a finding is the caller's threshold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watcher.model.context import Ctx
from watcher.model.objects import (
    Condition,
    Key,
    Lookup,
    condition,
    describe,
    dig,
    group_of,
    integer,
    is_deleting,
    labels_of,
    spec_written_at,
    subject_of,
    time_at,
    transition,
)
from watcher.model.types import Finding, FindingType, HealthReason, rfc3339

_WAITING: Mapping[str, HealthReason] = {
    "ImagePullBackOff": HealthReason.IMAGE_PULL_BACK_OFF,
    "ErrImagePull": HealthReason.ERR_IMAGE_PULL,
    "InvalidImageName": HealthReason.ERR_IMAGE_PULL,
    "ErrImageNeverPull": HealthReason.ERR_IMAGE_PULL,
    "CrashLoopBackOff": HealthReason.CRASH_LOOP_BACK_OFF,
    "CreateContainerConfigError": HealthReason.CREATE_CONTAINER_CONFIG_ERROR,
    "CreateContainerError": HealthReason.CREATE_CONTAINER_CONFIG_ERROR,
    "RunContainerError": HealthReason.CREATE_CONTAINER_CONFIG_ERROR,
}
"""Kubelet waiting reasons that mean "this will not fix itself", folded into the fixed set."""


@dataclass(frozen=True, slots=True)
class WorkloadState:
    """The verdict on one Pod or workload. `failing` is None when it is fine (or finished)."""

    ready: bool
    failing: HealthReason | None = None
    detail: str = ""
    """The exact reason Kubernetes wrote (e.g. InvalidImageName, ProgressDeadlineExceeded)."""
    container: str = ""
    image: str = ""
    message: str = ""
    restarts: int = 0
    since: datetime | None = None


def pod_state(pod: Mapping[str, Any]) -> WorkloadState:
    """Classify a Pod.

    since: a crash loop has no first-failure time and Ready flips on every restart, so
    it counts from the Pod's start (kubelet only says CrashLoopBackOff after a crash);
    Unschedulable from PodScheduled's transition; everything else from the Ready
    condition's transition to False, or the Pod's creation.
    """
    status = pod.get("status", {})
    phase = status.get("phase", "")
    if is_deleting(pod) or phase in ("Succeeded", "Failed"):
        return WorkloadState(ready=False)
    ready_cond = condition(pod, "Ready")
    ready = phase == "Running" and ready_cond is not None and ready_cond["status"] == "True"
    statuses = [*status.get("initContainerStatuses", ()), *status.get("containerStatuses", ())]
    for cs in statuses:
        waiting = dig(cs, "state", "waiting", "reason") or ""
        oom = dig(cs, "lastState", "terminated", "reason") == "OOMKilled"
        reason = _WAITING.get(waiting)
        if reason is HealthReason.CRASH_LOOP_BACK_OFF and oom:
            reason = HealthReason.OOM_KILLED
        if reason is None and oom and not cs.get("ready", False) and dig(cs, "state", "running") is not None:
            reason, waiting = HealthReason.OOM_KILLED, "OOMKilled"
        if reason is None:
            continue
        if reason in (HealthReason.CRASH_LOOP_BACK_OFF, HealthReason.OOM_KILLED):
            since = time_at(pod, "status", "startTime") or _created(pod)
        else:
            since = _not_ready_since(ready_cond) or _created(pod)
        return WorkloadState(
            ready=ready,
            failing=reason,
            detail=waiting,
            container=cs["name"],
            image=cs.get("image", ""),
            message=dig(cs, "state", "waiting", "message") or "",
            restarts=cs.get("restartCount", 0),
            since=since,
        )
    if ready:
        return WorkloadState(ready=True)
    scheduled = condition(pod, "PodScheduled")
    if scheduled and scheduled["status"] == "False" and scheduled.get("reason") == "Unschedulable":
        return WorkloadState(
            ready=False,
            failing=HealthReason.UNSCHEDULABLE,
            detail="Unschedulable",
            message=scheduled.get("message", ""),
            since=transition(scheduled) or _created(pod),
        )
    first = statuses[0] if statuses else {}
    return WorkloadState(
        ready=False,
        failing=HealthReason.NOT_READY,
        detail=phase or "Pending",
        container=first.get("name", ""),
        image=first.get("image", ""),
        message=(ready_cond or {}).get("message", ""),
        since=_not_ready_since(ready_cond) or _created(pod),
    )


def _created(obj: Mapping[str, Any]) -> datetime | None:
    return time_at(obj, "metadata", "creationTimestamp")


def _not_ready_since(ready: Condition | None) -> datetime | None:
    return transition(ready) if ready is not None and ready["status"] != "True" else None


def owner_workload(pod: Mapping[str, Any], lookup: Lookup) -> Key | None:
    """Pod -> ReplicaSet -> Deployment (or StatefulSet/DaemonSet/Job) via ownerReferences.

    Without the ReplicaSet object, its name minus the pod-template-hash names the Deployment.
    """
    namespace = pod["metadata"].get("namespace", "")
    for ref in dig(pod, "metadata", "ownerReferences") or ():
        if not ref.get("controller", False) or not ref.get("name"):
            continue
        kind, name = ref.get("kind", ""), ref["name"]
        if kind != "ReplicaSet":
            return Key(group_of(ref.get("apiVersion", "")), kind, namespace, name)
        replicaset = lookup(Key("apps", "ReplicaSet", namespace, name))
        if replicaset is not None:
            for parent in dig(replicaset, "metadata", "ownerReferences") or ():
                if parent.get("kind") == "Deployment" and parent.get("name"):
                    return Key("apps", "Deployment", namespace, parent["name"])
            return Key("apps", "ReplicaSet", namespace, name)
        template_hash = labels_of(pod).get("pod-template-hash", "")
        if template_hash and name.endswith(f"-{template_hash}"):
            return Key("apps", "Deployment", namespace, name[: -len(template_hash) - 1])
        return Key("apps", "ReplicaSet", namespace, name)
    return None


def desired_replicas(workload: Mapping[str, Any]) -> int:
    """spec.replicas, defaulting to 1 as the API server does."""
    replicas = integer(workload, "spec", "replicas")
    return 1 if replicas is None else replicas


def available_replicas(workload: Mapping[str, Any]) -> int:
    field = "availableReplicas" if workload["kind"] == "Deployment" else "readyReplicas"
    return integer(workload, "status", field) or 0


def workload_state(workload: Mapping[str, Any]) -> WorkloadState:
    """Classify a Deployment or StatefulSet.

    since: ProgressDeadlineExceeded from the Progressing transition; a generation the
    workload controller has not observed from the last spec write; too few available
    replicas from Available turning False, else the last time the Deployment made
    progress (Progressing.lastUpdateTime). StatefulSets keep no such times: their
    `since` is None and only their Pods carry the timing.
    """
    desired = desired_replicas(workload)
    available = available_replicas(workload)
    if is_deleting(workload) or desired == 0:
        return WorkloadState(ready=False)
    progressing = condition(workload, "Progressing")
    if progressing and progressing.get("reason") == "ProgressDeadlineExceeded":
        return WorkloadState(
            ready=available > 0,
            failing=HealthReason.PROGRESS_DEADLINE_EXCEEDED,
            detail="ProgressDeadlineExceeded",
            message=progressing.get("message", ""),
            since=transition(progressing),
        )
    generation = integer(workload, "metadata", "generation")
    observed = integer(workload, "status", "observedGeneration")
    if generation is not None and observed is not None and observed < generation:
        return WorkloadState(
            ready=available > 0,
            failing=HealthReason.GENERATION_NOT_OBSERVED,
            detail="GenerationNotObserved",
            message=f"generation {generation}, observed {observed}",
            since=spec_written_at(workload),
        )
    if available >= desired:
        return WorkloadState(ready=True)
    available_cond = condition(workload, "Available")
    if workload["kind"] != "Deployment":
        since = None
    elif available_cond and available_cond["status"] == "False":
        since = transition(available_cond)
    else:
        since = time_at(progressing or {}, "lastUpdateTime") or time_at(
            workload, "metadata", "creationTimestamp"
        )
    return WorkloadState(
        ready=available > 0,
        failing=HealthReason.NO_AVAILABLE_REPLICAS if available == 0 else HealthReason.UNAVAILABLE,
        detail=f"{available}/{desired} available",
        message=(available_cond or {}).get("message", ""),
        since=since,
    )


# -- WorkloadUnhealthy ---------------------------------------------------------------------------

_ADVICE: Mapping[HealthReason, str] = {
    HealthReason.IMAGE_PULL_BACK_OFF: "Check the image name/tag and the registry credentials.",
    HealthReason.ERR_IMAGE_PULL: "Check the image name/tag and the registry credentials.",
    HealthReason.CRASH_LOOP_BACK_OFF: "Read its logs (kubectl logs --previous) and fix or roll back.",
    HealthReason.OOM_KILLED: "It runs out of memory: raise its memory limit or fix the leak.",
    HealthReason.CREATE_CONTAINER_CONFIG_ERROR: "A ConfigMap/Secret (key) it references is missing.",
    HealthReason.UNSCHEDULABLE: "No node fits it; free capacity or fix its scheduling constraints.",
    HealthReason.NOT_READY: "Check its readiness probe, logs and Events.",
    HealthReason.PROGRESS_DEADLINE_EXCEEDED: "Its rollout stalled; check the new Pods, roll back if needed.",
    HealthReason.GENERATION_NOT_OBSERVED: "kube-controller-manager has not processed its spec.",
    HealthReason.UNAVAILABLE: "Check its Pods and Events for why replicas are not available.",
    HealthReason.NO_AVAILABLE_REPLICAS: "Check its Pods and Events for why no replica is available.",
}

_PHRASES: Mapping[HealthReason, str] = {
    HealthReason.NO_AVAILABLE_REPLICAS: "has {detail} replicas",
    HealthReason.UNAVAILABLE: "has {detail} replicas",
    HealthReason.PROGRESS_DEADLINE_EXCEEDED: "has exceeded its progress deadline",
    HealthReason.GENERATION_NOT_OBSERVED: "has a spec its controller has not observed ({message})",
}


def describe_state(state: WorkloadState) -> str:
    """`is in CrashLoopBackOff (container app, image x:1)` or `has 0/2 available replicas`."""
    phrase = _PHRASES.get(state.failing) if state.failing is not None else None
    if phrase is not None:
        return phrase.format(detail=state.detail, message=state.message)
    shown = state.detail if state.failing is HealthReason.NOT_READY else str(state.failing)
    parts = [
        f"container {state.container}" if state.container else "",
        f"image {state.image}" if state.image else "",
    ]
    listed = ", ".join(p for p in parts if p)
    return f"is in {shown}" + (f" ({listed})" if listed else "")


def state_of(obj: Mapping[str, Any]) -> WorkloadState:
    return pod_state(obj) if obj["kind"] == "Pod" else workload_state(obj)


def workload_unhealthy(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """A failing Pod or Deployment, once it has failed for the threshold (correlation decides
    whether another finding explains it)."""
    state = state_of(obj)
    if state.failing is None or not ctx.due(state.since, ctx.config.thresholds.workload_unhealthy):
        return None
    message = f"{describe(subject_of(obj))} {describe_state(state)} since {rfc3339(state.since)}"
    shown = state.message and state.failing is not HealthReason.GENERATION_NOT_OBSERVED
    message += f": {state.message}. " if shown else ". "
    message += _ADVICE.get(state.failing, "")
    evidence = {
        "reason": str(state.failing),
        "detail": state.detail,
        "container": state.container,
        "image": state.image,
        "restarts": state.restarts,
        "message": state.message,
    }
    return ctx.finding(FindingType.WORKLOAD_UNHEALTHY, subject_of(obj), message, state.since, evidence)
