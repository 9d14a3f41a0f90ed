"""The rules judged across objects, not one object at a time, as the engine sees them: one place.

CRDRemoved (removals.py), CRDOwnershipRisk (crd_risk.py), PruneOrphan (prune.py),
ConflictingWriters (rules/writers.py) and the policy compliance report (compliance.py) each keep their
own incremental state; the engine hands them what changed since the last evaluation and asks
only whether correlation must run again. Keeping them together keeps that contract in one place,
and the engine's evaluation readable.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from watcher.model.cluster.compliance import Compliance, ComplianceReport
from watcher.model.cluster.crd_risk import CRDRisks
from watcher.model.cluster.prune import KUSTOMIZATION, PruneOrphans
from watcher.model.cluster.removals import Removals
from watcher.model.ingest.objects import Key
from watcher.model.rules.controllers import ControllerState
from watcher.model.rules.writers import Writers
from watcher.model.store.graph import Edge, Store
from watcher.model.types import Finding, ModelConfig


class ClusterRules:
    """The cross-object rules of one model, fed with its changes."""

    def __init__(self, config: ModelConfig, store: Store, *, running: Callable[[], Collection[str]]) -> None:
        self._removals = Removals(config, store, running)
        self._risks = CRDRisks(config, store)
        self._orphans = PruneOrphans(config, store)
        self._compliance = Compliance(store)
        self._writers = Writers(config)
        self._blindness_changed = False
        """Every policy object is read again (compliance.py): a kind's objects came or went from view."""

    def observe(
        self, key: Key, obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, now: datetime
    ) -> None:
        """An object with managedFields was put (its field sets are replaced by their hashes here)."""
        self._writers.observe(key, obj, old, now=now)

    def deleted(self, key: Key, old: Mapping[str, Any] | None, *, gitops: bool, now: datetime) -> None:
        """An object was deleted (`old`: its last version, None when the model did not hold it)."""
        self._writers.forget(key)
        if old is None:
            return
        if gitops:
            self._removals.deleted(key, old, now=now)
        if (key.group, key.kind) == KUSTOMIZATION:
            self._orphans.deleted(key)

    def crd_changed(self, key: Key, crd: Mapping[str, Any], *, deleted: bool, now: datetime) -> bool:
        """A CRD came, changed or went: whether correlation must run again."""
        return self._removals.track(key, crd, deleted=deleted, now=now)

    def blindness_changed(self) -> None:
        self._blindness_changed = True
        self._orphans.judge_all_again()

    def pop_due(self, now: datetime) -> bool:
        """Whether a threshold of one of them fell due."""
        removals = self._removals.pop_due(now)
        orphans = self._orphans.pop_due(now)
        return removals or orphans or self._writers.due(now)

    def refresh(
        self,
        touched: Collection[Key],
        edges: Collection[Edge],
        *,
        controllers: Sequence[ControllerState],
        everything: bool,
        now: datetime,
    ) -> bool:
        """Judge what the touched objects and edges (and time) may have changed: whether
        correlation must run again. `everything`: controllers or what is visible changed."""
        recheck = self._risks.refresh(touched, edges, controllers=controllers, everything=everything)
        recheck |= self._orphans.refresh(touched, now=now)
        self._compliance.refresh(touched, everything=self._blindness_changed)
        self._blindness_changed = False
        recheck |= self._compliance.take_moved()  # a PolicyDenied may name a constraint that came or went
        if self._writers.due(now):
            recheck |= self._writers.refresh(now)
        return recheck

    def reads(self, key: Key) -> bool:
        """Whether a change of `key` alone could change what they find (ConflictingWriters and
        CRDRemoved follow the objects they are given through observe, deleted and crd_changed)."""
        return self._risks.reads(key) or self._orphans.reads(key) or self._compliance.reads(key)

    def findings(self) -> list[Finding]:
        return (
            self._removals.findings()
            + self._risks.findings()
            + self._orphans.findings()
            + self._writers.findings()
        )

    def policy_objects(self, engine: str, name: str, namespace: str) -> list[Key]:
        return self._compliance.policy_objects(engine, name, namespace)

    @property
    def report(self) -> ComplianceReport:
        return self._compliance.report
