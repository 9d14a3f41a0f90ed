"""When a cached answer may stop holding: the next moment a threshold could flip it, per key.

Each cache that can go stale with time (an object's findings, a controller's verdict, a removed
CRD's retention) owns one `Deadlines`, so a deadline that falls due goes back to its owner by
construction, with no tag saying whose it is.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from datetime import datetime

from watcher.model.ingest.objects import Key


class Deadlines:
    """The due moment of each key, in a heap; rescheduling a key supersedes its old entry."""

    __slots__ = ("_due", "_heap", "_seq")

    def __init__(self) -> None:
        self._due: dict[Key, datetime] = {}
        self._heap: list[tuple[datetime, int, Key]] = []
        self._seq = itertools.count()
        """Breaks ties between equal moments, so keys are never compared."""

    def schedule(self, key: Key, when: datetime | None) -> None:
        """`key` falls due at `when` (None: never, or no longer)."""
        if when is None:
            self._due.pop(key, None)
            return
        if self._due.get(key) == when:
            return
        self._due[key] = when
        heapq.heappush(self._heap, (when, next(self._seq), key))

    def pop_due(self, now: datetime) -> Sequence[Key]:
        """The keys due at `now` (at or before it), each forgotten once returned (asked by every
        evaluation, most often of a heap with nothing due: then nothing is built)."""
        heap = self._heap
        if not heap or heap[0][0] > now:
            return ()
        due = []
        while heap and heap[0][0] <= now:
            when, _, key = heapq.heappop(heap)
            if self._due.get(key) == when:  # else superseded by a later schedule()
                del self._due[key]
                due.append(key)
        return due
