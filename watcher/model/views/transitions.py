"""How the timeline's entries are derived, each the cheapest way it can be (timeline.py).

Two sources, neither of which a Pod pays for:
  * the objects as they change (`upserted`): the previous version is the one the model still
    holds (`stored`), so nothing is copied. GitOps objects give Ready flips and applied revisions;
    ReplicaSets give image changes: a Deployment's rollout is a ReplicaSet with a higher
    `deployment.kubernetes.io/revision` than any before it (a new one, or an old one brought
    back by `kubectl rollout undo`), and its images against the previous one's are the change.
    Per Deployment only its newest revision and images are kept.
  * consecutive evaluations (`evaluated`): root causes opened and resolved (by finding id), and
    controllers down and up. Compared only when the evaluation's list is a new one.

Nothing is recorded from the first sight of anything: objects in the initial list, the first
ReplicaSets of a kind until its list completed, the evaluations until every kind is synced. A
relist of the same objects compares equal and adds nothing. A finding that disappears because
its kind can no longer be seen is recorded as unknown, not resolved.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watcher.model.evaluation import Evaluation
from watcher.model.ingest.flux import applied_revision
from watcher.model.ingest.kinds import APPLIERS
from watcher.model.ingest.objects import Key, condition, describe, dig, key_of, subject_of
from watcher.model.ingest.revisions import same_revision, short
from watcher.model.rules.controllers import is_gitops, reconciles
from watcher.model.types import ControllerHealth, ControllerSpec, Finding, Subject
from watcher.model.views.timeline import Change, Entry

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
_REVISION = re.compile(r"[0-9]{1,18}")
"""A rollout's revision in ASCII digits: `²` passes str.isdigit() and int() refuses it."""


class _Role(enum.Enum):
    GITOPS = "Ready and applied revision"
    REPLICASET = "a Deployment's rollouts"
    DEPLOYMENT = "forgotten with its rollouts"


@dataclass(frozen=True, slots=True)
class Rollout:
    """A Deployment's newest ReplicaSet: its revision and its containers' images by name."""

    replicaset: str
    revision: int
    images: tuple[tuple[str, str], ...]


def rollout_of(obj: Mapping[str, Any]) -> tuple[str, str, Rollout] | None:
    """(namespace, Deployment, rollout) of a ReplicaSet a Deployment controls; None for one
    without that owner or without a revision (then it is no rollout of a Deployment)."""
    meta = obj.get("metadata") or {}
    owner = next(
        (
            o.get("name", "")
            for o in meta.get("ownerReferences") or ()
            if o.get("controller") and o.get("kind") == "Deployment"
        ),
        "",
    )
    revision = (meta.get("annotations") or {}).get(REVISION_ANNOTATION, "")
    if not owner or not isinstance(revision, str) or _REVISION.fullmatch(revision) is None:
        return None
    pod = dig(obj, "spec", "template", "spec") or {}
    containers = (*(pod.get("initContainers") or ()), *(pod.get("containers") or ()))
    images = tuple((c.get("name", ""), c.get("image", "")) for c in containers)
    return meta.get("namespace", ""), owner, Rollout(meta.get("name", ""), int(revision), images)


def image_changed(
    namespace: str, deployment: str, before: Rollout, after: Rollout, *, now: datetime, controller: str | None
) -> Entry | None:
    """The entry for a rollout from `before` to `after`; None when no image changed (a restart
    or a template annotation makes a new ReplicaSet with the same images)."""
    old, new = dict(before.images), dict(after.images)
    changed = [name for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]
    if not changed:
        return None
    subject = Subject(apiVersion="apps/v1", kind="Deployment", namespace=namespace, name=deployment)
    named = len(old.keys() | new.keys()) > 1
    said = ", ".join(_image_step(name if named else "", old.get(name), new.get(name)) for name in changed)
    undo = f"kubectl rollout undo deployment/{deployment} -n {namespace}"
    return Entry(
        at=now,
        type=Change.IMAGE_CHANGED,
        subject=subject,
        controller=controller,
        before=", ".join(_labelled(name, old.get(name), named) for name in changed),
        after=", ".join(_labelled(name, new.get(name), named) for name in changed),
        message=f"{describe(subject)}: {said} (ReplicaSet revision {after.revision})",
        details={
            "replicaset": after.replicaset,
            "revision": str(after.revision),
            "previous_replicaset": before.replicaset,
            "previous_revision": str(before.revision),
            "undo": undo,
        },
    )


def _labelled(name: str, image: str | None, named: bool) -> str:
    return f"{name}={image or 'none'}" if named else image or "none"


def _image_step(name: str, old: str | None, new: str | None) -> str:
    """`image A:1 -> 2`: the new image by its tag or digest alone when the repository is the same."""
    where = f"image of {name}" if name else "image"
    if old is None or new is None:
        return f"{where} {old or 'none'} -> {new or 'none'}"
    old_repo, old_ref = _split_image(old)
    new_repo, new_ref = _split_image(new)
    shown = new_ref if old_repo == new_repo and old_ref and new_ref else new
    return f"{where} {old} -> {shown}"


def _split_image(image: str) -> tuple[str, str]:
    """(repository, tag or digest): `reg:5000/app:v1` -> (`reg:5000/app`, `v1`)."""
    repo, at, digest = image.partition("@")
    if at:
        return repo, digest
    head, colon, tag = image.rpartition(":")
    return (head, tag) if colon and "/" not in tag else (image, "")


# -- GitOps objects ----------------------------------------------------------------------------


def object_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], *, now: datetime, controller: str | None
) -> list[Entry]:
    """What changed between two versions of one GitOps object (Ready, the revision it applied)."""
    found = (rule(old, new, now, controller) for rule in _OBJECT_RULES)
    return [entry for entry in found if entry is not None]


def _ready_changed(
    old: Mapping[str, Any], new: Mapping[str, Any], now: datetime, controller: str | None
) -> Entry | None:
    """Ready's status flipped (True, False, Unknown); a new reason or message alone is no flip."""
    before, after = condition(old, "Ready"), condition(new, "Ready")
    if after is None or (before is not None and before["status"] == after["status"]):
        return None
    was = before["status"] if before is not None else "none"
    reason = after.get("reason", "")
    why = " ".join(f"{reason}: {after.get('message', '')}".strip(": ").split())
    subject = subject_of(new)
    message = f"{describe(subject)}: Ready {was} -> {after['status']}" + (f" ({why})" if why else "")
    return Entry(
        at=now,
        type=Change.READY_CHANGED,
        subject=subject,
        controller=controller,
        before=was,
        after=after["status"],
        message=message,
        details={"reason": reason} if reason else {},
    )


def _revision_applied(
    old: Mapping[str, Any], new: Mapping[str, Any], now: datetime, controller: str | None
) -> Entry | None:
    """An applier applied another revision (for a HelmRelease: its chart version); the same
    revision spelled another way (Flux's legacy spellings) is no change."""
    if new["kind"] not in APPLIERS:
        return None
    before, after = applied_revision(old), applied_revision(new)
    if not after or same_revision(before, after):
        return None
    chart = new["kind"] == "HelmRelease" and bool(dig(new, "status", "history"))
    what = "chart version" if chart else "revision"
    subject = subject_of(new)
    step = f"{short(before) if before else 'none'} -> {short(after)}"
    return Entry(
        at=now,
        type=Change.REVISION_APPLIED,
        subject=subject,
        controller=controller,
        before=before or "none",
        after=after,
        message=f"{describe(subject)}: applied {what} {step}",
    )


_OBJECT_RULES = (_ready_changed, _revision_applied)


# -- Evaluations -------------------------------------------------------------------------------


def roots_of(evaluation: Evaluation) -> dict[str, Finding]:
    """The model's findings come roots first (correlate/working.py's order_key): read no further
    than the first symptom, of which an incident has thousands."""
    return {f.id: f for f in itertools.takewhile(_is_root, evaluation.findings)}


def _is_root(finding: Finding) -> bool:
    return finding.is_root


def finding_changes(
    before: Evaluation, after: Evaluation, *, roots_before: Mapping[str, Finding], blind: Collection[str]
) -> tuple[list[Entry], dict[str, Finding]]:
    """Root causes opened and resolved between two evaluations, and the roots after.

    Only roots are entries: a root's symptoms are listed under it and open with it. A root that
    becomes a symptom is still open, and one that stops being a symptom was open already; a
    finding whose kind is now `blind` (by kind name) is unknown, not resolved. Whether a finding
    was (or still is) open at all is looked up only when the roots changed: during an incident
    with tens of thousands of symptoms, most passes only move symptoms."""
    roots_after = roots_of(after)
    new = [f for ident, f in roots_after.items() if ident not in roots_before]
    gone = [f for ident, f in roots_before.items() if ident not in roots_after]
    if not new and not gone:
        return [], roots_after
    open_before = {f.id for f in before.findings} if new else set()
    open_after = {f.id for f in after.findings} if gone else set()
    entries = [_finding_entry(f, after.now, opened=True) for f in new if f.id not in open_before]
    entries += [
        _finding_entry(f, after.now, opened=False, unseen=f.subject["kind"] in blind)
        for f in gone
        if f.id not in open_after
    ]
    return entries, roots_after


def _finding_entry(finding: Finding, now: datetime, *, opened: bool, unseen: bool = False) -> Entry:
    controller = finding.evidence.get("controller")
    if opened:
        after, said = "open", f"opened: {' '.join(finding.message.split())}"
    elif unseen:
        after, said = "unknown", f"no longer known: stalewatch cannot see {finding.subject['kind']} now"
    else:
        after, said = "resolved", "resolved"
    return Entry(
        at=now,
        type=Change.FINDING_OPENED if opened else Change.FINDING_RESOLVED,
        subject=finding.subject,
        controller=controller if isinstance(controller, str) else None,
        before="none" if opened else "open",
        after=after,
        message=f"{finding.type} on {describe(finding.subject)} {said}",
        details={"finding": finding.id, "finding_type": str(finding.type), "severity": str(finding.severity)},
    )


def controller_changes(
    before: Sequence[ControllerHealth], after: Sequence[ControllerHealth], *, now: datetime
) -> list[Entry]:
    """Controllers seen in both evaluations that went down or came back up."""
    was = {_where(h.subject): h for h in before}
    entries = []
    for health in after:
        previous = was.get(_where(health.subject))
        if previous is None or previous.up == health.up:
            continue
        name = health.name or health.subject["name"]
        said = "up again" if health.up else f"down ({health.reason})"
        entries.append(
            Entry(
                at=now,
                type=Change.CONTROLLER_UP if health.up else Change.CONTROLLER_DOWN,
                subject=health.subject,
                controller=health.name or None,
                before=_state(previous),
                after=_state(health),
                message=f"controller {name} ({describe(health.subject)}) is {said}",
                details={"reason": health.reason},
            )
        )
    return entries


def _state(health: ControllerHealth) -> str:
    return f"up ({health.reason})" if health.up else f"down ({health.reason})"


def _where(subject: Subject) -> tuple[str, str, str]:
    return subject["kind"], subject["namespace"], subject["name"]


# -- The recorder the live model feeds ---------------------------------------------------------


class Transitions:
    """Turns what the live model is fed and concludes into timeline entries (see the module
    docstring). `stored` is the model's current version of an object, read before it is replaced."""

    def __init__(
        self, specs: Sequence[ControllerSpec], *, stored: Callable[[Key], Mapping[str, Any] | None]
    ) -> None:
        self._specs, self._stored = specs, stored
        self._roles: dict[tuple[str, str], _Role | None] = {}
        self._listed: set[tuple[str, str]] = set()
        self._rollouts: dict[tuple[str, str], Rollout] = {}
        self._last: Evaluation | None = None
        self._roots: dict[str, Finding] = {}
        self._workloads: dict[tuple[str, str, str], str] = {}
        """Controller workloads (kind, namespace, name) -> the controller they are."""
        self._running: set[str] = set()
        self.comparing_since: datetime | None = None
        """The time of the evaluation the next is compared with first (None: none yet)."""
        self._reconcilers: dict[tuple[str, str], list[str]] = {}

    def follows(self, group: str, kind: str) -> bool:
        """Whether changes of this kind are looked at at all (a dict lookup for a Pod)."""
        return self._role(group, kind) is not None

    def _role(self, group: str, kind: str) -> _Role | None:
        key = (group, kind)
        if key not in self._roles:
            if key == ("apps", "ReplicaSet"):
                self._roles[key] = _Role.REPLICASET
            elif key == ("apps", "Deployment"):
                self._roles[key] = _Role.DEPLOYMENT
            else:
                self._roles[key] = _Role.GITOPS if is_gitops(self._specs, group, kind) else None
        return self._roles[key]

    def upserted(self, obj: Mapping[str, Any], *, now: datetime) -> list[Entry]:
        """An object of a followed kind is about to replace its previous version in the model."""
        role = self._role(obj["apiVersion"].rpartition("/")[0], obj["kind"])
        if role is _Role.GITOPS:
            key = key_of(obj)
            old = self._stored(key)
            if old is None:
                return []
            return object_changes(old, obj, now=now, controller=self._reconciler(key.group, key.kind))
        if role is _Role.REPLICASET:
            return self._replicaset(obj, now=now)
        return []

    def _replicaset(self, obj: Mapping[str, Any], *, now: datetime) -> list[Entry]:
        read = rollout_of(obj)
        if read is None:
            return []
        namespace, deployment, rollout = read
        known = self._rollouts.get((namespace, deployment))
        if known is not None and rollout.revision <= known.revision:
            return []  # the same ReplicaSet again (a resync, a scale) or an older one
        self._rollouts[namespace, deployment] = rollout
        if known is None or ("apps", "ReplicaSet") not in self._listed:
            return []  # a new Deployment's first ReplicaSet, or the initial list in any order
        controller = self._workloads.get(("Deployment", namespace, deployment))
        entry = image_changed(namespace, deployment, known, rollout, now=now, controller=controller)
        return [entry] if entry is not None else []

    def deleted(self, group: str, kind: str, namespace: str, name: str) -> None:
        if self._role(group, kind) is _Role.DEPLOYMENT:
            self._rollouts.pop((namespace, name), None)

    def listed(self, group: str, kind: str, names: Collection[tuple[str, str]]) -> None:
        """A list of this kind completed: from now on its changes are changes, not first sights;
        of its Deployments (or their newest ReplicaSets) only the listed remain."""
        self._listed.add((group, kind))
        role = self._role(group, kind)
        if role is _Role.DEPLOYMENT:
            gone = [key for key in self._rollouts if key not in names]
        elif role is _Role.REPLICASET:
            gone = [key for key, r in self._rollouts.items() if (key[0], r.replicaset) not in names]
        else:
            return
        for key in gone:
            del self._rollouts[key]

    def evaluated(self, evaluation: Evaluation, *, synced: bool, blind: Collection[str]) -> list[Entry]:
        """A new evaluation; until every kind is synced, evaluations only set the baseline."""
        last, self._last = self._last, evaluation
        if evaluation.controllers is not (last.controllers if last is not None else None):
            self._workloads = {_where(h.subject): h.name for h in evaluation.controllers if h.name}
            self._running = set(self._workloads.values())
        if last is None or not synced:
            self._roots = roots_of(evaluation)
            if not synced:
                self._last = None
            self.comparing_since = evaluation.now if synced else None
            return []
        entries: list[Entry] = []  # causes before what they caused: the controllers, then the roots
        if evaluation.controllers is not last.controllers:
            entries += controller_changes(last.controllers, evaluation.controllers, now=evaluation.now)
        if evaluation.findings is not last.findings:
            found, self._roots = finding_changes(last, evaluation, roots_before=self._roots, blind=blind)
            entries += found
        return entries

    def _reconciler(self, group: str, kind: str) -> str | None:
        """The configured controller reconciling a kind: one seen running, else the first configured."""
        names = self._reconcilers.get((group, kind))
        if names is None:
            names = [spec.name for spec in self._specs if reconciles(spec, group, kind)]
            self._reconcilers[group, kind] = names
        return next((n for n in names if n in self._running), names[0] if names else None)
