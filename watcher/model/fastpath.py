"""A typed fast path from watch lines and list pages straight to project()'s projection.

Decoding a 5 KiB Pod with orjson builds every field (managedFields, spec, IPs) only for
project() to drop most of it: about 30 us of decode and 30 us of projection per event,
plus the garbage collector chasing the discarded objects. Here msgspec decodes into
Structs that declare only the projected fields, so everything else is skipped in C, and
the Structs carry the limits project() enforces (lengths, entry counts, integer ranges).
The few rules a Struct cannot state (Pod conditions kept by type, interned tokens,
annotations kept by prefix, truncated lists, parseable timestamps, events.k8s.io names)
are applied after decoding, on the handful of fields that survive.

The fast path only answers when it is sure the result EQUALS project() of the same
object. Whenever it is not (a null, a wrong type, an over-long value, an entry project()
would drop, an ERROR event), it answers None and the caller takes the slow path
(orjson.loads + project()), so every lenient and strict rule and every MalformedObject
message keeps its meaning. Kinds without a Struct shape here always take the slow path.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, NamedTuple, TypeVar

import msgspec
import orjson
from msgspec import UNSET, Meta, Struct, UnsetType

# project()'s own tables, so that both paths keep the same kinds, conditions and names; a test
# checks that the Structs below decode exactly the fields project() keeps.
from watcher.model.projection import (
    EVENT_KINDS,
    EVENTS_V1_RENAMES,
    KEPT_ANNOTATIONS,
    MESSAGE_LIMIT,
    POD_CONDITIONS,
    SECTIONS,
    project,
)

_intern = sys.intern
_parse_time = datetime.fromisoformat

ObjectKey = tuple[str, str]
"""(namespace, name) within one kind."""


class Unsure(ValueError):
    """The fast path cannot promise project()'s result: take the slow path."""


# -- Field types: the limits project() enforces, so a violation fails decoding ------------------

Int = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
"""orjson turns a wider integer into a float, which project() rejects as not an integer."""
Token = Annotated[str, Meta(max_length=316)]
"""Interned after decoding (reasons, condition types, kinds repeat across objects)."""
RequiredToken = Annotated[str, Meta(min_length=1, max_length=316)]
Name = Annotated[str, Meta(max_length=253)]
RequiredName = Annotated[str, Meta(min_length=1, max_length=253)]
Message = Annotated[str, Meta(max_length=MESSAGE_LIMIT)]
Image = Annotated[str, Meta(max_length=1024)]
Time = str | None
"""Checked with datetime.fromisoformat after decoding, as project() does; null (as in a
condition's lastUpdateTime) reads as absent."""


def _time(value: str | None) -> str:
    if value:
        _parse_time(value)  # ValueError: project() would drop it
        return value
    return ""


def _interned(labels: dict[str, str]) -> dict[str, str]:
    return {_intern(k): _intern(v) for k, v in labels.items()}


class _Shape(Struct, omit_defaults=True, gc=False):
    """Lenient strings default to "" and everything else to UNSET, so to_builtins leaves
    out exactly what project() leaves out: absent fields and empty strings."""


class _Named(_Shape):
    apiVersion: Token = ""
    kind: Token = ""
    name: Name = ""

    def fix(self) -> None:
        self.apiVersion, self.kind = _intern(self.apiVersion), _intern(self.kind)


class _Ref(_Named):
    namespace: Name = ""


class _Owner(_Named):
    controller: bool | UnsetType = UNSET


class _ManagedField(_Shape):
    manager: Token = ""
    operation: Token = ""
    subresource: Token = ""
    time: Time = ""

    def fix(self) -> None:
        self.manager, self.operation = _intern(self.manager), _intern(self.operation)
        self.subresource = _intern(self.subresource)
        self.time = _time(self.time)


class _Condition(_Shape):
    type: RequiredToken
    status: RequiredToken
    reason: Token = ""
    message: Message = ""
    lastTransitionTime: Time = ""
    lastUpdateTime: Time = ""
    observedGeneration: Int | UnsetType = UNSET

    def fix(self) -> None:
        self.type, self.status, self.reason = _intern(self.type), _intern(self.status), _intern(self.reason)
        self.lastTransitionTime = _time(self.lastTransitionTime)
        self.lastUpdateTime = _time(self.lastUpdateTime)


Conditions = Annotated[list[_Condition], Meta(max_length=64)]


def _fix_all(items: list[Any] | UnsetType) -> None:
    for item in items or ():
        item.fix()


class _Metadata(_Shape):
    """Metadata of Pods and Events: no managedFields (project() keeps none for them)."""

    name: Name = ""
    namespace: Annotated[str, Meta(max_length=63)] | UnsetType = UNSET
    generation: Int | UnsetType = UNSET
    creationTimestamp: Time = ""
    deletionTimestamp: Time = ""
    labels: Annotated[dict[str, str], Meta(max_length=256)] | UnsetType = UNSET
    annotations: dict[str, str] | UnsetType = UNSET
    ownerReferences: Annotated[list[_Owner], Meta(max_length=32)] | UnsetType = UNSET
    resourceVersion: str = ""
    """Read by the caller, then cleared: not part of the projection."""
    uid: str = ""

    def fix(self) -> None:
        self.creationTimestamp = _time(self.creationTimestamp)
        self.deletionTimestamp = _time(self.deletionTimestamp)
        if self.namespace is not UNSET:
            self.namespace = _intern(self.namespace)
        if self.labels is not UNSET:
            self.labels = _interned(self.labels)
        if self.annotations is not UNSET:
            kept = {
                _intern(k): v[:MESSAGE_LIMIT]
                for k, v in self.annotations.items()
                if k.startswith(KEPT_ANNOTATIONS)
            }
            if len(kept) > 64:
                raise Unsure("too many kept annotations: project() names the object")
            self.annotations = kept
        _fix_all(self.ownerReferences)
        self.resourceVersion = self.uid = ""


class _MetadataWithHistory(_Metadata):
    managedFields: list[_ManagedField] | UnsetType = UNSET

    def fix(self) -> None:
        super().fix()
        if self.managedFields is not UNSET:
            self.managedFields = self.managedFields[:32]
            _fix_all(self.managedFields)


class _Object(_Shape):
    """A top-level object: its metadata (with or without history, per kind) and sections.
    fix() applies, in place and before to_builtins, what the Structs cannot say."""

    metadata: _Metadata

    def fix(self) -> None:
        self.metadata.fix()
        for name in ("spec", "status"):
            section = getattr(self, name, UNSET)
            if section is not UNSET:
                section.fix()


# -- Pods -------------------------------------------------------------------------------------


class _Reason(_Shape):
    reason: Token = ""

    def fix(self) -> None:
        self.reason = _intern(self.reason)


class _Waiting(_Reason):
    message: Message = ""


class _Running(_Shape):
    """Kept as a marker: {} when running."""


class _State(_Shape):
    waiting: _Waiting | UnsetType = UNSET
    running: _Running | UnsetType = UNSET
    terminated: _Reason | UnsetType = UNSET


class _LastState(_Shape):
    terminated: _Reason | UnsetType = UNSET


class _ContainerStatus(_Shape):
    name: RequiredToken
    image: Image = ""
    ready: bool | UnsetType = UNSET
    restartCount: Int | UnsetType = UNSET
    state: _State | UnsetType = UNSET
    lastState: _LastState | UnsetType = UNSET

    def fix(self) -> None:
        self.name, self.image = _intern(self.name), _intern(self.image)
        if self.state is not UNSET:
            for part in (self.state.waiting, self.state.terminated):
                if part is not UNSET:
                    part.fix()
        if self.lastState is not UNSET:
            if self.lastState.terminated is UNSET:
                self.lastState = UNSET  # project() drops an empty lastState
            else:
                self.lastState.terminated.fix()


ContainerStatuses = Annotated[list[_ContainerStatus], Meta(max_length=64)]


class _PodStatus(_Shape):
    phase: Token = ""
    reason: Token = ""
    startTime: Time = ""
    conditions: list[_Condition] | UnsetType = UNSET
    containerStatuses: ContainerStatuses | UnsetType = UNSET
    initContainerStatuses: ContainerStatuses | UnsetType = UNSET

    def fix(self) -> None:
        self.phase, self.reason = _intern(self.phase), _intern(self.reason)
        self.startTime = _time(self.startTime)
        if self.conditions is not UNSET:
            self.conditions = [c for c in self.conditions if c.type in POD_CONDITIONS]
            if len(self.conditions) > 64:
                raise Unsure("too many Pod conditions: project() names the object")
            _fix_all(self.conditions)
        _fix_all(self.containerStatuses)
        _fix_all(self.initContainerStatuses)


class _Pod(_Object):
    status: _PodStatus | UnsetType = UNSET


# -- Deployments, ReplicaSets, StatefulSets, DaemonSets ----------------------------------------


class _Container(_Shape):
    name: Token = ""
    image: Image = ""

    def fix(self) -> None:
        self.name = _intern(self.name)


Containers = Annotated[list[_Container], Meta(max_length=64)]


class _PodSpec(_Shape):
    containers: Containers | UnsetType = UNSET
    initContainers: Containers | UnsetType = UNSET


class _Template(_Shape):
    spec: _PodSpec | UnsetType = UNSET


class _Selector(_Shape):
    matchLabels: Annotated[dict[str, str], Meta(max_length=64)] | UnsetType = UNSET


class _RollingUpdate(_Shape):
    partition: Int | UnsetType = UNSET


class _UpdateStrategy(_Shape):
    type: Token = ""
    rollingUpdate: _RollingUpdate | UnsetType = UNSET


class _WorkloadSpec(_Shape):
    replicas: Int | UnsetType = UNSET
    selector: _Selector | UnsetType = UNSET
    progressDeadlineSeconds: Int | UnsetType = UNSET
    updateStrategy: _UpdateStrategy | UnsetType = UNSET
    template: _Template | UnsetType = UNSET

    def fix(self) -> None:
        if self.selector is not UNSET and self.selector.matchLabels is not UNSET:
            self.selector.matchLabels = _interned(self.selector.matchLabels)
        if self.updateStrategy is not UNSET:
            self.updateStrategy.type = _intern(self.updateStrategy.type)
        if self.template is not UNSET and self.template.spec is not UNSET:
            _fix_all(self.template.spec.containers)
            _fix_all(self.template.spec.initContainers)


class _WorkloadStatus(_Shape):
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
        _fix_all(self.conditions)


class _Workload(_Object):
    metadata: _MetadataWithHistory
    spec: _WorkloadSpec | UnsetType = UNSET
    status: _WorkloadStatus | UnsetType = UNSET


# -- Flux and tofu-controller custom resources -------------------------------------------------


class _DependsOn(_Ref, kw_only=True):
    name: RequiredName


class _ChartSpec(_Shape):
    chart: str = ""
    version: str = ""
    sourceRef: _Ref | UnsetType = UNSET

    def fix(self) -> None:
        if self.sourceRef is not UNSET:
            self.sourceRef.fix()


class _Chart(_Shape):
    spec: _ChartSpec | UnsetType = UNSET


class _GitOpsSpec(_Shape):
    interval: Token = ""
    retryInterval: Token = ""
    suspend: bool | UnsetType = UNSET
    sourceRef: _Ref | UnsetType = UNSET
    dependsOn: Annotated[list[_DependsOn], Meta(max_length=256)] | UnsetType = UNSET
    chart: _Chart | str | UnsetType = UNSET
    """An object in a HelmRelease; a HelmChart's spec.chart is a name, which project() drops."""
    chartRef: _Ref | UnsetType = UNSET
    releaseName: Name = ""
    targetNamespace: Name = ""
    storageNamespace: Name = ""
    approvePlan: str = ""

    def fix(self) -> None:
        self.interval, self.retryInterval = _intern(self.interval), _intern(self.retryInterval)
        for ref in (self.sourceRef, self.chartRef):
            if ref is not UNSET:
                ref.fix()
        if isinstance(self.chart, str):
            self.chart = UNSET
        elif self.chart is not UNSET and self.chart.spec is not UNSET:
            self.chart.spec.fix()
        _fix_all(self.dependsOn)


class _Artifact(_Shape):
    revision: str = ""
    digest: str = ""
    lastUpdateTime: Time = ""


class _InventoryEntry(_Shape):
    id: Annotated[str, Meta(min_length=1)]
    v: Token = ""

    def fix(self) -> None:
        self.v = _intern(self.v)


class _Inventory(_Shape):
    entries: Annotated[list[_InventoryEntry], Meta(max_length=100_000)] | UnsetType = UNSET


class _Release(_Shape):
    name: Name = ""
    namespace: Name = ""
    version: Int | UnsetType = UNSET
    status: Token = ""
    chartName: str = ""
    chartVersion: str = ""
    appVersion: str = ""
    digest: str = ""
    ociDigest: str = ""


class _Plan(_Shape):
    pending: str = ""


class _GitOpsStatus(_Shape):
    conditions: Conditions | UnsetType = UNSET
    observedGeneration: Int | UnsetType = UNSET
    lastAppliedRevision: str = ""
    lastAttemptedRevision: str = ""
    lastHandledReconcileAt: str = ""
    helmChart: str = ""
    artifact: _Artifact | UnsetType = UNSET
    inventory: _Inventory | UnsetType = UNSET
    history: list[_Release] | UnsetType = UNSET
    plan: _Plan | UnsetType = UNSET

    def fix(self) -> None:
        _fix_all(self.conditions)
        if self.artifact is not UNSET:
            self.artifact.lastUpdateTime = _time(self.artifact.lastUpdateTime)
        if self.inventory is not UNSET:
            _fix_all(self.inventory.entries)
        if self.history is not UNSET:
            self.history = self.history[:5]
            for release in self.history:
                release.status = _intern(release.status)


class _GitOps(_Object):
    metadata: _MetadataWithHistory
    spec: _GitOpsSpec | UnsetType = UNSET
    status: _GitOpsStatus | UnsetType = UNSET


# -- Leases and Events -------------------------------------------------------------------------


class _LeaseSpec(_Shape):
    holderIdentity: str = ""
    leaseDurationSeconds: Int | UnsetType = UNSET
    renewTime: Time = ""
    acquireTime: Time = ""
    leaseTransitions: Int | UnsetType = UNSET

    def fix(self) -> None:
        self.renewTime, self.acquireTime = _time(self.renewTime), _time(self.acquireTime)


class _Lease(_Object):
    metadata: _MetadataWithHistory
    spec: _LeaseSpec | UnsetType = UNSET


class _InvolvedObject(_Ref, kw_only=True):
    kind: RequiredToken
    name: RequiredName


class _Series(_Shape):
    count: Int | UnsetType = UNSET
    lastObservedTime: Time = ""


Maybe = UnsetType | None
"""Event fields: absent, or null (a core/v1 Event's eventTime is usually null), or a value."""


class _KubeEvent(_Object):
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
    series: _Series | Maybe = UNSET
    involvedObject: _InvolvedObject | Maybe = UNSET
    regarding: _InvolvedObject | Maybe = UNSET
    reportingController: Token | Maybe = UNSET

    def fix(self) -> None:
        self.metadata.fix()
        for name in _EVENT_TOKENS:
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, _intern(value))
        for name in _EVENT_TIMES:
            value = getattr(self, name)
            if isinstance(value, str):
                _time(value)
        if isinstance(self.series, _Series):
            self.series.lastObservedTime = _time(self.series.lastObservedTime)
        for ref in (self.involvedObject, self.regarding):
            if isinstance(ref, _Ref):
                ref.fix()


_EVENT_TOKENS = ("type", "reason", "reportingController")
_EVENT_TIMES = (
    "firstTimestamp",
    "deprecatedFirstTimestamp",
    "lastTimestamp",
    "deprecatedLastTimestamp",
    "eventTime",
)


def _event_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The core/v1 spelling of each field, nulls and empty strings left out."""
    for old, new in EVENTS_V1_RENAMES.items():
        if old in fields:
            if new in fields:
                raise Unsure(f"both {old} and {new}: which wins depends on their order")
            fields[new] = fields.pop(old)
    return {k: v for k, v in fields.items() if v is not None and v != ""}


# -- Decoders ---------------------------------------------------------------------------------


class Decoded(NamedTuple):
    """One watch event, decoded and projected."""

    type: str
    """ADDED, MODIFIED, DELETED or BOOKMARK (ERROR always takes the slow path)."""
    resource_version: str
    key: ObjectKey
    """(namespace, name); ("", "") for a BOOKMARK."""
    object: dict[str, Any] | None
    """The projection, equal to project()'s; None for a BOOKMARK."""


class Page(NamedTuple):
    """One list page: its items projected, and where the list goes on."""

    items: list[tuple[ObjectKey, dict[str, Any]]]
    resource_version: str
    continue_token: str


class _ListMeta(Struct, gc=False):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


Shape = TypeVar("Shape")


class _Watch(Struct, Generic[Shape], gc=False):
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: Shape


class _List(Struct, Generic[Shape], gc=False):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[Shape] = msgspec.field(default_factory=list)


_DECODE_ERRORS = (msgspec.MsgspecError, ValueError)
"""Unsure (a ValueError), a failed time parse, and anything msgspec refuses."""


class FastPath:
    """The decoders of one watched kind; apiVersion and kind come from the watched resource
    (list items carry neither), exactly as the reflector sets them before project()."""

    def __init__(self, api_version: str, kind: str, shape: type[_Object]) -> None:
        self.api_version, self.kind = _intern(api_version), _intern(kind)
        self.shape = shape
        self._watch: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_Watch[shape])  # type: ignore[valid-type]
        self._list: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_List[shape])  # type: ignore[valid-type]
        self._finish = _event_fields if shape is _KubeEvent else _sections

    def event(self, line: bytes) -> Decoded | None:
        """The decoded event, or None when only the slow path can be sure."""
        try:
            event = self._watch.decode(line)
            obj, kind = event.object, event.type
            rv = obj.metadata.resourceVersion
            if kind == "BOOKMARK":
                return Decoded(kind, rv, ("", ""), None)
            key, projected = self._project(obj)
        except _DECODE_ERRORS:
            return None
        return Decoded(kind, rv, key, projected)

    def page(self, body: bytes) -> Page | None:
        """The projected list page, or None when any item needs the slow path."""
        try:
            page = self._list.decode(body)
            items = [self._project(obj) for obj in page.items]
        except _DECODE_ERRORS:
            return None
        return Page(items, page.metadata.resourceVersion, page.metadata.continue_)

    def _project(self, obj: Any) -> tuple[ObjectKey, dict[str, Any]]:
        meta = obj.metadata
        if not meta.name:
            raise Unsure("no metadata.name: project() says so")
        key = (meta.namespace or "", meta.name)
        obj.fix()
        out = {"apiVersion": self.api_version, "kind": self.kind, **self._finish(msgspec.to_builtins(obj))}
        return key, out


def _sections(fields: dict[str, Any]) -> dict[str, Any]:
    """project() leaves out a spec or status with nothing kept in it."""
    for name in ("spec", "status"):
        if name in fields and not fields[name]:
            del fields[name]
    return fields


_SHAPES: dict[tuple[str, str], type[_Object]] = {
    ("", "Pod"): _Pod,
    ("apps", "Deployment"): _Workload,
    ("apps", "StatefulSet"): _Workload,
    ("apps", "DaemonSet"): _Workload,
    ("apps", "ReplicaSet"): _Workload,
    ("coordination.k8s.io", "Lease"): _Lease,
    **dict.fromkeys(EVENT_KINDS, _KubeEvent),
}
"""Built-in kinds with a fast path; every kind project() treats as a custom resource gets the
GitOps shape; the remaining built-ins (CRDs, Jobs, Services, ...) take the slow path."""

_CACHE: dict[tuple[str, str], FastPath | None] = {}


def fast_path(api_version: str, kind: str) -> FastPath | None:
    """The fast path of a watched kind, or None when it has none (built once per kind)."""
    key = (api_version, kind)
    if key not in _CACHE:
        group = api_version.rpartition("/")[0]
        shape = _SHAPES.get((group, kind))
        if shape is None and (group, kind) not in SECTIONS:
            shape = _GitOps
        _CACHE[key] = FastPath(api_version, kind, shape) if shape is not None else None
    return _CACHE[key]


def decode_event(line: bytes, *, api_version: str, kind: str) -> tuple[str, dict[str, Any] | None]:
    """(type, projection) of one watch line of the given kind, as orjson.loads + project()
    would give it: the fast path when it is sure, else exactly that slow path. The projection
    is None for BOOKMARK and ERROR events; a malformed object raises MalformedObject and an
    unreadable line orjson.JSONDecodeError, as the slow path does."""
    fast = fast_path(api_version, kind)
    decoded = fast.event(line) if fast is not None else None
    if decoded is not None:
        return decoded.type, decoded.object
    event = orjson.loads(line)
    obj = event["object"]
    if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
        return event["type"], None
    obj["apiVersion"], obj["kind"] = api_version, kind
    return event["type"], project(obj)
