"""PolicyDenied: a write that a policy engine denies, retried again and again.

A controller whose Service, Deployment or dry-run is denied by another team's Gatekeeper
constraint, Kyverno policy or ValidatingAdmissionPolicy retries forever while CI and Flux look
green; the denial shows only as text (policy.py reads it). Two places carry it:

* a Warning Event about the object the controller reconciles (its reconcile error), recurring:
  at least `policy_denied_count` times, first to last at least `policy_denied_window`, and last
  seen within `retry_loop_recent`. Such an Event is judged here INSTEAD of RetryLoop (which stays
  for loops that are not a policy's); below these thresholds it is no finding at all;
* a Flux object's Ready=False (or a HelmRelease's Released=False) message: a Kustomization's
  dry-run or apply, a HelmRelease's install or upgrade. Its controller retries at its interval
  (spec.retryInterval, else spec.interval), so it is PolicyDenied once Ready=False has held the
  window and long enough for that many attempts. A Stalled object has stopped retrying: Stalled.

One finding per trying object (Events about it with other reasons merge into it). It is the root
of what the denial causes: the object's RetryLoop and ReconcileFailed (PRECEDENCE), the
DependencyBlocked of what waits on it (correlate/correlator.py follows dependsOn to it), and above it the
WorkloadUnhealthy of a Deployment whose ReplicaSet may not create Pods (and the Ready HelmRelease
over it). Which stacks and policies a denial touches is correlation's (correlate/policies.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from watcher.model.ingest.objects import (
    after,
    condition,
    describe,
    format_duration,
    group_of,
    is_true,
    parse_duration,
    sentence,
    subject_of,
    text,
    transition,
)
from watcher.model.rules.context import Ctx
from watcher.model.rules.events import event_window, involved_subject, retry_loop
from watcher.model.rules.policy import Admission, read_denial
from watcher.model.types import Finding, FindingType, Subject, rfc3339


def judge_event(event: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """The rule for Events: a Warning whose message is a policy denial is PolicyDenied's, any
    other RetryLoop's."""
    admission = read_denial(text(event, "message")) if text(event, "type") == "Warning" else None
    return retry_loop(event, ctx) if admission is None else denied_event(event, admission, ctx)


def denied_event(event: Mapping[str, Any], admission: Admission, ctx: Ctx) -> Finding | None:
    subject = involved_subject(event)
    count, first, last = event_window(event)
    thresholds = ctx.config.thresholds
    if subject is None or first is None or last is None or count < thresholds.policy_denied_count:
        return None
    if last - first < thresholds.policy_denied_window:
        return None
    history_at = after(last, thresholds.retry_loop_recent)
    if history_at < ctx.now:
        return None  # it stopped: history, not a controller still trying
    ctx.pending.append(history_at)
    controller = (
        text(event, "reportingController")
        or text(event, "reportingComponent")
        or text(event, "source", "component")
    )
    how = f"{count} times from {rfc3339(first)} to {rfc3339(last)}"
    who = f"{controller} retried" if controller else "Retried"
    return denial_finding(
        ctx,
        subject,
        admission,
        since=first,
        how=f"{who} it {how} (Event {event['metadata']['name']}, {text(event, 'reason')})",
        evidence={"controller": controller, "count": count, "last": rfc3339(last)},
    )


def denied_condition(obj: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """A Flux object's Ready=False (or Released=False) that a policy denial explains, held long
    enough for `policy_denied_count` attempts at its retry interval."""
    ready = condition(obj, "Ready")
    if ready is None or ready["status"] != "False" or is_true(obj, "Stalled"):
        return None
    admission = read_denial(ready.get("message", ""))
    released = condition(obj, "Released")
    if admission is None and released is not None and released["status"] == "False":
        admission = read_denial(released.get("message", ""))
    if admission is None:
        return None
    spec = obj.get("spec") or {}
    every = parse_duration(spec.get("retryInterval")) or parse_duration(spec.get("interval"))
    thresholds = ctx.config.thresholds
    needed = thresholds.policy_denied_window
    if every is not None:
        needed = max(needed, every * (thresholds.policy_denied_count - 1))
    since = transition(ready)
    if not ctx.due(since, needed):
        return None
    spelled = format_duration(every) if every is not None else ""
    group, kind = group_of(obj["apiVersion"]), obj["kind"]
    controller = next(
        (c.name for c in ctx.config.controllers if group in c.groups and (not c.kinds or kind in c.kinds)), ""
    )
    how = f"{controller or 'Its controller'} retries it" + (f" every {spelled}" if spelled else "")
    return denial_finding(
        ctx,
        subject_of(obj),
        admission,
        since=since,
        how=f"{how}; Ready=False since {rfc3339(since)} ({ready.get('reason', '')})",
        evidence={"controller": controller, "every": spelled},
    )


def denial_finding(
    ctx: Ctx,
    subject: Subject,
    admission: Admission,
    *,
    since: datetime | None,
    how: str,
    evidence: dict[str, Any],
) -> Finding:
    engine = admission.engine
    policies = admission.policies()
    first = admission.denials[0]
    named = ", ".join(policies)
    denied = f" {admission.denied}" if admission.denied else ""
    message = sentence(
        f"{describe(subject)} keeps being denied by {engine} {'policies' if len(policies) > 1 else 'policy'} "
        f"{named}: the write of{denied or ' an object'} is refused ({first.message or 'no message'})"
    )
    message += (
        f" {sentence(how)} Retrying will not help: change the object to satisfy the policy, or ask the "
        "policy's owners for an exception."
    )
    return ctx.finding(
        FindingType.POLICY_DENIED,
        subject,
        message,
        since,
        {
            "engine": str(engine),
            "policies": policies,
            "denials": [_denial_text(d.policy, d.rule, d.message) for d in admission.denials],
            "webhook": admission.webhook,
            "denied_object": admission.denied,
            **evidence,
            "stacks": [],
        },
    )


def _denial_text(policy: str, rule: str, message: str) -> str:
    return f"{policy}{'/' + rule if rule else ''}: {message}"
