"""Runs one Reflector per watched kind, and starts or stops them as CRDs come and go.

CustomResourceDefinitions are watched like any kind; their reflector delivers to this
supervisor, which forwards every CRD to the model FIRST (so the model sees a CRD turn
Terminating while the objects of its kind are still in the store: that is how it reports
CRDRemoved with the objects orphaned) and then reconciles the set of reflectors. The API
server deletes a CRD's objects only after it has published the CRD's deletionTimestamp, so
the CRD event reaches us first; the reflector of that kind is then stopped and its objects
dropped from the model. An account that may not list CRDs gets the custom kinds from API
discovery instead (polled while CRDs stay forbidden), without CRDRemoved reports.

Besides the kinds stalewatch always reads, every kind a Kustomization's inventory lists is watched
while one lists it (the model says which: HealthModel.listed_kinds), so that a failing Certificate
or Job under a green Kustomization is judged too: custom kinds once their CRD is Established,
built-in ones from resources.ON_DEMAND. At most `listed_limit` kinds are watched for that reason;
a kind over the limit, not served, or forbidden (403) is not read, and the model counts its listed
objects as such (Evaluation.unread), by kind, in every output.

A probe (GET /version) runs every few seconds so that a silent network partition shows as
unreachable quickly; when the server is unreachable every stream is closed and every kind
marked not live, so nothing is judged from data that may have missed events, and when it is
back every reflector retries at once instead of waiting out its backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import aiohttp

from watcher.kube.client import CONNECTION_ERRORS, UNREACHABLE, describe_error, get
from watcher.kube.discovery import DiscoveryError, discover
from watcher.kube.ledger import Sink
from watcher.kube.link import Link
from watcher.kube.reflector import Reflector, WatchOptions
from watcher.kube.resources import BUILT_IN, CRDS, ON_DEMAND_BY_KEY, Resource, crd_resource, wanted
from watcher.kube.scoped import NamespacedKind
from watcher.logs import fields, get_logger
from watcher.model.types import ControllerSpec
from watcher.telemetry import KindKey, KindStats, Telemetry, kind_name

log = get_logger("kube")

_DISCOVERY_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, DiscoveryError)


class ClusterWatcher:
    """Every watched kind of one cluster, delivering projections to `sink`."""

    def __init__(
        self,
        api: Any,
        sink: Sink,
        telemetry: Telemetry,
        *,
        controllers: Iterable[ControllerSpec],
        extra_kinds: Iterable[tuple[str, str]] = (),
        keep_namespace: Callable[[str], bool] = lambda namespace: True,
        options: WatchOptions | None = None,
        built_in: Sequence[Resource] = BUILT_IN,
        listed_limit: int = 50,
        namespaces: Sequence[str] = (),
    ) -> None:
        """`built_in`: the built-in kinds to watch (a one-shot reader needs fewer), CRDs among them;
        `listed_limit`: how many kinds at most are watched because an inventory lists them;
        `namespaces`: namespace mode, each namespaced kind read in these only (kube/scoped.py)."""
        self._api, self._sink, self._telemetry = api, sink, telemetry
        self._built_in = tuple(built_in)
        self._controllers = tuple(controllers)
        self._extra = frozenset(extra_kinds)
        """(group, kind) watched although no controller reconciles them (conflict_watch_kinds)."""
        self._unserved: frozenset[tuple[str, str]] = frozenset()
        """The `_extra` kinds no CRD serves, as last logged."""
        self._keep = keep_namespace
        self._namespaces = tuple(namespaces)
        self._options = options or WatchOptions()
        self._running: dict[KindKey, tuple[Reflector | NamespacedKind, asyncio.Task[None]]] = {}
        self._custom: dict[str, Resource] = {}
        """CRD name -> the resource we watch for it."""
        self._discovered: dict[KindKey, Resource] = {}
        """Kinds found through API discovery (while CRDs are forbidden) and not adopted by a CRD."""
        self._served: dict[KindKey, tuple[str, Resource]] = {}
        """Every kind an Established CRD serves: (the CRD's name, where), wanted or not."""
        self._discoverable: dict[KindKey, Resource] = {}
        """What the last API discovery found (while CRDs are forbidden), wanted or listed."""
        self._listed: frozenset[KindKey] = frozenset()
        """The kinds inventories list now (list_kinds), built-in ones without state excluded."""
        self._admitted: set[KindKey] = set()
        """The listed kinds watched because they are listed, at most `listed_limit`."""
        self._listed_limit = listed_limit
        self._left_out: tuple[tuple[KindKey, ...], tuple[KindKey, ...]] = ((), ())
        """(over the limit, not served) among the listed kinds, as last logged."""
        self._probe: asyncio.Task[None] | None = None
        self._discovery: asyncio.Task[None] | None = None
        self.link = Link(telemetry, self._reachability_changed)

    def watched(self) -> list[Resource]:
        return sorted((r.resource for r, _ in self._running.values()), key=lambda r: (r.group, r.kind))

    async def start(self) -> None:
        for resource in self._built_in:
            self._start(resource, self if resource == CRDS else self._sink)
        for key in sorted(self._extra & ON_DEMAND_BY_KEY.keys()):  # watch_kinds naming built-in kinds
            if key not in self._running:
                self._start(ON_DEMAND_BY_KEY[key], self._sink)
        self._telemetry.started = True
        self._probe = asyncio.create_task(self._probe_loop(), name="stalewatch probe")

    async def stop(self) -> None:
        """Cancel every watch and the probe, and wait for them to close their streams."""
        tasks = [task for _, task in self._running.values()]
        tasks += [task for task in (self._probe, self._discovery) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._running.clear()

    # -- Reflectors ------------------------------------------------------------------------

    def _start(self, resource: Resource, sink: Sink) -> None:
        def reflector(resource: Resource, sink: Sink, stats: KindStats | None = None) -> Reflector:
            return Reflector(
                self._api,
                resource,
                sink,
                self._telemetry,
                self.link,
                options=self._options,
                keep_namespace=self._keep,
                stats=stats,
            )

        where: dict[str, Any] = {}
        if self._namespaces and resource.namespaced:
            kind = NamespacedKind(resource, self._namespaces, reflector, sink, self._telemetry)
            task = asyncio.create_task(kind.run(self._guard), name=f"watch {resource}")
            self._running[resource.key] = (kind, task)
            where["namespaces"] = list(self._namespaces)
        else:
            if self._namespaces:
                self._telemetry.cluster_scoped.add(resource.key)
            one = reflector(resource, sink)
            self._running[resource.key] = (
                one,
                asyncio.create_task(self._guard(one), name=f"watch {resource}"),
            )
        log.info(
            "watching",
            extra=fields(group=resource.group, kind=resource.kind, version=resource.version, **where),
        )

    async def _guard(self, reflector: Reflector) -> None:
        """A bug in one reflector must not silently end that kind's watch: log and restart it."""
        while True:
            try:
                await reflector.run()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watch loop failed, restarting it", extra=fields(kind=reflector.resource.kind))
                reflector.rv, reflector.stats.live = None, False
                await asyncio.sleep(self._options.backoff_cap)

    def _stop(self, resource: Resource, why: str) -> None:
        entry = self._running.pop(resource.key, None)
        if entry is None:
            return
        entry[1].cancel()
        self._telemetry.forget(resource.group, resource.kind)
        self._sink.retain(resource, set())
        log.info("stopped watching", extra=fields(group=resource.group, kind=resource.kind, reason=why))

    # -- The CRD reflector's sink ----------------------------------------------------------

    def upsert(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        self._sink.upsert(resource, obj)
        self._reconcile_crd(obj["metadata"]["name"], obj)

    def delete(self, resource: Resource, obj: dict[str, Any]) -> None:
        self._sink.delete(resource, obj)
        self._reconcile_crd(obj["metadata"]["name"], None)

    def retain(self, resource: Resource, keys: set[tuple[str, str]]) -> None:
        self._sink.retain(resource, keys)
        listed = {name for _, name in keys}
        known = {name for name, _ in self._served.values()} | self._custom.keys()
        for name in sorted(known - listed):
            self._reconcile_crd(name, None)
        self._refresh_listed()
        self._say_unserved()

    def _say_unserved(self) -> None:
        """Once every CRD is listed: name the conflict_watch_kinds and watch_kinds no CRD serves (a
        typo, or a CRD not installed yet), which are then not watched, instead of saying nothing."""
        unserved = frozenset(k for k in self._extra if k not in self._running)
        if unserved and unserved != self._unserved:
            log.warning(
                "conflict_watch_kinds or watch_kinds name kinds no CRD serves: not watched until one does",
                extra=fields(kinds=sorted(kind_name(k) for k in unserved)),
            )
        self._unserved = unserved

    def notify(self) -> None:
        self._sink.notify()
        crds = self._telemetry.kinds.get(CRDS.key)
        if crds is not None and crds.forbidden and self._discovery is None:
            self._discovery = asyncio.create_task(self._discovery_loop(), name="stalewatch discovery")

    def _reconcile_crd(self, name: str, crd: Mapping[str, Any] | None) -> None:
        """Watch the kind this CRD serves if we want it, and nothing for it otherwise."""
        served = crd_resource(crd) if crd is not None else None
        for key in [key for key, (crd_name, _) in self._served.items() if crd_name == name]:
            del self._served[key]
        if served is not None:
            self._served[served.key] = (name, served)
        resource = served if served is not None and self._wants(served.key) else None
        current = self._custom.get(name)
        if current is None and resource is not None and resource.key in self._discovered:
            current = self._custom[name] = self._discovered.pop(resource.key)  # now backed by its CRD
        if resource != current:
            if current is not None:
                del self._custom[name]
                why = "its CRD was deleted" if resource is None else f"its CRD now serves {resource.version}"
                self._stop(current, why)
            if resource is not None and resource.key not in self._running:
                self._custom[name] = resource
                self._start(resource, self._sink)
        if self._listed:
            self._refresh_listed()

    def _wants(self, key: KindKey) -> bool:
        return wanted(self._controllers, *key, self._extra) or key in self._admitted

    # -- Kinds the inventories list -----------------------------------------------------------

    def list_kinds(self, kinds: Iterable[KindKey]) -> None:
        """The kinds the Kustomizations' inventories list now (the model's listed_kinds): each is
        watched while one lists it, within the limit; the built-in kinds watched anyway aside."""
        built_in = {r.key for r in self._built_in}
        self._listed = frozenset(kinds) - built_in
        self._refresh_listed()

    def _refresh_listed(self) -> None:
        for key in sorted(self._admitted):
            resource = self._resolve(key)
            if key in self._listed and resource is not None:
                continue
            self._admitted.discard(key)
            if not wanted(self._controllers, *key, self._extra):
                why = "no inventory lists it any more" if key not in self._listed else "no longer served"
                self._stop_kind(key, why)
        over: list[KindKey] = []
        unserved: list[KindKey] = []
        for key in sorted(self._listed - self._admitted):
            if key in self._running:
                continue  # watched for its own sake (a controller's kind, a policy engine's, ...)
            resource = self._resolve(key)
            if resource is None:
                unserved.append(key)
            elif len(self._admitted) >= self._listed_limit:
                over.append(key)
            else:
                self._admitted.add(key)
                served = self._served.get(key)
                if served is not None:
                    self._custom[served[0]] = resource
                self._start(resource, self._sink)
        self._telemetry.listed_kinds = {
            "watched": frozenset(self._admitted),
            "over_limit": frozenset(over),
            "not_served": frozenset(unserved),
        }
        self._say_left_out(tuple(over), tuple(unserved))

    def _resolve(self, key: KindKey) -> Resource | None:
        """Where the API server serves a listed kind: its CRD, the built-in table, or discovery."""
        served = self._served.get(key)
        if served is not None:
            return served[1]
        return ON_DEMAND_BY_KEY.get(key) or self._discoverable.get(key)

    def _stop_kind(self, key: KindKey, why: str) -> None:
        entry = self._running.get(key)
        if entry is None:
            return
        resource = entry[0].resource
        for name in [name for name, r in self._custom.items() if r == resource]:
            del self._custom[name]
        self._stop(resource, why)

    def _say_left_out(self, over: tuple[KindKey, ...], unserved: tuple[KindKey, ...]) -> None:
        """Name the listed kinds not watched, once each time the set changes: their objects are
        counted as not read (stalewatch_listed_objects_unread), and this says why. A kind is not
        said unserved before every CRD has been listed (its CRD may be on the next page)."""
        crds = self._telemetry.kinds.get(CRDS.key)
        if crds is None or not (crds.synced or crds.forbidden):
            unserved = ()
        if (over, unserved) == self._left_out:
            return
        self._left_out = (over, unserved)
        if over:
            log.warning(
                "inventories list more kinds than listed_kinds_limit: not watched, their objects not read",
                extra=fields(limit=self._listed_limit, kinds=[kind_name(k) for k in over]),
            )
        if unserved:
            log.warning(
                "inventories list kinds the API server does not serve (no CRD Established): not watched",
                extra=fields(kinds=[kind_name(k) for k in unserved]),
            )

    # -- Discovery, while CRDs are forbidden ------------------------------------------------

    async def _discovery_loop(self) -> None:
        """Find custom kinds through API discovery for as long as CRDs cannot be listed."""
        log.warning("cannot list CustomResourceDefinitions: finding custom kinds through API discovery")
        limits = aiohttp.ClientTimeout(total=self._options.request_timeout)
        try:
            while (crds := self._telemetry.kinds.get(CRDS.key)) is not None and crds.forbidden:
                try:
                    extra = self._extra | self._listed
                    found = await discover(self._api, self._controllers, limits=limits, extra=extra)
                except _DISCOVERY_ERRORS as error:
                    log.warning("API discovery failed", extra=fields(error=describe_error(error)))
                else:
                    self._reconcile_discovered(found)
                await asyncio.sleep(self._options.forbidden_retry)
        finally:
            self._discovery = None

    def _reconcile_discovered(self, found: dict[KindKey, Resource]) -> None:
        """Watch what discovery found that we want; listed kinds go through the limit."""
        self._discoverable = found
        for key, resource in list(self._discovered.items()):
            if found.get(key) != resource:
                del self._discovered[key]
                self._stop(resource, "no longer served (API discovery)")
        for key, resource in found.items():
            if key not in self._running and wanted(self._controllers, *key, self._extra):
                self._discovered[key] = resource
                self._start(resource, self._sink)
        self._refresh_listed()
        self._say_unserved()

    # -- Reachability ----------------------------------------------------------------------

    def _reachability_changed(self, up: bool) -> None:
        for reflector, _ in self._running.values():
            if up:
                reflector.wake()
            else:
                reflector.interrupt()
        self._sink.notify()

    async def _probe_loop(self) -> None:
        interval, patience = self._options.probe_interval, self._options.probe_timeout
        limits = aiohttp.ClientTimeout(total=patience)
        while True:
            await asyncio.sleep(interval)
            try:
                async with asyncio.timeout(patience):
                    response = await get(self._api, "/version", [], limits=limits)
                response.release()
            except UNREACHABLE as error:
                self.link.lost(error)
            except CONNECTION_ERRORS:
                continue  # e.g. a pooled connection the server had closed: the next probe tells
            else:
                self.link.reached()
