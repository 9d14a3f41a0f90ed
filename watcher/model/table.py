"""A table of values kept sorted by key, for the engine's outputs.

Evaluations hand out lists in a fixed order (objects by key, findings by output order). Keeping
the values sorted as they change makes an output a copy, not a sort, and the same list is handed
out again until something changes. New keys wait unsorted until the next output: inserting each
into the sorted lists moves every value after it, which at 50,000 GitOps objects made the
initial replay quadratic (some 35 us per insert); placed together they cost one copy.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from operator import itemgetter
from typing import Any, Generic, TypeVar

from watcher.model.objects import Key

K = TypeVar("K", bound=Key | tuple[Any, ...])
"""Ordered keys: object Keys, or the findings' output order."""
V = TypeVar("V")


class SortedTable(Generic[K, V]):
    """Values by key, in key order; the lists it hands out are read-only to their holders."""

    def __init__(self) -> None:
        self._keys: list[K] = []
        self._values: list[V] = []
        self._added: dict[K, V] = {}
        """Values at keys not yet in `_keys`, placed by the next output (_place)."""
        self._out: list[V] | None = None

    def set(self, key: K, value: V | None) -> None:
        """Insert, replace, or (with None) remove the value at `key`."""
        if key in self._added:
            if value is None:
                del self._added[key]
            elif self._added[key] == value:
                return
            else:
                self._added[key] = value
            self._out = None
            return
        index = bisect_left(self._keys, key)
        present = index < len(self._keys) and self._keys[index] == key
        if value is None:
            if not present:
                return
            del self._keys[index], self._values[index]
        elif present:
            if self._values[index] == value:
                return
            self._values[index] = value
        else:
            self._added[key] = value
        self._out = None

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
        added, self._added = sorted(self._added.items(), key=itemgetter(0)), {}
        keys, values = self._keys, self._values
        self._keys, self._values = [], []
        start = 0
        for key, value in added:
            index = bisect_left(keys, key, start)
            self._keys += keys[start:index]
            self._values += values[start:index]
            self._keys.append(key)
            self._values.append(value)
            start = index
        self._keys += keys[start:]
        self._values += values[start:]

    def interleaved(self, items: list[V], key: Callable[[V], K]) -> list[V]:
        """`items`, already in key order, with this table's values each where its key falls."""
        self._place()
        if not self._keys:
            return items
        keys, values = self._keys, self._values
        merged: list[V] = []
        start = 0
        for item in items:
            index = bisect_left(keys, key(item), start)
            merged += values[start:index]
            merged.append(item)
            start = index
        merged += values[start:]
        return merged
