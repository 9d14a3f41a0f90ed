"""Which objects of one kind the sink holds, and which are set aside as unreadable.

A reflector delivers every object it can read to the sink and remembers its key, so a DELETED
event, a namespace filtered out or a relist that no longer lists it removes it again. An object
it cannot read (malformed) is never silently dropped: it is counted and logged once per version
and listed (KindStats.unreadable, shown under `rejected`) until fixed, deleted or relisted away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from watcher.kube.resources import Resource
from watcher.logs import fields, get_logger
from watcher.model.ingest.decoded import ObjectKey
from watcher.model.ingest.quarantine import unreadable
from watcher.model.types import Rejection, Subject
from watcher.telemetry import KindStats

log = get_logger("kube")

Malformed = dict[ObjectKey, tuple[str, Rejection]]
"""Objects set aside as unreadable: (the version read, "uid/resourceVersion"; the rejection)."""


class Sink(Protocol):
    """Where a reflector delivers projected objects (the live model, or a test store)."""

    def upsert(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        """A projection: a dict, or a healthy Pod still packed (watcher.model.store.graph.Packed)."""

    def delete(self, resource: Resource, obj: dict[str, Any]) -> None: ...

    def retain(self, resource: Resource, keys: set[ObjectKey]) -> None:
        """A relist delivered its objects (upserts, page by page): of the kind, only these
        (namespace, name) remain, anything else of it is gone."""

    def notify(self) -> None:
        """Watch state changed (synced, forbidden, live): re-evaluate soon."""


class Ledger:
    """The keys delivered to the sink and the objects set aside, for one kind."""

    def __init__(self, resource: Resource, sink: Sink, stats: KindStats) -> None:
        self._resource, self._sink, self._stats = resource, sink, stats
        self._keys: set[ObjectKey] = set()
        self.malformed: Malformed = stats.unreadable
        self._where = {"group": resource.group, "kind": resource.kind}

    @property
    def keys(self) -> frozenset[ObjectKey]:
        return frozenset(self._keys)

    def accept(self, key: ObjectKey, projected: Mapping[str, Any]) -> None:
        if self.malformed.pop(key, None) is not None:
            self._malformed_changed()
        self._keys.add(key)
        self._stats.objects = len(self._keys)
        self._sink.upsert(self._resource, projected)

    def forget(self, key: ObjectKey, *, keep_malformed: bool) -> None:
        if not keep_malformed and self.malformed.pop(key, None) is not None:
            self._malformed_changed()
        if key in self._keys:
            self._keys.discard(key)
            self._stats.objects = len(self._keys)
            stub = {"namespace": key[0], "name": key[1]} if key[0] else {"name": key[1]}
            self._sink.delete(
                self._resource,
                {"apiVersion": self._resource.api_version, "kind": self._resource.kind, "metadata": stub},
            )

    def set_aside(self, key: ObjectKey, problem: str, meta: Mapping[str, Any], into: Malformed) -> None:
        """An object the decoder could not read: listed in `into` (the live list, or a relist's
        own until it commits), counted and logged once per version."""
        version = f"{meta.get('uid', '')}/{meta.get('resourceVersion', '')}"
        if version not in (self.malformed.get(key, ("",))[0], into.get(key, ("",))[0]):
            self._stats.malformed += 1
            log.warning(
                "malformed object skipped",
                extra=fields(
                    **self._where, namespace=key[0], name=key[1], resource_version=version, error=problem
                ),
            )
        subject = Subject(
            apiVersion=self._resource.api_version, kind=self._resource.kind, namespace=key[0], name=key[1]
        )
        into[key] = (version, unreadable(subject, problem))
        if into is self.malformed:
            self._malformed_changed()

    def replace(self, keys: set[ObjectKey], malformed: Malformed) -> None:
        """A relist's result: of the kind, only these objects remain, and only these are set aside."""
        self._sink.retain(self._resource, keys)
        self._keys, self.malformed = keys, malformed
        self._stats.objects, self._stats.unreadable = len(keys), malformed
        self._malformed_changed()

    def _malformed_changed(self) -> None:
        """The unreadable objects listed changed: count them, and evaluate soon to list them."""
        self._stats.malformed_now = len(self.malformed)
        self._stats.unreadable_changes += 1
        self._sink.notify()
