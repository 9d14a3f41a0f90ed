"""PruneOrphan: an object its Kustomization applied, no longer lists, and did not prune.

kustomize-controller labels what it applies (kustomize.toolkit.fluxcd.io/name and /namespace) and
records it in status.inventory.entries ("<namespace>_<name>_<group>_<Kind>"). A new build that
lacks an object replaces the inventory first, then deletes the object (prune) in the same
reconcile. When that delete did not happen (spec.prune was false at the time, or the DELETE was
refused and kustomize-controller moved the inventory on anyway: fluxcd/kustomize-controller#1664,
fixed by re-tracking such survivors), the object stays, labelled but untracked: no later
reconcile prunes it, nothing in Git manages it, and its controller may keep working on it.

What is judged, and what is not a verdict:
  * the object must carry both labels, not be deleting (a prune's DELETE waits on finalizers),
    and not opt out of pruning the way kustomize-controller honours it (_OPT_OUTS, in its labels
    or annotations, case-insensitive as fluxcd/pkg ssa compares them);
  * its Kustomization lists it: not an orphan. It does not, since the build its inventory
    records was first applied (status.history), held for `prune_orphan`: an orphan;
  * kustomize-controller wrote the object after that (its managedFields): a newer apply made it,
    not an orphan; without that time and with a newer attempt than the inventory (failed or
    running), it may be that attempt's: no verdict;
  * its Kustomization never recorded an inventory, or is not visible (its kind blind, or not in
    the snapshot): no verdict, never "healthy";
  * its Kustomization was seen deleted (the live model remembers it, as it remembers a removed
    CRD; a snapshot cannot tell a deleted Kustomization from one it does not hold): an orphan,
    with no since;
  * spec.prune: false leaves removed objects by design: still reported, as info.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watcher.model.ingest.flux import kustomized_by, revisions
from watcher.model.ingest.kinds import KUSTOMIZE_GROUP
from watcher.model.ingest.objects import (
    Key,
    Lookup,
    after,
    annotations_of,
    describe,
    dig,
    is_deleting,
    key_of,
    labels_of,
    parse_time,
    subject_of,
    text,
)
from watcher.model.ingest.revisions import same_revision
from watcher.model.rules.context import new_finding
from watcher.model.rules.controllers import reconciles
from watcher.model.store.deadlines import Deadlines
from watcher.model.store.graph import KUSTOMIZED, Store
from watcher.model.store.working import Pass
from watcher.model.types import Finding, FindingType, ModelConfig, Severity, Subject, rfc3339

MANAGER = "kustomize-controller"
"""The field manager kustomize-controller applies with (its --controller-name)."""

_OPT_OUTS: Mapping[str, str] = {
    f"{KUSTOMIZE_GROUP}/prune": "disabled",
    f"{KUSTOMIZE_GROUP}/reconcile": "disabled",
    f"{KUSTOMIZE_GROUP}/ssa": "Ignore",
}
"""What kustomize-controller's prune skips (its DeleteOptions.Exclusions): kept on purpose."""

WROTE_INVENTORY = frozenset({"ReconciliationSucceeded", "HealthCheckFailed", "PruneFailed"})
"""History statuses of an attempt whose apply succeeded: it replaced the inventory."""

KUSTOMIZATION = (KUSTOMIZE_GROUP, "Kustomization")
NOT_LISTED, LEFT_BY_DESIGN, GONE = "NotInInventory", "PruneDisabled", "KustomizationGone"
"""Why an object is an orphan (a metric label, so a fixed set): its Kustomization no longer lists
it, the same while that one has spec.prune: false, or its Kustomization was deleted."""


def opt_out(obj: Mapping[str, Any]) -> str | None:
    """The label or annotation by which the object opts out of pruning ("key: value"), or None."""
    own, notes = labels_of(obj), annotations_of(obj)
    for key, value in _OPT_OUTS.items():
        if any(str(found.get(key, "")).lower() == value.lower() for found in (own, notes)):
            return f"{key}: {value}"
    return None


def inventory_id(key: Key) -> str:
    """The object's id in status.inventory.entries (flux.inventory reads them back into keys)."""
    return f"{key.namespace}_{key.name}_{key.group}_{key.kind}"


def written_at(obj: Mapping[str, Any]) -> datetime | None:
    """When kustomize-controller last wrote the object (its managedFields), or None."""
    times = [
        parse_time(entry.get("time"))
        for entry in dig(obj, "metadata", "managedFields") or ()
        if entry.get("manager") == MANAGER and entry.get("subresource", "") != "status"
    ]
    return max((t for t in times if t is not None), default=None)


@dataclass(frozen=True, slots=True)
class Owner:
    """What a Kustomization's status says of the objects it applied, read once per version."""

    listed: frozenset[str]
    revision: str
    """The revision of the build its inventory records."""
    since: datetime | None
    """When that build was first applied; None when nothing records it."""
    prune: bool
    pending: bool
    """An attempt newer than the inventory failed or runs: its objects are not listed yet."""


def read_owner(ks: Mapping[str, Any], lookup: Lookup) -> Owner | None:
    """None when the Kustomization never recorded an inventory (nothing to judge against).

    The build the inventory records is the newest attempt in status.history that wrote it; it was
    first applied at the earliest firstReconciled of that build's (digest's) attempts. Without a
    history, the applied revision's source artifact time stands in (the apply came after it).
    """
    entries = dig(ks, "status", "inventory", "entries")
    if entries is None:
        return None
    applied = text(ks, "status", "lastAppliedRevision")
    attempted = text(ks, "status", "lastAttemptedRevision")
    history = [h for h in dig(ks, "status", "history") or () if h.get("lastReconciledStatus")]
    wrote = [h for h in history if h["lastReconciledStatus"] in WROTE_INVENTORY]
    if wrote:
        build = wrote[0]
        same = [parse_time(h.get("firstReconciled")) for h in wrote if h.get("digest") == build.get("digest")]
        since = min((t for t in same if t is not None), default=None)
        revision = text(build, "metadata", "revision") or applied
        pending = history[0] is not build or _newer(attempted, revision)
    else:
        if not applied:
            return None
        revision, pending = applied, _newer(attempted, applied)
        found = revisions(ks, lookup)
        since = found.updated if found.revision and same_revision(found.revision, applied) else None
    return Owner(
        listed=frozenset(e["id"] for e in entries),
        revision=revision,
        since=since,
        prune=dig(ks, "spec", "prune") is not False,
        pending=pending,
    )


def _newer(attempted: str, recorded: str) -> bool:
    return bool(attempted) and not same_revision(attempted, recorded)


def prune_orphan(
    obj: Mapping[str, Any],
    owner: Owner | str | None,
    *,
    controller: str | None,
    now: datetime,
    config: ModelConfig,
) -> tuple[Finding | None, datetime | None]:
    """PruneOrphan for `obj` given its labelled `owner` (read_owner; GONE when it is gone; None:
    no verdict), and the moment to look again when the threshold has not passed yet."""
    applied_by = kustomized_by(obj)
    if owner is None or applied_by is None or is_deleting(obj) or opt_out(obj) is not None:
        return None, None
    if isinstance(owner, Owner):
        if inventory_id(key_of(obj)) in owner.listed:
            return None, None
        written = written_at(obj)
        if (written is None and owner.pending) or (
            written is not None and owner.since is not None and written > owner.since
        ):
            return None, None
        if owner.since is not None and after(owner.since, config.thresholds.prune_orphan) > now:
            return None, after(owner.since, config.thresholds.prune_orphan)
    return _finding(subject_of(obj), applied_by, owner, controller=controller, config=config), None


def _finding(
    subject: Subject, applied_by: Key, owner: Owner | str, *, controller: str | None, config: ModelConfig
) -> Finding:
    ks = describe(applied_by)
    acting = f" {controller} still reconciles it." if controller else ""
    if isinstance(owner, Owner):
        when = f", applied since {rfc3339(owner.since)}" if owner.since else ""
        message = (
            f"{describe(subject)} is no longer in {ks}'s inventory (revision {owner.revision}{when}) but"
            " still exists"
        )
        if owner.prune:
            message += (
                ": it was not pruned, and no later reconcile will prune it (it is no longer tracked)."
                f"{acting} Delete it by hand if it should be gone, or put it back in Git."
            )
        else:
            message += (
                f": {ks} has spec.prune: false, so what leaves Git stays, by design, and nothing manages"
                f" it any more.{acting} Delete it by hand if it should be gone."
            )
        since, reason = owner.since, NOT_LISTED if owner.prune else LEFT_BY_DESIGN
    else:
        message = (
            f"{describe(subject)} is labelled as applied by {ks}, which no longer exists: nothing prunes"
            f" or manages it.{acting} Delete it by hand if it should be gone, or add it to a Kustomization."
        )
        since, reason = None, GONE
    evidence = {
        "kustomization": f"Kustomization/{applied_by.namespace}/{applied_by.name}",
        "reason": reason,
        "revision": owner.revision if isinstance(owner, Owner) else None,
        "applied_since": rfc3339(since),
        "prune": owner.prune if isinstance(owner, Owner) else None,
        "controller": controller,
    }
    found = new_finding(config, FindingType.PRUNE_ORPHAN, subject, message, since, evidence)
    if isinstance(owner, Owner) and not owner.prune:
        found.severity = Severity.INFO  # left by design: worth knowing, never worth a page
    return found


class PruneOrphans:
    """The PruneOrphan findings of every labelled object, judged again when it, its Kustomization
    or that one's source (whose artifact may date it) changes, when a threshold falls due, or
    when blindness changes (judge_all_again)."""

    def __init__(self, config: ModelConfig, store: Store) -> None:
        self._config, self._store = config, store
        self._findings: dict[Key, Finding] = {}
        self._owners: dict[Key, Owner | None] = {}
        self._deleted: set[Key] = set()
        """Kustomizations seen deleted that labelled objects still name."""
        self._dirty: set[Key] = set()
        self._all = True
        self.due = Deadlines()

    def judge_all_again(self) -> None:
        self._all = True

    def deleted(self, key: Key) -> None:
        """A Kustomization was deleted: what it applied and did not take with it is orphaned."""
        self._deleted.add(key)

    def pop_due(self, now: datetime) -> bool:
        due = self.due.pop_due(now)
        self._dirty.update(due)
        return bool(due)

    def findings(self) -> list[Finding]:
        return [self._findings[key] for key in sorted(self._findings)]

    def refresh(self, touched: Collection[Key], *, now: datetime) -> bool:
        """Judge what `touched` (and time, and blindness) may have changed: whether the findings did."""
        dirty, self._dirty = self._dirty, set()
        if self._all:
            self._all = False
            self._owners.clear()
            dirty.update(self._findings)
            for owner in self._store.targets(KUSTOMIZED):
                dirty.update(self._store.referrers(KUSTOMIZED, owner))
        for key in touched:
            if (key.group, key.kind) == KUSTOMIZATION:
                self._owner_changed(key, dirty)
            for sourced in self._sourced(key):
                self._owner_changed(sourced, dirty)
            if self._applied(key):
                dirty.add(key)
        changed = False
        for key in dirty:
            found = self._judge(key, now)
            if found != self._findings.get(key):
                changed = True
                if found is None:
                    del self._findings[key]
                else:
                    self._findings[key] = found
        return changed

    def reads(self, key: Key) -> bool:
        """Whether a change of `key` alone would have the next refresh judge something again."""
        return (
            self._all
            or (key.group, key.kind) == KUSTOMIZATION
            or self._applied(key)
            or bool(self._sourced(key))
        )

    def _sourced(self, key: Key) -> list[Key]:
        """The Kustomizations built from `key` (its artifact dates their applies)."""
        return [k for k in self._store.referrers("source", key) if (k.group, k.kind) == KUSTOMIZATION]

    def _applied(self, key: Key) -> bool:
        """Whether `key` is judged itself: a Kustomization labelled it, or it has a finding."""
        return key in self._findings or bool(self._store.links(KUSTOMIZED, key))

    def _owner_changed(self, key: Key, dirty: set[Key]) -> None:
        """A Kustomization changed: what it applied is judged again only if what its status says
        of it did (its status is written every reconcile; its inventory rarely changes)."""
        old = self._owners.pop(key, None)
        applied = self._store.referrers(KUSTOMIZED, key)
        if not applied:
            self._deleted.discard(key)
        elif old is None or self._owner(key) != old:
            dirty.update(applied)

    def _owner(self, key: Key) -> Owner | str | None:
        """The owner as prune_orphan takes it; Kustomizations read once until they change."""
        if not self._store.visible(key.kind):
            return None
        ks = self._store.get(key)
        if ks is None:
            return GONE if key in self._deleted else None
        self._deleted.discard(key)
        if key not in self._owners:
            self._owners[key] = read_owner(ks, self._store.get)
        return self._owners[key]

    def _judge(self, key: Key, now: datetime) -> Finding | None:
        obj = self._store.get(key)
        owner_key = kustomized_by(obj) if obj is not None else None
        if obj is None or owner_key is None:
            self.due.schedule(key, None)
            return None
        controller = next(
            (s.name for s in self._config.controllers if reconciles(s, key.group, key.kind)), None
        )
        found, deadline = prune_orphan(
            obj, self._owner(owner_key), controller=controller, now=now, config=self._config
        )
        self.due.schedule(key, deadline)
        return found


def acted_on(run: Pass) -> None:
    """Each PruneOrphan names what still happens to its object: the findings on it that precedence
    made its symptoms (its controller's Warning Events, its Ready=False)."""
    for finding in run.each(FindingType.PRUNE_ORPHAN):
        ids = run.by_subject[run.keys[finding.id]]
        later = ids[ids.index(finding.id) + 1 :]
        if not later:
            continue
        told = [_told(run.found[i]) for i in later]
        finding.evidence = {**finding.evidence, "acted_on": told}
        finding.message += " Still acted on: " + "; ".join(told) + "."


def _told(finding: Finding) -> str:
    evidence = finding.evidence
    if finding.type is FindingType.RETRY_LOOP:
        return (
            f"RetryLoop, Warning {evidence['reason']} {evidence['count']} times, last at"
            f" {evidence['lastTimestamp']}"
        )
    if finding.type is FindingType.POLICY_DENIED:
        return f"PolicyDenied by {', '.join(evidence['policies'])}"
    return f"{finding.type} since {rfc3339(finding.since)}" if finding.since else str(finding.type)
