"""What changed: a bounded, in-memory timeline of the live model's own transitions.

On-call asks "what changed before it broke?" before anything else. The live model already sees
every change it is fed and every conclusion it draws, so it records the few transitions that
answer that (see transitions.py for how each is derived): a root cause opened or resolved, a
controller down or up, a revision applied, Ready flipped, a Deployment's image changed.

Bounded in entries and in bytes: every text of an entry is cut (a revision or a condition
status is whatever the cluster wrote: 400 KB flipping back and forth would otherwise make one
answer hundreds of megabytes), and the newest entries are kept within both `limit` and
`budget`, the oldest dropped first; how many were dropped is said (a timeline that lost its
start must not look like a quiet past). In memory only: a restarted stalewatch starts an empty
timeline, it never invents history.

Pure, like the rest of the model: every entry carries the time it was given, never the clock's.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from watcher.model.ingest.kinds import CONTROLLER_WORKLOADS
from watcher.model.ingest.objects import group_of
from watcher.model.types import Finding, ObjectHealth, Subject, rfc3339


class Change(StrEnum):
    """The transitions recorded, from a FIXED set (the `type` of an entry)."""

    FINDING_OPENED = "finding_opened"
    FINDING_RESOLVED = "finding_resolved"
    CONTROLLER_DOWN = "controller_down"
    CONTROLLER_UP = "controller_up"
    REVISION_APPLIED = "revision_applied"
    READY_CHANGED = "ready_changed"
    IMAGE_CHANGED = "image_changed"


FINDING_CHANGES = frozenset({Change.FINDING_OPENED, Change.FINDING_RESOLVED})
"""Entries about the model's conclusions; the others are changes in the cluster it concluded from."""
MESSAGE_LIMIT = 240
"""An entry says what changed in one line; the condition message itself is on the object's page."""
VALUE_LIMIT = 160
"""A before, after or detail value past this is cut, with a digest of the whole: a revision is
an id (main@sha1:..., an OCI digest: well under it), and two long ones must stay apart."""
BUDGET = 32 * 2**20
"""The bytes of text a timeline keeps (by default): 100,000 entries cut as above could hold 200 MB."""
ENTRY_BYTES = 256
"""What an entry costs past its text (its object, its time, its dict): counted in the budget."""


def cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text`, or its first `limit` characters ending in `…`."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cut_value(text: str) -> str:
    """`text`, or its start and a digest of the whole (`main@sha1:aaaa… sha256:0123456789abcdef`),
    VALUE_LIMIT characters in all: two values cut the same differ in their digest."""
    if len(text) <= VALUE_LIMIT:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[: VALUE_LIMIT - 25]}… sha256:{digest}"


@dataclass(frozen=True, slots=True)
class Entry:
    """One transition: when, on what, from what to what, said in one line.

    `controller` is the configured controller the subject is (a controller workload) or that
    reconciles it (a GitOps object), when known. `details` holds what one type adds: the finding
    id, the ReplicaSet and its revision, the command that undoes a rollout.
    """

    at: datetime
    type: Change
    subject: Subject
    controller: str | None
    before: str
    after: str
    message: str
    details: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Every text cut, whoever made the entry: the timeline's bound holds for each."""
        setter = object.__setattr__
        setter(self, "before", cut_value(self.before))
        setter(self, "after", cut_value(self.after))
        setter(self, "message", cut(self.message))
        if self.controller is not None:
            setter(self, "controller", cut_value(self.controller))
        if any(len(value) > VALUE_LIMIT for value in self.details.values()):
            setter(self, "details", {name: cut_value(value) for name, value in self.details.items()})

    @property
    def size(self) -> int:
        """The bytes it holds, roughly: its texts (UTF-8) and ENTRY_BYTES."""
        texts = [self.before, self.after, self.message, self.controller or "", self.path]
        texts += [self.subject["apiVersion"], *self.details.keys(), *self.details.values()]
        return ENTRY_BYTES + sum(len(text.encode("utf-8", "surrogatepass")) for text in texts)

    @property
    def path(self) -> str:
        """KIND/NAMESPACE/NAME, what `?subject=` matches (a prefix of it)."""
        return subject_path(self.subject)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of one entry of `/api/v1/timeline`."""
        return {
            "time": rfc3339(self.at),
            "type": str(self.type),
            "subject": dict(self.subject),
            "controller": self.controller,
            "before": self.before,
            "after": self.after,
            "message": self.message,
            "details": dict(self.details),
        }


def subject_path(subject: Subject) -> str:
    return f"{subject['kind']}/{subject['namespace']}/{subject['name']}"


class Timeline:
    """The newest entries within `limit` entries and `budget` bytes (Entry.size), oldest first
    in memory, handed out newest first."""

    def __init__(self, *, limit: int, budget: int = BUDGET) -> None:
        self.limit, self.budget = limit, budget
        self._entries: deque[Entry] = deque()
        self._sizes: deque[int] = deque()
        self.bytes = 0
        """The sizes of the entries kept, summed."""
        self.dropped = 0
        """Entries dropped to stay within `limit` and `budget` since the process started."""
        self.comparing_since: datetime | None = None
        """From when evaluations are compared (root causes, controllers): the first evaluation
        after every kind was listed. None until then: what is open then was open before."""

    def __len__(self) -> int:
        return len(self._entries)

    def extend(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            size = entry.size
            self._entries.append(entry)
            self._sizes.append(size)
            self.bytes += size
            while len(self._entries) > self.limit or (self.bytes > self.budget and len(self._entries) > 1):
                self._entries.popleft()
                self.bytes -= self._sizes.popleft()
                self.dropped += 1

    @property
    def oldest(self) -> datetime | None:
        """When the oldest entry kept happened (None when empty)."""
        return self._entries[0].at if self._entries else None

    def snapshot(self) -> Snapshot:
        """What a view renders, taken at once on the event loop (a renderer may run in a thread)."""
        return Snapshot(self.newest_first(), dropped=self.dropped, comparing_since=self.comparing_since)

    def newest_first(self) -> list[Entry]:
        """A copy, so a renderer in another thread reads a list no event changes under it."""
        return list(reversed(self._entries))

    def query(self, *, since: datetime | None = None, subject: str = "", limit: int) -> list[Entry]:
        """Newest first: at most `limit` entries at or after `since` whose KIND/NAMESPACE/NAME
        starts with `subject`."""
        found: list[Entry] = []
        for entry in reversed(self._entries):
            if len(found) == limit:
                break
            if since is not None and entry.at < since:
                continue  # insertion order is time order unless the clock stepped back: look at all
            if subject and not entry.path.startswith(subject):
                continue
            found.append(entry)
        return found


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The timeline at one moment: its entries newest first, and what it cannot show."""

    entries: Sequence[Entry]
    dropped: int = 0
    comparing_since: datetime | None = None


def reconciler_of(subject: Subject, objects: Sequence[ObjectHealth]) -> str | None:
    """The controller the model says reconciles `subject`, from an Evaluation's objects (which the
    model keeps in key order, so this is a bisection, not a scan); None for a non-GitOps subject."""
    key = (group_of(subject["apiVersion"]), subject["kind"], subject["namespace"], subject["name"])
    index = bisect.bisect_left(objects, key, key=_health_key)
    if index < len(objects) and _health_key(objects[index]) == key:
        return objects[index].controller
    return None


def _health_key(health: ObjectHealth) -> tuple[str, str, str, str]:
    s = health.subject
    return group_of(s["apiVersion"]), s["kind"], s["namespace"], s["name"]


def root_changes(
    root: Finding, objects: Sequence[ObjectHealth], entries: Sequence[Entry], *, limit: int
) -> list[Entry]:
    """The changes that preceded a root cause: on its subject and on its controller's workload
    (the controller named in its evidence, else the one reconciling its subject)."""
    named = root.evidence.get("controller")
    controller = named if isinstance(named, str) else reconciler_of(root.subject, objects)
    return preceding(entries, subject=root.subject, controller=controller, limit=limit)


def preceding(
    entries: Sequence[Entry], *, subject: Subject, controller: str | None, limit: int
) -> list[Entry]:
    """The changes in the cluster that came before a root cause: on its subject, or on the
    workload of the controller that reconciles it (`controller`, its image and its up/down),
    newest first (`entries` are), at most `limit`. The root's own findings are not changes
    that preceded it: the card says when it started."""
    path = subject_path(subject)
    found: list[Entry] = []
    for entry in entries:
        if entry.type in FINDING_CHANGES:
            continue
        # a workload's entry names the controller it IS; a GitOps object's, the one reconciling it
        on_controller = (
            controller is not None
            and entry.controller == controller
            and entry.subject["kind"] in CONTROLLER_WORKLOADS
        )
        if on_controller or entry.path == path:
            found.append(entry)
            if len(found) == limit:
                break
    return found
