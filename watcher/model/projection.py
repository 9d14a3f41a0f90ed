"""Slim, validated projections of API objects: the only shape the model ever reads.

Both `stalewatch analyze` (files) and the live watcher call `project()` on every object
before it reaches the model, so the rules can trust types and never see a Secret's data,
a managedFields blob or a 50 KiB condition message. The live watcher keeps only these
projections, which is why they are small: a typical Pod is under 1 KiB as JSON (about
2.2 KiB as Python objects). A Pod keeps no spec (its images are in containerStatuses),
container states keep no times, managedFields shrink to who wrote when (not for Pods
and Events), and an empty string is left out (it reads the same as absent).

The schema below is declarative: one table of the fields the rules read. Per field it
says what happens when the value is wrong:
  * strict fields (kind, apiVersion, metadata.name/namespace/generation,
    status.observedGeneration, the status.conditions list itself, and anything beyond a
    sane size) raise MalformedObject: the object cannot be judged correctly without them;
  * every other field is lenient: a wrong-typed value or a bad list entry (a condition
    without type/status, a label whose value is not a string, an unparseable timestamp)
    is dropped and the rest of the object is kept;
  * a value of the right type but out of range (a timestamp outside years 1-9999 once in
    UTC, an integer past int64 or a number where a count belongs, a number of seconds past
    a century) is REJECTED: in a strict field that is MalformedObject; in a lenient one the
    field is dropped, the rest kept, and the projection says so under `rejected` (a list of
    {field, reason, value}; a types.RejectReason each), which the model reports. Nothing
    downstream ever meets such a value, so no rule has to guard its arithmetic.
Unknown fields are ignored. Long messages are truncated to MESSAGE_LIMIT characters.
events.k8s.io/v1 Events are projected under their core/v1 field names.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

from watcher.model.objects import MAX_DURATION_SECONDS
from watcher.model.types import RejectReason

MESSAGE_LIMIT = 1024
"""Condition and Event messages beyond this are cut (Flux messages can be tens of KiB)."""
VALUE_LIMIT = 120
"""A rejected value is quoted up to this many characters."""
MAX_REJECTED = 256
"""More out-of-range values than this in one object section is malformed."""
REJECTED = "rejected"
"""The projection's key for its rejected fields (no Kubernetes object has one at top level)."""
INT64 = 2**63


class MalformedObject(ValueError):
    """The object cannot be used; the message is one line naming the object and the field."""


class _Drop(Exception):
    """A lenient field was wrong: leave it out and keep the object."""


class _Located(Exception):
    """Raised from a field; each enclosing level adds its step to `path` on the way out."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []

    def steps(self) -> list[str]:
        return self.path[::-1]

    def where(self) -> str:
        return "".join(step if step.startswith("[") else f".{step}" for step in self.steps()).lstrip(".")


class _Malformed(_Located):
    """A strict field was wrong."""


class _OutOfRange(_Located):
    """A lenient field had the right type but a value out of range: drop it and say so."""

    def __init__(self, reason: RejectReason, value: Any) -> None:
        super().__init__(str(reason))
        self.reason = reason
        text = value.isoformat() if isinstance(value, datetime) else value
        self.value = (text if isinstance(text, str) else repr(text))[:VALUE_LIMIT]


Check = Callable[[Any], Any]
"""Validates one value and returns what to keep; raises _Drop (lenient) or _Malformed (strict)."""


def _reject(strict: bool, problem: str) -> NoReturn:
    if strict:
        raise _Malformed(problem)
    raise _Drop


def _str(limit: int | None = None, *, strict: bool = False, intern: bool = False) -> Check:
    def check(value: Any) -> Any:
        if not isinstance(value, str):
            _reject(strict, "is not a string")
        if not value and not strict:
            raise _Drop  # "" reads the same as absent everywhere, and absent costs nothing
        if limit is not None and len(value) > limit:
            if strict:
                raise _Malformed(f"is longer than {limit} characters")
            value = value[: limit - 1] + "…"
        return sys.intern(value) if intern else value

    return check


def _int(
    strict: bool = False, *, limit: int = INT64, reason: RejectReason = RejectReason.INTEGER_OUT_OF_RANGE
) -> Check:
    """An integer in [-limit, limit) (int64 by default, as the API server stores them)."""

    def check(value: Any) -> Any:
        if type(value) is not int:  # bool is an int subclass, and not a count
            if type(value) is float and not strict:
                big = not math.isfinite(value) or abs(value) >= limit
                raise _OutOfRange(reason if big else RejectReason.NOT_AN_INTEGER, value)
            _reject(strict, "is not an integer")
        if not -limit <= value < limit:
            if strict:
                raise _Malformed(f"is out of range ({_cut(value)})")
            raise _OutOfRange(reason, value)
        return value

    return check


def _cut(value: Any) -> str:
    return repr(value)[:VALUE_LIMIT]


def _bool(value: Any) -> Any:
    if type(value) is not bool:
        raise _Drop
    return value


def _time(value: Any) -> Any:
    """RFC3339 strings are kept as written; YAML-parsed datetimes are spelled back out. A time
    that is no moment in UTC (9999-12-31T23:59:59-01:00) is out of range."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
        except OverflowError:
            raise _OutOfRange(RejectReason.TIME_OUT_OF_RANGE, value) from None
    if not isinstance(value, str):
        raise _Drop
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise _Drop from None
    if not in_utc_range(moment):
        raise _OutOfRange(RejectReason.TIME_OUT_OF_RANGE, value)
    return value


def in_utc_range(moment: datetime) -> bool:
    """Whether this moment exists in UTC (only one in year 1 or 9999 with an offset may not)."""
    if moment.year not in (1, 9999) or moment.tzinfo is None:
        return True
    try:
        moment.astimezone(UTC)
    except OverflowError:
        return False
    return True


def _labels(
    limit: int, *, keep: Callable[[str], bool] | None = None, value_limit: int | None = None
) -> Check:
    """A str->str map; entries with other values are dropped, too many is malformed."""

    def check(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _Drop
        kept = {
            sys.intern(k): sys.intern(v) if value_limit is None else v[:value_limit]
            for k, v in value.items()
            if isinstance(k, str) and isinstance(v, str) and (keep is None or keep(k))
        }
        if len(kept) > limit:
            raise _Malformed(f"has {len(kept)} entries (more than {limit})")
        return kept

    return check


def _obj(
    fields: Mapping[str, Check],
    *,
    strict: bool = False,
    required: tuple[str, ...] = (),
    keep_empty: bool = True,
) -> Check:
    """A mapping of known fields. `strict`: a non-mapping is malformed (else dropped).
    `required`: without these entries, this (lenient) entry is dropped; so is an empty
    result unless `keep_empty` (an empty mapping can be a marker, e.g. state.running)."""

    def check(value: Any) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):
            _reject(strict, "is not an object")
        out: dict[str, Any] = {}
        for name, item in value.items():
            field = fields.get(name)
            if field is None or item is None:
                continue
            try:
                out[name] = field(item)
            except _Drop:
                continue
            except _Located as error:
                error.path.append(name)
                raise
        for name in required:
            if name not in out:
                raise _Drop
        if not out and not keep_empty:
            raise _Drop
        return out

    return check


def _list(
    item: Check,
    *,
    limit: int,
    strict: bool = False,
    truncate: bool = False,
    only: Callable[[Any], bool] | None = None,
) -> Check:
    """A list. Longer than `limit` is malformed, or cut when `truncate`; `only` filters entries first."""

    def check(value: Any) -> Any:
        if not isinstance(value, list):
            _reject(strict, "is not a list")
        # (index as written, entry): a bad entry's path must name it in the object itself
        entries: Sequence[Any]
        if only is not None:
            entries = [(index, entry) for index, entry in enumerate(value) if only(entry)]
            count = len(entries)
        else:
            entries, count = value, len(value)
        if count > limit:
            if not truncate:
                raise _Malformed(f"has {count} entries (more than {limit})")
            entries = entries[:limit]
        out = []
        for index, entry in entries if only is not None else enumerate(entries):
            try:
                out.append(item(entry))
            except _Drop:
                continue
            except _Located as error:
                error.path.append(f"[{index}]")
                raise
        return out

    return check


_S = _str()
_NAME = _str(253)
_TOKEN = _str(316, intern=True)
_MESSAGE = _str(MESSAGE_LIMIT)
_I = _int()
_SECONDS = _int(limit=int(MAX_DURATION_SECONDS), reason=RejectReason.DURATION_OUT_OF_RANGE)
"""A number of seconds that becomes a timedelta (a Lease's duration, a progress deadline)."""
_REF = _obj({"apiVersion": _TOKEN, "kind": _TOKEN, "name": _NAME, "namespace": _NAME})

KEPT_ANNOTATIONS = (
    "reconcile.fluxcd.io/",
    "meta.helm.sh/",
    "helm.toolkit.fluxcd.io/",
    "kustomize.toolkit.fluxcd.io/",
)

_CONDITION = _obj(
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
_CONDITIONS = _list(_CONDITION, limit=64, strict=True)

_METADATA_FIELDS: dict[str, Check] = {
    "name": _str(253, strict=True),
    "namespace": _str(63, strict=True, intern=True),
    "generation": _int(strict=True),
    "creationTimestamp": _time,
    "deletionTimestamp": _time,
    "labels": _labels(256),
    "annotations": _labels(
        limit=64, keep=lambda k: k.startswith(KEPT_ANNOTATIONS), value_limit=MESSAGE_LIMIT
    ),
    "ownerReferences": _list(
        _obj({"apiVersion": _TOKEN, "kind": _TOKEN, "name": _NAME, "controller": _bool}),
        limit=32,
    ),
}
_MANAGED_FIELDS = _list(
    _obj({"manager": _TOKEN, "operation": _TOKEN, "subresource": _TOKEN, "time": _time}),
    limit=32,
    truncate=True,
)
_CONTAINERS = _list(_obj({"name": _TOKEN, "image": _str(1024)}), limit=64)
_SELECTOR = _obj({"matchLabels": _labels(64)})

# -- Kind-specific spec and status fields -----------------------------------------------------

_GITOPS_SPEC: dict[str, Check] = {
    "interval": _TOKEN,
    "retryInterval": _TOKEN,
    "suspend": _bool,
    "sourceRef": _REF,
    "dependsOn": _list(
        _obj({"name": _NAME, "namespace": _NAME, "kind": _TOKEN, "apiVersion": _TOKEN}, required=("name",)),
        limit=256,
    ),
    "chart": _obj({"spec": _obj({"chart": _S, "version": _S, "sourceRef": _REF})}),
    "chartRef": _REF,
    "releaseName": _NAME,
    "targetNamespace": _NAME,
    "storageNamespace": _NAME,
    "approvePlan": _S,
}
_GITOPS_STATUS: dict[str, Check] = {
    "conditions": _CONDITIONS,
    "observedGeneration": _int(strict=True),
    "lastAppliedRevision": _S,
    "lastAttemptedRevision": _S,
    "lastHandledReconcileAt": _S,
    "helmChart": _S,
    "artifact": _obj({"revision": _S, "digest": _S, "lastUpdateTime": _time}),
    "inventory": _obj({"entries": _list(_obj({"id": _S, "v": _TOKEN}, required=("id",)), limit=100_000)}),
    "history": _list(
        _obj(
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
    "plan": _obj({"pending": _S}),
}

_WORKLOAD_SPEC: dict[str, Check] = {
    "replicas": _I,
    "selector": _SELECTOR,
    "progressDeadlineSeconds": _SECONDS,
    "updateStrategy": _obj({"type": _TOKEN, "rollingUpdate": _obj({"partition": _I})}),
    "template": _obj({"spec": _obj({"containers": _CONTAINERS, "initContainers": _CONTAINERS})}),
}
_WORKLOAD_STATUS: dict[str, Check] = {
    "conditions": _CONDITIONS,
    "observedGeneration": _int(strict=True),
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

_TERMINATED = _obj({"reason": _TOKEN, "exitCode": _I})
_CONTAINER_STATE = _obj(
    {
        "waiting": _obj({"reason": _TOKEN, "message": _MESSAGE}),
        "running": _obj({}),
        "terminated": _TERMINATED,
    }
)
"""Which state a container is in (running is kept as a marker) and why; no times: none is read."""
_LAST_STATE = _obj({"terminated": _TERMINATED}, keep_empty=False)
_CONTAINER_STATUSES = _list(
    _obj(
        {
            "name": _TOKEN,
            "image": _str(1024, intern=True),
            "ready": _bool,
            "restartCount": _I,
            "state": _CONTAINER_STATE,
            "lastState": _LAST_STATE,
        },
        required=("name",),
    ),
    limit=64,
)
POD_CONDITIONS = frozenset({"Ready", "PodScheduled", "Reconciling", "Stalled"})
"""The only Pod conditions any rule reads (kstatus' generic checks and Pod rule, and ours); the
rest is dropped."""

_POD_SPEC: dict[str, Check] = {}
"""A Pod's images are read from its containerStatuses (kubelet reports the spec image there)."""
_POD_STATUS: dict[str, Check] = {
    "observedGeneration": _int(strict=True),
    "phase": _TOKEN,
    "reason": _TOKEN,
    "message": _MESSAGE,
    "startTime": _time,
    "conditions": _list(
        _CONDITION,
        limit=64,
        strict=True,
        only=lambda c: (
            type(c) is not dict or (isinstance(c.get("type"), str) and c["type"] in POD_CONDITIONS)
        ),
    ),
    "containerStatuses": _CONTAINER_STATUSES,
    "initContainerStatuses": _CONTAINER_STATUSES,
}

_LEASE_SPEC: dict[str, Check] = {
    "holderIdentity": _S,
    "leaseDurationSeconds": _SECONDS,
    "renewTime": _time,
    "acquireTime": _time,
    "leaseTransitions": _I,
}
_CRD_SPEC: dict[str, Check] = {
    "group": _TOKEN,
    "scope": _TOKEN,
    "names": _obj({"kind": _TOKEN, "plural": _TOKEN}),
    "versions": _list(_obj({"name": _TOKEN, "served": _bool, "storage": _bool}), limit=64),
}
_JOB_SPEC: dict[str, Check] = {"parallelism": _I, "completions": _I, "suspend": _bool}
_GENERIC_STATUS: dict[str, Check] = {"conditions": _CONDITIONS, "observedGeneration": _int(strict=True)}
"""What kstatus' generic checks read on every kind (its Reconciling/Stalled conditions and
observedGeneration), kept on the built-ins whose own fields say nothing of them."""
_JOB_STATUS: dict[str, Check] = {
    **_GENERIC_STATUS,
    "succeeded": _I,
    "active": _I,
    "failed": _I,
    "startTime": _time,
}
_SERVICE_SPEC: dict[str, Check] = {"type": _TOKEN, "clusterIP": _S}
_PVC_STATUS: dict[str, Check] = {**_GENERIC_STATUS, "phase": _TOKEN}

SECTIONS: dict[tuple[str, str], tuple[dict[str, Check], dict[str, Check]]] = {
    ("apps", "Deployment"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("apps", "StatefulSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("apps", "DaemonSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("apps", "ReplicaSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("extensions", "Deployment"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("extensions", "DaemonSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("extensions", "ReplicaSet"): (_WORKLOAD_SPEC, _WORKLOAD_STATUS),
    ("", "Pod"): (_POD_SPEC, _POD_STATUS),
    ("coordination.k8s.io", "Lease"): (_LEASE_SPEC, {}),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (_CRD_SPEC, _GENERIC_STATUS),
    ("batch", "Job"): (_JOB_SPEC, _JOB_STATUS),
    ("", "Service"): (_SERVICE_SPEC, _GENERIC_STATUS),
    ("", "PersistentVolumeClaim"): ({}, _PVC_STATUS),
    ("", "Secret"): ({}, _GENERIC_STATUS),
    ("", "ConfigMap"): ({}, _GENERIC_STATUS),
}
"""Built-in kinds; anything else is treated as a custom resource (the GitOps fields). Each keeps
every field kstatus reads on it (its generic checks and its rule in core.go's table, the
extensions/ twins of the workloads included); kinds kstatus has a rule for but no row here
(CronJob, PodDisruptionBudget) read only the generic fields, which the GitOps fields hold."""

EVENT_KINDS = {("", "Event"), ("events.k8s.io", "Event")}
_EVENT_FIELDS: dict[str, Check] = {
    "type": _TOKEN,
    "reason": _TOKEN,
    "message": _MESSAGE,
    "count": _I,
    "firstTimestamp": _time,
    "lastTimestamp": _time,
    "eventTime": _time,
    "series": _obj({"count": _I, "lastObservedTime": _time}),
    "involvedObject": _obj(
        {"apiVersion": _TOKEN, "kind": _TOKEN, "name": _NAME, "namespace": _NAME},
        required=("kind", "name"),
    ),
    "reportingController": _TOKEN,
}
EVENTS_V1_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedCount": "count",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
}
"""events.k8s.io/v1 spells the core/v1 fields differently; projections use the core/v1 names."""


_METADATA = _obj({**_METADATA_FIELDS, "managedFields": _MANAGED_FIELDS}, strict=True)
_METADATA_WITHOUT_HISTORY = _obj(_METADATA_FIELDS, strict=True)
"""Pods and Events change constantly and no rule dates their spec writes: no managedFields."""

_CHECKS: dict[tuple[str, str], tuple[Check, Check, Check]] = {
    group_kind: (_METADATA_WITHOUT_HISTORY if group_kind[1] == "Pod" else _METADATA, _obj(spec), _obj(status))
    for group_kind, (spec, status) in SECTIONS.items()
}
_CUSTOM = (_METADATA, _obj(_GITOPS_SPEC), _obj(_GITOPS_STATUS))
_EVENT = _obj(_EVENT_FIELDS)


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
    try:
        return _project(obj, kind, api_version, metadata)
    except _Malformed as error:
        namespace = metadata.get("namespace")
        where = f"{kind} {namespace}/{metadata['name']}" if namespace else f"{kind} {metadata['name']}"
        raise MalformedObject(f"{where}: {error.where()} {error.problem}") from None


def _project(
    obj: Mapping[str, Any], kind: str, api_version: str, metadata: Mapping[str, Any]
) -> dict[str, Any]:
    group = api_version.rpartition("/")[0]
    event = (group, kind) in EVENT_KINDS
    meta_check, spec_check, status_check = _CHECKS.get((group, kind), _CUSTOM)
    if event:
        meta_check = _METADATA_WITHOUT_HISTORY
    rejected: list[dict[str, str]] = []
    meta = _section(meta_check, metadata, "metadata", rejected)
    out: dict[str, Any] = {"apiVersion": sys.intern(api_version), "kind": sys.intern(kind), "metadata": meta}
    if event:
        out.update(_section(_EVENT, {EVENTS_V1_RENAMES.get(k, k): v for k, v in obj.items()}, "", rejected))
    else:
        for name, check in (("spec", spec_check), ("status", status_check)):
            section = _section(check, obj.get(name), name, rejected)
            if section:
                out[name] = section
    if rejected:
        out[REJECTED] = rejected
    return out


def _section(check: Check, value: Any, name: str, rejected: list[dict[str, str]]) -> dict[str, Any]:
    """A top-level section: absent or not an object means empty (strictness is per field).

    A value out of range is taken out of (a copy of) the section, which is checked again
    without it: rare, so the usual object pays nothing for it."""
    if type(value) is not dict and not isinstance(value, Mapping):
        return {}
    for _ in range(MAX_REJECTED):
        try:
            section: dict[str, Any] = check(value)
            return section
        except _OutOfRange as error:
            steps = error.steps()
            field = f"{name}.{error.where()}" if name else error.where()
            rejected.append({"field": field, "reason": str(error.reason), "value": error.value})
            value = _without(value, steps)
        except _Malformed as error:
            if name:
                error.path.append(name)
            raise
    too_many = _Malformed(f"has more than {MAX_REJECTED} values out of range")
    too_many.path.append(name)
    raise too_many


def _without(value: Any, steps: Sequence[str]) -> Any:
    """A copy of `value` without the field at `steps` (the containers on the way are copied)."""
    step, rest = steps[0], steps[1:]
    if step.startswith("["):
        items = list(value)
        index = int(step[1:-1])
        items[index] = _without(items[index], rest) if rest else None
        return items
    fields = dict(value)
    if rest:
        fields[step] = _without(fields[step], rest)
    else:
        del fields[step]
    return fields
