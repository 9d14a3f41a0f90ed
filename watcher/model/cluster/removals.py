"""CRDRemoved bookkeeping: only a model with memory sees a CustomResourceDefinition go away.

A CRD seen deleting (or deleted) yields one CRDRemoved finding listing the objects of its kind
at that moment, and those deleted just before it (store/orphans.py); the finding stays for the
retention threshold after the CRD is gone, and goes at once if the CRD comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watcher.model.ingest.objects import Key, is_deleting, subject_of, text
from watcher.model.rules.controllers import reconciles
from watcher.model.rules.dispatch import crd_removed
from watcher.model.store.deadlines import Deadlines
from watcher.model.store.graph import Store, claims, installer_name
from watcher.model.store.orphans import RecentlyDeleted
from watcher.model.types import Finding, ModelConfig


@dataclass(slots=True)
class _Removal:
    """A CustomResourceDefinition seen going away, and the objects of its kind at that moment."""

    finding: Finding
    gone_at: datetime | None = None


class Removals:
    """The CRDs seen going away, each with its finding, until its retention falls due."""

    def __init__(self, config: ModelConfig, store: Store, running: Callable[[], Collection[str]]) -> None:
        """`running`: the names of the controllers up now (they reconcile the orphans)."""
        self._config, self._store, self._running = config, store, running
        self._removals: dict[Key, _Removal] = {}
        self._deleted = RecentlyDeleted()
        self._due = Deadlines()

    def deleted(self, key: Key, obj: Mapping[str, Any], *, now: datetime) -> None:
        """A custom resource was deleted: it may be among the orphans of a CRD removal seen soon."""
        self._deleted.add(key, subject_of(obj), at=now)

    def track(self, key: Key, crd: Mapping[str, Any], *, deleted: bool, now: datetime) -> bool:
        """A CRD changed or went: whether the findings changed."""
        removal = self._removals.get(key)
        if not deleted and not is_deleting(crd):
            if removal is None:
                return False
            del self._removals[key]  # the CRD is back
            self._due.schedule(key, None)
            return True
        changed = False
        if removal is None:
            found = self._removal(crd, now=now)
            if found is None:
                return False
            removal = self._removals[key] = _Removal(found)
            changed = True
        if deleted and removal.gone_at is None:
            removal.gone_at = now
            self._due.schedule(key, now + self._config.thresholds.crd_removed_retention)
        return changed

    def pop_due(self, now: datetime) -> bool:
        """Forget the removals whose retention is over: whether there were any."""
        due = self._due.pop_due(now)
        for key in due:
            self._removals.pop(key, None)
        return bool(due)

    def findings(self) -> list[Finding]:
        return [r.finding for _, r in sorted(self._removals.items())]

    def _removal(self, crd: Mapping[str, Any], *, now: datetime) -> Finding | None:
        group, kind = text(crd, "spec", "group"), text(crd, "spec", "names", "kind")
        existing = {k: self._store.raw(k) for k in self._store.raw_of_kind(group, kind)}
        found = self._deleted.of_kind(group, kind, now=now)
        found.update((k, subject_of(obj)) for k, obj in existing.items() if obj is not None)
        orphans = [subject for _, subject in sorted(found.items())]
        claimers = [s.name for s in self._config.controllers if reconciles(s, group, kind)]
        running = self._running()
        running_ones = [name for name in claimers if name in running] or claimers
        installers = [installer_name(k) for k in dict.fromkeys(claims(self._store, crd))]
        return crd_removed(
            crd,
            orphans=orphans,
            reconcilers=running_ones,
            installers=installers,
            now=now,
            config=self._config,
        )
