"""The node types schema.py declares each field with, and the blocks every kind shares.

A node says a field's type and what bounds it (schema.py's docstring says what is generated from
them); the blocks (a condition, metadata with or without its managedFields, a reference) are
shared by the kinds of schema.py and policy_schema.py, and by identity: projection.py compiles
each node once, and a shared node shares its check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from watcher.model.ingest.objects import MAX_DURATION_SECONDS
from watcher.model.types import RejectReason

MESSAGE_LIMIT = 1024
"""Condition and Event messages beyond this are cut (Flux messages can be tens of KiB)."""
INT64 = 2**63


@dataclass(frozen=True, eq=False)
class Str:
    """A string; "" reads as absent unless strict. Longer than `limit` is cut (malformed if strict)."""

    limit: int | None = None
    strict: bool = False
    intern: bool = False


@dataclass(frozen=True, eq=False)
class Int:
    """An integer in [-limit, limit); beyond is rejected (the field dropped, the object marked)."""

    strict: bool = False
    limit: int = INT64
    reason: RejectReason = RejectReason.INTEGER_OUT_OF_RANGE


@dataclass(frozen=True, eq=False)
class Bool:
    """A boolean (an integer is not one)."""


@dataclass(frozen=True, eq=False)
class Time:
    """An RFC3339 timestamp, kept as written; unparseable is dropped, out of UTC range rejected."""


@dataclass(frozen=True, eq=False)
class Labels:
    """A str->str map; entries with other values are dropped; more than `limit` kept is malformed.
    `keep`: only keys with one of these prefixes; `value_limit`: values cut (and not interned)."""

    limit: int
    keep: tuple[str, ...] = ()
    value_limit: int | None = None


@dataclass(frozen=True, eq=False)
class Obj:
    """A mapping of known fields (others ignored). `strict`: a non-mapping is malformed (else
    dropped). `required`: an entry without these is dropped; so is an empty one unless `keep_empty`
    (an empty mapping can be a marker, e.g. state.running)."""

    fields: Mapping[str, Field]
    strict: bool = False
    required: tuple[str, ...] = ()
    keep_empty: bool = True


@dataclass(frozen=True, eq=False)
class List:
    """A list of entries. More than `limit` is malformed, or cut when `truncate`. `types`: only
    entries whose "type" is one of these are read at all (Pod conditions); `unless` (field,
    value): entries with that value there are not read at all (managedFields entries written
    through the status subresource)."""

    item: Obj
    limit: int
    strict: bool = False
    truncate: bool = False
    types: frozenset[str] | None = None
    unless: tuple[str, str] | None = None


@dataclass(frozen=True, eq=False)
class FieldSet:
    """A managedFields entry's fieldsV1 trie, kept as the sorted field paths it names, one a line
    in one string, bounded (fieldsets.py): what ConflictingWriters compares between versions."""


@dataclass(frozen=True, eq=False)
class Flags:
    """A container's `args`, of which only the flags `names` are kept: each once, the last one
    written (pflag's reading), as "--flag=value" whether written so or as "--flag value". A value
    longer than `limit` is kept as the bare "--flag" (no value), which its reader cannot read: it
    says so rather than take the flag for absent."""

    names: tuple[str, ...]
    limit: int = 1024


Field = Str | Int | Bool | Time | Labels | Obj | List | FieldSet | Flags


@dataclass(frozen=True, eq=False)
class Kind:
    """One kind's metadata and sections; the section named "" is read at the top level (Events)."""

    metadata: Obj
    sections: Mapping[str, Obj] = field(default_factory=dict)


S = Str()
NAME = Str(253)
TOKEN = Str(316, intern=True)
MESSAGE = Str(MESSAGE_LIMIT)
I = Int()  # noqa: E741 (a type name, as in the tables)
SECONDS = Int(limit=int(MAX_DURATION_SECONDS), reason=RejectReason.DURATION_OUT_OF_RANGE)
"""A number of seconds that becomes a timedelta (a Lease's duration, a progress deadline)."""
GENERATION = Int(strict=True)
REF = Obj({"apiVersion": TOKEN, "kind": TOKEN, "name": NAME, "namespace": NAME})

KEPT_ANNOTATIONS = (
    "reconcile.fluxcd.io/",
    "meta.helm.sh/",
    "helm.toolkit.fluxcd.io/",
    "kustomize.toolkit.fluxcd.io/",
    "deployment.kubernetes.io/revision",
    "helm.sh/resource-policy",
)
"""Annotation prefixes kept; the rest is dropped. A ReplicaSet's revision (its Deployment's rollout
number) dates and orders image changes (views/transitions.py); helm.sh/resource-policy: keep spares a CRD
from its release's removal (cluster/crd_risk.py)."""

CONDITION = Obj(
    {
        "type": TOKEN,
        "status": TOKEN,
        "reason": TOKEN,
        "message": MESSAGE,
        "lastTransitionTime": Time(),
        "lastUpdateTime": Time(),
        "observedGeneration": I,
    },
    strict=True,
    required=("type", "status"),
)
CONDITIONS = List(CONDITION, limit=64, strict=True)

_METADATA_FIELDS: dict[str, Field] = {
    "name": Str(253, strict=True),
    "namespace": Str(63, strict=True, intern=True),
    "generation": GENERATION,
    "creationTimestamp": Time(),
    "deletionTimestamp": Time(),
    "labels": Labels(256),
    "annotations": Labels(64, keep=KEPT_ANNOTATIONS, value_limit=MESSAGE_LIMIT),
    "ownerReferences": List(
        Obj({"apiVersion": TOKEN, "kind": TOKEN, "name": NAME, "controller": Bool()}), limit=32
    ),
}
_WRITE: dict[str, Field] = {"manager": TOKEN, "operation": TOKEN, "subresource": TOKEN, "time": Time()}


def _writes(entry: Obj) -> List:
    """managedFields, but for the entries written through the status subresource: no rule reads
    those (a spec write is what spec_written_at dates and what ConflictingWriters compares), and
    every object a controller reports on has one, which the model would keep."""
    return List(entry, limit=32, truncate=True, unless=("subresource", "status"))


METADATA = Obj(
    {**_METADATA_FIELDS, "managedFields": _writes(Obj({**_WRITE, "fieldsV1": FieldSet()}))}, strict=True
)
"""Who wrote when (spec_written_at) and which fields each writer owns (ConflictingWriters: the
engine hands the field sets to rules/writers.py and keeps the object without them)."""
METADATA_WITHOUT_FIELDS = Obj({**_METADATA_FIELDS, "managedFields": _writes(Obj(_WRITE))}, strict=True)
"""Who wrote when, without the field sets: ReplicaSets (written by their Deployment's controller
alone, and packed by the fast path) and Leases (renewed every few seconds by their holder)."""
METADATA_WITHOUT_HISTORY = Obj(_METADATA_FIELDS, strict=True)
"""Pods and Events change constantly and no rule dates their spec writes: no managedFields."""
