"""The heartbeat reader against in-process HTTP servers: each controller's read reaches the model
as the lab's real controllers' recorded exposition says, one read per controller per round, and
counted by result in the reader's own metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from watcher.kube.heartbeats import HeartbeatReader, Read
from watcher.model.ingest.controller_metrics import ControllerMetrics, Unreadable, parse_controller_metrics
from watcher.model.rules.metrics_targets import MetricsTarget
from watcher.telemetry import Telemetry

RECORDINGS = Path(__file__).parents[1] / "lab" / "recordings" / "metrics"
KC = "kustomize-controller"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serving(handler: Handler, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[int]:
    """A /metrics server on `host`; yields its port."""
    app = web.Application()
    app.router.add_get("/metrics", handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)  # a handler still sleeping is cancelled
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def body(text: str | bytes) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(body=text.encode() if isinstance(text, str) else text)

    return handler


def target(port: int, *pods: tuple[str, str], controller: str = KC, problem: str = "") -> MetricsTarget:
    pods = pods or (("kc-0", "127.0.0.1"),)
    return MetricsTarget(
        controller, f"Deployment/flux-system/{controller}", port, "test", pods, None, problem
    )


async def read_once(
    targets: list[MetricsTarget], *, read_timeout: float = 5.0, max_bytes: int = 64 * 2**20
) -> tuple[list[tuple[str, Read]], Telemetry]:
    """One round of the reader: what it delivered, and its telemetry."""
    delivered: list[tuple[str, Read]] = []
    telemetry = Telemetry()
    reader = HeartbeatReader(
        lambda: targets,
        lambda controller, read, _at: delivered.append((controller, read)),
        telemetry,
        interval=30.0,
        timeout=read_timeout,
        max_bytes=max_bytes,
    )
    async with reader:
        await reader.read_all()
    return delivered, telemetry


def results(telemetry: Telemetry, controller: str = KC) -> dict[str, int]:
    return {result: n for result, n in telemetry.heartbeat_reads[controller].items() if n}


@pytest.mark.parametrize(
    "recording", sorted(p.relative_to(RECORDINGS).as_posix() for p in RECORDINGS.glob("*/*.txt"))
)
async def test_a_recorded_exposition_reaches_the_model_as_parsed(recording: str) -> None:
    text = (RECORDINGS / recording).read_text()
    async with serving(body(text)) as port:
        delivered, telemetry = await read_once([target(port)])
    parsed = parse_controller_metrics(text)
    if isinstance(parsed, Unreadable):  # the recording of a controller that was down
        parsed = Unreadable(f"pod kc-0 (http://127.0.0.1:{port}/metrics): {parsed.reason}")
    assert delivered == [(KC, parsed)]
    assert results(telemetry) == {"ok" if isinstance(parsed, ControllerMetrics) else "unparsable": 1}


async def test_every_controller_is_read_once_per_round_and_one_without_an_endpoint_is_unknown() -> None:
    text = (RECORDINGS / "recovered" / f"{KC}.txt").read_text()
    async with serving(body(text)) as port:
        delivered, telemetry = await read_once(
            [target(port), target(port, controller="helm-controller", problem="no metrics port: ...")]
        )
    assert sorted(c for c, _ in delivered) == ["helm-controller", KC]
    assert dict(delivered)["helm-controller"] == Unreadable("no metrics port: ...")
    assert results(telemetry, "helm-controller") == {"no_endpoint": 1}
    assert results(telemetry) == {"ok": 1}
    assert set(telemetry.heartbeat_read_seconds) == {KC, "helm-controller"}


def exposition(total: int, started: float) -> str:
    return (
        f'controller_runtime_reconcile_total{{controller="kustomization",result="success"}} {total}\n'
        f"process_start_time_seconds {started}\n"
    )


async def test_without_a_leader_the_pod_that_reconciled_most_stands_for_the_controller() -> None:
    async with serving(body(exposition(0, 1.0)), host="127.0.0.2") as port:  # noqa: SIM117 (port first)
        async with serving(body(exposition(42, 2.0)), port=port):
            delivered, _ = await read_once([target(port, ("follower", "127.0.0.2"), ("leader", "127.0.0.1"))])
    (_, read) = delivered[0]
    assert isinstance(read, ControllerMetrics)
    assert read.reconciles_total() == 42


async def test_without_a_leader_one_pod_unreadable_makes_the_read_unreadable() -> None:
    """The Pod not read could be the leader: the follower's still counters would be a false alarm."""
    async with serving(body(exposition(0, 1.0)), host="127.0.0.2") as port:
        delivered, telemetry = await read_once(
            [target(port, ("follower", "127.0.0.2"), ("leader", "127.0.0.1"))]
        )
    (_, read) = delivered[0]
    assert isinstance(read, Unreadable)
    assert read.reason.startswith(f"pod leader (http://127.0.0.1:{port}/metrics): unreachable: ")
    assert results(telemetry) == {"unreachable": 1}
