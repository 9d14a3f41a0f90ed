"""List + watch of one kind, owned end to end (client-go's Reflector, kopf's watching.py).

The loop: a paginated list (limit/continue) REPLACES the kind's cache atomically and gives a
resourceVersion; a watch (allowWatchBookmarks, an explicit timeoutSeconds) resumes from it,
every event including BOOKMARK advancing it. A normal close re-watches from the last version.
410 Gone (as an ERROR event or an HTTP status) means the history we need is compacted away:
relist and replace, so objects deleted during the gap are emitted as deletions. An inactivity
watchdog closes streams that went silent without closing. Connection errors, 429 (honouring
Retry-After) and 5xx back off exponentially with jitter. 403 degrades this kind alone.

Per event the work is O(1): decode one line, project the object, hand the projection to
the sink. Lines and list pages have one decoder (watcher.model.fastpath's decode() and
decode_page(), which take the typed fast path when sure and orjson + project() otherwise).
Objects it cannot read (malformed) are counted and logged once per version, and listed
(KindStats.unreadable) until fixed, deleted or gone from a relist.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson
from opentelemetry import trace

from watcher.kube.client import (
    CONNECTION_ERRORS,
    UNREACHABLE,
    Backoff,
    classify,
    describe_error,
    get,
    retry_after,
    sleep_or_wake,
)
from watcher.kube.resources import Resource
from watcher.logs import fields, get_logger
from watcher.model.fastpath import ObjectKey, Unreadable, fast_path, metadata_of
from watcher.model.quarantine import unreadable
from watcher.model.types import Rejection, Subject
from watcher.telemetry import KindStats, Telemetry
from watcher.tracing import tracer

log = get_logger("kube")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A watch line longer than this is a broken stream (etcd's object limit is 1.5 MiB)."""

Malformed = dict[ObjectKey, tuple[str, Rejection]]
"""Objects set aside as unreadable: (the version read, "uid/resourceVersion"; the rejection)."""


class Sink(Protocol):
    """Where a reflector delivers projected objects (the live model, or a test store)."""

    def upsert(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        """A projection: a dict, or a healthy Pod still packed (watcher.model.graph.Packed)."""

    def delete(self, resource: Resource, obj: dict[str, Any]) -> None: ...

    def retain(self, resource: Resource, keys: set[ObjectKey]) -> None:
        """A relist delivered its objects (upserts, page by page): of the kind, only these
        (namespace, name) remain, anything else of it is gone."""

    def notify(self) -> None:
        """Watch state changed (synced, forbidden, live): re-evaluate soon."""


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """Timings and sizes; the defaults suit a production cluster, tests shrink them."""

    page_size: int = 500
    watch_timeout: float = 300.0
    """timeoutSeconds asked of the server (plus up to 25% jitter), after which we re-watch."""
    inactivity_grace: float = 30.0
    """The watchdog closes a stream silent for timeoutSeconds + this."""
    settle: float = 0.25
    """A resumed watch that sends no ERROR within this long is trusted (the kind is live)."""
    backoff_initial: float = 0.5
    backoff_cap: float = 30.0
    forbidden_retry: float = 60.0
    request_timeout: float = 60.0
    """Connect and per-read timeout of list pages (a watch has only the connect part)."""
    probe_interval: float = 5.0
    probe_timeout: float = 10.0
    """A probe unanswered this long means unreachable: generous, since it interrupts every watch."""


class Link:
    """API-server reachability and acceptance, fed by every request a reflector or the probe opens.

    Only failing to connect (or to get an answer in time) counts as unreachable; a connection
    reset or a watch stream cut midway (a proxy, a server closing long requests) is that
    request's problem, not an outage. The log says so at the first failure (also when the
    server was never reached), then once every `repeat` seconds while it lasts, and once when
    it answers again; a 401 (credentials rejected) is logged once until a request is accepted.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        on_change: Callable[[bool], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        repeat: float = 60.0,
    ) -> None:
        self._telemetry = telemetry
        self._on_change = on_change
        self._clock, self._repeat = clock, repeat
        self._down_since: float | None = None
        self._said_at = 0.0

    def reached(self) -> None:
        if self._down_since is not None:
            log.info(
                "API server reachable again",
                extra=fields(unreachable_seconds=round(self._clock() - self._down_since)),
            )
            self._down_since = None
        elif not self._telemetry.up:
            log.info("API server reachable")
        if not self._telemetry.up:
            self._telemetry.up = True
            self._on_change(True)

    def lost(self, error: BaseException) -> None:
        now = self._clock()
        if self._down_since is None:
            self._down_since = self._said_at = now
            log.warning("API server unreachable", extra=fields(error=describe_error(error)))
        elif now - self._said_at >= self._repeat:
            self._said_at = now
            log.warning(
                "API server still unreachable",
                extra=fields(error=describe_error(error), unreachable_seconds=round(now - self._down_since)),
            )
        if self._telemetry.up:
            self._telemetry.up = False
            self._on_change(False)

    def rejected(self, message: str) -> None:
        """The API server answered 401: it does not accept our credentials."""
        if not self._telemetry.unauthorized:
            log.error(
                "the API server rejects stalewatch's credentials (401 Unauthorized): check the "
                "kubeconfig user or the ServiceAccount token",
                extra=fields(error=message),
            )
        self._telemetry.unauthorized = (
            f"401 Unauthorized: the API server rejects stalewatch's credentials ({message})"
        )

    def accepted(self) -> None:
        if self._telemetry.unauthorized:
            self._telemetry.unauthorized = ""
            log.info("the API server accepts stalewatch's credentials again")


_SAID_ONCE = frozenset({"connection_error", "unauthorized"})
"""Failures the Link logs itself (at the first, then once a minute / once), not per request."""


class _Gone(Exception):
    pass


class _Forbidden(Exception):
    pass


class _Retry(Exception):
    def __init__(self, reason: str, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.reason, self.delay = reason, delay


class _Interrupted(Exception):
    """The watcher closed the stream on purpose (connectivity lost, stopping)."""


class Reflector:
    """Keeps one kind of the sink in step with the API server until cancelled."""

    def __init__(
        self,
        api: Any,
        resource: Resource,
        sink: Sink,
        telemetry: Telemetry,
        link: Link,
        *,
        options: WatchOptions,
        keep_namespace: Callable[[str], bool] = lambda namespace: True,
    ) -> None:
        self.resource = resource
        self.rv: str | None = None
        self._api, self._sink, self._link, self._options = api, sink, link, options
        self._keep = keep_namespace
        self._decoder = fast_path(resource.api_version, resource.kind)
        self.stats: KindStats = telemetry.kind(resource.group, resource.kind)
        self._keys: set[ObjectKey] = set()
        self._malformed: Malformed = self.stats.unreadable
        self._response: aiohttp.ClientResponse | None = None
        self._interrupted = False
        self._wake = asyncio.Event()
        self._wakeable = False
        self._activity = 0.0
        self._backoff = Backoff(initial=options.backoff_initial, cap=options.backoff_cap)
        self._where = fields(group=resource.group, kind=resource.kind)

    # -- Control, from the supervisor ------------------------------------------------------

    def interrupt(self) -> None:
        """Close the current watch stream; the loop reconnects (after a backoff)."""
        self.stats.live = False
        if self._response is not None:
            self._interrupted = True
            self._response.close()

    def wake(self) -> None:
        """Cut short a backoff sleep caused by an unreachable server (it is back)."""
        if self._wakeable:
            self._wake.set()

    # -- The loop --------------------------------------------------------------------------

    async def run(self) -> None:
        reason = "initial"
        while True:
            try:
                if self.rv is None:
                    await self._list(reason)
                await self._watch()
                continue
            except _Gone:
                self.stats.watch_gone += 1
                self.stats.live = False  # relisting: the last known objects stay, stale, until it completes
                self._sink.notify()
                log.info("watch expired (410 Gone), relisting", extra=self._where)
                self.rv, reason = None, "gone"
                continue
            except _Forbidden as error:
                self._forbidden(str(error))
                self.rv, reason = None, ("forbidden" if self.stats.synced else "initial")
                await self._sleep(self._options.forbidden_retry, wakeable=False)
            except _Interrupted:
                await self._sleep(self._backoff.next(), wakeable=True)
            except _Retry as error:
                self.stats.live = False
                self._sink.notify()
                if error.reason not in _SAID_ONCE:
                    log.warning("watch request failed", extra=fields(**self._fields(), error=str(error)))
                delay = error.delay if error.delay is not None else self._backoff.next()
                await self._sleep(delay, wakeable=error.delay is None)

    async def _sleep(self, delay: float, *, wakeable: bool) -> None:
        self._wake.clear()
        self._wakeable = wakeable
        try:
            await sleep_or_wake(self._wake, delay)
        finally:
            self._wakeable = False

    def _fields(self) -> dict[str, Any]:
        return {"group": self.resource.group, "kind": self.resource.kind}

    def _forbidden(self, message: str) -> None:
        self.stats.live = False
        if not self.stats.forbidden:
            self.stats.forbidden = True
            log.warning(
                "cannot see this kind: the API server answers 403 Forbidden; grant get, list and watch "
                "on it to stalewatch's ServiceAccount",
                extra=fields(**self._fields(), resource=self.resource.plural, error=message),
            )
        self._sink.notify()

    # -- Requests --------------------------------------------------------------------------

    def _query(self, *pairs: tuple[str, str]) -> list[tuple[str, str]]:
        query = list(pairs)
        if self.resource.field_selector:
            query.append(("fieldSelector", self.resource.field_selector))
        return query

    async def _open(
        self, query: list[tuple[str, str]], counter: dict[str, int], limits: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        """A 200 response, or the exception saying what to do about the failure."""
        try:
            async with asyncio.timeout(self._options.request_timeout):
                response = await get(self._api, self.resource.path, query, limits=limits)
        except CONNECTION_ERRORS as error:
            counter["connection_error"] = counter.get("connection_error", 0) + 1
            if isinstance(error, UNREACHABLE):
                self._link.lost(error)
            raise _Retry("connection_error", describe_error(error)) from None
        self._link.reached()
        result = classify(response.status)
        counter[result] = counter.get(result, 0) + 1
        if result == "ok":
            self._link.accepted()
            return response
        try:
            body = await response.read()
        except CONNECTION_ERRORS:
            body = b""
        finally:
            response.release()
        message = _status_message(body) or f"HTTP {response.status}"
        if result == "gone":
            raise _Gone(message)
        if result == "forbidden":
            raise _Forbidden(message)
        if response.status == 401:
            self._link.rejected(message)
            raise _Retry("unauthorized", f"HTTP 401: {message}")
        delay = retry_after(response.headers.get("Retry-After")) if result == "throttled" else None
        raise _Retry(result, f"HTTP {response.status}: {message}", delay=delay)

    async def _list(self, reason: str) -> None:
        """All pages, each delivered as it arrives (a 50k-Pod list is never held whole: its
        projections would raise the process's high-water mark for good); once all arrived,
        whatever of the kind was not listed is gone."""
        attributes = {
            "k8s.group": self.resource.group,
            "k8s.kind": self.resource.kind,
            "stalewatch.reason": reason,
        }
        with tracer().start_as_current_span("stalewatch.relist", attributes=attributes):
            await self._list_pages(reason)

    async def _list_pages(self, reason: str) -> None:
        timeout = aiohttp.ClientTimeout(
            sock_connect=self._options.request_timeout, sock_read=self._options.request_timeout
        )
        keys: set[ObjectKey] = set()
        malformed: Malformed = {}
        token = ""
        while True:
            paging = [("limit", str(self._options.page_size))] + ([("continue", token)] if token else [])
            query = self._query(*paging)
            try:
                response = await self._open(query, self.stats.list_requests, timeout)
            except _Gone:
                if not token:
                    raise
                token = ""  # the continue token expired mid-list: start the list over
                keys, malformed = set(), {}
                continue
            try:
                body = await response.read()
            except CONNECTION_ERRORS as error:
                raise _Retry("decode_error", f"list page unreadable: {describe_error(error)}") from None
            finally:
                response.release()
            try:
                page = self._decoder.decode_page(body)
            except Unreadable as error:
                raise _Retry("decode_error", str(error)) from None
            for key, obj in page.items:
                if self._keep(key[0]):
                    keys.add(key)
                    self._sink.upsert(self.resource, obj)
            for item in page.malformed:
                if self._keep(item.key[0]):
                    self._set_aside(item.key, item.problem, item.metadata, malformed)
            token, rv = page.continue_token, page.resource_version
            if not token:
                break
        self._commit(keys, malformed, rv, reason)

    def _commit(self, keys: set[ObjectKey], malformed: Malformed, rv: str, reason: str) -> None:
        self._sink.retain(self.resource, keys)
        trace.get_current_span().set_attributes(
            {"stalewatch.objects": len(keys), "stalewatch.malformed": len(malformed)}
        )
        self._keys, self._malformed = keys, malformed
        self.rv = rv or None
        stats = self.stats
        stats.objects, stats.unreadable = len(keys), malformed
        self._malformed_changed()
        stats.relists[reason] += 1
        if stats.forbidden:
            log.info("this kind is visible again", extra=self._where)
        stats.synced, stats.live, stats.forbidden = True, True, False
        self._backoff.reset()
        self._sink.notify()
        log.info(
            "listed",
            extra=fields(**self._fields(), objects=len(keys), malformed=len(malformed), reason=reason),
        )

    async def _watch(self) -> None:
        options = self._options
        seconds = int(options.watch_timeout * (1 + random.random() / 4)) or 1
        query = self._query(
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.rv or ""),
            ("timeoutSeconds", str(seconds)),
        )
        timeout = aiohttp.ClientTimeout(sock_connect=options.request_timeout)
        response = await self._open(query, self.stats.watch_requests, timeout)
        self._response, self._interrupted = response, False
        loop = asyncio.get_running_loop()
        self._activity = started = loop.time()
        settle = loop.call_later(options.settle, self._settled)
        watchdog = asyncio.create_task(self._watchdog(response, seconds + options.inactivity_grace))
        events = 0
        try:
            events = await self._stream(response)
        except CONNECTION_ERRORS as error:
            if self._interrupted:
                raise _Interrupted from None
            reason = "timeout" if watchdog.done() else "connection"
            self.stats.watch_errors[reason] += 1
            raise _Retry(reason, f"watch stream broke: {describe_error(error)}") from None
        finally:
            settle.cancel()
            watchdog.cancel()
            response.close()
            self._response = None
        if self._interrupted:
            raise _Interrupted
        if watchdog.done() and not watchdog.cancelled():
            self.stats.watch_errors["timeout"] += 1
            raise _Retry("timeout", "watch stream went silent; reconnecting")
        if events == 0 and loop.time() - started < 1.0:
            raise _Retry("closed_early", "watch closed at once without events", delay=self._backoff.next())
        self._backoff.reset()

    async def _watchdog(self, response: aiohttp.ClientResponse, limit: float) -> None:
        """Close a stream that has been silent for longer than `limit` seconds."""
        loop = asyncio.get_running_loop()
        while True:
            left = self._activity + limit - loop.time()
            if left <= 0:
                log.warning("watch stream silent, reconnecting", extra=self._where)
                response.close()
                return
            await asyncio.sleep(left)

    def _settled(self) -> None:
        if not self.stats.live:
            self.stats.live = True
            self._sink.notify()

    async def _stream(self, response: aiohttp.ClientResponse) -> int:
        """Feed every complete line to _event; returns how many events arrived."""
        loop = asyncio.get_running_loop()
        pending = bytearray()
        count = 0
        async for chunk in response.content.iter_any():
            self._activity = loop.time()
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if pending:
                    pending += chunk[start:end]
                    line: bytes = bytes(pending)
                    pending.clear()
                else:
                    line = chunk[start:end]
                start = end + 1
                if line.strip():
                    count += 1
                    self._event(line)
            pending += chunk[start:]
            if len(pending) > MAX_LINE_BYTES:
                self.stats.watch_errors["decode"] += 1
                raise _Retry("decode", f"watch line longer than {MAX_LINE_BYTES} bytes")
        return count

    # -- Events ----------------------------------------------------------------------------

    def _event(self, line: bytes) -> None:
        try:
            event = self._decoder.decode(line)
        except Unreadable as error:
            self.stats.watch_errors["decode"] += 1
            raise _Retry("decode", str(error)) from None
        stats = self.stats
        stats.events[event.type] += 1
        stats.last_event = time.time()
        if event.type == "ERROR":
            self._error_event(event.raw or {})
        if not stats.live:
            stats.live = True
            self._sink.notify()
        if event.resource_version:
            self.rv = event.resource_version
        if event.type == "DELETED":
            self._forget(event.key, keep_malformed=False)
        elif event.type != "ADDED" and event.type != "MODIFIED":
            return  # a BOOKMARK: only its resourceVersion counts
        elif not self._keep(event.key[0]):
            self._forget(event.key, keep_malformed=True)
        elif event.object is not None:
            self._accept(event.key, event.object)
        else:
            self._set_aside(event.key, event.problem, metadata_of(event.raw), self._malformed)
            self._forget(event.key, keep_malformed=True)

    def _error_event(self, status: Mapping[str, Any]) -> None:
        code = status.get("code")
        message = str(status.get("message") or status.get("reason") or "watch error")
        result = classify(code) if isinstance(code, int) else "client_error"
        if result == "gone":
            raise _Gone(message)
        if result == "forbidden":
            raise _Forbidden(message)
        self.stats.watch_errors[result] += 1
        raise _Retry(result, f"watch ERROR event {code}: {message}")

    def _set_aside(self, key: ObjectKey, problem: str, meta: Mapping[str, Any], into: Malformed) -> None:
        """An object the decoder could not read: listed in `into`, counted and logged once per version."""
        version = f"{meta.get('uid', '')}/{meta.get('resourceVersion', '')}"
        if version not in (self._malformed.get(key, ("",))[0], into.get(key, ("",))[0]):
            self.stats.malformed += 1
            log.warning(
                "malformed object skipped",
                extra=fields(
                    **self._fields(), namespace=key[0], name=key[1], resource_version=version, error=problem
                ),
            )
        subject = Subject(
            apiVersion=self.resource.api_version, kind=self.resource.kind, namespace=key[0], name=key[1]
        )
        into[key] = (version, unreadable(subject, problem))
        if into is self._malformed:
            self._malformed_changed()

    def _malformed_changed(self) -> None:
        """The unreadable objects listed changed: count them, and evaluate soon to list them."""
        self.stats.malformed_now = len(self._malformed)
        self.stats.unreadable_changes += 1
        self._sink.notify()

    def _accept(self, key: ObjectKey, projected: Mapping[str, Any]) -> None:
        if self._malformed.pop(key, None) is not None:
            self._malformed_changed()
        self._keys.add(key)
        self.stats.objects = len(self._keys)
        self._sink.upsert(self.resource, projected)

    def _forget(self, key: ObjectKey, *, keep_malformed: bool) -> None:
        if not keep_malformed and self._malformed.pop(key, None) is not None:
            self._malformed_changed()
        if key in self._keys:
            self._keys.discard(key)
            self.stats.objects = len(self._keys)
            stub = {"namespace": key[0], "name": key[1]} if key[0] else {"name": key[1]}
            self._sink.delete(
                self.resource,
                {"apiVersion": self.resource.api_version, "kind": self.resource.kind, "metadata": stub},
            )


def _status_message(body: bytes) -> str:
    """The `message` of a Kubernetes Status body, else the first line of the body."""
    try:
        status = orjson.loads(body)
        if isinstance(status, dict) and isinstance(status.get("message"), str):
            return str(status["message"])
    except orjson.JSONDecodeError:
        pass
    text = body.decode(errors="replace").strip()
    return text.splitlines()[0][:300] if text else ""
