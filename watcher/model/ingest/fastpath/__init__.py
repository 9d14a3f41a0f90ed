"""A typed fast path from watch lines and list pages straight to project()'s projection.

Decoding a 5 KiB Pod with orjson builds every field only for project() to drop most of it. Here
msgspec decodes into Structs generated from schema.py (shapes.py) that declare only the projected
fields with project()'s bounds, so the rest is skipped in C. The fast path answers only when it is
sure the result EQUALS project() of the same object; whenever it is not (a null, a wrong type, an
over-long value, an entry project() would drop, an ERROR event), decode() takes the slow path
(orjson.loads + project()), so every rule and every MalformedObject message keeps its meaning.

A Pod running and ready with nothing failing (healthy(), by far the usual Pod), and every
ReplicaSet, is not built as dicts at all but encoded straight into the Store's packed form
(graph.Packed), which the model keeps without judging it again (HealthModel.upsert). Not one
that kustomize-controller labelled as applied (a bare Pod or ReplicaSet in Git): a packed object
gets no edge, and PruneOrphan judges what a Kustomization applied through that edge.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from typing import Any, Generic, Literal, TypeVar

import msgspec
import orjson
from msgspec import UNSET, Struct

from watcher.model.ingest.decoded import Decoded, Malformed, ObjectKey, Page, Unreadable, metadata_of
from watcher.model.ingest.fastpath.shapes import Unsure, kind_shape
from watcher.model.ingest.flux import kustomization_labelled, kustomized_by
from watcher.model.ingest.kinds import failure_conditions
from watcher.model.ingest.objects import Key
from watcher.model.ingest.packed import Packed, pack
from watcher.model.ingest.projection import project_or_problem
from watcher.model.ingest.schema import EVENT_KINDS


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


class FastPath:
    """The decoders of one watched kind; apiVersion and kind come from the watched resource
    (list items carry neither), exactly as the reflector sets them before project()."""

    def __init__(self, api_version: str, kind: str) -> None:
        self.api_version, self.kind = sys.intern(api_version), sys.intern(kind)
        self._group = api_version.rpartition("/")[0]
        struct, self._fix, self._check = kind_shape(self._group, kind)
        self._watch: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_Watch[struct])  # type: ignore[valid-type]
        self._list: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_List[struct])  # type: ignore[valid-type]
        self._renames = EVENT_KINDS.get((self._group, kind))
        self._pod = (self._group, kind) == ("", "Pod")
        self._packs = (self._group, kind) == ("apps", "ReplicaSet")
        self._kind_key = (self._group, kind)
        """A ReplicaSet comes packed (it only links Pods to their Deployment) unless it says it
        fails (kinds.FAILURE_CONDITIONS: ObjectFailing judges it then)."""

    def decode(self, line: bytes) -> Decoded:
        """The event, always: the fast path when it is sure, else orjson + project() (a malformed
        object comes with its `problem`). Raises Unreadable when the line is no watch event."""
        decoded = self.event(line)
        if decoded is not None:
            return decoded
        try:
            event = orjson.loads(line)
            kind, obj = event["type"], event["object"]
            if not isinstance(kind, str) or not isinstance(obj, dict):
                raise TypeError("type or object missing")
        except (orjson.JSONDecodeError, KeyError, TypeError) as error:
            raise Unreadable(f"unreadable watch event: {error}") from error
        rv = metadata_of(obj).get("resourceVersion")
        rv = rv if isinstance(rv, str) else ""
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return Decoded(kind, rv, ("", ""), None, raw=obj)  # a BOOKMARK, or an ERROR's Status
        key, projected, problem = self._slow(obj)
        return Decoded(kind, rv, key, projected, problem, raw=obj)

    def decode_page(self, body: bytes) -> Page:
        """The list page, always: the fast path when it is sure of every item, else orjson +
        project() (malformed items listed with their problem). Raises Unreadable when the body
        is no list."""
        page = self.page(body)
        if page is not None:
            return page
        try:
            raw = orjson.loads(body)
            items, meta = raw.get("items") or [], raw.get("metadata") or {}
        except (orjson.JSONDecodeError, AttributeError) as error:
            raise Unreadable(f"unreadable list page: {error}") from error
        projected, malformed = [], []
        for item in items:
            key, obj, problem = self._slow(item)
            if obj is not None:
                projected.append((key, obj))
            else:
                malformed.append(Malformed(key, problem, metadata_of(item)))
        rv, token = str(meta.get("resourceVersion") or ""), str(meta.get("continue") or "")
        return Page(projected, rv, token, tuple(malformed))

    def _slow(self, raw: Any) -> tuple[ObjectKey, Mapping[str, Any] | None, str]:
        """(key, projection or None, problem) of an object as orjson read it."""
        meta = metadata_of(raw)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or meta.get("uid") or "?"))
        if isinstance(raw, dict):
            raw["apiVersion"], raw["kind"] = self.api_version, self.kind
        return (key, *project_or_problem(raw))

    def event(self, line: bytes) -> Decoded | None:
        """The decoded event, or None when only the slow path can be sure."""
        try:
            event = self._watch.decode(line)
            obj, kind = event.object, event.type
            rv = obj.metadata.resourceVersion
            if kind == "BOOKMARK":
                return Decoded(kind, rv, ("", ""), None)
            key, projected = self._project(obj)
        except ValueError:  # Unsure, a doubt of project()'s own checks, or anything msgspec refuses
            return None
        return Decoded(kind, rv, key, projected)

    def page(self, body: bytes) -> Page | None:
        """The projected list page, or None when any item needs the slow path."""
        try:
            page = self._list.decode(body)
            items = [self._project(obj) for obj in page.items]
        except ValueError:
            return None
        return Page(items, page.metadata.resourceVersion, page.metadata.continue_)

    def _project(self, obj: Any) -> tuple[ObjectKey, Mapping[str, Any]]:
        meta = obj.metadata
        if not meta.name:
            raise Unsure("no metadata.name: project() says so")
        key = (meta.namespace or "", meta.name)
        meta.resourceVersion = ""
        obj.apiVersion, obj.kind = self.api_version, self.kind
        if self._pod:  # checked first: a healthy Pod is packed, and needs no interned strings
            self._check(obj)
            labels = meta.labels if meta.labels is not UNSET else None
            if healthy(obj) and kustomization_labelled(labels) is None:
                return key, Packed(Key(self._group, self.kind, *key), pack(obj))
        self._fix(obj)
        out = msgspec.to_builtins(obj)
        if self._renames:  # an events.k8s.io Event, under its core/v1 names
            out = {self._renames.get(name, name): value for name, value in out.items()}
        if self._packs and kustomized_by(out) is None and not failure_conditions(self._kind_key, out):
            return key, Packed(Key(self._group, self.kind, *key), pack(out))
        return key, out


def healthy(pod: Any) -> bool:
    """Running, Ready=True, not being deleted, no container waiting and none last killed for
    memory: what workloads.pod_state calls ready with nothing failing, so the Pod's only rule
    has no finding and nothing to wait for (a test holds the two to that). Read after the Pod's
    checks (kind_shape's `check`: no string is left where an object belongs), before interning."""
    status = pod.status
    if status is UNSET or status.phase != "Running" or pod.metadata.deletionTimestamp:
        return False
    for condition in status.conditions or ():
        if condition.type == "Ready":  # the first one, as objects.condition() reads it
            if condition.status != "True":
                return False
            break
    else:
        return False
    for statuses in (status.initContainerStatuses, status.containerStatuses):
        for container in statuses or ():
            if container.state is not UNSET and container.state.waiting is not UNSET:
                return False
            last = container.lastState.terminated if container.lastState is not UNSET else UNSET
            if last is not UNSET and last.reason == "OOMKilled":
                return False
    return True


@functools.cache
def fast_path(api_version: str, kind: str) -> FastPath:
    """The fast path of a watched kind (built once per kind: every kind has one)."""
    return FastPath(api_version, kind)
