"""Is a Pod or a workload (Deployment, StatefulSet, DaemonSet) failing, why (from a fixed set)
and since when.

Kubelet reports a failing container as a *waiting* state with a reason but no time, so
`since` is taken from the nearest timestamp that bounds the failure (documented per
case in `pod_state`). A transient state is still returned here; whether it has lasted
long enough to be a finding is the caller's threshold (WorkloadUnhealthy, workload_rule.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from watcher.model.ingest.kinds import TIMED_BY_PODS
from watcher.model.ingest.objects import (
    Condition,
    Key,
    Lookup,
    condition,
    controller_owner,
    dig,
    integer,
    is_deleting,
    key_of,
    labels_of,
    parse_time,
    spec_written_at,
    text,
    time_at,
    transition,
)
from watcher.model.types import HealthReason

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

BACK_OFF = frozenset({"CrashLoopBackOff", "ImagePullBackOff"})
"""Waiting reasons kubelet only writes after failing again and again: reported even when the
object carries no time to age them by."""

REPLACED_BY: frozenset[tuple[str, str]] = frozenset(
    {("apps", kind) for kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")} | {("batch", "Job")}
)
"""Owners that speak for their failed Pods: they replace them (their own availability says
whether that works), or, for a Job, count them against its backoffLimit."""


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
    last_termination: str = ""
    """Why the container last ended (state.terminated if it is ended now, else lastState.terminated)."""
    exit_code: int | None = None
    since: datetime | None = None

    @property
    def restarted_after_exit(self) -> bool:
        """It ran, exited and was started again: a crash, not a readiness probe."""
        return self.restarts > 0 and bool(self.last_termination)


def _container(
    cs: Mapping[str, Any],
    *,
    ready: bool,
    failing: HealthReason,
    detail: str,
    message: str,
    since: datetime | None,
) -> WorkloadState:
    """A failing Pod's state, told by one of its containers (restarts and last exit included)."""
    ended = (cs.get("state") or _NOTHING).get("terminated") or _last_exit(cs)
    return WorkloadState(
        ready=ready,
        failing=failing,
        detail=detail,
        container=cs.get("name", ""),
        image=cs.get("image", ""),
        message=message,
        restarts=cs.get("restartCount", 0),
        last_termination=ended.get("reason", ""),
        exit_code=ended.get("exitCode"),
        since=since,
    )


_NOTHING: Mapping[str, Any] = {}
"""What an absent part of a container status reads as. The schema (ingest/schema.py) keeps each part a
mapping or drops it, so the hot per-container reads below are plain gets, not dig()s."""


def _last_exit(cs: Mapping[str, Any]) -> Mapping[str, Any]:
    return (cs.get("lastState") or _NOTHING).get("terminated") or _NOTHING


def _statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status", {})
    return [*status.get("initContainerStatuses", ()), *status.get("containerStatuses", ())]


def pod_state(pod: Mapping[str, Any]) -> WorkloadState:
    """Classify a running or pending Pod (a finished one is neither ready nor failing here).

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
    statuses = _statuses(pod)
    for cs in statuses:
        now_in = cs.get("state") or _NOTHING
        waiting = now_in.get("waiting") or _NOTHING
        said = waiting.get("reason") or ""
        oom = _last_exit(cs).get("reason") == "OOMKilled"
        reason = _WAITING.get(said)
        if reason is HealthReason.CRASH_LOOP_BACK_OFF and oom:
            reason = HealthReason.OOM_KILLED
        if reason is None and oom and not cs.get("ready", False) and now_in.get("running") is not None:
            reason, said = HealthReason.OOM_KILLED, "OOMKilled"
        if reason is None:
            continue
        if reason in (HealthReason.CRASH_LOOP_BACK_OFF, HealthReason.OOM_KILLED):
            since = parse_time(status.get("startTime")) or _created(pod)
        else:
            since = _not_ready_since(ready_cond) or _created(pod)
        message = waiting.get("message") or ""
        return _container(cs, ready=ready, failing=reason, detail=said, message=message, since=since)
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
    unready = next(
        (cs for cs in statuses if not cs.get("ready", False) and not _completed(cs)),
        statuses[0] if statuses else {},
    )
    return _container(
        unready,
        ready=False,
        failing=HealthReason.NOT_READY,
        detail=phase or "Pending",
        message=(ready_cond or {}).get("message", ""),
        since=_not_ready_since(ready_cond) or _created(pod),
    )


def failed_pod_state(pod: Mapping[str, Any]) -> WorkloadState:
    """A Pod in phase Failed: it will never run again. Why: the Pod's reason (Evicted,
    DeadlineExceeded, ...) or its container's exit; since Ready turned False (kubelet writes
    that when the Pod ends), else unknown."""
    statuses = _statuses(pod)
    ended = [cs for cs in statuses if dig(cs, "state", "terminated") and not _completed(cs)]
    told_by = ended[0] if ended else statuses[0] if statuses else {}
    state = _container(
        told_by,
        ready=False,
        failing=HealthReason.FAILED,
        detail="",
        message=text(pod, "status", "message"),
        since=_not_ready_since(condition(pod, "Ready")),
    )
    return replace(state, detail=text(pod, "status", "reason") or state.last_termination or "Failed")


def replaced(pod: Mapping[str, Any]) -> bool:
    """Is the Pod controlled by a workload that speaks for it (see REPLACED_BY)?"""
    owner = owner_workload(pod, _no_lookup)
    return owner is not None and (owner.group, owner.kind) in REPLACED_BY


def _completed(cs: Mapping[str, Any]) -> bool:
    """An (init) container that ran to a clean end: not what keeps the Pod from being ready."""
    return bool(dig(cs, "state", "terminated", "exitCode") == 0)


def _created(obj: Mapping[str, Any]) -> datetime | None:
    return time_at(obj, "metadata", "creationTimestamp")


def _not_ready_since(ready: Condition | None) -> datetime | None:
    return transition(ready) if ready is not None and ready["status"] != "True" else None


def owner_workload(pod: Mapping[str, Any], lookup: Lookup) -> Key | None:
    """Pod -> ReplicaSet -> Deployment (or StatefulSet/DaemonSet/Job) via ownerReferences.

    Without the ReplicaSet object, its name minus the pod-template-hash names the Deployment.
    """
    owner = controller_owner(pod)
    if owner is None or owner.kind != "ReplicaSet":
        return owner
    namespace, name = owner.namespace, owner.name
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


def desired_replicas(workload: Mapping[str, Any]) -> int:
    """spec.replicas, defaulting to 1 as the API server does; a DaemonSet wants one Pod per
    node it selects (status.desiredNumberScheduled)."""
    if workload["kind"] == "DaemonSet":
        return integer(workload, "status", "desiredNumberScheduled") or 0
    replicas = integer(workload, "spec", "replicas")
    return 1 if replicas is None else replicas


_AVAILABLE_FIELD = {"Deployment": "availableReplicas", "DaemonSet": "numberAvailable"}
"""Where each kind counts the replicas that serve; a StatefulSet's readyReplicas (availableReplicas
is newer and absent from older clusters' objects)."""


def available_replicas(workload: Mapping[str, Any]) -> int:
    return integer(workload, "status", _AVAILABLE_FIELD.get(workload["kind"], "readyReplicas")) or 0


Pods = Callable[[], Iterable[Mapping[str, Any]]]


def workload_state(workload: Mapping[str, Any], pods: Pods = tuple) -> WorkloadState:
    """Classify a Deployment, StatefulSet or DaemonSet.

    since: ProgressDeadlineExceeded from the Progressing transition; a generation the
    workload controller has not observed from the last spec write; too few available
    replicas from Available turning False, else the last time the Deployment made
    progress (Progressing.lastUpdateTime). StatefulSets and DaemonSets keep no such
    times: theirs is the earliest moment one of their `pods` (called only then) became
    unready; with none unready (a Pod that could not even be created) it is None, and
    the controller's FailedCreate Events tell instead (RetryLoop).
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
    if available_cond and available_cond["status"] == "False":
        since = transition(available_cond)
    elif workload["kind"] in TIMED_BY_PODS:
        since = _unready_since(workload, pods())
    else:
        since = time_at(progressing or {}, "lastUpdateTime") or time_at(
            workload, "metadata", "creationTimestamp"
        )
    counted = "ready" if workload["kind"] == "StatefulSet" else "available"
    return WorkloadState(
        ready=available > 0,
        failing=HealthReason.NO_AVAILABLE_REPLICAS if available == 0 else HealthReason.UNAVAILABLE,
        detail=f"{available}/{desired} {counted}",
        message=(available_cond or {}).get("message", ""),
        since=since,
    )


def _unready_since(workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> datetime | None:
    """The earliest time one of the workload's own Pods (by controller ownerReference) turned unready."""
    own = key_of(workload)
    times = [
        state.since
        for pod in pods
        if owner_workload(pod, _no_lookup) == own
        and (state := pod_state(pod)).failing is not None
        and state.since is not None
    ]
    return min(times, default=None)


def _no_lookup(key: Key) -> None:
    return None


def timed_by(*pods: Mapping[str, Any] | None) -> set[Key]:
    """The StatefulSets and DaemonSets whose `since` these Pods (versions of one Pod) bound.

    The engine re-judges them when the Pod changes. A Pod that arrives packed (healthy, see
    fastpath) skips that, which is safe: only a failing Pod with a time bounds a `since`, and
    such a Pod has a finding or a deadline of its own, so its next version is never packed."""
    found = set()
    for pod in pods:
        owner = owner_workload(pod, _no_lookup) if pod is not None else None
        if owner is not None and owner.group == "apps" and owner.kind in TIMED_BY_PODS:
            found.add(owner)
    return found


def state_of(obj: Mapping[str, Any], pods: Pods = tuple) -> WorkloadState:
    """A Pod's or workload's state; a failed Pod counts only when no workload replaces it."""
    if obj["kind"] != "Pod":
        return workload_state(obj, pods)
    status = obj.get("status") or _NOTHING
    if status.get("phase") == "Failed" and not is_deleting(obj) and not replaced(obj):
        return failed_pod_state(obj)
    return pod_state(obj)
