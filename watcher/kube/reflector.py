"""List + watch of one kind, owned end to end (client-go's Reflector, kopf's watching.py).

The loop: a paginated list (limit/continue) REPLACES the kind's cache atomically and gives a
resourceVersion; a watch (allowWatchBookmarks, an explicit timeoutSeconds) resumes from it,
every event including BOOKMARK advancing it. A normal close re-watches from the last version.
410 Gone (as an ERROR event or an HTTP status) means the history we need is compacted away:
relist and replace, so objects deleted during the gap are emitted as deletions. An inactivity
watchdog closes streams that went silent without closing. Connection errors, 429 (honouring
Retry-After) and 5xx back off exponentially with jitter. 403 degrades this kind alone.

Per event the work is O(1): decode one line, project the object, hand the projection to
the sink. Lines and list pages have one decoder (watcher.model.ingest.fastpath's decode() and
decode_page(), which take the typed fast path when sure and orjson + project() otherwise).
Objects it cannot read (malformed) are counted and logged once per version, and listed
(KindStats.unreadable) until fixed, deleted or gone from a relist (watcher.kube.ledger).
What each answer means (relist, degrade, back off) is watcher.kube.request's; whether the API
server is reachable at all, watcher.kube.link's.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from opentelemetry import trace

from watcher.kube.client import CONNECTION_ERRORS, Backoff, describe_error, sleep_or_wake
from watcher.kube.ledger import Ledger, Malformed, Sink
from watcher.kube.link import SAID_BY_LINK, Link
from watcher.kube.request import Forbidden, Gone, Interrupted, Retry, open_request, watch_error
from watcher.kube.resources import Resource
from watcher.logs import fields, get_logger
from watcher.model.ingest.decoded import ObjectKey, Unreadable, metadata_of
from watcher.model.ingest.fastpath import fast_path
from watcher.telemetry import KindStats, Telemetry
from watcher.tracing import tracer

log = get_logger("kube")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A watch line longer than this is a broken stream (etcd's object limit is 1.5 MiB)."""


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
    read_hold: float = 0.05
    """After a small read of a watch stream, leave its socket unread this long, so the events that
    arrive meanwhile are read, decrypted and handled in one wake-up instead of one each: under
    churn a wake-up per event, each on cold caches, was most of stalewatch's CPU (BENCHMARKS.md,
    "Reading watch streams in batches"). The first event after a quiet spell is read at once; one
    close behind it waits at most this long, then joins the next pass. 0 reads every event as it
    arrives."""
    busy_read: int = 64 * 1024
    """A read at least this large is no hold's business: the stream is busy (a relist's replay, a
    burst), each wake-up already carries many events, and holding would only slow it down."""


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
        stats: KindStats | None = None,
    ) -> None:
        """`stats`: where to keep count (one namespace's, kube/scoped.py), else the kind's."""
        self.resource = resource
        self.rv: str | None = None
        self._api, self._sink, self._link, self._options = api, sink, link, options
        self._keep = keep_namespace
        self._decoder = fast_path(resource.api_version, resource.kind)
        self.stats: KindStats = stats or telemetry.kind(resource.group, resource.kind)
        self._ledger = Ledger(resource, sink, self.stats)
        self._response: aiohttp.ClientResponse | None = None
        self._interrupted = False
        self._wake = asyncio.Event()
        self._wakeable = False
        self._activity = 0.0
        self._backoff = Backoff(initial=options.backoff_initial, cap=options.backoff_cap)
        self._kind = {"group": resource.group, "kind": resource.kind}
        if resource.namespace:
            self._kind["namespace"] = resource.namespace
        self._where = fields(**self._kind)

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

    def held(self) -> frozenset[ObjectKey]:
        """The objects it delivers to the sink now."""
        return self._ledger.keys

    # -- The loop --------------------------------------------------------------------------

    async def run(self) -> None:
        reason = "initial"
        while True:
            try:
                if self.rv is None:
                    await self._list(reason)
                await self._watch()
                continue
            except Gone:
                self.stats.watch_gone += 1
                self.stats.live = False  # relisting: the last known objects stay, stale, until it completes
                self._sink.notify()
                log.info("watch expired (410 Gone), relisting", extra=self._where)
                self.rv, reason = None, "gone"
                continue
            except Forbidden as error:
                self._forbidden(str(error))
                self.rv, reason = None, ("forbidden" if self.stats.synced else "initial")
                await self._sleep(self._options.forbidden_retry, wakeable=False)
            except Interrupted:
                await self._sleep(self._backoff.next(), wakeable=True)
            except Retry as error:
                self.stats.live = False
                self._sink.notify()
                if error.reason not in SAID_BY_LINK:
                    log.warning("watch request failed", extra=fields(**self._kind, error=str(error)))
                delay = error.delay if error.delay is not None else self._backoff.next()
                await self._sleep(delay, wakeable=error.delay is None)

    async def _sleep(self, delay: float, *, wakeable: bool) -> None:
        self._wake.clear()
        self._wakeable = wakeable
        try:
            await sleep_or_wake(self._wake, delay)
        finally:
            self._wakeable = False

    def _forbidden(self, message: str) -> None:
        self.stats.live = False
        if not self.stats.forbidden:
            self.stats.forbidden = True
            log.warning(
                "cannot see this kind: the API server answers 403 Forbidden; grant get, list and watch "
                "on it to stalewatch's ServiceAccount",
                extra=fields(**self._kind, resource=self.resource.plural, error=message),
            )
        self._sink.notify()

    # -- Requests --------------------------------------------------------------------------

    async def _open(
        self, pairs: list[tuple[str, str]], counter: dict[str, int], limits: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        return await open_request(
            self._api,
            self.resource,
            pairs,
            link=self._link,
            counter=counter,
            limits=limits,
            answer_within=self._options.request_timeout,
        )

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
            try:
                response = await self._open(paging, self.stats.list_requests, timeout)
            except Gone:
                if not token:
                    raise
                token = ""  # the continue token expired mid-list: start the list over
                keys, malformed = set(), {}
                continue
            try:
                body = await response.read()
            except CONNECTION_ERRORS as error:
                raise Retry("decode_error", f"list page unreadable: {describe_error(error)}") from None
            finally:
                response.release()
            try:
                page = self._decoder.decode_page(body)
            except Unreadable as error:
                raise Retry("decode_error", str(error)) from None
            for key, obj in page.items:
                if self._keep(key[0]):
                    keys.add(key)
                    self._sink.upsert(self.resource, obj)
            for item in page.malformed:
                if self._keep(item.key[0]):
                    self._ledger.set_aside(item.key, item.problem, item.metadata, malformed)
            token, rv = page.continue_token, page.resource_version
            if not token:
                break
        self._commit(keys, malformed, rv, reason)

    def _commit(self, keys: set[ObjectKey], malformed: Malformed, rv: str, reason: str) -> None:
        self._ledger.replace(keys, malformed)
        trace.get_current_span().set_attributes(
            {"stalewatch.objects": len(keys), "stalewatch.malformed": len(malformed)}
        )
        self.rv = rv or None
        stats = self.stats
        stats.relists[reason] += 1
        if stats.forbidden:
            log.info("this kind is visible again", extra=self._where)
        stats.synced, stats.live, stats.forbidden = True, True, False
        self._backoff.reset()
        self._sink.notify()
        log.info(
            "listed",
            extra=fields(**self._kind, objects=len(keys), malformed=len(malformed), reason=reason),
        )

    async def _watch(self) -> None:
        options = self._options
        seconds = int(options.watch_timeout * (1 + random.random() / 4)) or 1
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.rv or ""),
            ("timeoutSeconds", str(seconds)),
        ]
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
                raise Interrupted from None
            reason = "timeout" if watchdog.done() else "connection"
            self.stats.watch_errors[reason] += 1
            raise Retry(reason, f"watch stream broke: {describe_error(error)}") from None
        finally:
            settle.cancel()
            watchdog.cancel()
            response.close()
            self._response = None
        if self._interrupted:
            raise Interrupted
        if watchdog.done() and not watchdog.cancelled():
            self.stats.watch_errors["timeout"] += 1
            raise Retry("timeout", "watch stream went silent; reconnecting")
        if events == 0 and loop.time() - started < 1.0:
            raise Retry("closed_early", "watch closed at once without events", delay=self._backoff.next())
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
                raise Retry("decode", f"watch line longer than {MAX_LINE_BYTES} bytes")
            if len(chunk) < self._options.busy_read:
                await self._hold(response)
        return count

    async def _hold(self, response: aiohttp.ClientResponse) -> None:
        """Leave the stream's socket unread for `read_hold` (see WatchOptions). Paused through
        aiohttp's own flow control, which also stops the read timeout meanwhile."""
        hold, connection = self._options.read_hold, response.connection
        protocol = connection.protocol if connection is not None else None
        if hold <= 0 or protocol is None:
            return
        protocol.pause_reading()
        try:
            await asyncio.sleep(hold)
        finally:
            protocol.resume_reading()

    # -- Events ----------------------------------------------------------------------------

    def _event(self, line: bytes) -> None:
        try:
            event = self._decoder.decode(line)
        except Unreadable as error:
            self.stats.watch_errors["decode"] += 1
            raise Retry("decode", str(error)) from None
        stats = self.stats
        stats.events[event.type] += 1
        stats.last_event = time.time()
        if event.type == "ERROR":
            failure = watch_error(event.raw or {})
            if isinstance(failure, Retry):
                stats.watch_errors[failure.reason] += 1
            raise failure
        if not stats.live:
            stats.live = True
            self._sink.notify()
        if event.resource_version:
            self.rv = event.resource_version
        if event.type == "DELETED":
            self._ledger.forget(event.key, keep_malformed=False)
        elif event.type != "ADDED" and event.type != "MODIFIED":
            return  # a BOOKMARK: only its resourceVersion counts
        elif not self._keep(event.key[0]):
            self._ledger.forget(event.key, keep_malformed=True)
        elif event.object is not None:
            self._ledger.accept(event.key, event.object)
        else:
            ledger = self._ledger
            ledger.set_aside(event.key, event.problem, metadata_of(event.raw), ledger.malformed)
            self._ledger.forget(event.key, keep_malformed=True)
