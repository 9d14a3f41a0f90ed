"""The web surfaces of `stalewatch run` (the page, stack and object pages, the stream, the
timeline API) under hostile input: connections opened all at once, revisions of 400 KB,
numbers in other scripts, bidi overrides and `..` in names. Each answer is asserted: the 503
past a bound, the bytes an answer may take, the 400 naming the parameter, the text spelled out,
the name not linked."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urljoin, urlsplit

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import MultiDict

from tests.kube.support import poll
from tests.model.builders import NOW, kustomization
from tests.model.test_timeline import replicaset
from tests.web.cluster import REV_A, cluster, incident
from tests.web.dom import parse
from tests.web.incident import incident as incident_evaluation
from tests.web.sse import Board
from tests.web.test_browser import live_telemetry
from tests.web.test_stream import namespace_of, rows
from watcher.model.ingest.projection import project
from watcher.model.types import Subject
from watcher.model.views.timeline import VALUE_LIMIT, Change, Entry, Timeline
from watcher.model.views.transitions import object_changes, rollout_of
from watcher.web.page import PageState
from watcher.web.parts import Part
from watcher.web.server import hardened_app, watch_status
from watcher.web.stream import StreamHub, install
from watcher.web.timeline import MAX_LIMIT, TIMELINE, BadParameter, read_query, timeline_document

RAW = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""What no page may carry raw (tab, newline and CR are layout in HTML)."""
BIDI = "ok \u202eevil\x1b[2J"
ODD_IDS = {
    "..": "flux-system_.._apps_Deployment",
    ".": "flux-system_._apps_Deployment",
    "a namespace ..": ".._web_apps_Deployment",
}
"""Inventory entries whose names a browser would resolve away, by what is odd about them."""
LINKED = "flux-system_ok_apps_Deployment"


# -- the stream's bounds, under connections opened at once -------------------------------------


@dataclass
class Gated:
    """A hub whose renders wait at a gate, and the peak of the views it held."""

    hub: StreamHub[str | None]
    arrived: list[str | None]
    gate: threading.Event
    peak: list[int]

    def look(self) -> None:
        self.peak[0] = max(self.peak[0], len(self.hub.views))


@pytest.mark.parametrize(
    ("views", "bounds", "accepted", "why"),
    [
        pytest.param(
            60, {"max_views": 4}, 4, "distinct views streamed already (at most 4)", id="each its own view"
        ),
        pytest.param(1, {"max_clients": 10}, 10, "stream clients already (at most 10)", id="all one view"),
    ],
)
async def test_connections_opened_at_once_past_a_bound_are_each_refused_503_and_views_stay_within_theirs(
    views: int, bounds: dict[str, int], accepted: int, why: str
) -> None:
    """600 connections at once once made 576 views of a limit of 20: every check passed before
    the first render came back. Here every connection reaches the hub before any render may."""
    board, telemetry, connections = Board(), live_telemetry(), 60
    board.publish(incident_evaluation())
    gated = Gated(None, [], threading.Event(), [0])  # type: ignore[arg-type]

    def view(request: web.Request) -> str | None:
        gated.arrived.append(namespace_of(request))
        gated.look()
        return gated.arrived[-1]

    def parts(state: PageState, view: str | None) -> list[Part]:
        gated.gate.wait(timeout=20)
        gated.look()
        return rows(state, view)

    def state() -> PageState:
        return PageState(board.latest, watch_status(telemetry, board.latest), objects=5, load_errors=0)

    gated.hub = StreamHub(state=state, view=view, parts=parts, published=board.published, **bounds)
    app = hardened_app()
    install(app, gated.hub)
    async with TestServer(app) as server, aiohttp.ClientSession() as http:
        url = str(server.make_url("/api/v1/stream"))
        opened = [
            asyncio.ensure_future(http.get(f"{url}?namespace=ns-{i % views}")) for i in range(connections)
        ]
        await poll(
            lambda: len(gated.arrived) == connections, within=20, what="every connection reached the hub"
        )
        gated.gate.set()
        responses = await asyncio.gather(*opened)
        gated.look()
        refused = [await r.text() for r in responses if r.status == 503]
        statuses = sorted(r.status for r in responses)
        for response in responses:
            response.close()
    assert statuses == [200] * accepted + [503] * (connections - accepted)
    assert all(why in text for text in refused)
    assert gated.peak[0] <= bounds.get("max_views", 20)


# -- the timeline, bounded in bytes ------------------------------------------------------------


def flips(revision_a: str, revision_b: str, count: int) -> list[Entry]:
    """`count` applies flipping a Kustomization between two revisions, as the live model records them."""
    a, b = (project(kustomization("apps", applied=rev)) for rev in (revision_a, revision_b))
    found: list[Entry] = []
    for i in range(count):
        old, new = (a, b) if i % 2 == 0 else (b, a)
        found += object_changes(old, new, now=NOW + timedelta(seconds=i), controller="kustomize-controller")
    return found


def test_flips_between_two_long_revisions_answer_in_bounded_bytes_and_keep_the_two_apart() -> None:
    """300 flips of two 400 KB revisions once answered 240 MB; the revisions here share their
    first 100 KB, so only a digest of the whole tells them apart."""
    common = "main@sha1:" + "a" * 100_000
    timeline = Timeline(limit=5000)
    timeline.extend(flips(common + "1", common + "2", 300))
    body = timeline_document(timeline, now=NOW, limit=MAX_LIMIT)
    entries = orjson.loads(body)["entries"]
    assert len(entries) == 300
    assert len(body) < 300 * 2000
    assert all(len(e["before"]) <= VALUE_LIMIT and len(e["after"]) <= VALUE_LIMIT for e in entries)
    assert {e["after"] for e in entries} == {e["before"] for e in entries}
    assert len({e["after"] for e in entries}) == 2, "the two revisions stay distinguishable"
    assert entries[0]["after"].startswith("main@sha1:aaaa")


def test_the_timeline_keeps_within_its_byte_budget_dropping_the_oldest_and_counting_them() -> None:
    timeline = Timeline(limit=1000, budget=20_000)
    made = [
        Entry(
            NOW + timedelta(seconds=i),
            Change.READY_CHANGED,
            subject(f"apps-{i}"),
            None,
            "True",
            "False",
            "é" * 900,
        )
        for i in range(100)
    ]
    timeline.extend(made)
    assert timeline.bytes <= 20_000
    assert sum(entry.size for entry in timeline.newest_first()) == timeline.bytes
    assert timeline.dropped == 100 - len(timeline)
    assert timeline.newest_first()[0] is made[-1], "the newest kept, the oldest dropped"


def subject(name: str) -> Subject:
    return Subject(apiVersion="v1", kind="Kustomization", namespace="flux-system", name=name)


# -- numbers in the query string ---------------------------------------------------------------

NOT_ASCII_NUMBERS = [
    pytest.param("²", id="a superscript digit (isdigit yes, int no)"),
    pytest.param("٣", id="an Arabic-Indic digit (int reads it)"),
    pytest.param("9" * 5000, id="five thousand digits (int refuses)"),
    pytest.param("1_0", id="an underscore separator (int reads it)"),
]


@dataclass
class Served:
    http: aiohttp.ClientSession
    url: str

    async def get(self, path: str) -> tuple[int, str]:
        async with self.http.get(self.url + path) as response:
            return response.status, await response.text()

    async def opens(self, path: str) -> tuple[int, str]:
        """The status and type of a stream, closed once its headers came."""
        async with self.http.get(self.url + path) as response:
            return response.status, response.headers["Content-Type"]


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """The real app on a cluster whose messages carry a bidi override and ESC, and a stack
    (flux-system/odd) that lists names a browser resolves away."""
    odd = kustomization("odd", applied=REV_A, inventory=[*ODD_IDS.values(), LINKED])
    app = cluster(incident(message=BIDI), odd).app()
    timeline = Timeline(limit=100)
    timeline.extend(flips(REV_A, REV_A + "x", 3))
    app[TIMELINE] = timeline
    async with TestServer(app) as server, aiohttp.ClientSession() as http:
        yield Served(http, str(server.make_url("")).rstrip("/"))


@pytest.mark.parametrize("value", NOT_ASCII_NUMBERS)
async def test_a_limit_not_in_ascii_digits_is_a_400_naming_limit(served: Served, value: str) -> None:
    status, body = await served.get(f"/api/v1/timeline?limit={value}")
    assert status == 400
    assert orjson.loads(body)["error"].startswith(f"limit: expected a whole number from 1 to {MAX_LIMIT}")


@pytest.mark.parametrize("value", NOT_ASCII_NUMBERS)
@pytest.mark.parametrize("path", ["/", "/stacks/flux-system/flux-system"])
async def test_a_page_number_not_in_ascii_digits_is_named_on_the_page_which_shows_page_one(
    served: Served, path: str, value: str
) -> None:
    """The page's query never fails the page (a pasted URL with a typo still helps): the value
    is named among its problems, as `?page=x` is."""
    status, body = await served.get(f"{path}?page={value}")
    assert status == 200
    assert "is not a page number (1 to 100000): showing page 1" in parse(body).text


@pytest.mark.parametrize("value", NOT_ASCII_NUMBERS)
async def test_a_page_number_not_in_ascii_digits_still_opens_the_stream(served: Served, value: str) -> None:
    status, content_type = await served.opens(f"/api/v1/stream?page={value}")
    assert (status, content_type) == (200, "text/event-stream; charset=utf-8")


def test_a_replicaset_whose_revision_is_not_in_ascii_digits_is_no_rollout() -> None:
    made = replicaset("web", "5d4f8", revision=2, image="web:2")
    assert rollout_of(made) is not None
    made["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "²"
    assert rollout_of(made) is None


# -- since: what a setting takes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("since", "status"),
    [
        pytest.param("1000000h", 200, id="a million hours: a setting takes it"),
        pytest.param("2562047h", 200, id="the longest Go duration's hours"),
        pytest.param("2562048h", 400, id="past the longest Go duration"),
    ],
)
async def test_since_takes_the_durations_a_setting_takes(served: Served, since: str, status: int) -> None:
    answered, body = await served.get(f"/api/v1/timeline?since={since}")
    assert answered == status
    if status == 200:
        assert orjson.loads(body)["summary"]["returned"] == 3
    else:
        assert orjson.loads(body)["error"].startswith("since: ")
        assert "at most 2562047h47m16s, the longest Go duration" in orjson.loads(body)["error"]


# -- bidi and control characters in HTML -------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/", id="the page"),
        pytest.param("/objects/Terraform/flux-system/vpc", id="an object page"),
    ],
)
async def test_a_bidi_override_and_esc_reach_the_html_spelled_out_as_the_terminal_shows_them(
    served: Served, path: str
) -> None:
    status, body = await served.get(path)
    assert status == 200
    assert RAW.search(body) is None
    assert "ok \\u202eevil\\x1b[2J" in parse(body).text


async def test_a_bidi_override_and_esc_reach_the_stream_spelled_out(served: Served) -> None:
    async with served.http.get(served.url + "/api/v1/stream") as response:
        while not (line := await response.content.readline()).startswith(b"data: "):
            pass
    html = "".join(part["html"] for part in orjson.loads(line[6:])["added"])
    assert RAW.search(html) is None
    assert "ok \\u202eevil\\x1b[2J" in html


# -- names a browser resolves away -------------------------------------------------------------


async def test_a_name_a_browser_resolves_away_is_shown_not_linked_and_no_link_resolves_elsewhere(
    served: Served,
) -> None:
    status, body = await served.get("/stacks/flux-system/odd")
    assert status == 200
    table = parse(body).by_id("stacks-rows")
    cells = {tr.all("td")[0].text: tr.all("td")[0].all("a") for tr in table.all("tr")}
    assert {name: len(cells[name]) for name in cells if name.startswith("Deployment")} == {
        "Deployment flux-system/..": 0,
        "Deployment flux-system/.": 0,
        "Deployment ../web": 0,
        "Deployment flux-system/ok": 1,
    }
    hrefs = [a.attrs["href"] for a in parse(body).walk() if a.tag == "a"]
    for href in hrefs:
        assert urlsplit(urljoin("http://stalewatch/stacks/flux-system/odd", href)).path == (
            urlsplit(href).path or "/stacks/flux-system/odd"
        ), href


# -- the timeline API, fuzzed ------------------------------------------------------------------

hostile_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["²", "٣", "9" * 5000, "1_0", "-5m", "1000000h", "2562048h", "0", "1", "5001", "15m"]),
    st.sampled_from(["2026-12-01T09:00:00Z", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"]),
)


@settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    query=st.lists(
        st.tuples(st.sampled_from(["since", "subject", "limit", "x", "²"]), hostile_values), max_size=3
    ),
    revision=st.one_of(st.text(max_size=30), st.sampled_from(["x" * 70_000, BIDI])),
)
def test_no_query_or_revision_makes_the_timeline_api_raise_or_answer_unbounded(
    query: list[tuple[str, str]], revision: str
) -> None:
    """What the handler does, with any query and any revision recorded: an answer or a 400 in
    one line naming a parameter, never another exception; each entry within its bound."""
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    timeline = Timeline(limit=100)
    timeline.extend(flips(revision or "none", REV_A, 4))
    try:
        read, problem = read_query(MultiDict(query), now=now), ""
    except BadParameter as error:
        read, problem = {}, str(error)
    if problem:
        assert "\n" not in problem
        assert problem.split(":")[0] in {name[:40] for name, _ in query}
        return
    body = timeline_document(timeline, now=now, **read)
    assert len(body) < 5 * 2000
    assert orjson.loads(body)["summary"]["kept"] == len(timeline)
