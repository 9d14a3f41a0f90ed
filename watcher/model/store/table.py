"""A table of values kept sorted by key, for the engine's outputs.

Evaluations hand out lists in a fixed order (objects by key, findings by output order). Keeping
the values sorted as they change makes an output a copy, not a sort, and the same list is handed
out again until something changes. New keys wait unsorted until the next output: inserting each
into the sorted lists moves every value after it, which at 50,000 GitOps objects made the
initial replay quadratic (some 35 us per insert); placed together they cost one copy.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Generic, TypeVar

from watcher.model.ingest.objects import Key

K = TypeVar("K", bound=Key | tuple[Any, ...])
"""Ordered keys: object Keys, or the findings' output order."""
V = TypeVar("V")


MERGED = 8
"""Added keys are merged into the placed ones in one sort when more than 1/MERGED as many (each
placed by bisection costs about log2(n) comparisons of keys, a merge n, plus a value lookup each)."""


class SortedTable(Generic[K, V]):
    """Values by key, in key order; the lists it hands out are read-only to their holders."""

    def __init__(self) -> None:
        self._keys: list[K] = []
        self._values: list[V] = []
        self._at: dict[K, V] = {}
        """Every value by key, placed or not: a new key, an unchanged value or the removal of an
        absent key (most calls while the tables fill) is answered without a bisection."""
        self._added: dict[K, None] = {}
        """Keys in `_at` not yet in `_keys`, placed by the next output (_place); a dict, not a
        set, for the order they came in, which sorting takes runs from (keys often come sorted)."""
        self._out: list[V] | None = None
        self._out_keys: list[K] | None = None

    def set(self, key: K, value: V | None) -> None:
        """Insert, replace, or (with None) remove the value at `key`."""
        current = self._at.get(key)
        if value is None:
            if current is None:
                return
            del self._at[key]
            if key in self._added:
                del self._added[key]
            else:
                index = bisect_left(self._keys, key)
                del self._keys[index], self._values[index]
        elif current is None:
            self._at[key] = value
            self._added[key] = None
        elif current == value:
            return
        else:
            self._at[key] = value
            if key not in self._added:
                self._values[bisect_left(self._keys, key)] = value
        self._out = self._out_keys = None

    def __len__(self) -> int:
        return len(self._at)

    def get(self, key: K) -> V | None:
        return self._at.get(key)

    def values(self) -> list[V]:
        if self._out is None:
            self._place()
            self._out = list(self._values)
        return self._out

    def _place(self) -> None:
        """Move the added values into the sorted lists in one pass: slices of what was placed
        copied between the added values, each found by bisection from the one before."""
        if not self._added:
            return
        added, self._added = sorted(self._added), {}
        keys, values = self._keys, self._values
        if len(added) * MERGED > len(keys):  # many (the tables filling): one merge of two sorted runs
            self._keys = sorted(keys + added)
            self._values = [self._at[key] for key in self._keys]
            return
        self._keys, self._values = [], []
        start = 0
        for key in added:
            index = bisect_left(keys, key, start)
            self._keys += keys[start:index]
            self._values += values[start:index]
            self._keys.append(key)
            self._values.append(self._at[key])
            start = index
        self._keys += keys[start:]
        self._values += values[start:]

    def keys(self) -> list[K]:
        """The keys of `values()`, in the same order (read-only to their holders)."""
        if self._out_keys is None:
            self._place()
            self._out_keys = list(self._keys)
        return self._out_keys
