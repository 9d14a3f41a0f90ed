"""Has a GitOps stack converged at a revision, will it, or can nobody tell? `stalewatch wait`'s verdict.

Pure: the watcher's objects (a graph.Store), the model's Evaluation, what the watcher cannot
see, and `now` in; one Verdict out. The I/O loop (watcher.waiting) calls `judge` after every
change and stops at the first outcome that is not WAITING.

CONVERGED means every object under the targets is current (subtree.py says what is under a
target and when each object is current). The order of the checks is the order of honesty:
nothing is concluded while the watcher is blind; a status written by a controller that is down
is a cached report, and one of a controller that is up but stuck (ControllerStuck) is as old as
its last reconcile, so STALE comes before CONVERGED: a stuck controller fails the wait as soon
as it is found stuck, whether or not the stack's own objects are overdue yet; a failure is only
reported while the stack has not converged (an old finding elsewhere in it does not fail a
rollout that made it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from watcher.model.evaluation import Evaluation
from watcher.model.ingest.flux import source_key
from watcher.model.ingest.kinds import APPLIERS
from watcher.model.ingest.objects import Key, describe, format_duration, text
from watcher.model.store.graph import View
from watcher.model.types import Finding, FindingType, ObjectHealth, rfc3339
from watcher.model.views.subtree import Asked, ObjectState, State, Tree, cached, subject_key, walk
from watcher.model.views.targets import Target


class Outcome(StrEnum):
    CONVERGED = "converged"
    FAILED = "failed"
    """A root cause waiting will not fix."""
    CANNOT_WAIT = "cannot_wait"
    """A target does not exist, or the watcher could not see the cluster for too long."""
    TIMED_OUT = "timed_out"
    STALE = "stale"
    """A controller the stack depends on is down or stuck, or an object in it is not reconciled:
    its status cannot change."""
    WAITING = "waiting"
    """Not decided yet (the only outcome that is not final)."""


STALE_FINDINGS = frozenset(
    {
        FindingType.CONTROLLER_DOWN,
        FindingType.STATUS_STALE,
        FindingType.CONTROLLER_STUCK,
        FindingType.NOT_RECONCILING,
    }
)
CONFIRM_WITHIN = timedelta(seconds=5)
"""How long past the deadline the API server has to answer before the wait says it timed out:
an API server that hangs says nothing, so the watcher's picture can be seconds old while its
telemetry still says reachable (its probe gives up after 10 s)."""


@dataclass(frozen=True, slots=True)
class Blind:
    """Why the watcher cannot see what it needs (unreachable, 403, not listed yet), since when."""

    reason: str
    since: datetime


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    message: str
    objects: list[ObjectState] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    """The model's root causes that decided it (STALE, FAILED), each followed by its symptoms."""

    def not_current(self) -> list[ObjectState]:
        return [o for o in self.objects if o.state is not State.CURRENT]


def judge(
    targets: Sequence[Target],
    *,
    view: Tree,
    evaluation: Evaluation | None,
    now: datetime,
    deadline: datetime,
    grace: timedelta,
    blind: Blind | None = None,
    blind_window: timedelta = timedelta(seconds=30),
    served: Collection[tuple[str, str]] | None = None,
    forbidden: Collection[tuple[str, str]] = (),
    heard: datetime | None = None,
) -> Verdict:
    """The verdict at `now`; `targets` carry the revision each must reach ("" = none known yet).
    `served`: the (group, kind)s the watcher lists (an object of another kind cannot be seen);
    `forbidden`: those it may not list (403), whose objects are not judged, never "not created yet".
    `heard`: when the API server last answered a request made to confirm it (None: not yet).
    Not seeing wins over the deadline: it is only "timed out" if the API server answered at or
    after the deadline, so what is still in progress is known to be so, not a hang's last picture."""
    if blind is not None or evaluation is None:
        reason = blind.reason if blind is not None else "no evaluation yet"
        since = blind.since if blind is not None else now
        if now - since >= blind_window or now >= deadline:
            return Verdict(Outcome.CANNOT_WAIT, f"cannot see the cluster since {rfc3339(since)}: {reason}")
        return Verdict(Outcome.WAITING, f"cannot see the cluster: {reason}")
    missing = [t for t in targets if view.get(t.key) is None and not _rejected(evaluation, t.key)]
    if missing:
        names = ", ".join(describe(t.key) for t in missing)
        return Verdict(Outcome.CANNOT_WAIT, f"not found: {names}")
    asked = Asked(view, now, grace, _wanted(targets, view), served, forbidden)
    health = {subject_key(h.subject): h for h in evaluation.objects}
    rejected = {subject_key(r.subject): r.message for r in evaluation.rejected}
    objects, sources = walk([t.key for t in targets], asked, health=health, rejected=rejected)
    keys = {o.key for o in objects}
    roots = _roots(evaluation, keys | sources, health)
    stale = [o for o in objects if o.state is State.STALE] + _stale_sources(evaluation, sources)
    stale_roots = [f for f in roots if f.type in STALE_FINDINGS]
    if stale or stale_roots:
        named = _headline(stale_roots[0]) if stale_roots else f"{describe(stale[0].key)}: {stale[0].reason}"
        return Verdict(Outcome.STALE, named, objects, _with_symptoms(evaluation, stale_roots))
    if all(o.state is State.CURRENT for o in objects):
        return Verdict(Outcome.CONVERGED, f"{len(objects)}/{len(objects)} current", objects)
    failing = [f for f in roots if f.type not in STALE_FINDINGS]
    failed = [o for o in objects if o.state is State.FAILED]
    if failing or failed:
        named = _headline(failing[0]) if failing else f"{describe(failed[0].key)}: {failed[0].reason}"
        return Verdict(Outcome.FAILED, named, objects, _with_symptoms(evaluation, failing))
    progress = f"{sum(o.state is State.CURRENT for o in objects)}/{len(objects)} current"
    if now < deadline:
        return Verdict(Outcome.WAITING, progress, objects)
    if heard is not None and heard >= deadline:
        return Verdict(Outcome.TIMED_OUT, progress, objects)
    if now - deadline < CONFIRM_WITHIN:
        return Verdict(Outcome.WAITING, f"{progress}; at the deadline, asking the API server", objects)
    silent = f"the Kubernetes API server did not answer within {format_duration(CONFIRM_WITHIN)}"
    said = f"cannot see the cluster at the deadline: {silent} ({progress} when last seen)"
    return Verdict(Outcome.CANNOT_WAIT, said, objects)


def default_revision(target: Target, view: View) -> str:
    """What a target waits for without --revision: its source's artifact revision (read once,
    at start, by the caller); a source kind waits for its own. "" while none is visible."""
    obj = view.get(target.key)
    if obj is None:
        return ""
    source = source_key(obj) if target.key.kind in APPLIERS else target.key
    found = view.get(source) if source is not None else None
    return text(found, "status", "artifact", "revision") if found is not None else ""


def _wanted(targets: Sequence[Target], view: View) -> dict[Key, str]:
    wanted: dict[Key, str] = {}
    for target in targets:
        wanted[target.key] = target.revision
        obj = view.get(target.key)
        source = source_key(obj) if obj is not None and target.key.kind in APPLIERS else None
        if source is not None and target.revision:
            wanted.setdefault(source, target.revision)
    return wanted


# -- The model's findings -----------------------------------------------------------------------------


def _headline(root: Finding) -> str:
    """`ControllerDown Deployment flux-system/kustomize-controller (ScaledToZero)`: the report says more."""
    reason = root.evidence.get("reason")
    return f"{root.type} {describe(root.subject)}" + (
        f" ({reason})" if isinstance(reason, str) and reason else ""
    )


def _rejected(evaluation: Evaluation, key: Key) -> bool:
    return any(subject_key(r.subject) == key for r in evaluation.rejected)


def _roots(evaluation: Evaluation, keys: set[Key], health: Mapping[Key, ObjectHealth]) -> list[Finding]:
    """Root causes on, or with a blast radius reaching, the stack or its sources; and a stuck
    controller that reconciles one of them, overdue or not yet (its blast radius lists only
    the objects already overdue)."""
    controllers = {h.controller for key in keys if (h := health.get(key)) is not None and h.controller}
    return [
        f
        for f in evaluation.roots
        if subject_key(f.subject) in keys
        or any(subject_key(s) in keys for s in f.affected)
        or (f.type is FindingType.CONTROLLER_STUCK and f.evidence.get("controller") in controllers)
    ]


def _stale_sources(evaluation: Evaluation, sources: set[Key]) -> list[ObjectState]:
    return [
        ObjectState(subject_key(h.subject), State.STALE, cached(h.controller))
        for h in evaluation.objects
        if h.stale and subject_key(h.subject) in sources
    ]


def _with_symptoms(evaluation: Evaluation, roots: list[Finding]) -> list[Finding]:
    ids = {f.id for f in roots}
    return [f for f in evaluation.findings if f.id in ids or f.root_cause in ids]
