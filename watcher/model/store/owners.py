"""Which workload and release a failing object belongs to, remembered across correlation passes.

During an incident correlation runs again on every new finding, and each pass asked the same
questions about every failing Pod once more: its ReplicaSet, its Deployment, the release that
installed it (with 2,400 failing Pods, about 40% of a 150 ms pass). An answer only changes
when an object or a reverse edge it read changes, so each is kept with what it read and
dropped when the engine reports one of those touched; blindness changes drop them all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from watcher.model.ingest.objects import Key
from watcher.model.rules.workloads import owner_workload
from watcher.model.store.graph import Edge, Listing, Recorder, View, release_of


@dataclass(frozen=True, slots=True)
class Owners:
    """An existing object's workload (itself unless it is a Pod) and the release that installed it."""

    workload: Key | None
    release: Key | None


@dataclass(frozen=True, slots=True)
class _Answer:
    owners: Owners | None
    """None: the object does not exist (or its kind is blind)."""
    reads: frozenset[Key | Edge]


class OwnerCache:
    """Owners per object key, each answer kept until an object or edge it read is touched."""

    def __init__(self) -> None:
        self._answers: dict[Key, _Answer] = {}
        self._readers: dict[Key | Edge, set[Key]] = defaultdict(set)
        self._asked: set[Key] = set()

    def of(self, key: Key, view: Listing) -> Owners | None:
        self._asked.add(key)
        answer = self._answers.get(key)
        if answer is None:
            reads = Recorder(view)
            answer = _Answer(_resolve(key, reads), frozenset((*reads.keys, *reads.edges)))
            self._answers[key] = answer
            for read in answer.reads:
                self._readers[read].add(key)
        return answer.owners

    def forget(self, keys: Collection[Key], edges: Collection[Edge]) -> set[Key]:
        """Drop the answers that read any of these: the objects they were about (correlation
        used each answer it kept, so those objects' findings must be correlated again)."""
        if not self._answers:
            return set()  # the usual case, also while the initial sync touches every object
        stale: set[Key] = set()
        readers = self._readers
        for touched in (keys, edges):
            for read in readers.keys() & touched:  # iterates the smaller of the two
                stale |= readers[read]
        for key in stale:
            self._drop(key)
        return stale

    def reads(self, key: Key) -> bool:
        """Whether an answer kept read this object."""
        return key in self._readers

    def end_pass(self, scope: Collection[Key] | None = None) -> None:
        """Keep only the answers this pass asked for: the others are about objects no longer
        failing. A pass over a `scope` of subjects keeps those about subjects outside it."""
        answers, asked = self._answers, self._asked
        for key in answers.keys() - asked if scope is None else [k for k in scope if k in answers]:
            if key not in asked:
                self._drop(key)
        self._asked = set()

    def clear(self) -> None:
        self._answers.clear()
        self._readers.clear()

    def _drop(self, key: Key) -> None:
        answer = self._answers.pop(key, None)
        if answer is None:
            return
        for read in answer.reads:
            readers = self._readers.get(read)
            if readers is not None:
                readers.discard(key)
                if not readers:
                    del self._readers[read]


def _resolve(key: Key, view: View) -> Owners | None:
    obj: Mapping[str, Any] | None = view.get(key)
    if obj is None:
        return None
    workload_key = owner_workload(obj, view.get) if key.kind == "Pod" else key
    workload = view.get(workload_key) if workload_key is not None else None
    return Owners(workload_key, release_of(view, workload if workload is not None else obj))
