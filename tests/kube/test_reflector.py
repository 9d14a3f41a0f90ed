"""The reflector against a scripted API server: the protocol rules, fast and one by one.

The same behaviour is proven against the real kube-apiserver in test_watch_cluster.py; here
each rule (pagination, bookmarks, re-watch, 410, Retry-After, backoff, 403, watchdog,
malformed objects) gets its own small script.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest
from aiohttp import web

from tests.kube.fake import (
    FakeApiServer,
    bookmark,
    client_for_url,
    event,
    gone_event,
    obj,
    page,
    reset,
    status,
    stream,
)
from tests.kube.support import FAST, MemorySink, poll
from watcher.kube.client import Backoff, classify, retry_after
from watcher.kube.link import Link
from watcher.kube.reflector import Reflector, WatchOptions
from watcher.kube.resources import Resource
from watcher.telemetry import UNREADABLE_LISTED, KindStats, Telemetry

KUSTOMIZATIONS = Resource("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations")


@dataclass
class Rig:
    server: FakeApiServer
    sink: MemorySink
    telemetry: Telemetry
    reflector: Reflector
    tasks: list[asyncio.Task[None]]

    @property
    def stats(self) -> KindStats:
        return self.reflector.stats

    def start(self) -> None:
        self.tasks.append(asyncio.create_task(self.reflector.run()))


@pytest.fixture
async def rig() -> AsyncIterator[Callable[..., Rig]]:
    """Makes a reflector for KUSTOMIZATIONS against its own scripted server; cleans both up."""
    made: list[Rig] = []
    tasks: list[asyncio.Task[None]] = []

    def make(*, options: WatchOptions = FAST, keep: Callable[[str], bool] = lambda ns: True) -> Rig:
        server = FakeApiServer()
        telemetry = Telemetry()
        sink = MemorySink()
        link = Link(telemetry, lambda up: None)
        api = client_for_url(server.url)
        reflector = Reflector(
            api, KUSTOMIZATIONS, sink, telemetry, link, options=options, keep_namespace=keep
        )
        made.append(Rig(server, sink, telemetry, reflector, tasks))
        return made[-1]

    yield make
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for r in made:
        await r.reflector._api.close()
        await r.server.stop()


async def test_a_relist_delivers_each_page_as_it_arrives_and_drops_the_unlisted_only_at_the_end(
    rig: Callable[..., Rig],
) -> None:
    """A 50k-Pod list is never held whole (BENCHMARKS.md: it raised the RSS for good)."""
    r = rig(options=replace(FAST, page_size=2))
    r.sink.upsert(r.reflector.resource, obj("gone", "1"))
    release = asyncio.Event()
    last = page([obj("c", "3")], "10")

    async def held(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return await last(request)

    r.server.lists.extend([page([obj("a", "1"), obj("b", "2")], "10", cont="next"), held])
    await r.server.start()
    r.start()
    await poll(lambda: {"a", "b"} <= r.sink.names("Kustomization"), what="the first page, before the last")
    assert "gone" in r.sink.names("Kustomization")
    assert not r.stats.synced
    release.set()
    await poll(lambda: r.stats.synced, what="synced")
    assert r.sink.names("Kustomization") == {"a", "b", "c"}
    assert r.sink.deleted == ["gone"]


async def test_list_follows_continue_tokens_and_replaces_the_kind_with_every_page_once_all_arrived(
    rig: Callable[..., Rig],
) -> None:
    r = rig(options=replace(FAST, page_size=2))
    r.server.lists.extend(
        [
            page([obj("a", "1"), obj("b", "2")], "10", cont="next"),
            page([obj("c", "3")], "10"),
        ]
    )
    await r.server.start()
    r.start()
    await poll(lambda: r.stats.synced, what="synced")
    assert r.sink.names("Kustomization") == {"a", "b", "c"}
    lists = r.server.requests("list")
    assert [s.query.get("limit") for s in lists] == ["2", "2"]
    assert [s.query.get("continue") for s in lists] == [None, "next"]
    assert r.sink.retained == 1
    assert r.stats.objects == 3
    watch = (await poll(lambda: r.server.requests("watch"), what="watch"))[0]
    assert watch.query["resourceVersion"] == "10"
    assert watch.query["allowWatchBookmarks"] == "true"
    assert int(watch.query["timeoutSeconds"]) >= 30


async def test_list_items_get_the_apiversion_and_kind_of_the_resource(rig: Callable[..., Rig]) -> None:
    r = rig()
    r.server.lists.append(page([obj("a", "1")], "5"))
    await r.server.start()
    r.start()
    await poll(lambda: r.stats.synced)
    stored = r.sink.objects["Kustomization", "default", "a"]
    assert (stored["apiVersion"], stored["kind"]) == ("kustomize.toolkit.fluxcd.io/v1", "Kustomization")


async def test_every_event_including_bookmarks_advances_the_resource_version_for_the_next_watch(
    rig: Callable[..., Rig],
) -> None:
    r = rig()
    r.server.lists.append(page([], "10"))
    r.server.watches.extend(
        [
            stream(event("ADDED", obj("a", "11")), event("MODIFIED", obj("a", "12")), bookmark("20")),
            stream(event("DELETED", obj("a", "21"))),
        ]
    )
    await r.server.start()
    r.start()
    await poll(lambda: len(r.server.requests("watch")) >= 3, what="third watch")
    assert [s.query["resourceVersion"] for s in r.server.requests("watch")[:3]] == ["10", "20", "21"]
    assert len(r.server.requests("list")) == 1, "a normal close re-watches, it does not relist"
    assert r.sink.deleted == ["a"]
    # (unary + drops the zero counts every counter starts with)
    assert +r.stats.events == {"ADDED": 1, "MODIFIED": 1, "BOOKMARK": 1, "DELETED": 1}
    assert r.stats.last_event is not None


async def test_a_line_split_across_writes_is_read_whole(rig: Callable[..., Rig]) -> None:
    r = rig()
    r.server.lists.append(page([], "10"))
    r.server.watches.append(stream(event("ADDED", obj("split", "11")), split=True, hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: r.sink.names("Kustomization") == {"split"})


def _added(*names: str) -> list[bytes]:
    return [event("ADDED", obj(name, str(11 + i))) for i, name in enumerate(names)]


async def test_events_arriving_while_a_stream_is_held_are_all_read_after_the_hold_in_order(
    rig: Callable[..., Rig],
) -> None:
    r = rig(options=replace(FAST, read_hold=0.2))
    r.server.lists.append(page([], "10"))
    r.server.watches.append(stream(*_added("a", "b", "c", "d", "e"), paced=0.02, hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: r.sink.names("Kustomization") == {"a", "b", "c", "d", "e"}, what="every event")
    assert +r.stats.events == {"ADDED": 5}
    assert r.reflector.rv == "15", "the last event read is the newest"


async def test_a_held_stream_is_not_read_until_its_hold_ends(rig: Callable[..., Rig]) -> None:
    """The promise the CPU saving rests on: what arrives during a hold waits in the socket."""
    r = rig(options=replace(FAST, read_hold=600))
    written = asyncio.Event()
    r.server.lists.append(page([], "10"))
    r.server.watches.append(stream(*_added("first", "behind"), paced=0.1, written=written, hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: "first" in r.sink.names("Kustomization"), what="the first event, read at once")
    await asyncio.wait_for(written.wait(), timeout=5)
    await asyncio.sleep(0.3)  # long enough for the read it would have been, were it not held
    assert r.sink.names("Kustomization") == {"first"}


async def test_a_stream_trickling_a_few_bytes_a_write_is_read_whole_and_in_order_through_the_holds(
    rig: Callable[..., Rig],
) -> None:
    """A proxy passing a watch on a few bytes at a time makes every read a small one, each then
    held: such a stream is read late (at most one read per hold), never cut, lost or misread."""
    r = rig(options=replace(FAST, read_hold=0.02))
    r.server.lists.append(page([], "10"))
    r.server.watches.append(stream(*_added("a", "b", "c"), trickle=7, hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: len(r.sink.names("Kustomization")) == 3, within=30, what="every event")
    assert [name for _, _, name in r.sink.objects] == ["a", "b", "c"]
    assert +r.stats.events == {"ADDED": 3}
    assert r.reflector.rv == "13"
    assert r.telemetry.malformed_now() == 0


async def test_a_busy_read_is_not_held(rig: Callable[..., Rig]) -> None:
    """Every read counts as busy here: were it held, the second event would wait ten minutes."""
    r = rig(options=replace(FAST, read_hold=600, busy_read=1))
    r.server.lists.append(page([], "10"))
    r.server.watches.append(stream(*_added("a", "b", "c"), paced=0.05, hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: r.sink.names("Kustomization") == {"a", "b", "c"}, what="every event, unheld")


async def test_a_reflector_stopped_during_a_hold_stops_at_once(rig: Callable[..., Rig]) -> None:
    r = rig(options=replace(FAST, read_hold=600))
    r.server.lists.append(page([], "10"))
    r.server.watches.append(stream(*_added("a"), hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: "a" in r.sink.names("Kustomization"), what="the event")
    task = r.tasks.pop()
    task.cancel()
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), timeout=5)
    assert task.cancelled()


@pytest.mark.parametrize(
    "expire",
    [
        pytest.param(lambda: stream(gone_event()), id="error-event"),
        pytest.param(lambda: status(410, "too old"), id="http-status"),
    ],
)
async def test_410_gone_relists_and_replaces_so_objects_deleted_in_the_gap_disappear(
    rig: Callable[..., Rig], expire: Callable[[], object]
) -> None:
    r = rig()
    r.server.lists.extend([page([obj("kept", "1"), obj("gone", "2")], "10"), page([obj("kept", "1")], "30")])
    r.server.watches.append(expire())  # type: ignore[arg-type]
    await r.server.start()
    r.start()
    await poll(lambda: r.stats.relists.get("gone") == 1, what="relist after 410")
    assert r.sink.names("Kustomization") == {"kept"}
    assert r.sink.deleted == ["gone"]
    assert r.stats.watch_gone == 1
    assert +r.stats.relists == {"initial": 1, "gone": 1}
    watch = await poll(lambda: r.server.requests("watch")[1:], what="watch after relist")
    assert watch[0].query["resourceVersion"] == "30"


async def test_an_expired_continue_token_restarts_the_list_from_the_first_page(
    rig: Callable[..., Rig],
) -> None:
    r = rig(options=replace(FAST, page_size=1))
    r.server.lists.extend(
        [
            page([obj("a", "1")], "10", cont="t1"),
            status(410, "The provided continue parameter is too old"),
            page([obj("a", "1")], "40", cont="t2"),
            page([obj("b", "2")], "40"),
        ]
    )
    await r.server.start()
    r.start()
    await poll(lambda: r.stats.synced)
    assert [s.query.get("continue") for s in r.server.requests("list")] == [None, "t1", None, "t2"]
    assert r.sink.names("Kustomization") == {"a", "b"}
    assert +r.stats.relists == {"initial": 1}


async def test_429_waits_at_least_retry_after_before_the_next_request(rig: Callable[..., Rig]) -> None:
    r = rig(options=replace(FAST, backoff_initial=0.01, backoff_cap=0.02))
    r.server.lists.extend([status(429, "slow down", headers={"Retry-After": "1"}), page([], "10")])
    await r.server.start()
    r.start()
    await poll(lambda: r.stats.synced, within=5)
    first, second = r.server.requests("list")
    assert second.at - first.at >= 1.0, "Retry-After: 1 was not honoured"
    assert +r.stats.list_requests == {"throttled": 1, "ok": 1}


async def test_5xx_retries_with_backoff_until_the_list_succeeds(rig: Callable[..., Rig]) -> None:
    r = rig()
    r.server.lists.extend([status(500), status(503), page([obj("a", "1")], "10")])
    await r.server.start()
    r.start()
    await poll(lambda: r.stats.synced)
    assert +r.stats.list_requests == {"server_error": 2, "ok": 1}
    assert r.sink.names("Kustomization") == {"a"}


async def test_a_watch_failing_with_5xx_is_retried_from_the_same_version(rig: Callable[..., Rig]) -> None:
    r = rig()
    r.server.lists.append(page([], "10"))
    r.server.watches.extend([status(500), stream(event("ERROR", {"code": 500, "message": "etcd"}))])
    await r.server.start()
    r.start()
    await poll(lambda: len(r.server.requests("watch")) >= 3)
    assert {s.query["resourceVersion"] for s in r.server.requests("watch")} == {"10"}
    assert r.stats.watch_requests["server_error"] == 1
    assert +r.stats.watch_errors == {"server_error": 1}
    assert len(r.server.requests("list")) == 1


async def test_403_marks_only_this_kind_forbidden_logs_it_and_recovers_when_allowed(
    rig: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    r = rig()
    r.server.lists.extend([status(403, 'kustomizations is forbidden: User "x" cannot list'), page([], "10")])
    await r.server.start()
    with caplog.at_level(logging.INFO, logger="stalewatch"):
        r.start()
        await poll(lambda: r.stats.forbidden, what="forbidden")
        assert r.telemetry.forbidden() == [("kustomize.toolkit.fluxcd.io", "Kustomization")]
        assert r.telemetry.blind() == {"Kustomization"}
        await poll(lambda: r.stats.synced and not r.stats.forbidden, what="allowed again")
    denied = [rec for rec in caplog.records if "403 Forbidden" in rec.getMessage()]
    assert len(denied) == 1
    assert denied[0].stalewatch_fields["kind"] == "Kustomization"  # type: ignore[attr-defined]
    assert +r.stats.relists == {"initial": 1}


async def test_a_silent_stream_is_closed_by_the_watchdog_and_watched_again(rig: Callable[..., Rig]) -> None:
    r = rig(options=replace(FAST, watch_timeout=1, inactivity_grace=0.5))
    r.server.lists.append(page([], "10"))
    r.server.watches.append(stream(hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: len(r.server.requests("watch")) >= 2, within=10, what="reconnect")
    assert r.stats.watch_errors["timeout"] >= 1


async def test_connection_refused_marks_the_api_server_unreachable_until_it_answers(
    rig: Callable[..., Rig],
) -> None:
    r = rig()
    r.server.lists.append(page([], "10"))
    r.start()
    await poll(lambda: r.stats.list_requests.get("connection_error", 0) >= 2, what="refused")
    assert not r.telemetry.up
    await r.server.start()
    await poll(lambda: r.stats.synced, within=5)
    assert r.telemetry.up


async def test_a_reset_connection_is_retried_without_declaring_the_api_server_unreachable(
    rig: Callable[..., Rig],
) -> None:
    r = rig()
    r.server.lists.append(page([], "10"))
    r.server.watches.extend([reset(), reset(), stream(event("ADDED", obj("a", "11")), hold=True)])
    await r.server.start()
    r.start()
    await poll(lambda: r.sink.names("Kustomization") == {"a"}, what="watching after the resets")
    # aiohttp itself retries a request once when a pooled connection turns out reset
    assert r.stats.watch_requests["connection_error"] >= 1
    assert r.telemetry.up, "a reset is not an outage"


async def test_a_malformed_object_is_counted_and_logged_once_per_version_and_the_rest_delivered(
    rig: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    bad = obj("bad", "2", status={"conditions": "not-a-list"})
    r = rig()
    r.server.lists.extend([page([obj("good", "1"), bad], "10"), page([obj("good", "1"), bad], "20")])
    r.server.watches.extend(
        [
            stream(event("MODIFIED", bad)),  # the same version again: not counted twice
            stream(gone_event()),  # a relist sees it once more: still not counted twice
            stream(event("MODIFIED", obj("bad", "25", status={"observedGeneration": "x"}))),  # a new version
        ]
    )
    await r.server.start()
    with caplog.at_level(logging.WARNING, logger="stalewatch"):
        r.start()
        await poll(lambda: r.stats.malformed == 2, what="second version counted")
        await poll(lambda: len(r.server.requests("watch")) >= 4, what="past the scripted events")
    assert r.sink.names("Kustomization") == {"good"}
    assert r.stats.malformed == 2
    assert r.stats.malformed_now == 1
    logged = [rec for rec in caplog.records if rec.getMessage() == "malformed object skipped"]
    assert [rec.stalewatch_fields["resource_version"] for rec in logged] == [  # type: ignore[attr-defined]
        "uid-bad/2",
        "uid-bad/25",
    ]
    assert "status.conditions is not a list" in logged[0].stalewatch_fields["error"]  # type: ignore[attr-defined]


async def test_an_object_that_turns_malformed_is_removed_and_one_that_heals_comes_back(
    rig: Callable[..., Rig],
) -> None:
    r = rig()
    r.server.lists.append(page([obj("a", "1")], "10"))
    r.server.watches.append(
        stream(event("MODIFIED", obj("a", "11", status={"conditions": 7})), event("MODIFIED", obj("a", "12")))
    )
    await r.server.start()
    r.start()
    await poll(lambda: len(r.server.requests("watch")) >= 2)
    assert r.sink.deleted == ["a"]
    assert r.sink.names("Kustomization") == {"a"}
    assert r.stats.malformed_now == 0


async def test_malformed_objects_are_listed_at_most_a_thousand_until_a_relist_no_longer_has_them(
    rig: Callable[..., Rig],
) -> None:
    r = rig()
    release = asyncio.Event()
    relisted = page([obj("good", "1")], "30")

    async def held(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return await relisted(request)

    bad = [obj(f"bad-{i:04d}", str(i + 2), status={"conditions": "not-a-list"}) for i in range(1003)]
    r.server.lists.extend([page([obj("good", "1"), *bad], "10"), held])
    r.server.watches.append(stream(gone_event()))
    await r.server.start()
    r.start()
    await poll(lambda: len(r.server.requests("list")) == 2, what="the relist asked for")
    listed = r.telemetry.unreadable_listed()
    assert [x.subject["name"] for x in listed] == [f"bad-{i:04d}" for i in range(UNREADABLE_LISTED)]
    assert r.telemetry.malformed_now() == 1003, "the rest are counted"
    assert listed[0].message == (
        "Kustomization default/bad-0000: not evaluated, it could not be read "
        "(status.conditions is not a list)"
    )
    release.set()
    await poll(lambda: r.stats.relists.get("gone") == 1, what="relist completed")
    assert r.telemetry.unreadable_listed() == []
    assert r.telemetry.malformed_now() == 0


async def test_objects_outside_the_watched_namespaces_are_never_delivered(rig: Callable[..., Rig]) -> None:
    r = rig(keep=lambda namespace: namespace == "apps")
    r.server.lists.append(page([obj("a", "1", namespace="apps"), obj("b", "2", namespace="other")], "10"))
    r.server.watches.append(stream(event("ADDED", obj("c", "11", namespace="other")), hold=True))
    await r.server.start()
    r.start()
    await poll(lambda: r.stats.events.get("ADDED") == 1)
    assert r.sink.names("Kustomization") == {"a"}
    assert r.stats.objects == 1


def test_backoff_doubles_from_the_initial_delay_up_to_the_cap_with_jitter_in_the_upper_half() -> None:
    low = Backoff(initial=0.5, cap=4.0, rng=lambda: 0.0)
    high = Backoff(initial=0.5, cap=4.0, rng=lambda: 0.999999)
    assert [low.next() for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert [round(high.next(), 3) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    for _ in range(5000):  # a day-long outage
        assert high.next() <= 4.0
    low.reset()
    assert low.next() == 0.25


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param("3", 3.0, id="delta-seconds"),
        pytest.param(None, None, id="absent"),
        pytest.param("soon", None, id="garbage"),
        pytest.param("Wed, 21 Oct 2026 07:28:10 GMT", 10.0, id="http-date"),
    ],
)
def test_retry_after_reads_seconds_or_an_http_date(header: str | None, expected: float | None) -> None:
    now = datetime(2026, 10, 21, 7, 28, 0, tzinfo=UTC).timestamp()
    assert retry_after(header, now=lambda: now) == expected


@pytest.mark.parametrize(
    ("code", "label"),
    [
        (200, "ok"),
        (403, "forbidden"),
        (404, "not_found"),
        (410, "gone"),
        (429, "throttled"),
        (500, "server_error"),
        (504, "server_error"),
        (400, "client_error"),
        (401, "client_error"),
    ],
)
def test_http_statuses_map_onto_a_small_fixed_set_of_metric_labels(code: int, label: str) -> None:
    assert classify(code) == label


async def test_while_relisting_after_410_the_kind_is_stale_and_keeps_its_objects_until_the_list_completes(
    rig: Callable[..., Rig],
) -> None:
    r = rig(options=replace(FAST, page_size=1))
    release = asyncio.Event()
    last = page([], "30")

    async def held(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return await last(request)

    r.server.lists.extend(
        [page([obj("kept", "1"), obj("gone", "2")], "10"), page([obj("kept", "1")], "30", cont="more"), held]
    )
    r.server.watches.append(stream(gone_event()))
    r.telemetry.started = r.telemetry.up = True
    await r.server.start()
    r.start()
    await poll(lambda: len(r.server.requests("list")) == 3, what="the relist's last page asked for")
    assert not r.stats.live
    assert r.telemetry.stale
    assert r.telemetry.blind() == frozenset()
    assert r.telemetry.ready() == (
        False,
        "watch broken, serving the last known objects as stale: Kustomization.kustomize.toolkit.fluxcd.io",
    )
    assert r.sink.names("Kustomization") == {"kept", "gone"}
    release.set()
    await poll(lambda: r.stats.relists.get("gone") == 1, what="relist completed")
    assert r.sink.names("Kustomization") == {"kept"}
    assert r.telemetry.ready() == (True, "ok")


async def test_a_relist_that_breaks_midway_removes_nothing_and_the_next_complete_one_decides(
    rig: Callable[..., Rig],
) -> None:
    r = rig(options=replace(FAST, page_size=1))
    release = asyncio.Event()
    retried = page([obj("a", "1")], "40", cont="more")

    async def held(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return await retried(request)

    r.server.lists.extend(
        [
            page([obj("a", "1"), obj("b", "2")], "10"),
            page([obj("a", "1")], "30", cont="more"),
            status(500, "etcd timeout"),
            held,
            page([], "40"),
        ]
    )
    r.server.watches.append(stream(gone_event()))
    await r.server.start()
    r.start()
    await poll(lambda: len(r.server.requests("list")) == 4, what="the relist broke and started over")
    assert r.sink.names("Kustomization") == {"a", "b"}
    assert r.sink.deleted == []
    release.set()
    await poll(lambda: r.stats.relists.get("gone") == 1, what="a complete relist")
    assert r.sink.names("Kustomization") == {"a"}
    assert r.sink.deleted == ["b"]


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("script", "said"),
    [
        pytest.param(
            [(0, "lost")], ["WARNING API server unreachable"], id="the-first-failure-even-before-any-answer"
        ),
        pytest.param(
            [(0, "lost"), (1, "lost"), (59, "lost")], ["WARNING API server unreachable"], id="then-quiet"
        ),
        pytest.param(
            [(0, "lost"), (30, "lost"), (61, "lost"), (90, "lost"), (125, "lost")],
            [
                "WARNING API server unreachable",
                "WARNING API server still unreachable",
                "WARNING API server still unreachable",
            ],
            id="then-one-line-a-minute",
        ),
        pytest.param(
            [(0, "reached"), (5, "lost"), (6, "lost"), (70, "reached"), (71, "reached")],
            [
                "INFO API server reachable",
                "WARNING API server unreachable",
                "INFO API server reachable again",
            ],
            id="and-the-recovery-once",
        ),
        pytest.param(
            [(0, "reached"), (0, "rejected"), (1, "rejected"), (2, "accepted"), (3, "accepted")],
            [
                "INFO API server reachable",
                "ERROR the API server rejects stalewatch's credentials (401 Unauthorized): check the "
                "kubeconfig user or the ServiceAccount token",
                "INFO the API server accepts stalewatch's credentials again",
            ],
            id="a-401-once-until-accepted",
        ),
    ],
)
def test_the_log_says_when_the_api_server_cannot_be_used_once_then_once_a_minute(
    script: list[tuple[float, str]], said: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    clock, telemetry = Ticks(), Telemetry()
    link = Link(telemetry, lambda up: None, clock=clock)
    with caplog.at_level(logging.INFO, logger="stalewatch"):
        for at, what in script:
            clock.now = 1000.0 + at
            if what == "lost":
                link.lost(ConnectionRefusedError(111, "Connect call failed"))
            elif what == "rejected":
                link.rejected("Unauthorized")
            else:
                getattr(link, what)()
    assert [f"{r.levelname} {r.getMessage()}" for r in caplog.records] == said
