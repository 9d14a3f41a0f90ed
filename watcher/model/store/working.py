"""The working state of one correlation pass, and the order findings come out in.

A pass (correlate/correlator.py) admits copies of the engine's candidates, links them, and finishes
them into roots with their blast radius. `Pass` is what its steps share: the findings by id
and by subject (primary first, in PRECEDENCE order), the links between them, and where each
copy came from (its candidate, which cross-pass caches use to tell an unchanged input).
"""

from __future__ import annotations

from bisect import insort
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from watcher.model.ingest.objects import Key, group_of
from watcher.model.store.graph import Listing, Read, Recorder
from watcher.model.store.owners import OwnerCache
from watcher.model.types import Finding, FindingType, ModelConfig, Severity, Subject

if TYPE_CHECKING:  # satellites.py imports this module
    from watcher.model.store.satellites import Group

PRECEDENCE: Sequence[FindingType] = (
    FindingType.CRD_REMOVED,
    FindingType.CONTROLLER_DOWN,
    FindingType.CONTROLLER_STUCK,
    FindingType.SHARD_NOT_SERVED,
    FindingType.STATUS_STALE,
    FindingType.NOT_RECONCILING,
    FindingType.PRUNE_ORPHAN,
    FindingType.STALLED,
    FindingType.POLICY_DENIED,
    FindingType.DEPENDENCY_BLOCKED,
    FindingType.REVISION_SKEW,
    FindingType.RELEASE_READY_WORKLOAD_FAILING,
    FindingType.CONFLICTING_WRITERS,
    FindingType.RECONCILE_REQUEST_IGNORED,
    FindingType.GENERATION_NOT_OBSERVED,
    FindingType.RECONCILE_FAILED,
    FindingType.STUCK_RECONCILING,
    FindingType.WORKLOAD_UNHEALTHY,
    FindingType.OBJECT_FAILING,
    FindingType.RETRY_LOOP,
)
"""Within one subject, the earlier type explains the later ones (a blocked object also lags; an
object its controller does not reconcile (NotReconciling) is why its status says nothing new; a
policy's denial is why the revision is not applied, Ready says False and the Events repeat; an
object Git no longer has, left by prune, is why its controller still fails on it at all; writers
fighting over the spec are why its generation is never observed, its reconcile never settles and
its workload keeps rolling).

ReconcileFailed comes after the findings that say more about the same Ready=False (the
revision it could not apply, an unseen spec or request: the verdict predates it) and
before a Reconciling=True left beside it, whose retries it explains."""

_RANK = {kind: rank for rank, kind in enumerate(PRECEDENCE)}
_STALE = FindingType.STATUS_STALE
_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


def key_of_subject(subject: Subject) -> Key:
    return Key(group_of(subject["apiVersion"]), subject["kind"], subject["namespace"], subject["name"])


def subject_order(subject: Subject) -> tuple[str, str, str]:
    return (subject["namespace"], subject["kind"], subject["name"])


OrderKey = tuple[bool, int, str, str, str, str, str]


def order_key(f: Finding) -> OrderKey:
    """Where a finding goes in the output: roots first, critical first, then by subject."""
    return (not f.is_root, _SEVERITY_RANK.get(f.severity, 3), *subject_order(f.subject), f.type, f.id)


@dataclass(slots=True)
class Correlation:
    findings: list[Finding]
    """Every finding but the unpromoted satellites, in output order (see order_key)."""
    promoted: set[Key] = field(default_factory=set)
    """Satellites admitted as candidates because the pass asked about their subject."""
    roots: dict[str, str] = field(default_factory=dict)
    """Root cause of the unpromoted satellites, by the ControllerDown id they point at."""
    since: dict[str, datetime | None] = field(default_factory=dict)
    """Since when the unpromoted satellites are stale, by the id they point at (stale_since)."""
    order: Sequence[OrderKey] = ()
    """The order key of each of `findings` (order_key), in the same order."""
    changes: Sequence[tuple[OrderKey, Finding | None]] | None = None
    """What changed since the correlation before, in order (None at an order key: gone), when
    the pass knows it (one over a scope); None: compare with it."""


def stale_since(found: Mapping[str, Finding], link: str) -> datetime | None:
    """A StatusStale is stale since its controller went down: the `since` of the ControllerDown it
    points at (`link`), set when correlation admits or places it, not when its object is judged,
    so a down controller's verdict that moves in time (its Lease written again, still expired)
    judges none of its objects again. One pointing at a ShardNotServed says none."""
    root = found.get(link)
    return root.since if root is not None and root.type is FindingType.CONTROLLER_DOWN else None


class Reads(Recorder):
    """The pass's view of the objects: it files what each step read by the subject it was
    reading for (`reading`; None outside any finding's step), so the next pass can tell which
    subjects a change reaches (store/components.py)."""

    def __init__(self, store: Listing) -> None:
        super().__init__(store)
        self.by_reader: dict[Key | None, set[Read]] = {}
        self._into = self.by_reader[None] = set()

    def reading(self, reader: Key | None) -> None:
        into = self.by_reader.get(reader)
        if into is None:
            into = self.by_reader[reader] = set()
        self._into = into

    def note(self, read: Read) -> None:
        self._into.add(read)


class Escaped(Exception):
    """A pass scoped to some subjects asked about one outside its scope that holds findings:
    correlated without them, the answer would be wrong; the scope must take them in."""

    def __init__(self, key: Key) -> None:
        super().__init__(key)
        self.key = key


@dataclass(frozen=True, slots=True)
class Scope:
    """The subjects a pass correlates, the others' findings kept from earlier passes; `foreign`
    says whether a subject outside it holds findings (a candidate, or a kept output)."""

    keys: Collection[Key]
    foreign: Callable[[Key], bool]


class Pass:
    """The working state of one correlation pass."""

    def __init__(
        self,
        store: Listing,
        config: ModelConfig,
        now: datetime,
        satellites: Mapping[Key, Finding],
        owners: OwnerCache,
        groups: Mapping[str, Group],
        *,
        scope: Scope | None = None,
        promoted: Collection[Key] = (),
    ) -> None:
        """`promoted`: the satellites promoted by the components out of `scope` (kept as they were)."""
        self.view = Reads(store)
        self.store: Listing = self.view
        self.config, self.now = config, now
        self.scope = scope
        self.satellites, self.owners = satellites, owners
        self.groups = groups
        """The satellites by the root they point at (store/satellites.py)."""
        self.promoted: set[Key] = set(promoted)
        self.found: dict[str, Finding] = {}
        self.origin: dict[str, Finding] = {}
        """The finding each working copy was made from (a candidate, as the engine keeps it)."""
        self.keys: dict[str, Key] = {}
        self.links: dict[str, str] = {}
        self.extra: dict[str, list[Subject]] = defaultdict(list)
        self.by_subject: dict[Key, list[str]] = defaultdict(list)
        self.advice: dict[str, str] = {}

    def add(self, finding: Finding, *, link: str | None = None, key: Key | None = None) -> Finding:
        """A working copy: candidates are cached by the engine and must stay as they are, so
        root_cause/affected/message are set on the copy and evidence is replaced, never mutated."""
        f = finding
        fid = f.id
        since = stale_since(self.found, link) if link is not None and f.type is _STALE else f.since
        copy = Finding(fid, f.type, f.severity, f.subject, f.message, since, f.evidence)
        if key is None:
            key = key_of_subject(copy.subject)
        self._within(key)
        if self.satellites:
            self.promote(key)
        self.found[fid] = copy
        self.origin[fid] = finding
        self.keys[fid] = key
        ids = self.by_subject.get(key)
        if ids is None:
            self.by_subject[key] = [fid]
        else:
            insort(ids, fid, key=self._rank)
        if link is not None:
            self.links[fid] = link
        return copy

    def _rank(self, finding_id_: str) -> tuple[int, str]:
        """Where a finding goes among its subject's: PRECEDENCE order, then by id."""
        return _RANK[self.found[finding_id_].type], finding_id_

    def promote(self, key: Key) -> None:
        """Admit the satellite on this subject (if any), as if it had been a candidate."""
        satellite = self.satellites.get(key)
        if satellite is not None and key not in self.promoted:
            self.promoted.add(key)
            self.add(satellite, link=satellite.evidence["controller_workload"], key=key)

    def each(self, kind: FindingType) -> Iterator[Finding]:
        """The findings of one type, each step over one read for by its subject (see Reads)."""
        for finding in [f for f in self.found.values() if f.type is kind]:
            self.view.reading(self.keys[finding.id])
            yield finding
        self.view.reading(None)

    def _within(self, key: Key) -> None:
        scope = self.scope
        if scope is not None and key not in scope.keys and scope.foreign(key):
            raise Escaped(key)

    def primary(self, key: Key) -> str | None:
        self.view.note(key)
        self._within(key)
        if self.satellites:
            self.promote(key)
        ids = self.by_subject.get(key)
        return ids[0] if ids else None

    def drop(self, finding_id_: str) -> None:
        del self.found[finding_id_]
        self.origin.pop(finding_id_, None)
        self.by_subject[self.keys.pop(finding_id_)].remove(finding_id_)
        self.links.pop(finding_id_, None)
