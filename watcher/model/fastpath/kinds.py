"""Shapes of the built-in kinds stalewatch reads: Pods, workloads, Leases and Events."""

from __future__ import annotations

from typing import Annotated, Any, cast

from msgspec import UNSET, Meta, UnsetType

from watcher.model.fastpath.fields import (
    Condition,
    Conditions,
    Image,
    Int,
    Message,
    Metadata,
    MetadataWithHistory,
    Object,
    Ref,
    RequiredName,
    RequiredToken,
    Seconds,
    Shape,
    Time,
    Token,
    Unsure,
    checked_time,
    fix_all,
    intern,
    interned,
)
from watcher.model.graph import pack
from watcher.model.projection import EVENTS_V1_RENAMES, POD_CONDITIONS

# -- Pods -------------------------------------------------------------------------------------


class Reason(Shape):
    reason: Token = ""

    def fix(self) -> None:
        self.reason = intern(self.reason)


class Waiting(Reason):
    message: Message = ""


class Terminated(Reason):
    exitCode: Int | UnsetType = UNSET


class Running(Shape):
    """Kept as a marker: {} when running."""


class State(Shape):
    waiting: Waiting | UnsetType = UNSET
    running: Running | UnsetType = UNSET
    terminated: Terminated | UnsetType = UNSET


class LastState(Shape):
    terminated: Terminated | UnsetType = UNSET


class ContainerStatus(Shape):
    name: RequiredToken
    image: Image = ""
    ready: bool | UnsetType = UNSET
    restartCount: Int | UnsetType = UNSET
    state: State | UnsetType = UNSET
    lastState: LastState | UnsetType = UNSET

    def check(self) -> None:
        if self.lastState is not UNSET and self.lastState.terminated is UNSET:
            self.lastState = UNSET  # project() drops an empty lastState

    def fix(self) -> None:
        self.check()
        self.name, self.image = intern(self.name), intern(self.image)
        if self.state is not UNSET:
            for part in (self.state.waiting, self.state.terminated):
                if part is not UNSET:
                    part.fix()
        if self.lastState is not UNSET and self.lastState.terminated is not UNSET:
            self.lastState.terminated.fix()


ContainerStatuses = Annotated[list[ContainerStatus], Meta(max_length=64)]


class PodStatus(Shape):
    observedGeneration: Int | UnsetType = UNSET
    phase: Token = ""
    reason: Token = ""
    message: Message = ""
    startTime: Time = ""
    conditions: list[Condition] | UnsetType = UNSET
    containerStatuses: ContainerStatuses | UnsetType = UNSET
    initContainerStatuses: ContainerStatuses | UnsetType = UNSET

    def check(self) -> None:
        """What fix() does but interning (see Pod.packed)."""
        self.startTime = checked_time(self.startTime)
        if self.conditions is not UNSET:
            self.conditions = [c for c in self.conditions if c.type in POD_CONDITIONS]
            if len(self.conditions) > 64:
                raise Unsure("too many Pod conditions: project() names the object")
            for condition in self.conditions:
                condition.check()
        for statuses in (self.containerStatuses, self.initContainerStatuses):
            for status in statuses or ():
                status.check()

    def fix(self) -> None:
        self.check()
        self.phase, self.reason = intern(self.phase), intern(self.reason)
        fix_all(self.conditions)
        fix_all(self.containerStatuses)
        fix_all(self.initContainerStatuses)


class Pod(Object):
    status: PodStatus | UnsetType = UNSET

    def packed(self, api_version: str, kind: str) -> bytes | None:
        """The Store's packed form of a healthy() Pod's projection, else None (and the Pod is
        left for fix()). Its checks without fix()'s interning, which packed strings do not need."""
        if not self.healthy():
            return None
        self.metadata.check()
        status = cast(PodStatus, self.status)
        status.check()
        return pack(PackedPod(api_version, kind, self.metadata, status))

    def healthy(self) -> bool:
        """Running, Ready=True, not being deleted, no container waiting and none last killed for
        memory: what workloads.pod_state calls ready with nothing failing, so the Pod's only
        rule has no finding and nothing to wait for (a test holds the two to that). Read before
        fix() or after: it compares values, and fix() keeps the first Ready condition."""
        status, meta = self.status, self.metadata
        if status is UNSET or status.phase != "Running" or meta.deletionTimestamp:
            return False
        for condition in status.conditions or ():
            if condition.type == "Ready":  # the first one, as objects.condition() reads it
                if condition.status != "True":
                    return False
                break
        else:
            return False
        for statuses in (status.initContainerStatuses, status.containerStatuses):
            for cs in statuses or ():
                if cs.state is not UNSET and cs.state.waiting is not UNSET:
                    return False
                last = cs.lastState.terminated if cs.lastState is not UNSET else UNSET
                if last is not UNSET and last.reason == "OOMKilled":
                    return False
        return True


class PackedPod(Shape):
    """A Pod's projection in the order project() builds it: encoded, it is the packed dict."""

    apiVersion: str
    kind: str
    metadata: Metadata
    status: PodStatus | UnsetType = UNSET


# -- Deployments, ReplicaSets, StatefulSets, DaemonSets ----------------------------------------


class Container(Shape):
    name: Token = ""
    image: Image = ""

    def fix(self) -> None:
        self.name = intern(self.name)


Containers = Annotated[list[Container], Meta(max_length=64)]


class PodSpec(Shape):
    containers: Containers | UnsetType = UNSET
    initContainers: Containers | UnsetType = UNSET


class Template(Shape):
    spec: PodSpec | UnsetType = UNSET


class Selector(Shape):
    matchLabels: Annotated[dict[str, str], Meta(max_length=64)] | UnsetType = UNSET


class RollingUpdate(Shape):
    partition: Int | UnsetType = UNSET


class UpdateStrategy(Shape):
    type: Token = ""
    rollingUpdate: RollingUpdate | UnsetType = UNSET


class WorkloadSpec(Shape):
    replicas: Int | UnsetType = UNSET
    selector: Selector | UnsetType = UNSET
    progressDeadlineSeconds: Seconds | UnsetType = UNSET
    updateStrategy: UpdateStrategy | UnsetType = UNSET
    template: Template | UnsetType = UNSET

    def fix(self) -> None:
        if self.selector is not UNSET and self.selector.matchLabels is not UNSET:
            self.selector.matchLabels = interned(self.selector.matchLabels)
        if self.updateStrategy is not UNSET:
            self.updateStrategy.type = intern(self.updateStrategy.type)
        if self.template is not UNSET and self.template.spec is not UNSET:
            fix_all(self.template.spec.containers)
            fix_all(self.template.spec.initContainers)


class WorkloadStatus(Shape):
    conditions: Conditions | UnsetType = UNSET
    observedGeneration: Int | UnsetType = UNSET
    replicas: Int | UnsetType = UNSET
    readyReplicas: Int | UnsetType = UNSET
    availableReplicas: Int | UnsetType = UNSET
    updatedReplicas: Int | UnsetType = UNSET
    currentReplicas: Int | UnsetType = UNSET
    unavailableReplicas: Int | UnsetType = UNSET
    fullyLabeledReplicas: Int | UnsetType = UNSET
    desiredNumberScheduled: Int | UnsetType = UNSET
    currentNumberScheduled: Int | UnsetType = UNSET
    updatedNumberScheduled: Int | UnsetType = UNSET
    numberAvailable: Int | UnsetType = UNSET
    numberReady: Int | UnsetType = UNSET
    currentRevision: str = ""
    updateRevision: str = ""

    def fix(self) -> None:
        fix_all(self.conditions)


class Workload(Object):
    metadata: MetadataWithHistory
    spec: WorkloadSpec | UnsetType = UNSET
    status: WorkloadStatus | UnsetType = UNSET


# -- Leases and Events -------------------------------------------------------------------------


class LeaseSpec(Shape):
    holderIdentity: str = ""
    leaseDurationSeconds: Seconds | UnsetType = UNSET
    renewTime: Time = ""
    acquireTime: Time = ""
    leaseTransitions: Int | UnsetType = UNSET

    def fix(self) -> None:
        self.renewTime, self.acquireTime = checked_time(self.renewTime), checked_time(self.acquireTime)


class Lease(Object):
    metadata: MetadataWithHistory
    spec: LeaseSpec | UnsetType = UNSET


class InvolvedObject(Ref, kw_only=True):
    kind: RequiredToken
    name: RequiredName


class Series(Shape):
    count: Int | UnsetType = UNSET
    lastObservedTime: Time = ""


Maybe = UnsetType | None
"""Event fields: absent, or null (a core/v1 Event's eventTime is usually null), or a value."""


class KubeEvent(Object):
    """Both spellings (core/v1 and events.k8s.io/v1), reconciled in fix(): project() renames
    the events.k8s.io/v1 fields to their core/v1 names whatever the Event's group."""

    type: Token | Maybe = UNSET
    reason: Token | Maybe = UNSET
    message: Message | Maybe = UNSET
    note: Message | Maybe = UNSET
    count: Int | Maybe = UNSET
    deprecatedCount: Int | Maybe = UNSET
    firstTimestamp: Time | Maybe = UNSET
    deprecatedFirstTimestamp: Time | Maybe = UNSET
    lastTimestamp: Time | Maybe = UNSET
    deprecatedLastTimestamp: Time | Maybe = UNSET
    eventTime: Time | Maybe = UNSET
    series: Series | Maybe = UNSET
    involvedObject: InvolvedObject | Maybe = UNSET
    regarding: InvolvedObject | Maybe = UNSET
    reportingController: Token | Maybe = UNSET

    def fix(self) -> None:
        self.metadata.fix()
        for name in _EVENT_TOKENS:
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, intern(value))
        for name in _EVENT_TIMES:
            value = getattr(self, name)
            if isinstance(value, str):
                checked_time(value)
        if isinstance(self.series, Series):
            self.series.lastObservedTime = checked_time(self.series.lastObservedTime)
        for ref in (self.involvedObject, self.regarding):
            if isinstance(ref, Ref):
                ref.fix()


_EVENT_TOKENS = ("type", "reason", "reportingController")
_EVENT_TIMES = (
    "firstTimestamp",
    "deprecatedFirstTimestamp",
    "lastTimestamp",
    "deprecatedLastTimestamp",
    "eventTime",
)


def event_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The core/v1 spelling of each field, nulls and empty strings left out."""
    for old, new in EVENTS_V1_RENAMES.items():
        if old in fields:
            if new in fields:
                raise Unsure(f"both {old} and {new}: which wins depends on their order")
            fields[new] = fields.pop(old)
    return {k: v for k, v in fields.items() if v is not None and v != ""}
