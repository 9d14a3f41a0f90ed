"""The shape shared by Flux and tofu-controller custom resources (every kind project() treats
as a custom resource)."""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from watcher.model.fastpath.fields import (
    Conditions,
    Int,
    MetadataWithHistory,
    Name,
    Object,
    Ref,
    RequiredName,
    Shape,
    Time,
    Token,
    checked_time,
    fix_all,
    intern,
)

# -- Flux and tofu-controller custom resources -------------------------------------------------


class DependsOn(Ref, kw_only=True):
    name: RequiredName


class ChartSpec(Shape):
    chart: str = ""
    version: str = ""
    sourceRef: Ref | UnsetType = UNSET

    def fix(self) -> None:
        if self.sourceRef is not UNSET:
            self.sourceRef.fix()


class Chart(Shape):
    spec: ChartSpec | UnsetType = UNSET


class GitOpsSpec(Shape):
    interval: Token = ""
    retryInterval: Token = ""
    suspend: bool | UnsetType = UNSET
    sourceRef: Ref | UnsetType = UNSET
    dependsOn: Annotated[list[DependsOn], Meta(max_length=256)] | UnsetType = UNSET
    chart: Chart | str | UnsetType = UNSET
    """An object in a HelmRelease; a HelmChart's spec.chart is a name, which project() drops."""
    chartRef: Ref | UnsetType = UNSET
    releaseName: Name = ""
    targetNamespace: Name = ""
    storageNamespace: Name = ""
    approvePlan: str = ""

    def fix(self) -> None:
        self.interval, self.retryInterval = intern(self.interval), intern(self.retryInterval)
        for ref in (self.sourceRef, self.chartRef):
            if ref is not UNSET:
                ref.fix()
        if isinstance(self.chart, str):
            self.chart = UNSET
        elif self.chart is not UNSET and self.chart.spec is not UNSET:
            self.chart.spec.fix()
        fix_all(self.dependsOn)


class Artifact(Shape):
    revision: str = ""
    digest: str = ""
    lastUpdateTime: Time = ""


class InventoryEntry(Shape):
    id: Annotated[str, Meta(min_length=1)]
    v: Token = ""

    def fix(self) -> None:
        self.v = intern(self.v)


class Inventory(Shape):
    entries: Annotated[list[InventoryEntry], Meta(max_length=100_000)] | UnsetType = UNSET


class Release(Shape):
    name: Name = ""
    namespace: Name = ""
    version: Int | UnsetType = UNSET
    status: Token = ""
    chartName: str = ""
    chartVersion: str = ""
    appVersion: str = ""
    digest: str = ""
    ociDigest: str = ""


class Plan(Shape):
    pending: str = ""


class GitOpsStatus(Shape):
    conditions: Conditions | UnsetType = UNSET
    observedGeneration: Int | UnsetType = UNSET
    lastAppliedRevision: str = ""
    lastAttemptedRevision: str = ""
    lastHandledReconcileAt: str = ""
    helmChart: str = ""
    artifact: Artifact | UnsetType = UNSET
    inventory: Inventory | UnsetType = UNSET
    history: list[Release] | UnsetType = UNSET
    plan: Plan | UnsetType = UNSET

    def fix(self) -> None:
        fix_all(self.conditions)
        if self.artifact is not UNSET:
            self.artifact.lastUpdateTime = checked_time(self.artifact.lastUpdateTime)
        if self.inventory is not UNSET:
            fix_all(self.inventory.entries)
        if self.history is not UNSET:
            self.history = self.history[:5]
            for release in self.history:
                release.status = intern(release.status)


class GitOps(Object):
    metadata: MetadataWithHistory
    spec: GitOpsSpec | UnsetType = UNSET
    status: GitOpsStatus | UnsetType = UNSET
