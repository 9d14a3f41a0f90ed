"""Slim, validated projections of API objects: the only shape the model ever reads.

Both `stalewatch analyze` (files) and the live watcher call `project()` on every object
before it reaches the model, so the rules can trust types and never see a Secret's data,
a managedFields blob or a 50 KiB condition message. The live watcher keeps only these
projections, which is why they are small (a typical Pod is well under 2 KiB as JSON).

The schema below is declarative: one table of the fields the rules read. Per field it
says what happens when the value is wrong:
  * strict fields (kind, apiVersion, metadata.name/namespace/generation,
    status.observedGeneration, the status.conditions list itself, and anything beyond a
    sane size) raise MalformedObject: the object cannot be judged correctly without them;
  * every other field is lenient: a wrong-typed value or a bad list entry (a condition
    without type/status, a label whose value is not a string, an unparseable timestamp)
    is dropped and the rest of the object is kept.
Unknown fields are ignored. Long messages are truncated to MESSAGE_LIMIT characters.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MESSAGE_LIMIT = 1024
"""Condition and Event messages beyond this are cut (Flux messages can be tens of KiB)."""


class MalformedObject(ValueError):
    """The object cannot be used; the message is one line naming the object and the field."""


class _Drop(Exception):
    """A lenient field was wrong: leave it out and keep the object."""


Check = Callable[[Any, str], Any]


@dataclass(frozen=True, slots=True)
class _Str:
    limit: int | None = None
    strict: bool = False
    intern: bool = False

    def __call__(self, value: Any, path: str) -> Any:
        if not isinstance(value, str):
            _reject(self.strict, path, "is not a string")
        if self.limit is not None and len(value) > self.limit:
            if self.strict:
                raise MalformedObject(f"{path} is longer than {self.limit} characters")
            value = value[: self.limit - 1] + "…"
        return sys.intern(value) if self.intern else value


@dataclass(frozen=True, slots=True)
class _Int:
    strict: bool = False

    def __call__(self, value: Any, path: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            _reject(self.strict, path, "is not an integer")
        return value


def _bool(value: Any, path: str) -> Any:
    if not isinstance(value, bool):
        raise _Drop
    return value


def _time(value: Any, path: str) -> Any:
    """RFC3339 strings are kept as written; YAML-parsed datetimes are spelled back out."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if not isinstance(value, str):
        raise _Drop
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise _Drop from None
    return value


@dataclass(frozen=True, slots=True)
class _Labels:
    """A str->str map; entries with other values are dropped, too many is malformed."""

    limit: int
    keep: Callable[[str], bool] | None = None
    value_limit: int | None = None

    def __call__(self, value: Any, path: str) -> Any:
        if not isinstance(value, Mapping):
            raise _Drop
        kept = {
            sys.intern(k): v if self.value_limit is None else v[: self.value_limit]
            for k, v in value.items()
            if isinstance(k, str) and isinstance(v, str) and (self.keep is None or self.keep(k))
        }
        if len(kept) > self.limit:
            raise MalformedObject(f"{path} has {len(kept)} entries (more than {self.limit})")
        if not kept:
            raise _Drop
        return kept


@dataclass(frozen=True, slots=True)
class _Obj:
    fields: Mapping[str, Check]
    strict: bool = False
    """A value that is not a mapping at all is malformed (else it is dropped)."""
    required: tuple[str, ...] = ()
    """Entries that must be present; without them this (lenient) entry is dropped."""

    def __call__(self, value: Any, path: str) -> Any:
        if not isinstance(value, Mapping):
            _reject(self.strict, path, "is not an object")
        out: dict[str, Any] = {}
        for name, check in self.fields.items():
            if name not in value or value[name] is None:
                continue
            try:
                out[name] = check(value[name], f"{path}.{name}")
            except _Drop:
                continue
        if any(name not in out for name in self.required):
            raise _Drop
        return out


@dataclass(frozen=True, slots=True)
class _List:
    item: Check
    limit: int
    strict: bool = False
    truncate: bool = False
    """Keep only the first `limit` entries instead of calling a longer list malformed."""

    def __call__(self, value: Any, path: str) -> Any:
        if not isinstance(value, list):
            _reject(self.strict, path, "is not a list")
        if len(value) > self.limit:
            if not self.truncate:
                raise MalformedObject(f"{path} has {len(value)} entries (more than {self.limit})")
            value = value[: self.limit]
        out = []
        for index, entry in enumerate(value):
            try:
                out.append(self.item(entry, f"{path}[{index}]"))
            except _Drop:
                continue
        return out


def _reject(strict: bool, path: str, problem: str) -> Any:
    if strict:
        raise MalformedObject(f"{path} {problem}")
    raise _Drop


_S = _Str()
_NAME = _Str(limit=253)
_TOKEN = _Str(limit=316, intern=True)
_MESSAGE = _Str(limit=MESSAGE_LIMIT)
_I = _Int()
_REF = _Obj({"apiVersion": _TOKEN, "kind": _TOKEN, "name": _NAME, "namespace": _NAME})

_KEPT_ANNOTATIONS = (
    "reconcile.fluxcd.io/",
    "meta.helm.sh/",
    "helm.toolkit.fluxcd.io/",
    "kustomize.toolkit.fluxcd.io/",
)

_CONDITION = _Obj(
    {
        "type": _TOKEN,
        "status": _TOKEN,
        "reason": _TOKEN,
        "message": _MESSAGE,
        "lastTransitionTime": _time,
        "lastUpdateTime": _time,
        "observedGeneration": _I,
    },
    strict=True,
    required=("type", "status"),
)
_CONDITIONS = _List(_CONDITION, limit=64, strict=True)

_METADATA_FIELDS: dict[str, Check] = {
    "name": _Str(limit=253, strict=True),
    "namespace": _Str(limit=63, strict=True, intern=True),
    "uid": _S,
    "generation": _Int(strict=True),
    "creationTimestamp": _time,
    "deletionTimestamp": _time,
    "labels": _Labels(limit=256),
    "annotations": _Labels(
        limit=64, keep=lambda k: k.startswith(_KEPT_ANNOTATIONS), value_limit=MESSAGE_LIMIT
    ),
    "ownerReferences": _List(
        _Obj({"apiVersion": _TOKEN, "kind": _TOKEN, "name": _NAME, "uid": _S, "controller": _bool}),
        limit=32,
    ),
}
_MANAGED_FIELDS = _List(
    _Obj({"manager": _TOKEN, "operation": _TOKEN, "subresource": _TOKEN, "time": _time}),
    limit=32,
    truncate=True,
)
_CONTAINERS = _List(_Obj({"name": _TOKEN, "image": _Str(limit=1024)}), limit=64)
_SELECTOR = _Obj({"matchLabels": _Labels(limit=64)})

# -- Kind-specific spec and status fields -----------------------------------------------------

_GITOPS_SPEC: dict[str, Check] = {
    "interval": _TOKEN,
    "retryInterval": _TOKEN,
    "suspend": _bool,
    "sourceRef": _REF,
    "dependsOn": _List(
        _Obj({"name": _NAME, "namespace": _NAME, "kind": _TOKEN, "apiVersion": _TOKEN}, required=("name",)),
        limit=256,
    ),
    "chart": _Obj({"spec": _Obj({"chart": _S, "version": _S, "sourceRef": _REF})}),
    "chartRef": _REF,
    "releaseName": _NAME,
    "targetNamespace": _NAME,
    "storageNamespace": _NAME,
    "approvePlan": _S,
}
_GITOPS_STATUS: dict[str, Check] = {
    "conditions": _CONDITIONS,
    "observedGeneration": _Int(strict=True),
    "lastAppliedRevision": _S,
    "lastAttemptedRevision": _S,
    "lastHandledReconcileAt": _S,
    "helmChart": _S,
    "artifact": _Obj({"revision": _S, "digest": _S, "lastUpdateTime": _time}),
    "inventory": _Obj({"entries": _List(_Obj({"id": _S, "v": _TOKEN}, required=("id",)), limit=100_000)}),
    "history": _List(
        _Obj(
            {
                "name": _NAME,
                "namespace": _NAME,
                "version": _I,
                "status": _TOKEN,
                "chartName": _S,
                "chartVersion": _S,
                "appVersion": _S,
                "digest": _S,
                "ociDigest": _S,
            }
        ),
        limit=5,
        truncate=True,
    ),
    "plan": _Obj({"pending": _S}),
}

_WORKLOAD_SPEC: dict[str, Check] = {
    "replicas": _I,
    "selector": _SELECTOR,
    "progressDeadlineSeconds": _I,
    "updateStrategy": _Obj({"type": _TOKEN, "rollingUpdate": _Obj({"partition": _I})}),
    "template": _Obj({"spec": _Obj({"containers": _CONTAINERS, "initContainers": _CONTAINERS})}),
}
_WORKLOAD_STATUS: dict[str, Check] = {
    "conditions": _CONDITIONS,
    "observedGeneration": _Int(strict=True),
    **{
        name: _I
        for name in (
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "updatedReplicas",
            "currentReplicas",
            "unavailableReplicas",
            "fullyLabeledReplicas",
            "desiredNumberScheduled",
            "currentNumberScheduled",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberReady",
        )
    },
    "currentRevision": _S,
    "updateRevision": _S,
}

_STATE_TIMES: dict[str, Check] = {
    "reason": _TOKEN,
    "message": _MESSAGE,
    "startedAt": _time,
    "finishedAt": _time,
    "exitCode": _I,
}
_CONTAINER_STATE = _Obj(
    {"waiting": _Obj(_STATE_TIMES), "running": _Obj(_STATE_TIMES), "terminated": _Obj(_STATE_TIMES)}
)
_CONTAINER_STATUSES = _List(
    _Obj(
        {
            "name": _TOKEN,
            "image": _Str(limit=1024),
            "ready": _bool,
            "restartCount": _I,
            "state": _CONTAINER_STATE,
            "lastState": _CONTAINER_STATE,
        },
        required=("name",),
    ),
    limit=64,
)
_POD_CONDITIONS = ("Ready", "PodScheduled")
"""The only Pod conditions any rule reads (kstatus' Pod rule and ours); the rest is dropped."""

_POD_SPEC: dict[str, Check] = {"containers": _CONTAINERS, "initContainers": _CONTAINERS}
_POD_STATUS: dict[str, Check] = {
    "phase": _TOKEN,
    "reason": _TOKEN,
    "startTime": _time,
    "conditions": _CONDITIONS,
    "containerStatuses": _CONTAINER_STATUSES,
    "initContainerStatuses": _CONTAINER_STATUSES,
}

_LEASE_SPEC: dict[str, Check] = {
    "holderIdentity": _S,
    "leaseDurationSeconds": _I,
    "renewTime": _time,
    "acquireTime": _time,
    "leaseTransitions": _I,
}
_CRD_SPEC: dict[str, Check] = {
    "group": _TOKEN,
    "scope": _TOKEN,
    "names": _Obj({"kind": _TOKEN, "plural": _TOKEN}),
    "versions": _List(_Obj({"name": _TOKEN, "served": _bool, "storage": _bool}), limit=64),
}
_JOB_SPEC: dict[str, Check] = {"parallelism": _I, "completions": _I, "suspend": _bool}
_JOB_STATUS: dict[str, Check] = {
    "conditions": _CONDITIONS,
    "succeeded": _I,
    "active": _I,
    "failed": _I,
    "startTime": _time,
}
_SERVICE_SPEC: dict[str, Check] = {"type": _TOKEN, "clusterIP": _S}
_PVC_STATUS: dict[str, Check] = {"phase": _TOKEN}

_SECTIONS: dict[tuple[str, str], tuple[dict[str, Check], dict[str, Check]]] = {
    ("apps", "Deployment"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("apps", "StatefulSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("apps", "DaemonSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("apps", "ReplicaSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("", "Pod"): (_POD_SPEC, _POD_STATUS),
    ("coordination.k8s.io", "Lease"): (_LEASE_SPEC, {}),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (_CRD_SPEC, {"conditions": _CONDITIONS}),
    ("batch", "Job"): (_JOB_SPEC, _JOB_STATUS),
    ("", "Service"): (_SERVICE_SPEC, {}),
    ("", "PersistentVolumeClaim"): ({}, _PVC_STATUS),
    ("", "Secret"): ({}, {}),
    ("", "ConfigMap"): ({}, {}),
}
"""Built-in kinds; anything else is treated as a custom resource (the GitOps fields)."""

_EVENT_KINDS = {("", "Event"), ("events.k8s.io", "Event")}
_EVENT_FIELDS: dict[str, Check] = {
    "type": _TOKEN,
    "reason": _TOKEN,
    "message": _MESSAGE,
    "count": _I,
    "firstTimestamp": _time,
    "lastTimestamp": _time,
    "eventTime": _time,
    "series": _Obj({"count": _I, "lastObservedTime": _time}),
    "involvedObject": _Obj(
        {"apiVersion": _TOKEN, "kind": _TOKEN, "name": _NAME, "namespace": _NAME, "uid": _S},
        required=("kind", "name"),
    ),
    "reportingController": _TOKEN,
}
_EVENTS_V1_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedCount": "count",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
}
"""events.k8s.io/v1 spells the core/v1 fields differently; projections use the core/v1 names."""


def project(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only what the model reads, validated; raise MalformedObject when unusable."""
    if not isinstance(obj, Mapping):
        raise MalformedObject("object is not a mapping")
    kind, api_version, metadata = obj.get("kind"), obj.get("apiVersion"), obj.get("metadata")
    if not isinstance(kind, str) or not kind:
        raise MalformedObject("object has no kind")
    if not isinstance(api_version, str) or not api_version:
        raise MalformedObject(f"{kind}: object has no apiVersion")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise MalformedObject(f"{kind}: object has no metadata.name")
    where = (
        f"{kind} {metadata.get('namespace')}/{metadata['name']}"
        if metadata.get("namespace")
        else (f"{kind} {metadata['name']}")
    )
    try:
        return _project(obj, kind, api_version)
    except MalformedObject as error:
        raise MalformedObject(f"{where}: {error}") from None


def _project(obj: Mapping[str, Any], kind: str, api_version: str) -> dict[str, Any]:
    group = api_version.rpartition("/")[0]
    meta_fields = dict(_METADATA_FIELDS)
    if kind not in ("Pod", "Event"):
        meta_fields["managedFields"] = _MANAGED_FIELDS
    out: dict[str, Any] = {
        "apiVersion": sys.intern(api_version),
        "kind": sys.intern(kind),
        "metadata": _Obj(meta_fields, strict=True)(obj["metadata"], "metadata"),
    }
    if (group, kind) in _EVENT_KINDS:
        renamed = {_EVENTS_V1_RENAMES.get(k, k): v for k, v in obj.items()}
        out.update(_section(_EVENT_FIELDS, renamed, ""))
        return out
    spec_fields, status_fields = _SECTIONS.get((group, kind), (_GITOPS_SPEC, _GITOPS_STATUS))
    for name, fields in (("spec", spec_fields), ("status", status_fields)):
        section = _section(fields, obj.get(name), name) if fields else {}
        if section:
            out[name] = section
    if kind == "Pod" and "conditions" in out.get("status", {}):
        out["status"]["conditions"] = [c for c in out["status"]["conditions"] if c["type"] in _POD_CONDITIONS]
    return out


def _section(fields: Mapping[str, Check], value: Any, path: str) -> dict[str, Any]:
    """A top-level section: absent or not an object means empty (strictness is per field)."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, Any] = {}
    for name, check in fields.items():
        if name not in value or value[name] is None:
            continue
        try:
            out[name] = check(value[name], f"{path}.{name}" if path else name)
        except _Drop:
            continue
    return out
