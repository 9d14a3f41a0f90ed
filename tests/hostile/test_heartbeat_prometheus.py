"""Hostile and broken query APIs for heartbeats read through Prometheus: every one is that
controller's `Unreadable` naming the Prometheus URL and why (its heartbeat unknown), never a read
dated now, never a partial read, never an exception."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import orjson
import pytest
from aiohttp import web

from tests.export.promstack import free_port
from tests.kube.test_heartbeat_prometheus_answers import (
    NOW,
    POD,
    STALE_AFTER,
    QueryApi,
    envelope,
    healthy,
    query_api,
    read_answer,
    reads_for,
    series,
    target,
    up,
)
from watcher.fleet.prom import MAX_ANSWER_BYTES, MAX_SAMPLES
from watcher.kube.heartbeat_prometheus import PrometheusReads
from watcher.model.ingest.controller_metrics import Unreadable
from watcher.model.rules.metrics_targets import MetricsTarget

WHERE = "pod flux-system/" + POD


def without(family: str) -> list[dict[str, Any]]:
    return [s for s in healthy() if s["metric"].get("__name__") != family]


def untimed() -> list[dict[str, Any]]:
    return [s for s in healthy() if "stalewatch_scraped" not in s["metric"]]


def upped(value: str) -> list[dict[str, Any]]:
    answer = healthy()
    answer[0]["value"][1] = value
    return answer


def many_samples() -> bytes:
    sample = series("gotk_reconcile_duration_seconds_count", "1", kind="K", name="n")
    return envelope([*up(), *[sample] * (MAX_SAMPLES + 1)])


@dataclass(frozen=True)
class Case:
    id: str
    body: Callable[[], bytes]
    result: str
    reason: str
    """The Unreadable's reason after "Prometheus <url>"."""
    status: int = 200


CASES = [
    Case("an-html-error-page", lambda: b"<html>502 Bad Gateway</html>", "prometheus_error",
         ": HTTP 502, not a query API answer: <html>502 Bad Gateway</html>", status=502),
    Case("a-query-the-api-refuses", lambda: orjson.dumps(
        {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}),
         "prometheus_error", ": bad_data: parse error at char 3", status=400),
    Case("a-proxy-forbids-it", lambda: b"forbidden", "prometheus_error",
         ": HTTP 403, not a query API answer: forbidden", status=403),
    Case("not-json", lambda: b'{"status": "success", "data": ', "prometheus_error",
         ': HTTP 200, not a query API answer: {"status": "success", "data":'),
    Case("a-matrix", lambda: orjson.dumps({"status": "success", "data": {"resultType": "matrix"}}),
         "prometheus_error", ": expected an instant vector, got matrix"),
    Case("more-samples-than-fleet-reads", many_samples, "prometheus_error",
         f": answer refused: {MAX_SAMPLES + 2 + 1} samples, more than {MAX_SAMPLES}"),
    Case("more-bytes-than-fleet-reads", lambda: b'{"status": "success"' + b" " * MAX_ANSWER_BYTES + b"}",
         "prometheus_error", f": answer larger than {MAX_ANSWER_BYTES // 2**20} MiB"),
    Case("a-partial-answer", lambda: envelope(healthy(), warnings=["store gateway down"]),
         "prometheus_error", " warned (a partial answer may miss series): store gateway down"),
    Case("no-series-at-all", lambda: envelope([]), "not_scraped", f" has no series of {WHERE}"),
    Case("up-is-0", lambda: envelope(upped("0")), "not_scraped", f" could not scrape {WHERE} (up 0)"),
    Case("up-is-nan", lambda: envelope(upped("NaN")), "not_scraped", f" could not scrape {WHERE} (up NaN)"),
    Case("no-up", lambda: envelope(without("up")), "not_scraped", f" has series of {WHERE} but no up"),
    Case("no-scrape-time", lambda: envelope(untimed()), "not_scraped",
         f" did not say when it scraped {WHERE}"),
    Case("scraped-longer-ago-than-stale-after", lambda: envelope(healthy(at=NOW - timedelta(seconds=120))),
         "stale", f" last scraped {WHERE} 120s ago"),
    Case("not-a-controller-runtime-endpoint", lambda: envelope(without("controller_runtime_reconcile_total")),
         "unparsable", ""),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_a_broken_answer_is_unknown_naming_prometheus_and_why(case: Case) -> None:
    api = QueryApi(case.body(), case.status)
    async with query_api(api) as url, reads_for(url) as reads:
        result, read, at = await reads.read(target())
    assert (result, at) == (case.result, None)
    if case.result == "unparsable":
        expected = f"{WHERE} via Prometheus {url}: no controller_runtime_reconcile_total series: "
        assert read == Unreadable(expected + "not a controller-runtime metrics endpoint")
    else:
        assert read == Unreadable(f"Prometheus {url}{case.reason}")


async def test_prometheus_down_is_unknown_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with reads_for(url) as reads:
        result, read, at = await reads.read(target())
    assert (result, at) == ("prometheus_error", None)
    assert isinstance(read, Unreadable)
    assert read.reason.startswith(f"Prometheus {url}: unreachable: ")


async def test_prometheus_that_does_not_answer_in_time_is_unknown() -> None:
    async def slow(_: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response()

    app = web.Application()
    app.router.add_post("/api/v1/query", slow)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with PrometheusReads(url, timeout=0.2, stale_after=STALE_AFTER, clock=lambda: NOW) as reads:
            result, read, _ = await reads.read(target())
    finally:
        await runner.cleanup()
    assert (result, read) == ("prometheus_error", Unreadable(f"Prometheus {url}: no answer within 0.2s"))


async def test_a_scrape_just_within_stale_after_is_read_dated_by_it() -> None:
    at = NOW - timedelta(seconds=STALE_AFTER)
    result, _, dated = await read_answer(envelope(healthy(at=at)))
    assert (result, dated) == ("ok", at)


async def test_a_controller_with_no_ready_pod_and_no_selector_is_not_asked_for() -> None:
    api = QueryApi(envelope(healthy()))
    empty = MetricsTarget(
        "kustomize-controller", "Deployment/x/y", 8080, "", (), None, "Deployment/x/y has no Ready Pod"
    )
    async with query_api(api) as url, reads_for(url) as reads:
        got = await reads.read(empty)
    assert got == ("no_endpoint", Unreadable("Deployment/x/y has no Ready Pod"), None)
    assert api.queries == []
