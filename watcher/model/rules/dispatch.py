"""Per-object rules: what one object (plus, for revisions, its source) says is wrong.

Each rule is a small function `(obj, ctx) -> Finding | None`, dispatched by kind like
kstatus' table (local_findings): the GitOps rules (gitops_rules.py) on every Flux object and
every kind a configured controller reconciles, WorkloadUnhealthy (workload_rule.py) on Pods
and workloads, RetryLoop (events.py) or PolicyDenied (denials.py) on Events, ObjectFailing
(resources.py) on every other kind. Here too the
findings that need more than the object: StatusStale (its controller is down) and CRDRemoved
(its kind is gone). They produce *candidates*: correlation later decides which are roots and
which symptoms.

Messages say what is wrong and what to do, naming objects, and contain no durations
relative to `now` (they are cached between evaluations); times are spelled out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from watcher.model.ingest.kinds import APPLIERS, JUDGED, WITHOUT_STATUS, Judge
from watcher.model.ingest.objects import (
    condition,
    describe,
    dig,
    finding_id,
    group_of,
    is_true,
    said,
    subject_of,
    text,
    time_at,
    transition,
)
from watcher.model.rules.context import Ctx, Rule, new_finding
from watcher.model.rules.controllers import ControllerState
from watcher.model.rules.denials import judge_event
from watcher.model.rules.gitops_rules import GITOPS_RULES, revision_skew
from watcher.model.rules.resources import object_failing
from watcher.model.rules.shards import SHARD_KEY, Unserved
from watcher.model.rules.workload_rule import workload_unhealthy
from watcher.model.types import Finding, FindingType, ModelConfig, Subject, rfc3339


def status_stale(obj: Mapping[str, Any], down: ControllerState, config: ModelConfig) -> Finding:
    """StatusStale: the object's conditions are a cached report while its controller is down.
    Its `since`, when its controller went down, is set by correlation (working.stale_since)."""
    ready = condition(obj, "Ready")
    says = said(ready, "Ready", message=False)
    if is_true(obj, "Reconciling"):
        says += " and Reconciling=True"
    name, subject = down.spec.name, subject_of(obj)
    message = (
        f"{describe(subject)} says {says}, but its controller {name} is down "
        f"({down.health.reason}): this is a cached report, last changed {rfc3339(transition(ready))}. "
        f"Nothing reconciles it until {name} runs again."
    )
    evidence = {
        "controller": name,
        "controller_reason": down.health.reason,
        "controller_workload": finding_id(FindingType.CONTROLLER_DOWN, down.health.subject),
        "conditions": {c["type"]: c["status"] for c in dig(obj, "status", "conditions") or ()},
    }
    return new_finding(config, FindingType.STATUS_STALE, subject, message, None, evidence)


def unserved_stale(obj: Mapping[str, Any], unserved: Unserved, config: ModelConfig) -> Finding:
    """StatusStale: the object's conditions are a cached report, as no workload of its controller
    selects it (rules/shards.py); ShardNotServed is its root."""
    ready = condition(obj, "Ready")
    says = said(ready, "Ready", message=False)
    subject = subject_of(obj)
    label = f"{SHARD_KEY}={unserved.key}" if unserved.key else f"no {SHARD_KEY} label"
    message = (
        f"{describe(subject)} says {says}, but no {unserved.controller} workload selects it ({label}):"
        f" this is a cached report, last changed {rfc3339(transition(ready))}. Nothing reconciles it"
        " until a shard selecting it runs."
    )
    evidence = {
        "controller": unserved.controller,
        "shard": unserved.key,
        "controller_workload": finding_id(FindingType.SHARD_NOT_SERVED, unserved.subject()),
        "conditions": {c["type"]: c["status"] for c in dig(obj, "status", "conditions") or ()},
    }
    return new_finding(config, FindingType.STATUS_STALE, subject, message, None, evidence)


def crd_removed(
    crd: Mapping[str, Any],
    *,
    orphans: list[Subject],
    reconcilers: list[str],
    installers: Sequence[str] = (),
    now: datetime,
    config: ModelConfig,
) -> Finding | None:
    """CRDRemoved, when objects of its kind existed (`orphans`) or a controller reconciles its group.

    `installers`: the releases and Kustomizations that claimed it (graph.claims), the edge a
    CRDOwnershipRisk named before it came true. `now` stands in for the deletion time when the
    CRD carried no deletionTimestamp.
    """
    if not orphans and not reconcilers:
        return None
    group, kind = text(crd, "spec", "group"), text(crd, "spec", "names", "kind")
    since = time_at(crd, "metadata", "deletionTimestamp") or now
    name = crd["metadata"]["name"]
    message = f"CustomResourceDefinition {name} was deleted at {rfc3339(since)}"
    if orphans:
        message += f" while {len(orphans)} {kind} objects existed; they are deleted with it"
    if reconcilers:
        message += f"; {', '.join(reconcilers)} reconciles {group} and cannot work without it"
    if installers:
        message += f". It was installed by {' and '.join(installers)}: look at its last upgrade or removal"
    message += (
        ". Restore the CRD (re-apply the controller's install manifests), then let Git re-create the objects."
    )
    evidence = {
        "group": group,
        "kind": kind,
        "orphans": len(orphans),
        "controllers": reconcilers,
        "installed_by": list(installers),
    }
    found = new_finding(config, FindingType.CRD_REMOVED, subject_of(crd), message, since, evidence)
    found.affected = orphans
    return found


_JUDGES: Mapping[Judge, Rule] = {Judge.WORKLOAD: workload_unhealthy, Judge.EVENT: judge_event}

RULES: Mapping[tuple[str, str], Rule] = {key: _JUDGES[judge] for key, judge in JUDGED.items()}
"""Built-in kinds with a rule, by (group, kind) (declared in kinds.KINDS)."""
_APPLIER_RULES = tuple(GITOPS_RULES)
_OTHER_GITOPS_RULES = tuple(rule for rule in GITOPS_RULES if rule is not revision_skew)
"""GITOPS_RULES as each GitOps object is checked by them: revision_skew on APPLIERS only."""


def local_findings(
    obj: Mapping[str, Any],
    ctx: Ctx,
    *,
    gitops: bool,
    down: ControllerState | None = None,
    unserved: Unserved | None = None,
) -> list[Finding]:
    """Every candidate finding this object supports on its own (plus its source's revision).

    A GitOps object whose controller is `down`, or that no workload of it serves (`unserved`),
    gets StatusStale instead of its status-based findings; a suspended one gets nothing (it is
    not reconciled on purpose).
    """
    if gitops:
        if dig(obj, "spec", "suspend") is True:
            return []
        if down is not None:
            return [status_stale(obj, down, ctx.config)]
        if unserved is not None:
            return [unserved_stale(obj, unserved, ctx.config)]
        if text(obj, "metadata", "deletionTimestamp"):
            return []
        rules = _APPLIER_RULES if obj["kind"] in APPLIERS else _OTHER_GITOPS_RULES
        return [found for rule in rules if (found := rule(obj, ctx)) is not None]
    key = (group_of(obj["apiVersion"]), obj["kind"])
    if key in WITHOUT_STATUS:
        return []  # nothing to fail by design (a Lease renewed every few seconds among them)
    found = RULES.get(key, object_failing)(obj, ctx)
    return [found] if found is not None else []
