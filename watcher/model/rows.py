"""The per-object rows of an Evaluation: each GitOps object's health and the revision it runs.

Both are read off the object alone (and its source, through the Ctx), once per change of it;
the engine keeps them in sorted tables so that an Evaluation hands them out without a sort.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watcher.model.context import Ctx
from watcher.model.controllers import Claim
from watcher.model.kinds import APPLIERS
from watcher.model.kstatus import compute_status
from watcher.model.objects import condition, newest_transition, subject_of, transition
from watcher.model.types import ObjectHealth, RevisionInfo


def object_health(obj: Mapping[str, Any], claim: Claim) -> ObjectHealth:
    """kstatus' verdict, stale while the controller that `claim`s the kind is down."""
    status = compute_status(obj)
    return ObjectHealth(
        subject=subject_of(obj),
        status=status.status,
        reason=status.reason,
        stale=claim.down is not None,
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
