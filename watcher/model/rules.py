"""Per-object rules: what one object (plus, for revisions, its source) says is wrong.

Each rule is a small function `(obj, ctx) -> Finding | None`, dispatched by kind like
kstatus' table. They produce *candidates*: correlation later decides which are roots.
Rules never read the clock; `ctx.due()` both answers "has this lasted its threshold?"
and, when not yet, records the moment it will, so the incremental model knows when to
look again without an event.

Messages say what is wrong and what to do, naming objects, and contain no durations
relative to `now` (they are cached between evaluations); times are spelled out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from watcher.model.objects import (
    Key,
    annotations_of,
    condition,
    conditions,
    describe,
    dig,
    finding_id,
    group_of,
    integer,
    newest_transition,
    parse_duration,
    parse_time,
    spec_written_at,
    subject_of,
    text,
    time_at,
    transition,
)
from watcher.model.revisions import same_revision, short
from watcher.model.types import Finding, FindingType, HealthReason, ModelConfig, Subject, rfc3339
from watcher.model.workloads import WorkloadState, pod_state, workload_state

SOURCE_GROUP = "source.toolkit.fluxcd.io"
KUSTOMIZE_GROUP = "kustomize.toolkit.fluxcd.io"
HELM_GROUP = "helm.toolkit.fluxcd.io"
TERRAFORM_GROUP = "infra.contrib.fluxcd.io"
FLUX_GROUPS: Mapping[str, str] = {
    "Kustomization": KUSTOMIZE_GROUP,
    "HelmRelease": HELM_GROUP,
    "Terraform": TERRAFORM_GROUP,
    "GitRepository": SOURCE_GROUP,
    "OCIRepository": SOURCE_GROUP,
    "Bucket": SOURCE_GROUP,
    "HelmRepository": SOURCE_GROUP,
    "HelmChart": SOURCE_GROUP,
}
"""The API group of the kinds a reference may name without an apiVersion."""
REVISIONED_KINDS = frozenset({"Kustomization", "HelmRelease", "Terraform"})
"""Kinds that apply a source's revision and record what they applied."""

REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"

Lookup = Callable[[Key], Mapping[str, Any] | None]


@dataclass(slots=True)
class Ctx:
    """What a rule may use besides its object: the clock, the config and other objects."""

    now: datetime
    config: ModelConfig
    lookup: Lookup
    pending: list[datetime] = field(default_factory=list)

    def due(self, since: datetime | None, threshold: timedelta) -> bool:
        """Has the state that began at `since` lasted `threshold`? If not yet, note when."""
        if since is None:
            return False
        at = since + threshold
        if at <= self.now:
            return True
        self.pending.append(at)
        return False

    def finding(
        self,
        kind: FindingType,
        subject: Subject,
        message: str,
        since: datetime | None,
        evidence: dict[str, Any],
        *extra_id: str,
    ) -> Finding:
        severity = self.config.severities.get(kind)
        if severity is None:
            raise KeyError(f"ModelConfig.severities has no entry for {kind}")
        return Finding(
            finding_id(kind, subject, *extra_id), kind, severity, subject, message, since, evidence
        )


def _cond_text(obj: Mapping[str, Any], kind: str) -> str:
    """`Ready=False (Reason: message)` as evidence for a message."""
    cond = condition(obj, kind)
    if cond is None:
        return f"no {kind} condition"
    detail = ": ".join(p for p in (cond.get("reason", ""), cond.get("message", "")) if p)
    return f"{kind}={cond['status']}" + (f" ({detail})" if detail else "")


def _conditions_evidence(obj: Mapping[str, Any], *kinds: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in kinds:
        cond = condition(obj, kind)
        if cond is not None:
            out[kind] = {
                k: v for k, v in cond.items() if k in ("status", "reason", "message", "lastTransitionTime")
            }
    return out


# -- GitOps objects -----------------------------------------------------------------------


def stalled(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    cond = condition(obj, "Stalled")
    if cond is None or cond["status"] != "True":
        return None
    what = describe(subject_of(obj))
    message = (
        f"{what} is stalled: {cond.get('reason', '')}: {cond.get('message', '')}. "
        "Its controller has stopped retrying; fix the cause, then trigger a reconcile "
        f"(change the spec or set the {REQUESTED_AT} annotation)."
    )
    return ctx.finding(
        FindingType.STALLED,
        subject_of(obj),
        message,
        transition(cond),
        _conditions_evidence(obj, "Stalled", "Ready"),
    )


def stuck_reconciling(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    cond = condition(obj, "Reconciling")
    if cond is None or cond["status"] != "True":
        return None
    thresholds = ctx.config.thresholds
    interval = parse_duration(text(obj, "spec", "interval"))
    limit = thresholds.stuck_reconciling_min
    if interval is not None:
        limit = max(limit, interval * thresholds.stuck_reconciling_interval_factor)
    since = transition(cond)
    if not ctx.due(since, limit):
        return None
    what = describe(subject_of(obj))
    message = (
        f"{what} has said Reconciling=True since {rfc3339(since)} "
        f"({cond.get('reason', '')}: {cond.get('message', '')}), longer than {_span(limit)}"
    )
    message += (
        f" ({thresholds.stuck_reconciling_interval_factor:g} x its {text(obj, 'spec', 'interval')} interval)."
        if (interval is not None and limit > thresholds.stuck_reconciling_min)
        else "."
    )
    ready = condition(obj, "Ready")
    if ready is not None and ready["status"] == "True":
        message += (
            " It also says Ready=True: the controller finished but never cleared Reconciling, so "
            "kstatus-based tools (flux, kubectl wait, CI gates) see it as still in progress. "
            "Trigger a reconcile or restart the "
            "controller so it rewrites the status."
        )
    elif ready is not None and ready["status"] == "False":
        message += f" It keeps failing and retrying: {_cond_text(obj, 'Ready')}. Fix that cause."
    else:
        message += " Check the controller's logs for this object."
    evidence = {
        **_conditions_evidence(obj, "Reconciling", "Ready"),
        "interval": text(obj, "spec", "interval"),
        "threshold": _span(limit),
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
    except ValueError:
        return None
    return datetime.fromtimestamp(seconds, UTC) if seconds > 1e9 else None


def reconcile_request_ignored(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    requested = annotations_of(obj).get(REQUESTED_AT, "")
    handled = text(obj, "status", "lastHandledReconcileAt")
    if not requested or requested == handled:
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


def dependency_blocked(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """Ready=False because of other objects: DependencyNotReady (spec.dependsOn), or
    HealthCheckFailed (the objects it applied, status.inventory, fail their health checks).

    A candidate only: correlation links it to the first waited-on object with a finding,
    or, when none explains it, reports it once it has lasted its threshold.
    """
    ready = condition(obj, "Ready")
    if ready is None or ready["status"] != "False":
        return None
    waits_on = WAITING_REASONS.get(ready.get("reason", ""))
    named = {
        "dependsOn": dig(obj, "spec", "dependsOn"),
        "inventory": dig(obj, "status", "inventory", "entries"),
    }
    if waits_on is None or not named[waits_on]:
        return None
    since = transition(ready)
    ctx.due(since, ctx.config.thresholds.dependency_blocked)
    what = describe(subject_of(obj))
    if waits_on == "dependsOn":
        message = f"{what} is blocked waiting for its dependencies: {ready.get('message', '')}."
    else:
        message = (
            f"{what} is not Ready because objects it applied fail health checks: {ready.get('message', '')}."
        )
    evidence = {
        "waits_on": waits_on,
        "dependsOn": [f"{k.kind}/{k.namespace}/{k.name}" for k in dependencies(obj)],
        **_conditions_evidence(obj, "Ready"),
    }
    return ctx.finding(FindingType.DEPENDENCY_BLOCKED, subject_of(obj), message, since, evidence)


def dependencies(obj: Mapping[str, Any]) -> list[Key]:
    """spec.dependsOn as keys. Flux's entries name the same kind; an entry may also carry
    kind (and apiVersion) to name another kind, e.g. a Terraform."""
    namespace = obj["metadata"].get("namespace", "")
    keys = []
    for dep in dig(obj, "spec", "dependsOn") or ():
        kind = dep.get("kind") or obj["kind"]
        if dep.get("apiVersion"):
            group = group_of(dep["apiVersion"])
        elif kind == obj["kind"]:
            group = group_of(obj["apiVersion"])
        else:
            group = FLUX_GROUPS.get(kind, "")
        keys.append(Key(group, kind, dep.get("namespace") or namespace, dep["name"]))
    return keys


# -- Revisions -----------------------------------------------------------------------------


def source_key(obj: Mapping[str, Any]) -> Key | None:
    """The object whose artifact this one applies.

    Kustomization/Terraform: spec.sourceRef. HelmRelease: spec.chartRef, else the HelmChart
    named in status.helmChart (its HelmRepository's revision is an index, not the chart).
    """
    namespace = obj["metadata"].get("namespace", "")
    ref = dig(obj, "spec", "chartRef") if obj["kind"] == "HelmRelease" else dig(obj, "spec", "sourceRef")
    if isinstance(ref, Mapping) and ref.get("kind") and ref.get("name"):
        group = (
            group_of(ref["apiVersion"])
            if ref.get("apiVersion")
            else FLUX_GROUPS.get(ref["kind"], SOURCE_GROUP)
        )
        return Key(group, ref["kind"], ref.get("namespace") or namespace, ref["name"])
    chart = text(obj, "status", "helmChart")
    if obj["kind"] == "HelmRelease" and chart:
        chart_ns, _, chart_name = chart.rpartition("/")
        return Key(SOURCE_GROUP, "HelmChart", chart_ns or namespace, chart_name)
    return None


def applied_revision(obj: Mapping[str, Any]) -> str:
    """What the object last applied; for helm.toolkit v2 the newest history entry's chart."""
    latest = (dig(obj, "status", "history") or [{}])[0]
    if obj["kind"] == "HelmRelease" and latest.get("chartVersion"):
        digest = latest.get("ociDigest", "")
        return f"{latest['chartVersion']}@{digest}" if digest else str(latest["chartVersion"])
    return text(obj, "status", "lastAppliedRevision")


@dataclass(frozen=True, slots=True)
class Revisions:
    source: Key | None
    revision: str
    """The source's artifact revision ("" when the source is not visible)."""
    applied: str
    attempted: str
    updated: datetime | None
    """When the source got that revision (artifact.lastUpdateTime)."""


def revisions(obj: Mapping[str, Any], lookup: Lookup) -> Revisions:
    source = source_key(obj)
    found = lookup(source) if source is not None else None
    return Revisions(
        source=source,
        revision=text(found, "status", "artifact", "revision") if found else "",
        applied=applied_revision(obj),
        attempted=text(obj, "status", "lastAttemptedRevision"),
        updated=time_at(found, "status", "artifact", "lastUpdateTime") if found else None,
    )


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
    revs = revisions(obj, ctx.lookup)
    target, since = revs.revision, revs.updated
    if not target:
        ready = condition(obj, "Ready")
        target = revs.attempted
        since = transition(ready) if ready is not None and ready["status"] == "False" else None
    since = since or transition(condition(obj, "Ready"))
    if not revs.applied or not target or same_revision(revs.applied, target):
        return None
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
            f"; applying it fails: {_cond_text(obj, 'Ready')}. "
            "Fix that error; until then the cluster runs the old revision."
        )
    else:
        message += ". Check why the new revision was not applied (controller logs, Events)."
    evidence = {
        "source": f"{revs.source.kind}/{revs.source.namespace}/{revs.source.name}" if revs.source else "",
        "source_revision": revs.revision,
        "applied_revision": revs.applied,
        "attempted_revision": revs.attempted,
        **_conditions_evidence(obj, "Ready"),
    }
    return ctx.finding(FindingType.REVISION_SKEW, subject_of(obj), message, since, evidence)


# -- Workloads and Events --------------------------------------------------------------------

_WORKLOAD_ADVICE: Mapping[HealthReason, str] = {
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


_WORKLOAD_PHRASES: Mapping[HealthReason, str] = {
    HealthReason.NO_AVAILABLE_REPLICAS: "has {detail} replicas",
    HealthReason.UNAVAILABLE: "has {detail} replicas",
    HealthReason.PROGRESS_DEADLINE_EXCEEDED: "has exceeded its progress deadline",
    HealthReason.GENERATION_NOT_OBSERVED: "has a spec its controller has not observed ({message})",
}


def describe_state(state: WorkloadState) -> str:
    """`is in CrashLoopBackOff (container app, image x:1)` or `has 0/2 available replicas`."""
    phrase = _WORKLOAD_PHRASES.get(state.failing) if state.failing is not None else None
    if phrase is not None:
        return phrase.format(detail=state.detail, message=state.message)
    shown = state.detail if state.failing is HealthReason.NOT_READY else str(state.failing)
    parts = [
        f"container {state.container}" if state.container else "",
        f"image {state.image}" if state.image else "",
    ]
    shown_parts = ", ".join(p for p in parts if p)
    return f"is in {shown}" + (f" ({shown_parts})" if shown_parts else "")


def workload_unhealthy(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    state = pod_state(obj) if obj["kind"] == "Pod" else workload_state(obj)
    if state.failing is None or not ctx.due(state.since, ctx.config.thresholds.workload_unhealthy):
        return None
    message = f"{describe(subject_of(obj))} {describe_state(state)} since {rfc3339(state.since)}"
    shown = state.message and state.failing is not HealthReason.GENERATION_NOT_OBSERVED
    message += f": {state.message}. " if shown else ". "
    message += _WORKLOAD_ADVICE.get(state.failing, "")
    evidence = {
        "reason": str(state.failing),
        "detail": state.detail,
        "container": state.container,
        "image": state.image,
        "restarts": state.restarts,
        "message": state.message,
    }
    return ctx.finding(FindingType.WORKLOAD_UNHEALTHY, subject_of(obj), message, state.since, evidence)


_CORE_KINDS = {"Pod": "v1", "Node": "v1", "Service": "v1", "PersistentVolumeClaim": "v1"}
_APPS_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")


def involved_subject(event: Mapping[str, Any]) -> Subject | None:
    """The object an Event is about; older Events omit apiVersion for built-in kinds."""
    ref = event.get("involvedObject")
    if not isinstance(ref, Mapping):
        return None
    kind = ref["kind"]
    api_version = ref.get("apiVersion") or _CORE_KINDS.get(kind) or ("apps/v1" if kind in _APPS_KINDS else "")
    namespace = ref.get("namespace", event["metadata"].get("namespace", ""))
    return Subject(apiVersion=api_version, kind=kind, namespace=namespace, name=ref["name"])


def event_window(event: Mapping[str, Any]) -> tuple[int, datetime | None, datetime | None]:
    """(count, first, last) across core/v1 and events.k8s.io/v1 spellings."""
    count = integer(event, "series", "count") or integer(event, "count") or 1
    first = time_at(event, "firstTimestamp") or time_at(event, "eventTime")
    last = (
        time_at(event, "series", "lastObservedTime")
        or time_at(event, "lastTimestamp")
        or time_at(event, "eventTime")
    )
    return count, first, last


def retry_loop(event: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    subject = involved_subject(event)
    if subject is None or text(event, "type") != "Warning":
        return None
    count, first, last = event_window(event)
    thresholds = ctx.config.thresholds
    if count < 2 or first is None or last is None or last - first < thresholds.retry_loop:
        return None
    if last + thresholds.retry_loop_recent < ctx.now:
        return None
    ctx.pending.append(last + thresholds.retry_loop_recent)
    reason = text(event, "reason")
    message = (
        f"{describe(subject)} keeps failing: Warning {reason} repeated {count} times from {rfc3339(first)} "
        f"to {rfc3339(last)}: {text(event, 'message')}. "
        "It is retrying without success; fix the cause in the message."
    )
    evidence = {
        "event": event["metadata"]["name"],
        "reason": reason,
        "count": count,
        "message": text(event, "message"),
        "firstTimestamp": rfc3339(first),
        "lastTimestamp": rfc3339(last),
    }
    return ctx.finding(FindingType.RETRY_LOOP, subject, message, first, evidence, reason)


def _span(delta: timedelta) -> str:
    """A threshold as Flux writes durations: 30m, 1h30m, 45s."""
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return out or "0s"


GITOPS_RULES: Sequence[Callable[[Mapping[str, Any], Ctx], Finding | None]] = (
    stalled,
    dependency_blocked,
    revision_skew,
    reconcile_request_ignored,
    generation_not_observed,
    stuck_reconciling,
)
"""Checked on every visible GitOps object that is not suspended (revision_skew on REVISIONED_KINDS only)."""


def local_findings(obj: Mapping[str, Any], ctx: Ctx, *, gitops: bool) -> list[Finding]:
    """Every candidate finding this object supports on its own (plus its source's revision)."""
    kind = obj["kind"]
    if gitops:
        if dig(obj, "spec", "suspend") is True or text(obj, "metadata", "deletionTimestamp"):
            return []
        rules = [r for r in GITOPS_RULES if r is not revision_skew or kind in REVISIONED_KINDS]
        return [f for f in (rule(obj, ctx) for rule in rules) if f is not None]
    group = group_of(obj["apiVersion"])
    if (group, kind) in (("", "Pod"), ("apps", "Deployment")):
        found = workload_unhealthy(obj, ctx)
    elif kind == "Event" and group in ("", "events.k8s.io"):
        found = retry_loop(obj, ctx)
    else:
        found = None
    return [found] if found is not None else []
