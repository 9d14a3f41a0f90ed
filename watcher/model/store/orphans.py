"""Custom resources deleted moments ago, still counted among a removed CRD's orphans.

When a CRD is deleted, the API server marks it deleting, deletes its objects, then the CRD.
The watcher sees the CRD on one watch and its objects on another, so their deletions can arrive
in either order: the objects first, and the model would find no objects of the kind left when
it learns the CRD is going, losing the blast radius CRDRemoved exists to show. So deleted custom
resources are remembered for a short window, and a CRD removal seen within it counts them too.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from watcher.model.ingest.objects import Key
from watcher.model.types import Subject

ORPHAN_WINDOW = timedelta(minutes=2)
"""How long a deleted object may precede its CRD's removal and still count as orphaned by it:
the API server deletes them within seconds of each other; the rest is a watch's lag."""


class RecentlyDeleted:
    """Deleted objects by kind, each with when it was deleted, kept for ORPHAN_WINDOW."""

    def __init__(self) -> None:
        self._by_kind: dict[tuple[str, str], dict[Key, tuple[Subject, datetime]]] = defaultdict(dict)

    def add(self, key: Key, subject: Subject, *, at: datetime) -> None:
        recent = self._by_kind[key.group, key.kind]
        for old in [k for k, (_, when) in recent.items() if when < at - ORPHAN_WINDOW]:
            del recent[old]
        recent[key] = (subject, at)

    def of_kind(self, group: str, kind: str, *, now: datetime) -> dict[Key, Subject]:
        """Those of this kind deleted within ORPHAN_WINDOW before `now`."""
        recent = self._by_kind.get((group, kind), {})
        return {k: subject for k, (subject, when) in recent.items() if now - ORPHAN_WINDOW <= when <= now}
