"""The families with one entry per GitOps object, rendered again block by block.

A scrape used to walk every ObjectHealth and RevisionInfo to find its cached text: at 200,000
objects about 0.5 s of Python, holding the GIL while the evaluation waited for it, on every
scrape, although a churn pass changes a few hundred entries. The model hands out its sorted
lists with each unchanged entry as the same object (SortedTable), so the list is cut into blocks
of BLOCK entries, and a block keeps its lines when its entries are the same as the last
scrape's block at that place and the earlier blocks hold the same of its label sets as then (a
list comparison and two set tests, all in C). Any other block is rebuilt entry by entry, each
unchanged entry's lines reused; an insertion or a removal shifts the blocks after it, which are
then rebuilt that way, as every block was before.

The first entry with given label values wins, across the whole list: two series with the same
labels would make Prometheus drop samples.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from watcher.export.families import Family, Rendered, Values

BLOCK = 32
"""Entries per block: a changed entry costs the rebuilding of its block's other entries from
their cached lines, an unchanged block a slice and a comparison. Between two scrapes 15 s apart
the benchmark's churn changes some 500 entries of 200,000 objects' 100,000: with 32 a scrape
rebuilds about a fifth of the entries, with 256 nearly all of them."""

Row = tuple[object, list[str]]
"""An entry (kept so that its id stays its own) and its lines, one text per family."""


@dataclass(slots=True)
class _Block:
    items: list[Any]
    """The entries as handed out, duplicates included."""
    keys: set[Values] = field(default_factory=set)
    """The label values of the entries it kept."""
    yielded: set[Values] = field(default_factory=set)
    """The label values of the entries it left to an earlier block's."""
    kept: list[Any] = field(default_factory=list)
    rows: dict[int, Row] = field(default_factory=dict)
    """The kept entries' lines, by id."""
    lines: list[list[str]] = field(default_factory=list)
    """Per family, the kept entries' lines (the rows' own strings: nothing is copied)."""


class Itemized:
    """One group's families over the entries of one of the model's lists, scrape after scrape."""

    def __init__(self, families: Sequence[Family], *, key: Callable[[Any], Values]) -> None:
        self._families = tuple(families)
        self._texts = [family.text for family in self._families]
        self._key = key
        self._blocks: list[_Block] = []

    def render(self, items: Sequence[Any]) -> list[Rendered]:
        entries = items if isinstance(items, list) else list(items)
        parts = [entries[start : start + BLOCK] for start in range(0, len(entries), BLOCK)]
        previous = self._blocks
        same = [index < len(previous) and previous[index].items == part for index, part in enumerate(parts)]
        lines: dict[int, Row] = {}
        """Lines to reuse: those of the blocks that are not kept whole (an entry is in one place)."""
        for index, block in enumerate(previous):
            if index >= len(same) or not same[index]:
                lines.update(block.rows)
        seen: set[Values] = set()
        blocks = []
        for index, part in enumerate(parts):
            whole = previous[index] if same[index] else None
            if whole is not None and seen.isdisjoint(whole.keys) and whole.yielded <= seen:
                block = whole
            else:
                if whole is not None:  # the same entries, but the earlier blocks' labels moved
                    lines.update(whole.rows)
                block = self._build(part, seen, lines)
            seen |= block.keys
            blocks.append(block)
        self._blocks = blocks
        kept = list(itertools.chain.from_iterable(block.kept for block in blocks))
        return [
            Rendered(
                family, kept, list(itertools.chain.from_iterable(block.lines[index] for block in blocks))
            )
            for index, family in enumerate(self._families)
        ]

    def _build(self, part: list[Any], seen: set[Values], lines: dict[int, Row]) -> _Block:
        block = _Block(part)
        block.lines = [[] for _ in self._families]
        for item in part:
            key = self._key(item)
            if key in seen:
                block.yielded.add(key)
                continue
            if key in block.keys:
                continue
            block.keys.add(key)
            block.kept.append(item)
            row = lines.get(id(item))
            if row is None or row[0] is not item:
                row = (item, [text(item) for text in self._texts])
            block.rows[id(item)] = row
            for chunk, text in zip(block.lines, row[1], strict=True):
                chunk.append(text)
        return block
