"""The field types and shared shapes of the fast path: each limit project() enforces is
stated on the type, so a violation fails decoding and the caller takes the slow path."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

from msgspec import UNSET, Meta, Struct, UnsetType

from watcher.model.objects import MAX_DURATION_SECONDS
from watcher.model.projection import INT64, KEPT_ANNOTATIONS, MESSAGE_LIMIT, in_utc_range

intern = sys.intern
_parse_time = datetime.fromisoformat


class Unsure(ValueError):
    """The fast path cannot promise project()'s result: take the slow path."""


# -- Field types: the limits project() enforces, so a violation fails decoding ------------------

Int = Annotated[int, Meta(ge=-INT64, le=INT64 - 1)]
"""Wider (or a float) fails decoding: project() rejects it as out of range."""
Seconds = Annotated[int, Meta(ge=-int(MAX_DURATION_SECONDS), le=int(MAX_DURATION_SECONDS) - 1)]
"""A number of seconds project() keeps (longer is rejected there as out of range)."""
Token = Annotated[str, Meta(max_length=316)]
"""Interned after decoding (reasons, condition types, kinds repeat across objects)."""
RequiredToken = Annotated[str, Meta(min_length=1, max_length=316)]
Name = Annotated[str, Meta(max_length=253)]
RequiredName = Annotated[str, Meta(min_length=1, max_length=253)]
Message = Annotated[str, Meta(max_length=MESSAGE_LIMIT)]
Image = Annotated[str, Meta(max_length=1024)]
Time = str | None
"""Checked with datetime.fromisoformat after decoding, as project() does; null (as in a
condition's lastUpdateTime) reads as absent; a time out of range is left to project()."""


_TIMES: dict[str, str] = {}
"""Timestamps already checked, each to the first copy seen: objects share most of theirs (a
Pod's conditions usually carry its start time, Pods created together the same second), so a
check is mostly a lookup and the kept copies are shared like interned strings."""
_TIMES_LIMIT = 8192


def checked_time(value: str | None) -> str:
    if not value:
        return ""
    known = _TIMES.get(value)
    if known is None:
        if not in_utc_range(_parse_time(value)):  # ValueError: project() would drop it
            raise Unsure("a time out of range: project() rejects it and says so")
        if len(_TIMES) >= _TIMES_LIMIT:
            _TIMES.clear()
        known = _TIMES[value] = value
    return known


def interned(labels: dict[str, str]) -> dict[str, str]:
    return {intern(k): intern(v) for k, v in labels.items()}


class Shape(Struct, omit_defaults=True, gc=False):
    """Lenient strings default to "" and everything else to UNSET, so to_builtins leaves
    out exactly what project() leaves out: absent fields and empty strings."""


class Named(Shape):
    apiVersion: Token = ""
    kind: Token = ""
    name: Name = ""

    def fix(self) -> None:
        self.apiVersion, self.kind = intern(self.apiVersion), intern(self.kind)


class Ref(Named):
    namespace: Name = ""


class Owner(Named):
    controller: bool | UnsetType = UNSET


class ManagedField(Shape):
    manager: Token = ""
    operation: Token = ""
    subresource: Token = ""
    time: Time = ""

    def fix(self) -> None:
        self.manager, self.operation = intern(self.manager), intern(self.operation)
        self.subresource = intern(self.subresource)
        self.time = checked_time(self.time)


class Condition(Shape):
    type: RequiredToken
    status: RequiredToken
    reason: Token = ""
    message: Message = ""
    lastTransitionTime: Time = ""
    lastUpdateTime: Time = ""
    observedGeneration: Int | UnsetType = UNSET

    def check(self) -> None:
        self.lastTransitionTime = checked_time(self.lastTransitionTime)
        self.lastUpdateTime = checked_time(self.lastUpdateTime)

    def fix(self) -> None:
        self.check()
        self.type, self.status, self.reason = intern(self.type), intern(self.status), intern(self.reason)


Conditions = Annotated[list[Condition], Meta(max_length=64)]


def fix_all(items: list[Any] | UnsetType) -> None:
    for item in items or ():
        item.fix()


class Metadata(Shape):
    """Metadata of Pods and Events: no managedFields (project() keeps none for them)."""

    name: Name = ""
    namespace: Annotated[str, Meta(max_length=63)] | UnsetType = UNSET
    generation: Int | UnsetType = UNSET
    creationTimestamp: Time = ""
    deletionTimestamp: Time = ""
    labels: Annotated[dict[str, str], Meta(max_length=256)] | UnsetType = UNSET
    annotations: dict[str, str] | UnsetType = UNSET
    ownerReferences: Annotated[list[Owner], Meta(max_length=32)] | UnsetType = UNSET
    resourceVersion: str = ""
    """Read by the caller, then cleared: not part of the projection."""
    uid: str = ""

    def check(self) -> None:
        """What fix() does but interning: a packed Pod's strings live in its bytes."""
        self.creationTimestamp = checked_time(self.creationTimestamp)
        self.deletionTimestamp = checked_time(self.deletionTimestamp)
        if self.annotations is not UNSET:
            kept = {
                intern(k): v[:MESSAGE_LIMIT]
                for k, v in self.annotations.items()
                if k.startswith(KEPT_ANNOTATIONS)
            }
            if len(kept) > 64:
                raise Unsure("too many kept annotations: project() names the object")
            self.annotations = kept
        self.resourceVersion = self.uid = ""

    def fix(self) -> None:
        self.check()
        if self.namespace is not UNSET:
            self.namespace = intern(self.namespace)
        if self.labels is not UNSET:
            self.labels = interned(self.labels)
        fix_all(self.ownerReferences)


class MetadataWithHistory(Metadata):
    managedFields: list[ManagedField] | UnsetType = UNSET

    def fix(self) -> None:
        super().fix()
        if self.managedFields is not UNSET:
            self.managedFields = self.managedFields[:32]
            fix_all(self.managedFields)


class Object(Shape):
    """A top-level object: its metadata (with or without history, per kind) and sections.
    fix() applies, in place and before to_builtins, what the Structs cannot say."""

    metadata: Metadata

    def fix(self) -> None:
        self.metadata.fix()
        for name in ("spec", "status"):
            section = getattr(self, name, UNSET)
            if section is not UNSET:
                section.fix()
