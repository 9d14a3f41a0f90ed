"""Namespace-scoped mode: one namespaced kind read through one list + watch per namespace.

A tenant's account may read only its own namespaces (a Role per namespace), so a cluster-wide
list is refused; the same kind listed and watched at `/apis/G/V/namespaces/NS/PLURAL` in each
of its namespaces is not. Each namespace gets its own Reflector (its own resourceVersion,
backoff and 403), keeping its own KindStats; the kind's KindStats, the one every output reads,
is their sum, refreshed whenever one of them tells the sink anything:

- forbidden: every namespace answers 403 (the kind is not judged at all); some namespaces
  only: the kind is judged elsewhere and those namespaces are named (Telemetry.forbidden_in);
- synced: every namespace not forbidden has listed; live: every one of those is watching.

A namespace's relist replaces that namespace's objects only: the sink is told to retain them
together with what the other namespaces hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from watcher.kube.ledger import Sink
from watcher.kube.reflector import Reflector
from watcher.kube.resources import Resource
from watcher.model.ingest.decoded import ObjectKey
from watcher.telemetry import KindStats, Telemetry


class NamespacedKind:
    """One kind, read per namespace; stands for a Reflector in the ClusterWatcher's table."""

    def __init__(
        self,
        resource: Resource,
        namespaces: Sequence[str],
        make: Callable[[Resource, Sink, KindStats], Reflector],
        sink: Sink,
        telemetry: Telemetry,
    ) -> None:
        self.resource = resource
        self.sink, self._telemetry = sink, telemetry
        self.stats = telemetry.kind(resource.group, resource.kind)
        shared = self.stats
        self._parts: dict[str, Reflector] = {}
        for namespace in namespaces:
            part = KindStats(  # the counters are the kind's own: each request counts there at once
                list_requests=shared.list_requests,
                watch_requests=shared.watch_requests,
                relists=shared.relists,
                watch_errors=shared.watch_errors,
                events=shared.events,
                rejected=shared.rejected,
            )
            self._parts[namespace] = make(replace(resource, namespace=namespace), _Part(self), part)
        self._unreadable_changes = -1

    async def run(self, guard: Callable[[Reflector], Awaitable[None]]) -> None:
        await asyncio.gather(*(guard(reflector) for reflector in self._parts.values()))

    def interrupt(self) -> None:
        for reflector in self._parts.values():
            reflector.interrupt()
        self.refresh()

    def wake(self) -> None:
        for reflector in self._parts.values():
            reflector.wake()

    def held(self, besides: str) -> set[ObjectKey]:
        """What the namespaces other than `besides` deliver now."""
        return {key for namespace, r in self._parts.items() if namespace != besides for key in r.held()}

    def count(self) -> None:
        self.stats.objects = sum(r.stats.objects for r in self._parts.values())

    def refresh(self) -> None:
        """The kind's KindStats from its namespaces' (see the module docstring)."""
        parts = [r.stats for r in self._parts.values()]
        seen = [s for s in parts if not s.forbidden]
        total = self.stats
        total.forbidden = not seen
        total.synced = bool(seen) and all(s.synced for s in seen)
        total.live = bool(seen) and all(s.live for s in seen)
        self.count()
        total.malformed = sum(s.malformed for s in parts)
        total.watch_gone = sum(s.watch_gone for s in parts)
        total.last_event = max((s.last_event for s in parts if s.last_event is not None), default=None)
        changes = sum(s.unreadable_changes for s in parts)
        if changes != self._unreadable_changes:
            self._unreadable_changes = changes
            total.unreadable = {key: entry for s in parts for key, entry in s.unreadable.items()}
            total.malformed_now = len(total.unreadable)
            total.unreadable_changes += 1
        forbidden = tuple(n for n, r in self._parts.items() if r.stats.forbidden)
        self._telemetry.forbidden_in[self.resource.key] = forbidden if seen else ()


class _Part:
    """The Sink one namespace's Reflector delivers to: the kind's, its relists narrowed to it."""

    def __init__(self, kind: NamespacedKind) -> None:
        self._kind = kind

    def upsert(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        self._kind.sink.upsert(self._kind.resource, obj)
        self._kind.count()

    def delete(self, resource: Resource, obj: dict[str, Any]) -> None:
        self._kind.sink.delete(self._kind.resource, obj)
        self._kind.count()

    def retain(self, resource: Resource, keys: set[ObjectKey]) -> None:
        self._kind.sink.retain(self._kind.resource, keys | self._kind.held(resource.namespace))
        self.notify()

    def notify(self) -> None:
        self._kind.refresh()
        self._kind.sink.notify()
