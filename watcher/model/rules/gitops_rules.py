"""The rules every visible, unsuspended GitOps object is checked by: what its conditions, its
spec and its source's revision say is wrong (Flux kinds, and any kind a configured controller
reconciles).

Each is a small function `(obj, ctx) -> Finding | None` reading kstatus conditions the way Flux
writes them, and gives a *candidate*: correlation later decides which are roots and which
symptoms. Messages contain no durations relative to `now` (they are cached between
evaluations); times are spelled out, thresholds in Go's spelling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from watcher.model.ingest.flux import REQUESTED_AT, RETRYING, dependencies
from watcher.model.ingest.kinds import SOURCE_GROUP
from watcher.model.ingest.objects import (
    Condition,
    annotations_of,
    condition,
    condition_evidence,
    conditions,
    describe,
    dig,
    format_duration,
    group_of,
    integer,
    is_true,
    newest_transition,
    parse_duration,
    parse_time,
    said,
    said_why,
    sentence,
    spec_written_at,
    subject_of,
    text,
    transition,
)
from watcher.model.ingest.revisions import same_revision, short
from watcher.model.rules.context import Ctx, Rule
from watcher.model.rules.denials import denied_condition
from watcher.model.types import Finding, FindingType, Subject, rfc3339


def stalled(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    cond = condition(obj, "Stalled")
    if cond is None or cond["status"] != "True":
        return None
    what = describe(subject_of(obj))
    message = sentence(f"{what} is stalled: {cond.get('reason', '')}: {cond.get('message', '')}") + (
        " Its controller has stopped retrying; fix the cause, then trigger a reconcile "
        f"(change the spec or set the {REQUESTED_AT} annotation)."
    )
    return ctx.finding(
        FindingType.STALLED,
        subject_of(obj),
        message,
        transition(cond),
        condition_evidence(obj, "Stalled", "Ready"),
    )


def stuck_reconciling(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    cond = condition(obj, "Reconciling")
    if cond is None or cond["status"] != "True":
        return None
    ready = condition(obj, "Ready")
    failing = (ready is not None and ready["status"] == "False") or failed_conditions(obj)
    if cond.get("reason") == RETRYING and failing:
        return None  # Flux retrying a failed object: ReconcileFailed's, dated from the failure
    thresholds = ctx.config.thresholds
    limit, by_interval = _interval_limit(
        obj, thresholds.stuck_reconciling_min, thresholds.stuck_reconciling_interval_factor
    )
    since = transition(cond)
    if not ctx.due(since, limit):
        return None
    what = describe(subject_of(obj))
    message = (
        f"{what} has said Reconciling=True since {rfc3339(since)}{said_why(cond)}, "
        f"longer than {format_duration(limit)}"
    )
    message += (
        f" ({thresholds.stuck_reconciling_interval_factor:g} x its {text(obj, 'spec', 'interval')} interval)."
        if by_interval
        else "."
    )
    if ready is not None and ready["status"] == "True":
        message += (
            " It also says Ready=True: the controller finished but never cleared Reconciling, so "
            "kstatus-based tools (flux, kubectl wait, CI gates) see it as still in progress. "
            "Trigger a reconcile or restart the "
            "controller so it rewrites the status."
        )
    elif ready is not None and ready["status"] == "False":
        message += f" It keeps failing and retrying: {said(ready, 'Ready')}. Fix that cause."
    else:
        message += " Check the controller's logs for this object."
    evidence = {
        **condition_evidence(obj, "Reconciling", "Ready"),
        "interval": text(obj, "spec", "interval"),
        "threshold": format_duration(limit),
    }
    return ctx.finding(FindingType.STUCK_RECONCILING, subject_of(obj), message, since, evidence)


def generation_not_observed(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """status.observedGeneration behind metadata.generation, and no condition written for it.

    Flux only advances status.observedGeneration after a successful reconcile, but stamps
    every condition with the generation it was written for; a condition at the current
    generation means the controller saw the change (the object is failing, not ignored).

    since: the later of the newest condition transition and the last non-status write.

    The spec edit that bumped generation happened no later than the last write to the
    object (managedFields), and the controller has changed no condition since the newest
    transition; the later of the two is the conservative start of "not observed".
    """
    generation = integer(obj, "metadata", "generation")
    observed = integer(obj, "status", "observedGeneration")
    if generation is None or observed is None or observed >= generation:
        return None
    if any(c.get("observedGeneration", 0) >= generation for c in conditions(obj)):
        return None  # its conditions were written for this generation: seen, and failing or in progress
    times = [t for t in (newest_transition(obj), spec_written_at(obj)) if t is not None]
    since = max(times, default=None)
    if not ctx.due(since, ctx.config.thresholds.generation_not_observed):
        return None
    message = (
        f"{describe(subject_of(obj))} has metadata.generation {generation} but status.observedGeneration "
        f"{observed} since at least {rfc3339(since)}: its controller has not processed the latest spec. "
        "Check that the controller is running and watches this object (namespace, label-selector shard)."
    )
    evidence = {"generation": generation, "observedGeneration": observed}
    return ctx.finding(FindingType.GENERATION_NOT_OBSERVED, subject_of(obj), message, since, evidence)


def request_time(value: str) -> datetime | None:
    """reconcile.fluxcd.io/requestedAt is opaque; RFC3339 or unix seconds are read as a time."""
    moment = parse_time(value)
    if moment is not None:
        return moment
    try:
        seconds = float(value)
        return datetime.fromtimestamp(seconds, UTC) if seconds > 1e9 else None
    except (ValueError, OverflowError, OSError):
        return None


def reconcile_request_ignored(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    requested = annotations_of(obj).get(REQUESTED_AT, "")
    if not requested:
        return None
    handled = text(obj, "status", "lastHandledReconcileAt")
    if requested == handled:
        return None
    requested_at, handled_at = request_time(requested), request_time(handled)
    if requested_at is not None and handled_at is not None and handled_at >= requested_at:
        return None
    since = requested_at or spec_written_at(obj)
    if not ctx.due(since, ctx.config.thresholds.reconcile_request_ignored):
        return None
    message = (
        f"{describe(subject_of(obj))} was asked to reconcile at {requested} ({REQUESTED_AT}) "
        f"but its controller last handled {handled or 'no request'}; the request is unanswered "
        f"since {rfc3339(since)}. Check that the "
        "controller is running and not stuck on a long reconcile of this object."
    )
    evidence = {"requestedAt": requested, "lastHandledReconcileAt": handled}
    return ctx.finding(FindingType.RECONCILE_REQUEST_IGNORED, subject_of(obj), message, since, evidence)


WAITING_REASONS = {"DependencyNotReady": "dependsOn", "HealthCheckFailed": "inventory"}
"""Ready=False reasons that mean "waiting on other objects", and where those objects are named."""


def _waits_on(obj: Mapping[str, Any], ready: Condition) -> str | None:
    """Where the objects a Ready=False waits on are named, when its reason is a wait and they are."""
    waits_on = WAITING_REASONS.get(ready.get("reason", ""))
    named = {
        "dependsOn": dig(obj, "spec", "dependsOn"),
        "inventory": dig(obj, "status", "inventory", "entries"),
    }
    return waits_on if waits_on is not None and named[waits_on] else None


def dependency_blocked(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """Ready=False because of other objects: DependencyNotReady (spec.dependsOn), or
    HealthCheckFailed (the objects it applied, status.inventory, fail their health checks).

    A candidate only: correlation links it to the first waited-on object with a finding,
    or, when none explains it, reports it once it has lasted its threshold.
    """
    ready = condition(obj, "Ready")
    if ready is None or ready["status"] != "False":
        return None
    waits_on = _waits_on(obj, ready)
    if waits_on is None:
        return None
    since = transition(ready)
    ctx.due(since, ctx.config.thresholds.dependency_blocked)
    what = describe(subject_of(obj))
    if waits_on == "dependsOn":
        message = sentence(f"{what} is blocked waiting for its dependencies: {ready.get('message', '')}")
    else:
        message = sentence(
            f"{what} is not Ready because objects it applied fail health checks: {ready.get('message', '')}"
        )
    evidence = {
        "waits_on": waits_on,
        "dependsOn": [f"{k.kind}/{k.namespace}/{k.name}" for k in dependencies(obj)],
        **condition_evidence(obj, "Ready"),
    }
    return ctx.finding(FindingType.DEPENDENCY_BLOCKED, subject_of(obj), message, since, evidence)


def _interval_limit(
    obj: Mapping[str, Any], floor: timedelta, factor: float, *, field: str = "interval"
) -> tuple[timedelta, bool]:
    """max(floor, factor x spec.<field>), and whether that field set it."""
    interval = parse_duration(text(obj, "spec", field))
    if interval is not None and interval * factor > floor:
        return interval * factor, True
    return floor, False


def _retry_limit(obj: Mapping[str, Any], floor: timedelta, factor: float) -> timedelta:
    """How long a failure may last before it is ReconcileFailed: `factor` retries. A failing Flux
    object is retried on spec.retryInterval when set; source-controller retries a failure with
    exponential backoff (capped at 15 minutes by default), whatever its interval; the appliers
    (kustomize-, helm-, tofu-controller) at their interval. Six hours of Ready=False on a source
    with `interval: 24h` are six hours of failed attempts."""
    if text(obj, "spec", "retryInterval"):
        return _interval_limit(obj, floor, factor, field="retryInterval")[0]
    if group_of(obj["apiVersion"]) == SOURCE_GROUP:
        return floor
    return _interval_limit(obj, floor, factor)[0]


def failed_conditions(obj: Mapping[str, Any]) -> list[Condition]:
    """The True conditions that name a failure: a type ending in `Failed` (source-controller's
    FetchFailed, BuildFailed, StorageOperationFailed; kapp-controller's ReconcileFailed).

    They keep the time the failure began: a Flux controller sets Ready=Unknown at the start of
    every attempt and Ready=False at its end, so Ready's lastTransitionTime is never older than
    the last retry, while FetchFailed stays True, and keeps its time, from the first failed
    fetch until one succeeds."""
    return [
        c for c in conditions(obj) if c.get("status") == "True" and str(c.get("type", "")).endswith("Failed")
    ]


def _earliest(found: Sequence[Condition]) -> tuple[Condition, datetime] | None:
    dated = [(c, t) for c in found if (t := transition(c)) is not None]
    return min(dated, key=lambda pair: pair[1], default=None)


def reconcile_failed(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """Ready=False, or Ready=Unknown with nothing reconciling or a failure still standing, for
    longer than retries take.

    The failure every Flux tool shows (`flux get all --status-selector ready=false`). It is dated
    from when it began: Ready's own transition, or an earlier one of a True `*Failed` condition
    (failed_conditions: Ready's time moves with every retry). A wait on other objects
    (DependencyNotReady on spec.dependsOn, HealthCheckFailed on the inventory) is
    DependencyBlocked instead, and Stalled=True is Stalled: those say more. Ready=Unknown next to
    Reconciling=True and no standing failure is a reconcile in progress (StuckReconciling's once
    it lasts).
    """
    ready = condition(obj, "Ready")
    if ready is None or ready["status"] not in ("False", "Unknown") or is_true(obj, "Stalled"):
        return None
    failed = _earliest(failed_conditions(obj))
    if ready["status"] == "Unknown" and is_true(obj, "Reconciling") and failed is None:
        return None
    if ready["status"] == "False" and _waits_on(obj, ready) is not None:
        return None
    thresholds = ctx.config.thresholds
    limit = _retry_limit(obj, thresholds.reconcile_failed, thresholds.reconcile_failed_interval_factor)
    said_at = transition(ready)
    since = min((t for t in (said_at, failed[1] if failed else None) if t is not None), default=None)
    if not ctx.due(since, limit):
        return None
    subject = subject_of(obj)
    message = (
        f"{describe(subject)} has said Ready={ready['status']} since {rfc3339(said_at)}{said_why(ready)}"
    )
    if failed is not None and since != said_at:
        cond, began = failed
        message += f", and has failed since {rfc3339(began)}"
        same = (cond.get("reason"), cond.get("message")) == (ready.get("reason"), ready.get("message"))
        message += f" ({cond['type']}=True)" if same else f": {said(cond, cond['type'])}"
    if ready["status"] == "Unknown":
        message += (
            ": it is retrying"
            if is_true(obj, "Reconciling")
            else " with no reconcile in progress (no Reconciling=True)"
        )
    message += f". Fix the cause its controller reports; see it in full with {_advice(subject)}."
    evidence = {
        **condition_evidence(obj, "Ready", "Reconciling", *(c["type"] for c in failed_conditions(obj))),
        "interval": text(obj, "spec", "interval"),
        "threshold": format_duration(limit),
    }
    return ctx.finding(FindingType.RECONCILE_FAILED, subject, message, since, evidence)


def kubectl_describe(subject: Subject) -> str:
    """`kubectl describe <kind> <name> [-n <namespace>]`, quoted as code, as messages name it. A
    third party's kind is named with its group (`service.serving.knative.dev`): its bare name may
    be a built-in kind's (Knative's Service) or another operator's, and kubectl would describe
    that one. Built-in groups (no dot, or *.k8s.io) and Flux's keep the bare kind."""
    namespace = subject["namespace"]
    scope = f" -n {namespace}" if namespace else ""
    group = group_of(subject["apiVersion"])
    kind = subject["kind"].lower()
    if "." in group and not group.endswith((".k8s.io", ".toolkit.fluxcd.io")):
        kind = f"{kind}.{group}"
    return f"`kubectl describe {kind} {subject['name']}{scope}`"


def _advice(subject: Subject) -> str:
    """Where the controller's reason shows in full: `flux logs` for Flux kinds, `kubectl describe`."""
    namespace = subject["namespace"]
    described = kubectl_describe(subject)
    if not group_of(subject["apiVersion"]).endswith(".toolkit.fluxcd.io"):
        return f"{described} and its controller's logs"
    scope = f" --namespace={namespace}" if namespace else ""
    return f"`flux logs --kind={subject['kind']} --name={subject['name']}{scope}` and {described}"


def revision_skew(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """Applied revision behind the source's (or behind the last attempted one).

    (a)/(d) Kustomization and Terraform vs their source's artifact, since the artifact's
    lastUpdateTime; (c) a HelmRelease's newest history chart vs its HelmChart/OCI source,
    or vs lastAttemptedRevision. Without a visible source, lastAttemptedRevision stands in
    for it and the clock starts at Ready's transition to False. Terraform waiting for a
    manual plan approval lags on purpose and is left alone.
    """
    if obj["kind"] == "Terraform" and text(obj, "spec", "approvePlan") not in ("", "auto"):
        return None
    revs = ctx.revisions(obj)
    target, since = revs.revision, revs.updated
    if not target:
        ready = condition(obj, "Ready")
        target = revs.attempted
        since = transition(ready) if ready is not None and ready["status"] == "False" else None
    if not revs.applied or not target or same_revision(revs.applied, target):
        return None
    since = since or transition(condition(obj, "Ready"))
    if not ctx.due(since, ctx.config.thresholds.revision_skew):
        return None
    what = describe(subject_of(obj))
    where = (
        f"its source {describe(revs.source)} has" if revs.revision and revs.source else "it last attempted"
    )
    message = f"{what} runs {short(revs.applied)} but {where} {short(target)} since {rfc3339(since)}"
    ready = condition(obj, "Ready")
    if ready is not None and ready["status"] == "False":
        message += (
            f"; applying it fails: {said(ready, 'Ready')}. "
            "Fix that error; until then the cluster runs the old revision."
        )
    else:
        message += ". Check why the new revision was not applied (controller logs, Events)."
    evidence = {
        "source": f"{revs.source.kind}/{revs.source.namespace}/{revs.source.name}" if revs.source else "",
        "source_revision": revs.revision,
        "applied_revision": revs.applied,
        "attempted_revision": revs.attempted,
        **condition_evidence(obj, "Ready"),
    }
    return ctx.finding(FindingType.REVISION_SKEW, subject_of(obj), message, since, evidence)


GITOPS_RULES: Sequence[Rule] = (
    stalled,
    denied_condition,
    dependency_blocked,
    revision_skew,
    reconcile_request_ignored,
    generation_not_observed,
    stuck_reconciling,
    reconcile_failed,
)
"""Checked on every visible GitOps object that is not suspended (revision_skew on APPLIERS only)."""
