"""A failed evaluation is never "healthy": the last good one is served, stale, and everyone is told.

Since project() rejects every out-of-range value and each object is judged inside its own
guard, no known cluster content makes an evaluation raise any more. So the failure is injected
at the live model's one outside input that is not cluster data, its clock (a clock that
raises, as a broken time source would): the HealthModel, the LiveModel, the HTTP server and
the metrics collector are the real ones.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.kube.objects import cond, flux
from tests.kube.support import parse_metrics
from watcher.export.metrics import build_registry
from watcher.export.watcher_metrics import WatcherCollector
from watcher.kube.live import LiveModel
from watcher.kube.resources import Resource
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig
from watcher.telemetry import Telemetry
from watcher.web.server import create_app

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KUSTOMIZATIONS = Resource("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations")


class BrokenClock:
    """Wall time that can fail, as the clock of a real host can (an OSError from the C library)."""

    def __init__(self) -> None:
        self.broken = False

    def __call__(self) -> datetime:
        if self.broken:
            raise OSError("clock_gettime failed")
        return T0


def stalled(name: str) -> dict[str, object]:
    since = T0 - timedelta(hours=1)
    conditions = [
        cond("Ready", "False", "BuildFailed", "kustomize build failed", since=since),
        cond("Stalled", "True", "BuildFailed", "kustomize build failed", since=since),
    ]
    return project(flux("Kustomization", "apps", name, status={"conditions": conditions}))


@pytest.fixture
async def service() -> AsyncIterator[tuple[LiveModel, BrokenClock, TestClient]]:
    telemetry = Telemetry(up=True, started=True)
    stats = telemetry.kind(KUSTOMIZATIONS.group, KUSTOMIZATIONS.kind)
    stats.synced = stats.live = True
    clock = BrokenClock()
    live = LiveModel(ModelConfig(), telemetry, clock=clock)
    registry = build_registry(lambda: live.latest)
    registry.register(WatcherCollector(telemetry))
    app = create_app(telemetry=telemetry, source=lambda: live.latest, registry=registry)
    async with TestClient(TestServer(app)) as client:
        yield live, clock, client


async def test_a_failed_evaluation_keeps_the_last_good_one_stale_and_says_so_everywhere(
    service: tuple[LiveModel, BrokenClock, TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    live, clock, client = service
    live.upsert(KUSTOMIZATIONS, stalled("web"))
    good = live.evaluate()
    assert good is not None
    assert [str(f.type) for f in good.findings] == ["Stalled"]

    clock.broken = True
    with caplog.at_level(logging.WARNING, logger="stalewatch"):
        assert live.evaluate() is good, "the last good evaluation is served"
        assert live.evaluate() is good

        response = await client.get("/readyz")
        assert response.status == 503
        reason = "OSError: clock_gettime failed"
        assert await response.text() == f"the last evaluation failed ({reason}); serving the previous one\n"

        document = orjson.loads(await (await client.get("/api/v1/findings")).read())
        assert [f["type"] for f in document["findings"]] == ["Stalled"], "never turned into no findings"
        assert (document["summary"]["stale"], document["summary"]["evaluation_error"]) == (True, reason)

        samples = parse_metrics(await (await client.get("/metrics")).text())
        assert samples["stalewatch_evaluation_failures_total", frozenset()] == 2
        assert samples["stalewatch_up", frozenset()] == 1, "reachability is not the evaluation"
        assert samples["stalewatch_finding", _stalled_labels()] == 1, "the alert keeps firing"

        page = await (await client.get("/")).text()
        assert f'<p class="banner failed">STALE: the last evaluation failed ({reason}); this is' in page

        clock.broken = False
        recovered = live.evaluate()
        assert recovered is not None
        assert recovered is not good
        assert (await client.get("/readyz")).status == 200

    failed = [r for r in caplog.records if r.getMessage().startswith("evaluation failed")]
    assert len(failed) == 1, "logged when it starts, not on every tick it lasts"
    assert failed[0].exc_info is not None, "with the traceback"
    assert [r.getMessage() for r in caplog.records][-1] == "evaluation works again"


def _stalled_labels() -> frozenset[tuple[str, str]]:
    return frozenset(
        {
            "type": "Stalled",
            "severity": "warning",
            "kind": "Kustomization",
            "namespace": "apps",
            "name": "web",
            "root": "true",
            "root_type": "Stalled",
            "root_kind": "Kustomization",
            "root_namespace": "apps",
            "root_name": "web",
        }.items()
    )
