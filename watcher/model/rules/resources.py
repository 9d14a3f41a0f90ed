"""ObjectFailing: any object no other rule judges, read the way kstatus reads every kind.

A GitOps stack applies more than Flux objects and workloads: cert-manager Certificates,
external-secrets ExternalSecrets, Jobs, CRDs, the custom resources of any operator. A
Kustomization without health checks says Ready=True whatever they do, so their own status is
the only voice they have. It is read as kstatus reads it (rules/kstatus.py: the generic checks,
the table of kinds, then Ready), plus the failures kinds.FAILURE_CONDITIONS declares:

- kstatus says Failed (Stalled=True, a Job's Failed=True, a CRD whose names were refused or
  that is not Established): the controller's own verdict, a finding at once;
- a True `*Failed` condition (kapp-controller's ReconcileFailed), a kind's failure condition (a
  ReplicaSet's ReplicaFailure: its Pods cannot be created; an APIService's Available=False), a
  Crossplane resource's Synced=False ReconcileError, a PVC whose volume is Lost, or Ready=False:
  a finding once it has lasted `object_failing` (a retry may fix it), dated from the earliest
  of them.

A failure whose message is an admission policy's denial (a ReplicaSet's FailedCreate) is PolicyDenied
instead, which names the policy. Correlation names the Kustomization or HelmRelease that applied
it (correlate/appliers.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from watcher.model.ingest.kinds import WITHOUT_STATUS, failure_conditions
from watcher.model.ingest.objects import (
    Condition,
    condition,
    conditions,
    describe,
    dig,
    group_of,
    said,
    sentence,
    subject_of,
    text,
    time_at,
    transition,
)
from watcher.model.rules.context import Ctx
from watcher.model.rules.denials import denial_finding
from watcher.model.rules.gitops_rules import failed_conditions, kubectl_describe
from watcher.model.rules.kstatus import compute_status, reads_kind
from watcher.model.rules.policy import read_denial
from watcher.model.types import Finding, FindingType, Status, rfc3339


def object_failing(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    status = compute_status(obj, now=ctx.now)
    if status.status is Status.FAILED:
        cond = _deciding(obj, status.reason)
        says = said(cond, cond["type"]) if cond is not None else f"{status.reason}: {status.message}"
        return _finding(obj, ctx, f"has failed: {says}", transition(cond), status.status)
    failing = _failing(obj)
    if not failing:
        deleted = time_at(obj, "metadata", "deletionTimestamp")
        return _still_deleting(obj, ctx, deleted) if deleted is not None else None
    dated = [t for t in (transition(c) for c in failing) if t is not None]
    since = min(dated, default=None)
    if since is not None and not ctx.due(since, ctx.config.thresholds.object_failing):
        return None
    first = next((c for c in failing if transition(c) == since), failing[0])
    when = f"since {rfc3339(since)}" if since is not None else "since a time it does not say"
    admission = read_denial(first.get("message", ""))
    if admission is not None:  # a ReplicaSet's Pods refused by a policy: PolicyDenied names it
        how = (
            f"Its controller retries it; {first['type']}={first['status']} {when} ({first.get('reason', '')})"
        )
        return denial_finding(
            ctx, subject_of(obj), admission, since=since, how=how, evidence={"controller": ""}
        )
    return _finding(obj, ctx, f"says {said(first, first['type'])} {when}", since, status.status)


def judgeable(obj: Mapping[str, Any]) -> bool:
    """Whether object_failing can read anything of it: a kind kstatus reads, a kind with no state
    by design (kinds.WITHOUT_STATUS), or a status with conditions, a phase or an observedGeneration. A
    custom resource that reports nothing is not judged, and is counted so, never "healthy"."""
    key = (group_of(obj["apiVersion"]), obj["kind"])
    if reads_kind(*key) or key in WITHOUT_STATUS or conditions(obj) or text(obj, "status", "phase"):
        return True
    return dig(obj, "status", "observedGeneration") is not None


def _failing(obj: Mapping[str, Any]) -> list[Condition]:
    found = [*failed_conditions(obj), *_cron_job(obj)]
    found += failure_conditions((group_of(obj["apiVersion"]), obj["kind"]), obj)
    ready = condition(obj, "Ready")
    if ready is not None and ready["status"] == "False":
        found.append(ready)
    synced = condition(obj, UNSYNCED[0])
    if synced is not None and synced["status"] == "False" and synced.get("reason") == UNSYNCED[1]:
        found.append(synced)
    phase = text(obj, "status", "phase")
    if phase in FAILED_PHASES or (obj["kind"] == "PersistentVolumeClaim" and phase == "Lost"):
        # an operator that keeps a phase often says why beside it (Argo Rollouts' status.message)
        found.append({"type": "Phase", "status": phase, "message": text(obj, "status", "message")})
    return found


def _cron_job(obj: Mapping[str, Any]) -> list[Condition]:
    """A CronJob whose last scheduled run did not succeed and nothing runs now: failing since its
    last success (its creation when it never had one). It writes no condition of its own; the
    failed Job it made, kept by failedJobsHistoryLimit, says why (correlation puts it under)."""
    if obj["kind"] != "CronJob" or dig(obj, "spec", "suspend") is True or dig(obj, "status", "active"):
        return []
    scheduled = time_at(obj, "status", "lastScheduleTime")
    succeeded = time_at(obj, "status", "lastSuccessfulTime")
    if scheduled is None or (succeeded is not None and succeeded >= scheduled):
        return []
    since = succeeded or time_at(obj, "metadata", "creationTimestamp")
    what = f"no run has succeeded since {rfc3339(succeeded)}" if succeeded else "no run has succeeded yet"
    last_run: Condition = {  # read off status.lastScheduleTime/lastSuccessfulTime/active
        "type": "LastScheduledRun",
        "status": "NotSucceeded",
        "message": f"{what}; the last was scheduled at {rfc3339(scheduled)} and none is running",
    }
    if since is not None:
        last_run["lastTransitionTime"] = rfc3339(since) or ""
    return [last_run]


FAILED_PHASES = frozenset({"Failed", "Error", "Degraded", "PartiallyFailed", "FailedValidation"})
"""A custom resource's status.phase that says it failed, where an operator keeps a phase rather
than conditions: Flagger's Canary `Failed` (analysis failed, rolled back), Argo Rollouts'
`Degraded`, operators' `Error`, Velero's `PartiallyFailed` (a Backup or Restore that left items
out) and `FailedValidation` (one it refused to run). A phase carries no time: such a failure is
reported at once."""

UNSYNCED = ("Synced", "ReconcileError")
"""A Crossplane managed resource's (any group: every provider's kinds) Synced=False ReconcileError:
its provider cannot make the external resource match the spec. Ready may stay True, the old
resource still up: what Git says is not what runs."""


def _deciding(obj: Mapping[str, Any], reason: str) -> Condition | None:
    """The condition behind kstatus' Failed verdict: the one carrying its reason, else a Job's
    Failed=True (kstatus names it JobFailed)."""
    for cond in conditions(obj):
        if cond.get("reason") == reason and cond.get("status") in ("True", "False"):
            return cond
    return condition(obj, "Failed")


def _still_deleting(obj: Mapping[str, Any], ctx: Ctx, deleted: datetime) -> Finding | None:
    """Deleted, and still there past `object_deleting`: something keeps a finalizer on it. A
    Namespace says what in its NamespaceContentRemaining / NamespaceFinalizersRemaining conditions."""
    if not ctx.due(deleted, ctx.config.thresholds.object_deleting):
        return None
    held = [said(c, c["type"]) for c in conditions(obj) if _holds_deletion(c)]
    why = (
        "; ".join(held) if held else "a finalizer holds it (kubectl get -o jsonpath='{.metadata.finalizers}')"
    )
    return _finding(
        obj, ctx, f"was deleted at {rfc3339(deleted)} and is still there: {why}", deleted, Status.TERMINATING
    )


def _holds_deletion(cond: Condition) -> bool:
    return cond.get("status") == "True" and str(cond.get("type", "")).endswith("Remaining")


def _also(obj: Mapping[str, Any], says: str) -> str:
    """The object's other conditions that name a failure (cert-manager's Issuing=False Failed says
    why a Certificate's renewal failed, where Ready only says it expired)."""
    told = [said(c, c["type"]) for c in conditions(obj) if _names_a_failure(c)]
    told = [t for t in told if t not in says]
    return f" Also: {'; '.join(told)}." if told else ""


def _names_a_failure(cond: Condition) -> bool:
    reason = str(cond.get("reason", ""))
    return "Fail" in reason or "Error" in reason


def _finding(obj: Mapping[str, Any], ctx: Ctx, says: str, since: datetime | None, status: Status) -> Finding:
    subject = subject_of(obj)
    message = sentence(f"{describe(subject)} {says}") + _also(obj, says)
    message += f" Its controller reports it: see {kubectl_describe(subject)} and that controller's logs."
    evidence = {
        "kstatus": str(status),
        "conditions": {c["type"]: c["status"] for c in conditions(obj)},
    }
    return ctx.finding(FindingType.OBJECT_FAILING, subject, message, since, evidence)
