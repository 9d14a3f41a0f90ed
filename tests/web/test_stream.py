"""`/api/v1/stream` on its own: the real hub behind the real hardened aiohttp app, read over HTTP
as an EventSource reads it. The parts here are a small table of objects (one row part each,
filtered by `?namespace=`), so what the stream sends can be checked against what changed."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from html import escape
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client.registry import CollectorRegistry

from tests.kube.support import poll
from tests.web.dom import parse
from tests.web.incident import HOSTILE, NOW, incident
from tests.web.sse import Board, next_event, next_named
from tests.web.test_browser import live_telemetry
from watcher.model.evaluation import Evaluation
from watcher.model.types import ObjectHealth, Status
from watcher.telemetry import Telemetry
from watcher.web.page import PageState as State
from watcher.web.parts import Part
from watcher.web.server import create_app, hardened_app, watch_status
from watcher.web.stream import StreamHub, install


def namespace_of(request: web.Request) -> str | None:
    """The view: a namespace, or None for all (every other parameter is ignored)."""
    return request.query.get("namespace") or None


def rows(state: State, namespace: str | None) -> list[Part]:
    """One row per object, in the view's namespace if it names one."""
    objects = state.evaluation.objects if state.evaluation is not None else []
    made = []
    for o in objects:
        s = o.subject
        if namespace is None or s["namespace"] == namespace:
            ident = f"obj-{s['kind']}-{s['namespace']}-{s['name']}"
            html = f'<tr id="{ident}"><td>{escape(str(o.status))}</td><td>{escape(o.reason)}</td></tr>'
            made.append(Part(ident, "objects", html))
    return made


@dataclasses.dataclass
class Streaming:
    url: str
    hub: StreamHub[str | None]
    board: Board
    telemetry: Telemetry
    http: aiohttp.ClientSession
    renders: list[str | None]
    broken: list[bool]

    @asynccontextmanager
    async def open(
        self, query: str = "", headers: dict[str, str] | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        async with self.http.get(self.url + query, headers=headers) as response:
            yield response

    def later(self, change: Any = None) -> Evaluation:
        """The next evaluation: a second later, with `change(objects)` applied to its objects."""
        latest = self.board.latest
        assert latest is not None
        objects = change(list(latest.objects)) if change is not None else latest.objects
        evaluation = dataclasses.replace(latest, now=latest.now + timedelta(seconds=1), objects=objects)
        self.board.publish(evaluation)
        return evaluation


@asynccontextmanager
async def streaming(telemetry: Telemetry | None = None, **hub: Any) -> AsyncIterator[Streaming]:
    board, telemetry = Board(), telemetry or live_telemetry()
    board.publish(incident())
    renders: list[str | None] = []
    broken = [False]

    def state() -> State:
        return State(board.latest, watch_status(telemetry, board.latest), objects=5, load_errors=0)

    def counted(state: State, view: str | None) -> list[Part]:
        renders.append(view)
        if broken[0]:
            raise RuntimeError("a bug in the renderer")
        return rows(state, view)

    hub.setdefault("clock", lambda: NOW + timedelta(seconds=2))
    made = StreamHub(state=state, view=namespace_of, parts=counted, published=board.published, **hub)
    app = hardened_app()
    install(app, made)
    async with TestServer(app) as server, aiohttp.ClientSession() as http:
        yield Streaming(str(server.make_url("/api/v1/stream")), made, board, telemetry, http, renders, broken)


def row_ids(parts: list[dict[str, Any]]) -> list[str]:
    return [p["id"] for p in parts]


ALL_ROWS = [
    "obj-Terraform-flux-system-vpc",
    "obj-Terraform-flux-system-dns",
    "obj-Kustomization-flux-system-apps",
    "obj-Kustomization-web-frontend",
    "obj-GitRepository-web-fleet",
]


def failing(name: str, reason: str = "ReconciliationFailed") -> Any:
    def change(objects: list[ObjectHealth]) -> list[ObjectHealth]:
        return [
            dataclasses.replace(o, status=Status.FAILED, reason=reason) if o.subject["name"] == name else o
            for o in objects
        ]

    return change


def without(name: str) -> Any:
    return lambda objects: [o for o in objects if o.subject["name"] != name]


async def test_the_stream_is_an_uncached_event_stream_with_the_hardened_headers() -> None:
    async with streaming() as s, s.open() as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert response.headers["Server"] == "stalewatch"
        assert await response.content.readline() == b"retry: 3000\n"


async def test_a_new_client_gets_the_whole_view_once_with_its_freshness() -> None:
    async with streaming() as s, s.open() as response:
        first = await next_named(response, "evaluation")
        data = first.data
        assert (data["full"], data["changed"], data["removed"]) == (True, [], [])
        assert row_ids(data["added"]) == ALL_ROWS
        assert [a["before"] for a in data["added"]] == [*ALL_ROWS[1:], None]
        assert {a["container"] for a in data["added"]} == {"objects"}
        assert (data["time"], data["age"], data["state"]) == ("2026-11-30T12:00:00Z", 2.0, "live")
        assert data["status"]["up"] is True
        assert re.fullmatch(r"[0-9a-f]{8}-\d+", str(first.id))


async def test_after_an_evaluation_only_the_changed_row_is_sent() -> None:
    async with streaming() as s, s.open() as response:
        await next_named(response, "evaluation")
        s.later(failing("frontend"))
        data = (await next_named(response, "evaluation")).data
        assert data["full"] is False
        assert [(p["id"], p["html"]) for p in data["changed"]] == [
            ("obj-Kustomization-web-frontend", '<tr id="obj-Kustomization-web-frontend"><td>Failed</td>'
             "<td>ReconciliationFailed</td></tr>"),
        ]  # fmt: skip
        assert (data["added"], data["removed"]) == ([], [])
        assert (data["time"], data["generation"]) == ("2026-11-30T12:00:01Z", 2)


async def test_an_object_gone_is_sent_as_removed_and_nothing_else() -> None:
    async with streaming() as s, s.open() as response:
        await next_named(response, "evaluation")
        s.later(without("dns"))
        data = (await next_named(response, "evaluation")).data
        assert (data["changed"], data["added"]) == ([], [])
        assert data["removed"] == ["obj-Terraform-flux-system-dns"]


async def test_an_evaluation_with_nothing_new_still_says_how_fresh_it_is() -> None:
    async with streaming() as s, s.open() as response:
        await next_named(response, "evaluation")
        s.later()
        data = (await next_named(response, "evaluation")).data
        assert (data["changed"], data["added"], data["removed"]) == ([], [], [])
        assert (data["age"], data["state"]) == (1.0, "live")


async def test_a_heartbeat_comes_on_its_interval_with_the_watch_status_and_the_data_age() -> None:
    async with streaming(heartbeat=0.05) as s, s.open() as response:
        await next_named(response, "evaluation")
        beat = (await next_named(response, "heartbeat")).data
        assert (beat["state"], beat["age"], beat["generation"]) == ("live", 2.0, 1)
        assert beat["status"]["synced"] is True
        assert "changed" not in beat


async def test_the_api_server_lost_is_sent_at_once_not_at_the_next_heartbeat() -> None:
    async with streaming(heartbeat=3600, poll=0.05) as s, s.open() as response:
        await next_named(response, "evaluation")
        s.telemetry.up = False
        beat = (await next_named(response, "heartbeat")).data
        assert (beat["state"], beat["status"]["up"]) == ("stale", False)


async def test_a_filtered_view_stays_filtered_and_is_rendered_once_for_all_its_clients() -> None:
    web = ["obj-Kustomization-web-frontend", "obj-GitRepository-web-fleet"]
    async with (
        streaming() as s,
        s.open("?namespace=web") as one,
        s.open("?namespace=web") as two,
        s.open() as everything,
    ):
        for response in (one, two):
            assert row_ids((await next_named(response, "evaluation")).data["added"]) == web
        await next_named(everything, "evaluation")
        s.renders.clear()
        s.later(failing("vpc"))
        for response in (one, two):
            data = (await next_named(response, "evaluation")).data
            assert (data["changed"], data["added"], data["removed"]) == ([], [], [])
        changed = (await next_named(everything, "evaluation")).data["changed"]
        assert row_ids(changed) == ["obj-Terraform-flux-system-vpc"]
        assert sorted(s.renders, key=str) == [None, "web"], "one render per view, not per client"


async def test_hostile_text_arrives_escaped_inside_one_json_data_line() -> None:
    async with streaming() as s, s.open() as response:
        await next_named(response, "evaluation")
        s.later(failing("frontend", reason=HOSTILE + "\nsecond line\r\nthird"))
        event = await next_named(response, "evaluation")
        html = event.data["changed"][0]["html"]
        assert ("<script>" in html, "<img" in html) == (False, False)
        assert escape(HOSTILE) in html
        data_lines = [line for line in event.raw.split(b"\n") if line.startswith(b"data:")]
        assert len(data_lines) == 1
        assert b"\r" not in event.raw
        assert orjson.loads(data_lines[0].removeprefix(b"data: ")) == event.data


async def test_a_reconnect_gets_only_what_it_missed() -> None:
    async with streaming() as s, s.open() as keeper:  # keeps the view cached while others reconnect
        await next_named(keeper, "evaluation")
        async with s.open() as response:
            first = await next_named(response, "evaluation")
            s.later(failing("frontend"))
            missed = await next_named(response, "evaluation")
        async with s.open(headers={"Last-Event-ID": str(first.id)}) as behind:
            again = await next_named(behind, "evaluation")
            assert (again.id, again.data) == (missed.id, missed.data)
        async with s.open(headers={"Last-Event-ID": str(missed.id)}) as current:
            s.later(without("fleet"))
            nxt = (await next_named(current, "evaluation")).data
            assert (nxt["full"], nxt["removed"]) == (False, ["obj-GitRepository-web-fleet"])
        async with s.open(headers={"Last-Event-ID": "another-process-7"}) as unknown:
            assert (await next_named(unknown, "evaluation")).data["full"] is True


async def test_past_the_client_bound_the_stream_answers_503_and_says_why() -> None:
    async with streaming(max_clients=1) as s, s.open() as first:
        await next_named(first, "evaluation")
        async with s.open() as second:
            assert second.status == 503
            assert second.headers["Retry-After"] == "10"
            assert "1 stream clients already (at most 1)" in await second.text()


async def test_past_the_view_bound_a_new_view_is_refused_but_a_known_one_served() -> None:
    async with streaming(max_views=1) as s, s.open("?namespace=web") as first:
        await next_named(first, "evaluation")
        async with s.open("?namespace=flux-system") as other, s.open("?namespace=web") as same:
            assert (other.status, same.status) == (503, 200)


async def test_a_client_that_stops_reading_is_dropped_and_its_connection_closed() -> None:
    """A socket that never reads, a small receive buffer, big rows: the server's writes block,
    the backlog fills, the hub drops the client and aborts the connection."""
    async with streaming(backlog=2) as s:
        big = "x" * 200_000
        host, port = s.url.removeprefix("http://").split("/")[0].split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(f"GET /api/v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        await poll(lambda: len(s.hub.clients) == 1, what="the client connected")
        (client,) = s.hub.clients
        generation = 0
        while not client.dropped:
            generation += 1
            s.later(failing("frontend", reason=f"{generation}{big}"))
            await asyncio.sleep(0.02)
            assert generation < 500, "never dropped"
        assert s.hub.clients == set()
        assert s.hub.views == {}
        received = 0
        async with asyncio.timeout(10):
            while chunk := await reader.read(1 << 20):
                received += len(chunk)
        assert received < generation * len(big), "the server stopped sending before the end"
        writer.close()


async def test_a_renderer_that_fails_ends_the_streams_instead_of_serving_old_rows_as_live() -> None:
    async with streaming() as s, s.open() as response:
        await next_named(response, "evaluation")
        s.broken[0] = True
        s.later()
        while (event := await next_event(response)) is not None:
            assert event.name == "heartbeat"
        assert s.hub.clients == set()


def the_app(board: Board, telemetry: Telemetry) -> web.Application:
    """The real app (create_app: the page's own parts) serving the incident published on `board`."""
    board.publish(incident())
    return create_app(
        telemetry=telemetry,
        source=lambda: board.latest,
        registry=CollectorRegistry(),
        published=board.published,
    )


async def test_the_app_streams_the_pages_own_parts_for_the_pages_own_query() -> None:
    """create_app's stream: the parts `/?namespace=web` renders, then the delta of an evaluation
    whose reason is hostile, escaped as the page escapes it."""
    board, telemetry = Board(), live_telemetry()
    app = the_app(board, telemetry)
    async with TestServer(app) as server, aiohttp.ClientSession() as http:
        async with http.get(server.make_url("/?namespace=web")) as page:
            shown = parse(await page.text())
        async with http.get(server.make_url("/api/v1/stream?namespace=web")) as response:
            first = (await next_named(response, "evaluation")).data
            for added in first["added"]:
                assert shown.by_id(added["container"]).by_id(added["id"]), added["id"]
            objects = parse(next(a["html"] for a in first["added"] if a["container"] == "objects"))
            assert [td.text for td in objects.all("td")[2::8]] == ["frontend", "fleet"]
            latest = board.latest
            assert latest is not None
            board.publish(
                dataclasses.replace(latest, objects=failing("fleet", reason=HOSTILE)(latest.objects))
            )
            data = (await next_named(response, "evaluation")).data
            (table,) = [p for p in data["changed"] if p["container"] == "objects"]
            assert escape(HOSTILE) in table["html"]
            assert [td.text for td in parse(table["html"]).all("td")[4::8]] == [HOSTILE, "Ready"], "bad first"


async def test_the_trust_banner_follows_the_watch_status_without_a_new_evaluation() -> None:
    """While the API server is unreachable the live model publishes nothing new (it serves the
    last evaluation, frozen): the banner part must still say so."""
    board, telemetry = Board(), live_telemetry()
    app = the_app(board, telemetry)
    async with (
        TestServer(app) as server,
        aiohttp.ClientSession() as http,
        http.get(server.make_url("/api/v1/stream")) as response,
    ):
        first = (await next_named(response, "evaluation")).data
        assert "Live: every watch is synced" in first["added"][0]["html"]
        telemetry.up = False
        data = (await next_named(response, "evaluation", within=10)).data
        assert (data["generation"], data["state"]) == (first["generation"], "stale")
        (banner,) = [p for p in data["changed"] if p["container"] == "header"]
        assert "STALE: the Kubernetes API server is unreachable" in banner["html"]


async def test_with_no_client_an_evaluation_takes_no_page_state() -> None:
    """The page state holds a snapshot of the objects (the stacks): taken for nobody after every
    evaluation, it cost a 200k-object cluster's event loop real time."""
    board, telemetry, taken = Board(), live_telemetry(), [0]
    board.publish(incident())

    def state() -> State:
        taken[0] += 1
        return State(board.latest, watch_status(telemetry, board.latest), objects=5, load_errors=0)

    hub = StreamHub(state=state, view=namespace_of, parts=rows, published=board.published, poll=0.01)
    running = asyncio.create_task(hub.run())
    try:
        await asyncio.sleep(0)
        at_start = taken[0]
        for _ in range(5):
            board.publish(incident())
            await asyncio.sleep(0.02)
        assert taken[0] == at_start
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
