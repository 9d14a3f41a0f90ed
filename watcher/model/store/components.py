"""What each correlation pass related, kept so the next one correlates only what a change reaches.

A pass relates subjects: a finding's step asks about another subject's findings (its owner, its
source, what it waits on) or links to them, and a root explains its members. Subjects related
that way, directly or through others, form a *component*; a component's findings come out of
a pass the same whatever happens outside it, as long as nothing it read changed. So each
component is kept with everything its steps read (objects, present or not, reverse edges, and
other subjects asked about), and a change (a subject's candidates, an object touched, an edge)
reaches the components that hold or read it; the next pass correlates those alone
(working.Scope) and keeps every other finding as it was.

A step may relate a subject to one outside the scope (a Pod that starts failing asks about
its Deployment's finding): the pass then stops (working.Escaped) and runs again with that
subject's component taken in.

Some subjects are in every pass and in no component (*hubs*, Correlator.hubs): a down or stuck
controller, an unserved shard, a removed CRD explain subjects in any number of components, so
relating through them would make one component of everything. A hub's findings are made again
by every pass, with the members it explains in the components left out counted from their kept
findings (`explained`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable

from watcher.model.ingest.objects import Key
from watcher.model.store.graph import Read
from watcher.model.store.table import SortedTable
from watcher.model.store.working import OrderKey, Pass, key_of_subject, order_key
from watcher.model.types import Finding

_NONE: frozenset[Read] = frozenset()


class Components:
    """The components of the last passes, what each read, and the findings they came out as."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._of: dict[Key, int] = {}
        """Each subject's component."""
        self._members: dict[int, list[Key]] = {}
        self._reads: dict[int, set[Read]] = {}
        self._readers: dict[Read, set[int]] = defaultdict(set)
        self._unattributed: set[Read] = set()
        """What a pass read for no finding: a change to it reaches everything."""
        self._outputs = SortedTable[OrderKey, Finding]()
        self._placed: dict[Key, list[OrderKey]] = {}
        """Where each subject's findings are in `_outputs`."""
        self._explained: dict[str, dict[str, tuple[Key, Finding]]] = {}
        """The kept findings each root explains (root_cause), by id."""
        self._hub_reads: dict[Read, set[Key]] = {}
        """The hubs that read each object or edge (hubs are in every pass: a change to one needs one)."""
        self.promoted: frozenset[Key] = frozenset()
        """The satellites the last passes promoted (working.Pass.promote)."""
        self.changes: list[tuple[OrderKey, Finding | None]] = []
        """What the last `replace` changed in the outputs, in order (None: gone)."""
        self._next = 0

    def holds(self, key: Key) -> bool:
        """Whether a kept component has this subject (a finding is about it, or was)."""
        return key in self._of or key in self._placed

    def reads(self, key: Key) -> bool:
        """Whether a kept component read this object (or holds it)."""
        return key in self._readers or key in self._of or key in self._unattributed or key in self._hub_reads

    def reached(self, changed: Collection[Key], touched: Iterable[Read]) -> set[Key] | None:
        """The subjects to correlate again: the `changed` ones (their candidates changed) and every
        subject of the components they or the `touched` objects and edges are in or were read by;
        None when something read for no finding was touched (correlate everything)."""
        found: set[int] = set()
        scope = set(changed)
        for read in (*changed, *touched):
            if read in self._unattributed:
                return None
            component = self._of.get(read) if isinstance(read, Key) else None
            if component is not None:
                found.add(component)
            readers = self._readers.get(read)
            if readers:
                found |= readers
            hubs = self._hub_reads.get(read)
            if hubs:
                scope.update(hubs)
        for component in found:
            scope.update(self._members[component])
        return scope

    def explained(self, root: str, *, outside: Collection[Key]) -> list[tuple[Key, Finding]]:
        """The kept findings `root` explains, with their subjects' keys, whose subjects are not in
        `outside` (a pass's scope)."""
        kept = self._explained.get(root)
        return [(key, f) for key, f in kept.values() if key not in outside] if kept else []

    def findings(self) -> list[Finding]:
        return self._outputs.values()

    def order(self) -> list[OrderKey]:
        """The order key of each of `findings()`, in the same order."""
        return self._outputs.keys()

    def replace(self, run: Pass, scope: Collection[Key] | None, *, hubs: Collection[Key]) -> None:
        """Take in what a pass found and read over `scope` (None: every subject): the components
        that were in it are replaced by the pass's. `hubs`: the subjects in every pass."""
        changes: list[tuple[OrderKey, Finding | None]] = []
        if scope is None:
            self._reset()
        else:
            for component in {self._of[key] for key in scope if key in self._of}:
                self._drop(component)
            for key in scope:
                for where in self._placed.pop(key, ()):
                    old = self._outputs.get(where)
                    self._outputs.set(where, None)
                    changes.append((where, None))
                    if old is not None and old.root_cause is not None:
                        explained = self._explained[old.root_cause]
                        del explained[old.id]
                        if not explained:
                            del self._explained[old.root_cause]
        by_reader = run.view.by_reader
        self._unattributed |= by_reader.get(None, set())
        self._hub_reads = {}
        for hub in hubs:
            for read in by_reader.get(hub, _NONE):
                self._hub_reads.setdefault(read, set()).add(hub)
        self.promoted = frozenset(run.promoted)
        parent = {key: key for key in (*run.by_subject, *(k for k in scope or () if k in by_reader))}
        for hub in hubs:
            parent.pop(hub, None)

        def find(key: Key) -> Key:
            while parent[key] != key:
                parent[key] = parent[parent[key]]
                key = parent[key]
            return key

        def union(a: Key, b: Key) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb

        for reader, reads in by_reader.items():
            if reader is None or reader not in parent:
                continue
            for read in reads:
                if isinstance(read, Key) and read in parent and run.by_subject.get(read):
                    union(reader, read)
        for source, target in run.links.items():
            a, b = run.keys.get(source), run.keys.get(target)
            if a in parent and b in parent:
                union(a, b)
        grouped: dict[Key, list[Key]] = defaultdict(list)
        for key in parent:
            grouped[find(key)].append(key)
        for members in grouped.values():
            component = self._next
            self._next += 1
            self._members[component] = members
            reads = self._reads[component] = set()
            for member in members:
                self._of[member] = component
                reads |= by_reader.get(member, _NONE)
            for read in reads:
                self._readers[read].add(component)
        for finding in run.found.values():
            where = order_key(finding)
            self._outputs.set(where, finding)
            changes.append((where, finding))
            self._placed.setdefault(run.keys[finding.id], []).append(where)
            if finding.root_cause is not None:
                explained = self._explained.setdefault(finding.root_cause, {})
                explained[finding.id] = (run.keys[finding.id], finding)
        self.changes = changes

    def _drop(self, component: int) -> None:
        for member in self._members.pop(component):
            del self._of[member]
        for read in self._reads.pop(component):
            readers = self._readers[read]
            readers.discard(component)
            if not readers:
                del self._readers[read]


class Filers:
    """Which objects file candidates about each subject that is not themselves (an Event's
    PolicyDenied is about the object it involves): the engine keeps candidates by the object
    judged, correlation scopes by subject."""

    def __init__(self) -> None:
        self._by_subject: dict[Key, set[Key]] = {}

    def filed(self, key: Key, old: Iterable[Finding], new: Iterable[Finding]) -> set[Key]:
        """The object at `key` filed `new` in place of `old`: the subjects that changed."""
        before = {key_of_subject(f.subject) for f in old}
        after = {key_of_subject(f.subject) for f in new}
        for subject in before - after - {key}:
            filers = self._by_subject.get(subject)
            if filers is not None:
                filers.discard(key)
                if not filers:
                    del self._by_subject[subject]
        for subject in after - before - {key}:
            self._by_subject.setdefault(subject, set()).add(key)
        return {key, *before, *after}

    def of(self, subjects: Iterable[Key]) -> set[Key]:
        """The objects whose candidates may be about these subjects (the subjects themselves too)."""
        found = set(subjects)
        for subject in list(found):
            found |= self._by_subject.get(subject, _NONE_KEYS)
        return found

    def files(self, subject: Key) -> bool:
        """Whether another object files candidates about this subject."""
        return subject in self._by_subject


_NONE_KEYS: frozenset[Key] = frozenset()
