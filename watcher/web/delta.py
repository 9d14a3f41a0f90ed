"""What changed between two renderings of a view's parts: the body of a live-stream event.

The browser applies a delta to the page it has and must end up with the page a reload would
give: the same parts, in the same order, in the same containers. So a delta says which parts
to remove, which to replace in place (same id and container, new HTML) and which to insert,
each before the part that follows it in its container (or at the container's end). A part
that moved (a row that turned bad sorts first; a part that changed container) is removed and
inserted again. Within a container the parts that keep their relative order are the longest
increasing run of their old positions, so a re-sort moves as few parts as it must.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from watcher.web.parts import Part


@dataclass(frozen=True, slots=True)
class Added:
    part: Part
    before: str | None
    """The id of the part it goes before, in its container; None: at the container's end."""


@dataclass(frozen=True, slots=True)
class Delta:
    """Apply `removed`, then `changed`, then `added` from last to first (so every `before`
    names a part already in place)."""

    changed: list[Part] = field(default_factory=list)
    added: list[Added] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.added or self.removed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": [part_dict(p) for p in self.changed],
            "added": [{**part_dict(a.part), "before": a.before} for a in self.added],
            "removed": self.removed,
        }


def part_dict(part: Part) -> dict[str, str]:
    return {"id": part.id, "container": part.container, "html": part.html}


def delta(old: Sequence[Part], new: Sequence[Part]) -> Delta:
    """From `old` to `new` (both in document order, ids unique in each)."""
    was = {p.id: (i, p) for i, p in enumerate(old)}
    kept = _kept_in_place(was, new)
    result = Delta(removed=[p.id for p in old if p.id not in kept])
    for part, following in zip(new, _following(new), strict=True):
        if part.id not in kept:
            result.added.append(Added(part, following))
        elif was[part.id][1].html != part.html:
            result.changed.append(part)
    return result


def full(parts: Sequence[Part]) -> Delta:
    """Every part, as insertions: what a client that has nothing needs."""
    return Delta(added=[Added(p, f) for p, f in zip(parts, _following(parts), strict=True)])


def _kept_in_place(was: dict[str, tuple[int, Part]], new: Sequence[Part]) -> set[str]:
    """Ids of the parts that stay where they are: same container, and, per container, the
    longest run of them whose old positions increase in the new order."""
    runs: dict[str, list[tuple[int, str]]] = {}
    for part in new:
        before = was.get(part.id)
        if before is not None and before[1].container == part.container:
            runs.setdefault(part.container, []).append((before[0], part.id))
    kept: set[str] = set()
    for run in runs.values():
        kept.update(_longest_increasing(run))
    return kept


def _longest_increasing(run: list[tuple[int, str]]) -> list[str]:
    """Patience sorting: O(n log n) over (old position, id) pairs in new order."""
    tails: list[int] = []
    tail_at: list[int] = []
    back: list[int] = [-1] * len(run)
    for i, (position, _) in enumerate(run):
        k = bisect.bisect_left(tails, position)
        if k == len(tails):
            tails.append(position)
            tail_at.append(i)
        else:
            tails[k], tail_at[k] = position, i
        back[i] = tail_at[k - 1] if k else -1
    chain, i = [], tail_at[-1] if tail_at else -1
    while i >= 0:
        chain.append(run[i][1])
        i = back[i]
    return chain


def _following(parts: Sequence[Part]) -> list[str | None]:
    """For each part, the id of the next part in its container (None for the last)."""
    following: list[str | None] = [None] * len(parts)
    after: dict[str, str] = {}
    for i in range(len(parts) - 1, -1, -1):
        following[i] = after.get(parts[i].container)
        after[parts[i].container] = parts[i].id
    return following
