"""The satellite merge: during an incident most candidates are StatusStale alone on their
subject, each only pointing at its ControllerDown (see correlate/correlator.py). They are kept out of the
candidates correlation reads; a change to one that stays one (same id, same controller, not
promoted by the last pass) only replaces its output in a merge of two sorted lists, instead of
a correlation pass over every finding.
"""

from __future__ import annotations

import enum
import itertools
from datetime import datetime

from watcher.model.ingest.objects import Key
from watcher.model.store.table import MERGED, SortedTable
from watcher.model.store.working import Correlation, OrderKey, order_key
from watcher.model.types import Finding, FindingType

CORE, SATELLITE = 0, 1
"""The tags of `Satellites._placed`'s keys."""


class Filed(enum.Enum):
    """Where `Satellites.file()` put an object's new candidates."""

    CANDIDATES = "not a satellite: correlation must see them"
    SATELLITE = "a new satellite, or one that changed what correlation reads of it"
    MOVED = "a satellite that stays one: only its output moves"


class Group:
    """The satellites pointing at one root (a ControllerDown or ShardNotServed id): the subject
    each is about, as its key and apiVersion, and a version that moves when one joins or leaves,
    so a blast radius made from them is kept until then (correlate/roots.py)."""

    __slots__ = ("subjects", "version")

    def __init__(self) -> None:
        self.subjects: dict[Key, str] = {}
        self.version = 0
        """Set by Satellites from a counter shared by all its groups."""


class Satellites:
    """The satellites by subject, and their outputs placed in output order."""

    def __init__(self) -> None:
        self.candidates: dict[Key, Finding] = {}
        """Passed to Correlator.run(), which promotes those it asks about."""
        self.groups: dict[str, Group] = {}
        """The candidates by the id they point at (their `controller_workload`)."""
        self._versions = itertools.count(1)
        """Group versions, never repeated (a group gone and back is not the one it was)."""
        self.moved = False
        """A satellite changed in place since the last merge: the output must be merged again."""
        self._moved: set[Key] = set()
        """Satellites added, changed or gone since their outputs were last placed."""
        self._outputs: dict[Key, tuple[Finding, OrderKey]] = {}
        """Where each placed output is, with the candidate it was made from."""
        self._placed: SortedTable[tuple[OrderKey, int], Finding] = SortedTable()
        """The correlation's findings (keyed (order key, CORE)) and the unpromoted satellites'
        outputs ((order key, SATELLITE)), in output order. A satellite promoted or no longer
        promoted has the same order key in both: the tag keeps one from replacing the other
        while both are being placed."""
        self._core: dict[OrderKey, Finding] = {}
        """The correlation's findings placed, by order key."""
        self._placed_for = Correlation([])
        """The correlation whose promotions and roots `_placed` follows."""

    def file(self, key: Key, findings: list[Finding], *, promoted: set[Key]) -> Filed:
        """The key's candidates changed to `findings`; `promoted`: the last pass's promotions."""
        satellite = findings[0] if len(findings) == 1 and _is_satellite(findings[0]) else None
        old = self.candidates.get(key)
        self._moved.add(key)
        if satellite is None:
            if old is not None:
                del self.candidates[key]
                self._leave(key, old)
            return Filed.CANDIDATES
        self.candidates[key] = satellite
        api_version = satellite.subject["apiVersion"]
        if old is None or _link(old) != _link(satellite) or old.subject["apiVersion"] != api_version:
            if old is not None:
                self._leave(key, old)
            group = self.groups.get(_link(satellite))
            if group is None:
                group = self.groups[_link(satellite)] = Group()
            group.subjects[key] = api_version
            group.version = next(self._versions)
        if (
            old is not None
            and key not in promoted
            and old.id == satellite.id
            and old.evidence["controller_workload"] == satellite.evidence["controller_workload"]
        ):
            self.moved = True
            return Filed.MOVED
        return Filed.SATELLITE

    def remove(self, key: Key) -> bool:
        """The object is gone: whether it was a satellite."""
        old = self.candidates.pop(key, None)
        if old is None:
            return False
        self._leave(key, old)
        self._moved.add(key)
        return True

    def _leave(self, key: Key, old: Finding) -> None:
        link = _link(old)
        group = self.groups[link]
        del group.subjects[key]
        group.version = next(self._versions)
        if not group.subjects:
            del self.groups[link]

    def merged(self, core: Correlation) -> list[Finding]:
        """The correlation's findings merged with the outputs of its unpromoted satellites."""
        placed = self._placed_for
        new_core = core is not placed
        if core.roots != placed.roots:
            moved = self._outputs.keys() | self.candidates.keys()
        else:
            moved = self._moved | (core.promoted ^ placed.promoted)
            for link, since in core.since.items():  # a controller's verdict moved in time
                if link in self.groups and (link not in placed.since or placed.since[link] != since):
                    moved |= self.groups[link].subjects.keys()
        self._moved, self._placed_for, self.moved = set(), core, False
        for key in moved:
            kept = self._outputs.pop(key, None)
            at = kept[1] if kept is not None else None
            candidate = self.candidates.get(key)
            if candidate is not None and key not in core.promoted:
                link = _link(candidate)
                output = _output(candidate, core.roots[link], core.since[link])
                # an output's order is its candidate's (never a root): kept while that is the same
                where = kept[1] if kept is not None and kept[0] is candidate else order_key(output)
                self._outputs[key] = (candidate, where)
                if at is not None and at != where:
                    self._placed.set((at, SATELLITE), None)
                self._placed.set((where, SATELLITE), output)  # in place when its order is unchanged
            elif at is not None:
                self._placed.set((at, SATELLITE), None)
        if new_core:
            self._place_core(core)
        return self._placed.values()

    def _place_core(self, core: Correlation) -> None:
        """Replace the last correlation's findings with `core`'s: what a scoped pass says it
        changed, else those found changed, or all of them in one sort when many did (a pass over
        every subject). A promoted satellite's
        finding has its output's order key: one placed since (it is no longer promoted) stays."""
        was, table = self._core, self._placed
        if core.changes is not None:  # a scoped pass: what it replaced since the one before, in order
            for where, finding in core.changes:
                table.set((where, CORE), finding)
                if finding is None:
                    was.pop(where, None)
                else:
                    was[where] = finding
            return
        now = dict(zip(core.order, core.findings, strict=True))
        changed = [(where, f) for where, f in now.items() if was.get(where) is not f]
        gone = was.keys() - now.keys()
        if (len(changed) + len(gone)) * MERGED > len(table):
            placed = zip(table.keys(), table.values(), strict=True)
            outputs = [(tagged, output) for tagged, output in placed if tagged[1] == SATELLITE]
            table = self._placed = SortedTable()
            for tagged, output in outputs:
                table.set(tagged, output)
            changed, gone = list(now.items()), set()
        for where in gone:
            table.set((where, CORE), None)
        for where, finding in changed:
            table.set((where, CORE), finding)
        self._core = now


def _link(finding: Finding) -> str:
    link: str = finding.evidence["controller_workload"]
    return link


def _is_satellite(finding: Finding) -> bool:
    return finding.type is FindingType.STATUS_STALE


def _output(candidate: Finding, root: str, since: datetime | None) -> Finding:
    """What correlation makes of a satellite it did not promote: the candidate, explained by
    `root`, stale `since` (working.stale_since)."""
    c = candidate
    return Finding(c.id, c.type, c.severity, c.subject, c.message, since, c.evidence, root_cause=root)
