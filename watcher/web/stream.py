"""`GET /api/v1/stream`: the page's parts, live, as server-sent events.

The page at `/` opens this stream with its own query string (a filtered view stays filtered).
On connect the client gets every part of its view once; after each new evaluation (and when the
watch status changes: the trust banner is a part), only the parts whose HTML changed, were
added or were removed (watcher.web.delta); every `heartbeat` seconds, and at once when the
watch status changes, a heartbeat with the watch status and the age of the data. Events:

  event: evaluation   id: EPOCH-NUMBER       data: {"generation", "time", "age", "status",
                      "state", "full", "changed", "added", "removed"}
  event: heartbeat                           data: {"generation", "time", "age", "status", "state"}

`state` is "live" only when the watch status has nothing against the data (freshness.py).
A reconnecting EventSource sends `Last-Event-ID`: a client one event behind gets the last delta
again, one up to date nothing; any other (unknown, older, another process's epoch) the
full state.

Cost is per evaluation per distinct view, not per client: the hub renders each view that has
clients once, in one worker thread, and sends the same bytes to all of that view's clients.
Bounded: at most `max_clients` connections and `max_views` distinct views (503 beyond, the
page retries later); a client more than `backlog` events behind (it stopped reading) is
dropped, its connection aborted; it reconnects and gets a fresh full state. A client and its
view are counted the moment it connects, before anything is awaited (its view's first render):
600 connections opened at once get `max_clients` streams and 503s, never 600 renders.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import orjson
from aiohttp import web

from watcher.generations import Generations
from watcher.logs import fields, get_logger
from watcher.model.types import rfc3339
from watcher.web.delta import Delta, delta, full
from watcher.web.freshness import age_of, state_of
from watcher.web.page import PageState
from watcher.web.parts import Part

log = get_logger("web")

V = TypeVar("V", bound=Hashable)
"""A view: what a query string asks to see (the page's parsed query), the key renders are shared by."""


PartsOf = Callable[[PageState, V], list[Part]]
"""Renders a view's parts; called in a worker thread."""


@dataclasses.dataclass(eq=False)
class Client(Generic[V]):
    view: V
    queue: asyncio.Queue[bytes | None]
    abort: Callable[[], None] = lambda: None
    dropped: bool = False
    started: bool = False
    """Its first events are queued: heartbeats may follow them (none may come before)."""


@dataclasses.dataclass(eq=False)
class _Cached(Generic[V]):
    """A view's parts at `generation` (rendered from `state`), the number of the event that
    brought a client to them (`sent`; `previous` before `last_event`, that event), and who
    watches it. Until `first` (its first render) is done, `parts` is empty and the loop leaves
    it alone; its clients wait for it."""

    parts: list[Part]
    generation: int
    state: PageState
    sent: int
    last_event: bytes = b""
    previous: int = -1
    clients: set[Client[V]] = dataclasses.field(default_factory=set)
    first: asyncio.Future[list[Part]] | None = None

    @property
    def rendered(self) -> bool:
        return self.first is None


class Busy(Exception):
    """Too many clients or views: the caller answers 503."""


class StreamHub(Generic[V]):
    def __init__(
        self,
        *,
        state: Callable[[], PageState],
        view: Callable[[web.Request], V],
        parts: PartsOf[V],
        published: Generations,
        heartbeat: float = 15.0,
        poll: float = 1.0,
        max_clients: int = 100,
        max_views: int = 20,
        backlog: int = 16,
        retry_ms: int = 3000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`view` reads a stream request's view (the render key: its query, its path); `poll`: how often the
        watch status is compared with the last one sent (a change goes out at once, not with the
        next heartbeat)."""
        self._state, self._parts, self._published = state, parts, published
        self.view_of = view
        self.heartbeat, self._poll, self._clock = heartbeat, poll, clock
        self.max_clients, self.max_views, self.backlog = max_clients, max_views, backlog
        self._retry = f"retry: {retry_ms}\n\n".encode()
        self._epoch = secrets.token_hex(4)
        self.clients: set[Client[V]] = set()
        self.views: dict[V, _Cached[V]] = {}
        self._sent_status: Mapping[str, Any] | None = None
        self._round = 0
        """Numbers the render passes: an event's id is `EPOCH-ROUND` of the pass that made it."""
        self._poke = asyncio.Event()

    # -- clients ---------------------------------------------------------------------------

    async def connect(
        self, view: V, *, last_event_id: str | None = None, abort: Callable[[], None] = lambda: None
    ) -> Client[V]:
        """A client of `view` with its first events queued (`retry:`, then the full state or
        what `last_event_id` lacks). Raises Busy past the bounds.

        The client and a new view are registered before the first await, so the bounds hold
        however many connect at once; a new view's first render is shared by every client of it
        that comes meanwhile, and runs on if the client that asked for it leaves."""
        if len(self.clients) >= self.max_clients:
            raise Busy(f"{len(self.clients)} stream clients already (at most {self.max_clients})")
        cached = self.views.get(view)
        if cached is None:
            if len(self.views) >= self.max_views:
                raise Busy(f"{len(self.views)} distinct views streamed already (at most {self.max_views})")
            generation, state = self._published.count, self._state()
            cached = self.views[view] = _Cached([], generation, state, self._round)
            cached.first = asyncio.ensure_future(asyncio.to_thread(self._parts, state, view))
            cached.first.add_done_callback(_retrieved)  # its clients may all have left
        client = Client(view, asyncio.Queue(self.backlog), abort)
        cached.clients.add(client)
        self.clients.add(client)
        try:
            if cached.first is not None:
                parts = await asyncio.shield(cached.first)
                if cached.first is not None:  # the first of its clients to wake fills it in
                    cached.parts, cached.first = parts, None
                    if cached.generation != self._published.count:
                        self._poke.set()
        except BaseException:  # the render failed, or this client left while it ran
            self.disconnect(client)
            raise
        if client in self.clients:  # else it was ended meanwhile (shutdown): its queue says so
            client.queue.put_nowait(self._retry)
            first = self._catch_up(cached, last_event_id)
            if first:
                client.queue.put_nowait(first)
            client.started = True
        return client

    def _catch_up(self, cached: _Cached[V], last_event_id: str | None) -> bytes:
        if last_event_id == self._event_id(cached.sent):
            return b""
        if cached.last_event and last_event_id == self._event_id(cached.previous):
            return cached.last_event
        now = dataclasses.replace(cached.state, status=self._state().status)
        return self._evaluation_event(cached.sent, cached.generation, now, full(cached.parts), whole=True)

    def disconnect(self, client: Client[V]) -> None:
        self.clients.discard(client)
        cached = self.views.get(client.view)
        if cached is not None:
            cached.clients.discard(client)
            if not cached.clients:
                del self.views[client.view]

    def _send(self, client: Client[V], event: bytes) -> None:
        if client.dropped:
            return
        try:
            client.queue.put_nowait(event)
        except asyncio.QueueFull:
            self._drop(client)

    def _drop(self, client: Client[V]) -> None:
        """It stopped reading: forget its backlog, abort its connection (a blocked write ends)."""
        log.info("dropped a stream client that fell behind", extra=fields(backlog=self.backlog))
        client.dropped = True
        self._end(client)
        client.abort()

    def _end(self, client: Client[V]) -> None:
        """Its stream ends after what it was sent so far."""
        self.disconnect(client)
        while not client.queue.empty():
            client.queue.get_nowait()
        client.queue.put_nowait(None)

    def close(self) -> None:
        """Ends every stream (the server is shutting down)."""
        for client in list(self.clients):
            self._end(client)

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: render the views behind the latest evaluation or the watch status (the trust
        banner says it), send their deltas; send a heartbeat when one is due or the watch
        status changed."""
        seen, beat = self._published.count, time.monotonic() + self.heartbeat
        self._sent_status = self._state().status  # what every client's first event will say
        while True:
            await self._wake(seen, within=max(0.0, min(self._poll, beat - time.monotonic())))
            try:
                seen, beat = await self._pass(beat)
            except Exception:  # a bug here must not end the stream's loop for good
                log.exception("the live stream's pass failed; trying again")
                await asyncio.sleep(self._poll)

    async def _pass(self, beat: float) -> tuple[int, float]:
        """One pass; returns the generation it brought the views to and the next heartbeat's time.

        With no view streamed it takes no state: the state holds a snapshot of the objects for
        the stacks, which at 200k objects is real work on the event loop on every evaluation,
        for nobody (a client that connects is given the state of that moment)."""
        if not self.views:  # and no heartbeat is due to nobody (the loop would wake at once)
            return self._published.count, time.monotonic() + self.heartbeat
        seen, state = self._published.count, self._state()
        behind = [
            (view, cached)
            for view, cached in self.views.items()
            if cached.rendered and (cached.generation != seen or cached.state.status != state.status)
        ]
        if behind:
            await self._render(seen, state, behind)
        if state.status != self._sent_status or time.monotonic() >= beat:
            self._broadcast(self._heartbeat_event(seen, state))
            self._sent_status, beat = state.status, time.monotonic() + self.heartbeat
        return seen, beat

    async def _wake(self, seen: int, *, within: float) -> None:
        """Until a new evaluation, a poke (a view made behind) or `within` seconds."""
        waits = {asyncio.ensure_future(self._published.wait(seen)), asyncio.ensure_future(self._poke.wait())}
        try:
            await asyncio.wait(waits, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            self._poke.clear()

    async def _render(
        self, generation: int, state: PageState, behind: Sequence[tuple[V, _Cached[V]]]
    ) -> None:
        views = [view for view, _ in behind]
        try:
            rendered = await asyncio.to_thread(lambda: [self._parts(state, view) for view in views])
        except Exception:  # a renderer bug: its clients would see old parts as live
            log.exception("rendering the stream's parts failed; ending those streams")
            for _, cached in behind:
                for client in list(cached.clients):
                    self._end(client)
            return
        self._round += 1
        for (view, cached), parts in zip(behind, rendered, strict=True):
            if self.views.get(view) is not cached:
                continue  # its last client left meanwhile
            change = delta(cached.parts, parts)
            event = self._evaluation_event(self._round, generation, state, change, whole=False)
            cached.previous, cached.sent, cached.generation = cached.sent, self._round, generation
            cached.parts, cached.state, cached.last_event = parts, state, event
            for client in list(cached.clients):
                self._send(client, event)

    def _broadcast(self, event: bytes) -> None:
        for client in list(self.clients):
            if client.started:
                self._send(client, event)

    # -- events ----------------------------------------------------------------------------

    def _event_id(self, number: int) -> str:
        return f"{self._epoch}-{number}"

    def _about(self, generation: int, state: PageState) -> dict[str, Any]:
        evaluation = state.evaluation
        return {
            "generation": generation,
            "time": rfc3339(evaluation.now) if evaluation is not None else None,
            "age": age_of(evaluation, self._clock()),
            "status": state.status,
            "state": state_of(evaluation, state.status),
        }

    def _evaluation_event(
        self, number: int, generation: int, state: PageState, change: Delta, *, whole: bool
    ) -> bytes:
        data = {**self._about(generation, state), "full": whole, **change.to_dict()}
        return b"id: %s\nevent: evaluation\ndata: %s\n\n" % (
            self._event_id(number).encode(),
            orjson.dumps(data),
        )

    def _heartbeat_event(self, generation: int, state: PageState) -> bytes:
        return b"event: heartbeat\ndata: %s\n\n" % orjson.dumps(self._about(generation, state))


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Marks a failure read: whoever still waits has it raised (no 'never retrieved' warning)."""
    if not future.cancelled():
        future.exception()


HUB: web.AppKey[StreamHub[Any]] = web.AppKey("stream_hub", StreamHub)

STREAM_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
}
"""`X-Accel-Buffering: no`: a proxy in front (nginx) must pass events on as they come."""


def install(app: web.Application, hub: StreamHub[Any]) -> None:
    """The route, the hub's loop for the app's lifetime, and every stream ended on shutdown
    (else each open page would hold the shutdown for its whole timeout)."""
    app[HUB] = hub
    app.router.add_get("/api/v1/stream", stream)

    async def loop(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(hub.run(), name="stalewatch stream hub")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def shutdown(app: web.Application) -> None:
        hub.close()

    app.cleanup_ctx.append(loop)
    app.on_shutdown.append(shutdown)


async def stream(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    transport = request.transport
    try:
        client = await hub.connect(
            hub.view_of(request),
            last_event_id=request.headers.get("Last-Event-ID"),
            abort=transport.abort if transport is not None else lambda: None,
        )
    except Busy as error:
        raise web.HTTPServiceUnavailable(
            text=f"{error}; retry later\n", headers={"Retry-After": "10"}
        ) from None
    response = web.StreamResponse(headers=STREAM_HEADERS)
    try:
        await response.prepare(request)
        while (event := await client.queue.get()) is not None:
            await response.write(event)
    except (ConnectionError, RuntimeError):
        pass  # the client went away (or was dropped); nothing to answer
    finally:
        hub.disconnect(client)
    return response
