"""A port of kstatus (sigs.k8s.io/cli-utils pkg/kstatus/status), held to upstream's own
test tables case for case (tests/model/test_kstatus_upstream.py names the commits).

Same order as status.go Compute(): the generic checks of generic.go first
(deletionTimestamp, observedGeneration, then the first Reconciling=True or
Stalled=True condition in list order), then a per-kind rule from core.go's table
keyed by group/kind. A kind without a rule ends in status.go's checkReadyCondition:
the first Ready condition whose status is True makes it Current, False or Unknown
InProgress with that condition's reason and message; with no such Ready condition it
is Current. So a Flux object with Ready=False and neither Reconciling nor Stalled is
InProgress to kstatus, whatever its reason: kstatus cannot tell a failure from work in
progress there, which is why the model's own rules read Ready; this module answers
"what would kstatus say".

`reason` is the reason of the condition kstatus would add (Reconciling/Stalled, or the
object's own condition); it is "" where kstatus adds none (Current, Terminating).
The only clock kstatus reads is the Pod scheduling window; pass `now` for it.
Where kstatus returns an error (a Pod phase it does not know), the status is Unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from watcher.model.ingest.objects import conditions, dig, group_of, integer, text, time_at
from watcher.model.types import Status, StatusResult

SCHEDULE_WINDOW = timedelta(seconds=15)
"""How long kstatus lets a Pod be unschedulable before calling it Failed."""

_MAX_INT32 = 2**31 - 1

Rule = Callable[[Mapping[str, Any], datetime | None], StatusResult]


def compute_status(obj: Mapping[str, Any], *, now: datetime | None = None) -> StatusResult:
    """kstatus' Compute() for one projected object.

    `now` only matters for a Pending Pod that is Unschedulable: within 15 s of its
    creation it is InProgress, after that Failed. Without `now` the window is over.
    """
    generic = _generic(obj)
    if generic is not None:
        return generic
    rule = _BY_GROUP_KIND.get((group_of(obj["apiVersion"]), obj["kind"]))
    if rule is not None:
        return rule(obj, now)
    return _ready(obj) or _RESOURCE_CURRENT


def _in_progress(reason: str, message: str) -> StatusResult:
    return StatusResult(Status.IN_PROGRESS, reason, message)


def _failed(reason: str, message: str) -> StatusResult:
    return StatusResult(Status.FAILED, reason, message)


def _current(message: str) -> StatusResult:
    return StatusResult(Status.CURRENT, "", message)


_RESOURCE_CURRENT = _current("Resource is current")
_RESOURCE_READY = _current("Resource is Ready")
_ALWAYS_READY = _current("Resource is always ready")
_TERMINATING = StatusResult(Status.TERMINATING, "", "Resource scheduled for deletion")
"""The answers that carry nothing of the object, made once (a StatusResult is immutable): most
objects a pass judges are Ready, and building the same answer for each was a measurable part
of re-judging one."""


def _short(want: int, have: int, reason: str, counted: str) -> StatusResult | None:
    """The replica-count check every workload kind makes, in upstream's words: fewer `counted`
    replicas than wanted is in progress."""
    return _in_progress(reason, f"{counted}: {have}/{want}") if want > have else None


def _extra(replicas: int, spec: int) -> StatusResult | None:
    """More replicas than the spec: the old ones are still terminating."""
    return _in_progress("ExtraPods", f"Pending termination: {replicas - spec}") if replicas > spec else None


def _int(obj: Mapping[str, Any], path: str, default: int) -> int:
    value = integer(obj, *path.split("."))
    return default if value is None else value


def _generic(obj: Mapping[str, Any]) -> StatusResult | None:
    """generic.go checkGenericProperties: deletion, generation, then Reconciling/Stalled."""
    if text(obj, "metadata", "deletionTimestamp"):
        return _TERMINATING
    generation = integer(obj, "metadata", "generation")
    observed = integer(obj, "status", "observedGeneration")
    if (
        generation is not None
        and observed is not None
        and observed != generation
        and (observed >= 0 or not _conditions_observed(obj, generation))
    ):
        return _in_progress(
            "LatestGenerationNotObserved",
            f"{obj['kind']} generation is {generation}, but latest observed generation is {observed}",
        )
    for cond in conditions(obj):
        if cond["type"] == "Reconciling" and cond["status"] == "True":
            return _in_progress(cond.get("reason", ""), cond.get("message", ""))
        if cond["type"] == "Stalled" and cond["status"] == "True":
            return _failed(cond.get("reason", ""), cond.get("message", ""))
    return None


def _conditions_observed(obj: Mapping[str, Any], generation: int) -> bool:
    """A stalewatch addition, outside upstream's table: Flux writes status.observedGeneration -1
    until an object's first success, yet stamps every condition with the generation it judged
    (the lab's real controllers do both). Its generation was observed: its conditions, not
    "LatestGenerationNotObserved", say how it fails."""
    found = conditions(obj)
    return bool(found) and all(c.get("observedGeneration") == generation for c in found)


def _ready(obj: Mapping[str, Any]) -> StatusResult | None:
    """status.go checkReadyCondition: the first Ready condition that is True, False or Unknown
    decides; one with any other status is passed over."""
    for cond in conditions(obj):
        if cond["type"] != "Ready":
            continue
        if cond["status"] == "True":
            return _RESOURCE_READY
        if cond["status"] in ("False", "Unknown"):
            return _in_progress(cond.get("reason", ""), cond.get("message", ""))
    return None


def _always_ready(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    return _ALWAYS_READY


def _statefulset(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    if text(obj, "spec", "updateStrategy", "type") == "OnDelete":
        return _current("StatefulSet is using the ondelete update strategy")
    spec = _int(obj, "spec.replicas", 1)
    ready = _int(obj, "status.readyReplicas", 0)
    current = _int(obj, "status.currentReplicas", 0)
    updated = _int(obj, "status.updatedReplicas", 0)
    replicas = _int(obj, "status.replicas", 0)
    partition = _int(obj, "spec.updateStrategy.rollingUpdate.partition", -1)
    short = (
        _short(spec, replicas, "LessReplicas", "Replicas")
        or _short(spec, ready, "LessReady", "Ready")
        or _extra(replicas, spec)
    )
    if short is not None:
        return short
    if partition != -1:
        partitioned = _short(spec - partition, updated, "PartitionRollout", "updated")
        return partitioned or _current(f"Partition rollout complete. updated: {updated}")
    if (short := _short(spec, current, "LessCurrent", "current")) is not None:
        return short
    if text(obj, "status", "currentRevision") != text(obj, "status", "updateRevision"):
        return _in_progress("RevisionMismatch", "Waiting for updated revision to match current")
    return _current(f"All replicas scheduled as expected. Replicas: {replicas}")


def _deployment(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    progressing = _int(obj, "spec.progressDeadlineSeconds", _MAX_INT32) == _MAX_INT32
    available = False
    for cond in conditions(obj):
        if cond["type"] == "Progressing":
            if cond.get("reason") == "ProgressDeadlineExceeded":
                return _failed("ProgressDeadlineExceeded", "Progress deadline exceeded")
            if cond["status"] == "True" and cond.get("reason") == "NewReplicaSetAvailable":
                progressing = True
        elif cond["type"] == "Available" and cond["status"] == "True":
            available = True
    spec = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    updated = _int(obj, "status.updatedReplicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    available_replicas = _int(obj, "status.availableReplicas", 0)
    short = (
        _short(spec, replicas, "LessReplicas", "Replicas")
        or _short(spec, updated, "LessUpdated", "Updated")
        or _extra(replicas, spec)
        or _short(updated, available_replicas, "LessAvailable", "Available")
        or _short(spec, ready, "LessReady", "Ready")
    )
    if short is not None:
        return short
    if not progressing:
        return _in_progress("ReplicaSetNotAvailable", "ReplicaSet not Available")
    if not available:
        return _in_progress("DeploymentNotAvailable", "Deployment not Available")
    return _current(f"Deployment is available. Replicas: {replicas}")


def _replicaset(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    for cond in conditions(obj):
        if cond["type"] == "ReplicaFailure" and cond["status"] == "True":
            return _in_progress("ReplicaFailure", "Replica Failure condition. Check Pods")
    spec = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    available = _int(obj, "status.availableReplicas", 0)
    labelled = _int(obj, "status.fullyLabeledReplicas", 0)
    return (
        _short(spec, labelled, "LessLabelled", "Labelled")
        or _short(spec, available, "LessAvailable", "Available")
        or _short(spec, ready, "LessReady", "Ready")
        or _extra(replicas, spec)
        or _current(f"ReplicaSet is available. Replicas: {replicas}")
    )


def _daemonset(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    # Unlike the generic check, a DaemonSet must have both generation fields set.
    if integer(obj, "metadata", "generation") is None:
        message = f"{obj['kind']} metadata.generation not found"
        return _in_progress("NoGeneration", message)
    if integer(obj, "status", "observedGeneration") is None:
        message = f"{obj['kind']} status.observedGeneration not found"
        return _in_progress("NoObservedGeneration", message)
    desired = _int(obj, "status.desiredNumberScheduled", -1)
    current = _int(obj, "status.currentNumberScheduled", 0)
    updated = _int(obj, "status.updatedNumberScheduled", 0)
    available = _int(obj, "status.numberAvailable", 0)
    ready = _int(obj, "status.numberReady", 0)
    if desired == -1:
        return _in_progress("NoDesiredNumber", "Missing .status.desiredNumberScheduled")
    return (
        _short(desired, current, "LessCurrent", "Current")
        or _short(desired, updated, "LessUpdated", "Updated")
        or _short(desired, available, "LessAvailable", "Available")
        or _short(desired, ready, "LessReady", "Ready")
        or _current(f"All replicas scheduled as expected. Replicas: {desired}")
    )


def _pvc(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    phase = text(obj, "status", "phase") or "unknown"
    if phase != "Bound":
        return _in_progress("NotBound", f"PVC is not Bound. phase: {phase}")
    return _current("PVC is Bound")


def _pod(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    phase = text(obj, "status", "phase")
    conds = conditions(obj)
    if phase == "Succeeded":
        return _current("Pod has completed successfully")
    if phase == "Failed":
        return _current("Pod has completed, but not successfully")
    if phase == "Running":
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
            return _current("Pod is Ready")
        looping = [
            cs["name"]
            for cs in dig(obj, "status", "containerStatuses") or ()
            if dig(cs, "state", "waiting", "reason") == "CrashLoopBackOff"
        ]
        if looping:
            return _failed("ContainerCrashLooping", f"Containers in CrashLoop state: {','.join(looping)}")
        return _in_progress("PodRunningNotReady", "Pod is running but is not Ready")
    if phase == "Pending":
        scheduled = next((c for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"), None)
        if scheduled is not None and scheduled.get("reason") == "Unschedulable":
            created = time_at(obj, "metadata", "creationTimestamp")
            if now is not None and created is not None and now - SCHEDULE_WINDOW < created:
                return _in_progress("PodNotScheduled", "Pod has not been scheduled")
            return _failed("PodUnschedulable", "Pod could not be scheduled")
        return _in_progress("PodPending", "Pod is in the Pending phase")
    if phase == "":
        return _in_progress("PodNotObserved", "Pod phase not available")
    # kstatus returns an error here, which its callers report as Unknown.
    return StatusResult(Status.UNKNOWN, "", f"unknown phase {phase}")


def _pdb(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    return _current("AllowedDisruptions has been computed.")


def _job(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    """A Suspended=True condition counts only while spec.suspend is true: a Job on its way
    into or out of suspension falls through to the start-time check like any other."""
    parallelism = _int(obj, "spec.parallelism", 1)
    completions = _int(obj, "spec.completions", parallelism)
    succeeded = _int(obj, "status.succeeded", 0)
    active = _int(obj, "status.active", 0)
    failed = _int(obj, "status.failed", 0)
    for cond in conditions(obj):
        if cond["status"] != "True":
            continue
        if cond["type"] == "Complete":
            return _current(f"Job Completed. succeeded: {succeeded}/{completions}")
        if cond["type"] == "Failed":
            return _failed("JobFailed", f"Job Failed. failed: {failed}/{completions}")
        if cond["type"] == "Suspended" and dig(obj, "spec", "suspend") is True:
            return _current("Job is suspended")
    if not text(obj, "status", "startTime"):
        return _in_progress("JobNotStarted", "Job not started")
    return _current(f"Job in progress. success:{succeeded}, active: {active}, failed: {failed}")


def _service(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    if (text(obj, "spec", "type") or "ClusterIP") == "LoadBalancer" and not text(obj, "spec", "clusterIP"):
        return _in_progress("NoIPAssigned", "ClusterIP not set. Service type: LoadBalancer")
    return _current("Service is ready")


def _crd(obj: Mapping[str, Any], now: datetime | None) -> StatusResult:
    for cond in conditions(obj):
        if cond["type"] == "NamesAccepted" and cond["status"] == "False":
            return _failed(cond.get("reason", ""), cond.get("message", ""))
        if cond["type"] == "Established":
            if cond["status"] == "False" and cond.get("reason") != "Installing":
                return _failed(cond.get("reason", ""), cond.get("message", ""))
            if cond["status"] == "True":
                return _current("CRD is established")
    return _in_progress("Installing", "Install in progress")


RULES: Mapping[str, Rule] = {
    "Service": _service,
    "Pod": _pod,
    "Secret": _always_ready,
    "PersistentVolumeClaim": _pvc,
    "apps/StatefulSet": _statefulset,
    "apps/DaemonSet": _daemonset,
    "extensions/DaemonSet": _daemonset,
    "apps/Deployment": _deployment,
    "extensions/Deployment": _deployment,
    "apps/ReplicaSet": _replicaset,
    "extensions/ReplicaSet": _replicaset,
    "policy/PodDisruptionBudget": _pdb,
    "batch/CronJob": _always_ready,
    "ConfigMap": _always_ready,
    "batch/Job": _job,
    "apiextensions.k8s.io/CustomResourceDefinition": _crd,
}
"""core.go's legacyTypes: group/kind (bare kind for the core group) to its rule."""
_BY_GROUP_KIND: Mapping[tuple[str, str], Rule] = {
    (group, kind): rule
    for (group, _, kind), rule in ((name.rpartition("/"), rule) for name, rule in RULES.items())
}
"""RULES by (group, kind), as compute_status() looks them up (no key string built per object)."""


def reads_kind(group: str, kind: str) -> bool:
    """Whether kstatus' table has a reader of this kind's own fields (a Job's, a PVC's, ...)."""
    return (group, kind) in _BY_GROUP_KIND
