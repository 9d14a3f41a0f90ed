"""One object judged: its candidate findings and the rows of an Evaluation it has, in one guard.

The rows are each GitOps object's health and the revision it runs. All are read off the object
alone (and its source, through the Ctx), once per change of it; the engine keeps the rows in
sorted tables so that an Evaluation hands them out without a sort.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watcher.model.ingest.kinds import APPLIERS, policy_kind
from watcher.model.ingest.objects import condition, group_of, newest_transition, subject_of, transition
from watcher.model.ingest.quarantine import dropped_fields, rule_failed
from watcher.model.rules.context import Ctx
from watcher.model.rules.controllers import Claim
from watcher.model.rules.dispatch import RULES, local_findings
from watcher.model.rules.kstatus import compute_status
from watcher.model.rules.resources import judgeable
from watcher.model.types import Finding, ObjectHealth, Rejection, RevisionInfo

Judged = tuple[list[Finding], ObjectHealth | None, RevisionInfo | None, list[Rejection]]
"""An object's candidates, its health and revision rows, and what set it (or parts of it) aside."""


def judge(obj: Mapping[str, Any], ctx: Ctx, *, claim: Claim | None) -> Judged:
    """Everything one object says, inside one guard. `claim` is the controller that reconciles
    a GitOps object's kind (None for any other kind, which has no rows). A rule that raises sets
    this object aside, with the fields project() dropped from it, and the rest are judged."""
    rejected = dropped_fields(obj)
    try:
        if claim is None:
            return local_findings(obj, ctx, gitops=False), None, None, rejected
        findings = local_findings(obj, ctx, gitops=True, down=claim.down, unserved=claim.unserved)
        return findings, object_health(obj, claim), revision_info(obj, ctx), rejected
    except Exception as error:  # set this object aside, judge the rest
        ctx.pending.clear()
        rejected.append(rule_failed(subject_of(obj), error, what="a rule"))
        return [], None, None, rejected


def unjudged(obj: Mapping[str, Any], *, gitops: bool) -> bool:
    """No rule reads anything of it: not a GitOps kind, no rule of its own, and nothing
    ObjectFailing can read (resources.judgeable). Counted by kind in every Evaluation."""
    key = (group_of(obj["apiVersion"]), obj["kind"])
    if gitops or key in RULES or policy_kind(*key):  # a policy engine's: compliance reads it
        return False
    return not judgeable(obj)


def object_health(obj: Mapping[str, Any], claim: Claim) -> ObjectHealth:
    """kstatus' verdict, stale while the controller workload serving it is down or none serves it."""
    status = compute_status(obj)
    return ObjectHealth(
        subject=subject_of(obj),
        status=status.status,
        reason=status.reason,
        stale=claim.down is not None or claim.unserved is not None,
        controller=claim.name,
        last_transition=transition(condition(obj, "Ready")) or newest_transition(obj),
    )


def revision_info(obj: Mapping[str, Any], ctx: Ctx) -> RevisionInfo | None:
    """What an applier (Kustomization, HelmRelease, Terraform) runs against its source's revision."""
    if obj["kind"] not in APPLIERS:
        return None
    revs = ctx.revisions(obj)
    if revs.source is None:
        return None
    source = f"{revs.source.kind}/{revs.source.namespace}/{revs.source.name}"
    return RevisionInfo(subject_of(obj), source, revs.revision, revs.applied)
