"""WorkloadUnhealthy: when a failing Pod or workload (workloads.state_of) has failed long enough
to be a finding, and what to tell on-call to do about it.

Correlation decides afterwards whether another finding explains it (a controller down, a
release failing): here it is only a candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watcher.model.ingest.objects import describe, sentence, subject_of
from watcher.model.rules.context import Ctx
from watcher.model.rules.workload_words import describe_state, termination_evidence
from watcher.model.rules.workloads import BACK_OFF, WorkloadState, state_of
from watcher.model.types import Finding, FindingType, HealthReason, rfc3339

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
    HealthReason.FAILED: (
        "Nothing restarts it: read its logs and Events (kubectl describe pod), then fix and re-create it."
    ),
}
_RESTARTED_ADVICE = "It keeps exiting: read its logs (kubectl logs --previous) and fix or roll back."


def advice(state: WorkloadState) -> str:
    if state.failing is HealthReason.NOT_READY and state.restarted_after_exit:
        return _RESTARTED_ADVICE
    return _ADVICE.get(state.failing, "") if state.failing is not None else ""


def _lasted(state: WorkloadState, ctx: Ctx) -> bool:
    """Has the failure lasted the threshold? A failed Pod is final at once, and a Deployment's
    ProgressDeadlineExceeded is its controller's own timeout, dated or not; a back-off
    (repeated failure already) with no time to age it counts as lasted too."""
    if state.failing in (HealthReason.FAILED, HealthReason.PROGRESS_DEADLINE_EXCEEDED):
        return True  # final, or already the controller's own timeout: nothing to age
    if state.since is None:
        return state.detail in BACK_OFF
    return ctx.due(state.since, ctx.config.thresholds.workload_unhealthy)


def workload_unhealthy(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """A failing Pod or workload, once it has failed for the threshold (correlation decides
    whether another finding explains it)."""
    state = state_of(obj, lambda: ctx.pods(obj["metadata"].get("namespace", "")))
    if state.failing is None or not _lasted(state, ctx):
        return None
    subject = subject_of(obj)
    message = f"{describe(subject)} {describe_state(state)}"
    if state.since is not None:
        message += f" since {rfc3339(state.since)}"
    if state.message and state.failing is not HealthReason.GENERATION_NOT_OBSERVED:
        message += f": {state.message}"
    message = f"{sentence(message)} {advice(state)}".rstrip()
    evidence = {
        "reason": str(state.failing),
        "detail": state.detail,
        "container": state.container,
        "image": state.image,
        "restarts": state.restarts,
        **termination_evidence(state),
        "message": state.message,
    }
    return ctx.finding(FindingType.WORKLOAD_UNHEALTHY, subject, message, state.since, evidence)
