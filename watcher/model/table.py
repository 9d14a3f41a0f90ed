"""A table of values kept sorted by key, for the engine's outputs.

Evaluations hand out lists in a fixed order (objects by key, findings by output order). Keeping
the values sorted as they change makes an output a copy, not a sort, and the same list is handed
out again until something changes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
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
        self._out: list[V] | None = None

    def set(self, key: K, value: V | None) -> None:
        """Insert, replace, or (with None) remove the value at `key`."""
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
            self._keys.insert(index, key)
            self._values.insert(index, value)
        self._out = None

    def values(self) -> list[V]:
        if self._out is None:
            self._out = list(self._values)
        return self._out

    def interleaved(self, items: list[V], key: Callable[[V], K]) -> list[V]:
        """`items`, already in key order, with this table's values each where its key falls."""
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
