"""What `stalewatch impact` answers, as types: a tree of the objects reached from the target,
each with what happens to it and why, and the one-line verdict over it (watcher.model.views.impact
builds it; watcher.export.impact prints it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from watcher.model.ingest.objects import Key, describe
from watcher.model.store.graph import Store, installer_name


class Effect(StrEnum):
    TARGET = "target"
    REMOVED = "removed"
    KEPT = "kept"
    DELETED = "deleted"
    CANNOT_WATCH = "cannot_watch"
    UNRECONCILED = "not_reconciled"
    BLOCKED = "blocked"


BREAKS = frozenset({Effect.DELETED, Effect.CANNOT_WATCH, Effect.UNRECONCILED, Effect.BLOCKED})
"""What happens to an object that is not by design: counted in the verdict."""


class Action(StrEnum):
    REMOVING = "removing"
    STOPPING = "stopping"


class Outcome(StrEnum):
    NOTHING = "nothing"
    """Nothing depends on it, and every kind the answer needs was looked at."""
    BREAKS = "breaks"
    UNKNOWN = "unknown"
    """Nothing found depending on it, but a kind the answer needs could not be looked at."""


@dataclass(frozen=True, slots=True)
class Node:
    key: Key
    effect: Effect
    why: str
    """What happens to it and because of what, naming the object it follows from ("" for the target)."""
    stack: Key | None
    """The Kustomization or HelmRelease it is (or that installed it; graph.claims' first)."""
    children: tuple[Node, ...] = ()

    def walk(self) -> Iterator[Node]:
        """This node and every node under it, parents first."""
        return (node for node, _ in self.levels())

    def levels(self) -> Iterator[tuple[Node, int]]:
        """walk() with each node's depth below this one; without recursion, since a dependsOn
        chain is as deep as a cluster makes it (see impact._tree)."""
        pending = [(self, 0)]
        while pending:
            node, depth = pending.pop()
            yield node, depth
            pending.extend((child, depth + 1) for child in reversed(node.children))


@dataclass(frozen=True, slots=True)
class Impact:
    root: Node
    action: Action
    installers: tuple[Key, ...]
    """Who installed the target."""
    blind: tuple[str, ...] = ()
    """Each kind the answer needs that could not be looked at, and why."""

    @property
    def broken(self) -> list[Node]:
        return [node for node in self.root.walk() if node.effect in BREAKS]

    @property
    def removed(self) -> list[Node]:
        return [node for node in self.root.walk() if node.effect is Effect.REMOVED]

    @property
    def stacks(self) -> list[Key]:
        """The stacks the broken objects are in, in tree order."""
        return list(dict.fromkeys(node.stack for node in self.broken if node.stack is not None))

    @property
    def outcome(self) -> Outcome:
        if self.broken:
            return Outcome.BREAKS
        return Outcome.UNKNOWN if self.blind else Outcome.NOTHING


class Sight(Protocol):
    """Which kinds were looked at: a snapshot's, or a cluster's lists."""

    def unseen(self, group: str, kind: str) -> str:
        """Why not every object of this kind was looked at ("none in the snapshot"); "" when all were."""
        ...


class SnapshotSight:
    """A snapshot looked at a kind if it holds an object of it: it cannot tell "none exist" from
    "none saved" (an empty `kubectl get` List names no kind)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def unseen(self, group: str, kind: str) -> str:
        return "" if self._store.raw_of_kind(group, kind) else "none in the snapshot"


def verdict(impact: Impact) -> str:
    """One line: what removing (stopping) the target does, and what could not be looked at."""
    what = f"{impact.action} {describe(impact.root.key)}"
    removed, broken, stacks = impact.removed, impact.broken, impact.stacks
    parts = [f"removes {_count(len(removed), 'object')} it installed"] if removed else []
    if broken:
        named = ", ".join(map(installer_name, stacks))
        where = f" in {_count(len(stacks), 'stack')} ({named})" if stacks else ""
        parts.append(f"breaks {_count(len(broken), 'object')}{where}")
        line = f"{what} {' and '.join(parts)}"
    elif impact.blind:
        line = f"{what} breaks nothing stalewatch saw, but it could not look at all it reads: not known safe"
    else:
        line = f"nothing depends on {describe(impact.root.key)}: {what} breaks nothing"
        line += f" (it removes {_count(len(removed), 'object')} it installed)" if removed else ""
    if impact.blind:
        line += "; not looked at: " + "; ".join(impact.blind)
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
