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

A Pod that is running and ready with nothing failing (Pod.healthy(), by far the usual Pod)
is not built as dicts at all: it is encoded straight into the Store's packed form
(graph.Packed), which the model keeps without judging it again (HealthModel.upsert). So is
every ReplicaSet, which no rule judges.

The shapes: fields.py (field types, metadata, conditions), kinds.py (Pods, workloads, Leases,
Events), gitops.py (Flux and tofu-controller kinds). They take project()'s own tables, and a
test checks that they decode exactly the fields project() keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, Literal, NamedTuple, TypeVar

import msgspec
import orjson
from msgspec import Struct

from watcher.model.fastpath.fields import Object, Unsure, intern
from watcher.model.fastpath.gitops import GitOps
from watcher.model.fastpath.kinds import KubeEvent, Lease, Pod, Workload, event_fields
from watcher.model.graph import Packed, pack
from watcher.model.objects import Key
from watcher.model.projection import EVENT_KINDS, SECTIONS, project

ObjectKey = tuple[str, str]
"""(namespace, name) within one kind."""

# -- Decoders ---------------------------------------------------------------------------------


class Decoded(Struct, gc=False):
    """One watch event, decoded and projected (a Struct: built per event, and a NamedTuple's
    constructor is a Python function)."""

    type: str
    """ADDED, MODIFIED, DELETED or BOOKMARK (ERROR always takes the slow path)."""
    resource_version: str
    key: ObjectKey
    """(namespace, name); ("", "") for a BOOKMARK."""
    object: Mapping[str, Any] | None
    """The projection, equal to project()'s (a healthy Pod comes Packed); None for a BOOKMARK."""


class Page(NamedTuple):
    """One list page: its items projected, and where the list goes on."""

    items: list[tuple[ObjectKey, Mapping[str, Any]]]
    resource_version: str
    continue_token: str


class _ListMeta(Struct, gc=False):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


T = TypeVar("T")


class _Watch(Struct, Generic[T], gc=False):
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: T


class _List(Struct, Generic[T], gc=False):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[T] = msgspec.field(default_factory=list)


_DECODE_ERRORS = (msgspec.MsgspecError, ValueError)
"""Unsure (a ValueError), a failed time parse, and anything msgspec refuses."""


class FastPath:
    """The decoders of one watched kind; apiVersion and kind come from the watched resource
    (list items carry neither), exactly as the reflector sets them before project()."""

    def __init__(self, api_version: str, kind: str, shape: type[Object]) -> None:
        self.api_version, self.kind = intern(api_version), intern(kind)
        self._group = api_version.rpartition("/")[0]
        self.shape = shape
        self._watch: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_Watch[shape])  # type: ignore[valid-type]
        self._list: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_List[shape])  # type: ignore[valid-type]
        self._finish = event_fields if shape is KubeEvent else _sections
        self._packs = (self._group, kind) == ("apps", "ReplicaSet")
        """No rule judges a ReplicaSet (it only links Pods to their Deployment): it comes packed."""

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

    def _project(self, obj: Any) -> tuple[ObjectKey, Mapping[str, Any]]:
        meta = obj.metadata
        if not meta.name:
            raise Unsure("no metadata.name: project() says so")
        key = (meta.namespace or "", meta.name)
        if self.shape is Pod:
            packed = obj.packed(self.api_version, self.kind)
            if packed is not None:
                return key, Packed(Key(self._group, self.kind, *key), packed)
        obj.fix()
        out = {"apiVersion": self.api_version, "kind": self.kind, **self._finish(msgspec.to_builtins(obj))}
        if self._packs:
            return key, Packed(Key(self._group, self.kind, *key), pack(out))
        return key, out


def _sections(fields: dict[str, Any]) -> dict[str, Any]:
    """project() leaves out a spec or status with nothing kept in it."""
    for name in ("spec", "status"):
        if name in fields and not fields[name]:
            del fields[name]
    return fields


_SHAPES: dict[tuple[str, str], type[Object]] = {
    ("", "Pod"): Pod,
    ("apps", "Deployment"): Workload,
    ("apps", "StatefulSet"): Workload,
    ("apps", "DaemonSet"): Workload,
    ("apps", "ReplicaSet"): Workload,
    ("extensions", "Deployment"): Workload,
    ("extensions", "DaemonSet"): Workload,
    ("extensions", "ReplicaSet"): Workload,
    ("coordination.k8s.io", "Lease"): Lease,
    **dict.fromkeys(EVENT_KINDS, KubeEvent),
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
            shape = GitOps
        _CACHE[key] = FastPath(api_version, kind, shape) if shape is not None else None
    return _CACHE[key]


def decode_event(line: bytes, *, api_version: str, kind: str) -> tuple[str, Mapping[str, Any] | None]:
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
