"""Heartbeats through Prometheus, from hand-made query API answers served in-process: how an answer
becomes the Pod's exposition (read by the strict parser) and when the read is dated.

The dating rules are what keep a Prometheus read honest: the read is dated by the scrape, never
by the moment it was asked for, so a counter Prometheus has not scraped anew does not look
unmoved for longer than it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from aiohttp import web

from watcher.kube.heartbeat_prometheus import PrometheusReads, default_selector, query
from watcher.kube.heartbeats import HeartbeatReader, Read
from watcher.model.ingest.controller_metrics import ControllerMetrics, Unreadable
from watcher.model.rules.metrics_targets import MetricsTarget
from watcher.model.store.heartbeats import Heartbeats
from watcher.telemetry import Telemetry

NOW = datetime(2026, 12, 7, 11, 30, tzinfo=UTC)
SCRAPED = NOW - timedelta(seconds=12)
KC = "kustomize-controller"
POD = "kustomize-controller-7d9f8c-x2x4q"
TARGET_LABELS = {"job": "flux-system/kustomize-controller", "instance": "10.0.0.7:8080"}
STALE_AFTER = 90.0


def target(*pods: str, leader: str | None = None) -> MetricsTarget:
    return MetricsTarget(
        KC,
        f"Deployment/flux-system/{KC}",
        8080,
        "test",
        tuple((p, "10.0.0.7") for p in pods or (POD,)),
        leader,
        "",
    )


def series(
    family: str, value: str, /, *, pod: str = POD, instance: str | None = None, **labels: str
) -> dict[str, Any]:
    """One sample as the query API answers it (the value's time is the query's, never read)."""
    where = {**TARGET_LABELS, "namespace": "flux-system", "pod": pod}
    if instance is not None:
        where["instance"] = instance
    return {"metric": {"__name__": family, **where, **labels}, "value": [NOW.timestamp(), value]}


def up(
    value: str = "1", *, pod: str = POD, at: datetime = SCRAPED, instance: str | None = None
) -> list[dict[str, Any]]:
    """A target's `up` and its `timestamp(up)` (no name, the marker label)."""
    sample = series("up", value, pod=pod, instance=instance)
    stamp = {k: v for k, v in sample["metric"].items() if k != "__name__"}
    return [
        sample,
        {
            "metric": {**stamp, "stalewatch_scraped": "true"},
            "value": [NOW.timestamp(), f"{at.timestamp():.3f}"],
        },
    ]


def healthy(
    *, pod: str = POD, total: str = "7", at: datetime = SCRAPED, instance: str | None = None
) -> list[dict[str, Any]]:
    """A controller's scrape: one object, its totals, a queue, its start."""
    return [
        *up(pod=pod, at=at, instance=instance),
        series(
            "controller_runtime_reconcile_total", total, pod=pod, instance=instance,
            controller="kustomization", result="success",
        ),
        series(
            "gotk_reconcile_duration_seconds_count", "3", pod=pod, instance=instance,
            kind="Kustomization", name="apps", exported_namespace="apps",
        ),
        series(
            "workqueue_depth", "0", pod=pod, instance=instance,
            name="kustomization", controller="kustomization",
        ),
        series("process_start_time_seconds", "1796628126.26", pod=pod, instance=instance),
    ]  # fmt: skip


def envelope(result: Sequence[dict[str, Any]], **extra: Any) -> bytes:
    return orjson.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": list(result)}, **extra}
    )


@dataclass
class QueryApi:
    """A fake query API: answers each POST with `status` and `body`; remembers the queries."""

    body: bytes = b""
    status: int = 200
    queries: list[dict[str, str]] = field(default_factory=list)

    async def handler(self, request: web.Request) -> web.StreamResponse:
        self.queries.append(dict(await request.post()))  # type: ignore[arg-type]
        return web.Response(status=self.status, body=self.body, content_type="application/json")


@asynccontextmanager
async def query_api(api: QueryApi) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/api/v1/query", api.handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def reads_for(url: str, **options: Any) -> PrometheusReads:
    """The reads of `url`'s query API at NOW."""
    return PrometheusReads(url, timeout=5.0, stale_after=STALE_AFTER, clock=lambda: NOW, **options)


async def read_answer(
    body: bytes, the_target: MetricsTarget | None = None, *, status: int = 200, **options: Any
) -> tuple[str, Read, datetime | None]:
    api = QueryApi(body, status)
    async with (
        query_api(api) as url,
        PrometheusReads(url, timeout=5.0, stale_after=STALE_AFTER, clock=lambda: NOW, **options) as reads,
    ):
        return await reads.read(the_target or target())


def metrics(read: Read) -> ControllerMetrics:
    assert isinstance(read, ControllerMetrics), read
    return read


# -- the query -----------------------------------------------------------------------------------


def test_the_default_selector_names_the_targets_pods_exactly() -> None:
    assert default_selector(target("kc-0", "kc.1")) == r'{pod=~"kc-0|kc\\.1"}'


def test_the_query_asks_for_the_families_read_up_and_when_each_target_was_scraped() -> None:
    expr = query('{job="a"}')
    assert expr.startswith('{__name__=~"controller_runtime_active_workers|')
    assert "|up|workqueue_depth|" in expr
    assert expr.endswith(
        ', job="a"} or label_replace(timestamp(up{job="a"}), "stalewatch_scraped", "true", "", "")'
    )


# -- what the answer becomes ---------------------------------------------------------------------


async def test_a_read_is_the_pods_exposition_with_prometheus_renaming_undone() -> None:
    result, read, _ = await read_answer(envelope(healthy()))
    assert result == "ok"
    got = metrics(read)
    assert got.objects == {("Kustomization", "apps", "apps"): 3.0}
    assert got.reconciles == {"kustomization": {"success": 7.0}}
    assert got.started_at == 1796628126.26
    assert got.problems == ()


async def test_under_honor_labels_an_objects_namespace_is_its_own_even_when_it_is_the_targets() -> None:
    """No `exported_namespace`: the series' `namespace` is the object's, kept as it is."""
    answer = [*up(), series("controller_runtime_reconcile_total", "1", controller="k", result="success")]
    answer.append(series("gotk_reconcile_duration_seconds_count", "2", kind="Kustomization", name="infra"))
    _, read, _ = await read_answer(envelope(answer))
    assert metrics(read).objects == {("Kustomization", "flux-system", "infra"): 2.0}


@dataclass(frozen=True)
class Value:
    id: str
    value: str
    expected: float | None


VALUES = [
    Value("a-plain-count", "42", 42.0),
    Value("nan-stays-unknown", "NaN", None),
    Value("inf-is-unknown", "+Inf", None),
    Value("negative-is-unknown", "-1", None),
    Value("go-exponent", "1.5e+03", 1500.0),
    Value("a-line-smuggled-in-a-value-is-not-a-number", "1\ngotk_reconcile_duration_seconds_count 9", None),
    Value("underscores-are-not-go", "1_000", None),
]


@pytest.mark.parametrize("case", VALUES, ids=[c.id for c in VALUES])
async def test_a_sample_value_is_read_as_the_parser_reads_it(case: Value) -> None:
    answer = healthy()
    answer[3]["value"][1] = case.value  # the object's counter
    _, read, _ = await read_answer(envelope(answer))
    got = metrics(read)
    assert got.objects == {("Kustomization", "apps", "apps"): case.expected}
    assert bool(got.problems) is (case.expected is None)


async def test_label_values_are_escaped_so_they_come_back_as_they_were() -> None:
    odd = 'a"b\\c\nd'
    answer = healthy()
    answer[3]["metric"]["name"] = odd
    _, read, _ = await read_answer(envelope(answer))
    assert metrics(read).objects == {("Kustomization", "apps", odd): 3.0}


async def test_a_label_name_the_format_cannot_hold_leaves_its_family_incomplete_not_a_forged_line() -> None:
    answer = healthy()
    answer[3]["metric"]['x="y"} 5\ngotk_reconcile_duration_seconds_count{kind'] = "z"
    _, read, _ = await read_answer(envelope(answer))
    got = metrics(read)
    assert got.objects == {}
    assert "gotk_reconcile_duration_seconds_count" in got.incomplete


async def test_a_read_is_dated_by_its_scrape_not_by_the_query() -> None:
    _, _, at = await read_answer(envelope(healthy()))
    assert at == SCRAPED


async def test_without_a_leader_the_pod_that_reconciled_most_stands_for_it_dated_by_its_scrape() -> None:
    earlier = SCRAPED - timedelta(seconds=5)
    answer = [
        *healthy(pod="kc-a", total="0", instance="10.0.0.8:8080"),
        *healthy(pod="kc-b", total="9", at=earlier, instance="10.0.0.9:8080"),
    ]
    result, read, at = await read_answer(envelope(answer), target("kc-a", "kc-b"))
    assert result == "ok"
    assert metrics(read).reconciles_total() == 9.0
    assert at == earlier


async def test_a_pod_two_jobs_scrape_reads_from_the_one_that_scraped_it() -> None:
    answer = [*up("0", instance="10.0.0.7:9999"), *healthy()]
    result, read, _ = await read_answer(envelope(answer))
    assert result == "ok"
    assert metrics(read).reconciles_total() == 7.0


async def test_a_same_named_pod_of_another_namespace_is_not_ours() -> None:
    answer = healthy()
    for sample in answer:
        sample["metric"]["namespace"] = "elsewhere"
    result, read, _ = await read_answer(envelope(answer))
    assert result == "not_scraped"
    assert isinstance(read, Unreadable)


# -- the same scrape seen twice ------------------------------------------------------------------


async def test_the_same_scrape_seen_twice_is_two_reads_at_the_same_instant_and_raises_no_alarm() -> None:
    """Prometheus had not scraped again between two rounds: both reads are dated at the scrape.
    The store takes a read at the same instant as the last (nothing moved, no time passed), so
    the heartbeat ages from the scrape and goes unknown, never stuck on counters dated now."""
    delivered: list[tuple[Read, datetime | None]] = []
    api = QueryApi(envelope(healthy()))
    async with query_api(api) as url:
        reads = PrometheusReads(url, timeout=5.0, stale_after=STALE_AFTER, clock=lambda: NOW)
        reader = HeartbeatReader(
            lambda: [target()], lambda _c, read, at: delivered.append((read, at)), Telemetry(),
            interval=30.0, timeout=5.0, prometheus=reads,
        )  # fmt: skip
        async with reader:
            await reader.read_all()
            await reader.read_all()
    assert [at for _, at in delivered] == [SCRAPED, SCRAPED]
    beats = Heartbeats()
    for read, at in delivered:
        assert at is not None
        assert beats.read(KC, at=at, samples=metrics(read))
    stale = timedelta(seconds=STALE_AFTER)
    assert beats.controller(KC, now=SCRAPED + stale, stale_after=stale).unknown == ""
    later = beats.controller(KC, now=SCRAPED + stale + timedelta(seconds=1), stale_after=stale)
    assert later.unknown == "its last good read is older than 90s"
    assert later.last_moved_at is None
    assert later.watched_since == SCRAPED
