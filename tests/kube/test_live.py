"""The live model between the reflectors and the HTTP layer: debounce, timer, freeze, blindness.

A controllable clock stands in for wall time where thresholds matter; the HealthModel is
the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kube.objects import cond, deployment, flux, lease, pod, waiting
from tests.kube.support import poll
from watcher.kube.ledger import Ledger
from watcher.kube.live import LiveModel
from watcher.kube.resources import Resource
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig
from watcher.telemetry import Telemetry

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KUSTOMIZATIONS = Resource("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations")
DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments")
PODS = Resource("", "v1", "Pod", "pods")
LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def live_telemetry(*resources: Resource) -> Telemetry:
    telemetry = Telemetry(up=True, started=True)
    for resource in resources:
        stats = telemetry.kind(resource.group, resource.kind)
        stats.synced = stats.live = True
    return telemetry


def stuck(name: str, *, since: datetime) -> dict[str, Any]:
    status = {
        "conditions": [
            cond("Ready", "True", "ReconciliationSucceeded", "Applied", since=since),
            cond("Reconciling", "True", "Progressing", "Reconciliation in progress", since=since),
        ]
    }
    return project(flux("Kustomization", "apps", name, status=status))


@pytest.fixture
async def started() -> AsyncIterator[Callable[[LiveModel], None]]:
    tasks: list[asyncio.Task[None]] = []
    yield lambda live: tasks.append(asyncio.create_task(live.run()))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def types(evaluation: Evaluation | None) -> list[tuple[str, str]]:
    assert evaluation is not None
    return [(str(f.type), f.subject["name"]) for f in evaluation.findings]


async def test_a_burst_of_events_is_coalesced_into_one_evaluation_shortly_after(
    started: Callable[[LiveModel], None],
) -> None:
    telemetry = live_telemetry(KUSTOMIZATIONS)
    live = LiveModel(ModelConfig(), telemetry, debounce=0.05, tick=3600, clock=Clock())
    started(live)
    for i in range(500):
        live.upsert(KUSTOMIZATIONS, stuck(f"k{i}", since=T0 - timedelta(hours=1)))
    await poll(lambda: telemetry.evaluation.count, what="an evaluation after the burst")
    await asyncio.sleep(0.3)
    assert telemetry.evaluation.count == 1
    assert len(types(live.latest)) == 500


async def test_a_threshold_crossed_with_no_event_is_found_on_the_timer(
    started: Callable[[LiveModel], None],
) -> None:
    clock = Clock()
    live = LiveModel(ModelConfig(), live_telemetry(KUSTOMIZATIONS), debounce=0.01, tick=0.05, clock=clock)
    live.upsert(KUSTOMIZATIONS, stuck("apps", since=T0))
    started(live)
    await poll(lambda: live.latest is not None)
    assert types(live.latest) == []
    clock.now = T0 + timedelta(minutes=31)  # past 3 x its 10m interval; nothing else happens
    await poll(lambda: types(live.latest), what="StuckReconciling from the timer alone")
    assert types(live.latest) == [("StuckReconciling", "apps")]


def test_while_unreachable_the_last_evaluation_is_served_unchanged() -> None:
    clock = Clock()
    telemetry = live_telemetry(KUSTOMIZATIONS)
    live = LiveModel(ModelConfig(), telemetry, clock=clock)
    live.upsert(KUSTOMIZATIONS, stuck("apps", since=T0))
    before = live.evaluate()
    telemetry.up = False
    clock.now = T0 + timedelta(hours=2)
    live.upsert(KUSTOMIZATIONS, stuck("other", since=T0 - timedelta(hours=5)))
    assert live.evaluate() is before
    telemetry.up = True
    assert types(live.evaluate()) == [("StuckReconciling", "apps"), ("StuckReconciling", "other")]


@pytest.mark.parametrize(
    "unseen",
    [
        pytest.param(lambda stats: setattr(stats, "forbidden", True), id="forbidden"),
        pytest.param(lambda stats: setattr(stats, "synced", False), id="not-listed-yet"),
    ],
)
def test_a_controller_whose_workload_kind_cannot_be_seen_is_never_reported_down(
    unseen: Callable[[Any], None],
) -> None:
    telemetry = live_telemetry(DEPLOYMENTS, PODS, KUSTOMIZATIONS)
    live = LiveModel(ModelConfig(), telemetry, clock=lambda: datetime.now(UTC))
    down = deployment("flux-system", "kustomize-controller", available=0)
    live.upsert(DEPLOYMENTS, project(down))
    failing = waiting("ImagePullBackOff", "Back-off pulling image")
    live.upsert(PODS, project(pod("flux-system", "kustomize-controller", status=failing)))
    live.upsert(KUSTOMIZATIONS, project(flux("Kustomization", "flux-system", "apps", status={"conditions": [
        cond("Ready", "True", "ReconciliationSucceeded", "Applied", since=T0)]})))  # fmt: skip
    assert ("ControllerDown", "kustomize-controller") in types(live.evaluate())

    unseen(telemetry.kind("apps", "Deployment"))
    unseen(telemetry.kind("", "Pod"))
    assert types(live.evaluate()) == []


def test_a_kind_whose_watch_broke_keeps_its_findings_stale_until_a_completed_relist_replaces_it() -> None:
    telemetry = live_telemetry(KUSTOMIZATIONS)
    live = LiveModel(ModelConfig(), telemetry, clock=Clock())
    for name in ("apps", "gone"):
        live.upsert(KUSTOMIZATIONS, stuck(name, since=T0 - timedelta(hours=2)))
    assert types(live.evaluate()) == [("StuckReconciling", "apps"), ("StuckReconciling", "gone")]

    telemetry.kind(KUSTOMIZATIONS.group, KUSTOMIZATIONS.kind).live = False  # down, then relisting
    assert types(live.evaluate()) == [("StuckReconciling", "apps"), ("StuckReconciling", "gone")]
    assert telemetry.stale
    live.upsert(KUSTOMIZATIONS, stuck("apps", since=T0 - timedelta(hours=2)))  # the relist's first page
    assert types(live.evaluate()) == [("StuckReconciling", "apps"), ("StuckReconciling", "gone")]

    live.retain(KUSTOMIZATIONS, {("apps", "apps")})  # the relist completed without `gone`
    assert types(live.evaluate()) == [("StuckReconciling", "apps")]


def test_a_lease_not_seen_renewed_while_its_watch_is_down_is_no_hung_leader_until_the_watch_says_so() -> None:
    clock = Clock()
    telemetry = live_telemetry(DEPLOYMENTS, PODS, LEASES)
    live = LiveModel(ModelConfig(), telemetry, clock=clock)
    live.upsert(DEPLOYMENTS, project(deployment("flux-system", "kustomize-controller")))
    live.upsert(PODS, project(pod("flux-system", "kustomize-controller")))
    holder = "kustomize-controller-5d4f8b7c9-x7k2p_1f2e"
    name = "kustomize-controller-leader-election"
    live.upsert(LEASES, project(lease("flux-system", name, holder=holder, duration=40, renewed=T0)))
    assert types(live.evaluate()) == []

    telemetry.kind(LEASES.group, LEASES.kind).live = False
    clock.now = T0 + timedelta(minutes=10)  # renewals may have happened that we could not see
    assert types(live.evaluate()) == []

    telemetry.kind(LEASES.group, LEASES.kind).live = True  # resumed, and no renewal came: it is hung
    assert ("ControllerDown", "kustomize-controller") in types(live.evaluate())


def test_a_change_the_model_cannot_take_is_logged_and_the_next_ones_still_apply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    live = LiveModel(ModelConfig(), live_telemetry(KUSTOMIZATIONS), clock=Clock())
    nameless = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {}}
    live.upsert(KUSTOMIZATIONS, nameless)  # never produced by project(): stands for a model bug
    live.upsert(KUSTOMIZATIONS, stuck("apps", since=T0 - timedelta(hours=1)))
    assert types(live.evaluate()) == [("StuckReconciling", "apps")]
    assert [r.getMessage() for r in caplog.records] == ["the model failed on a change; skipped it"]


def test_a_delete_the_timeline_cannot_follow_still_reaches_the_model(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = LiveModel(ModelConfig(), live_telemetry(KUSTOMIZATIONS), clock=Clock())
    apps = stuck("apps", since=T0 - timedelta(hours=1))
    live.upsert(KUSTOMIZATIONS, apps)
    assert types(live.evaluate()) == [("StuckReconciling", "apps")]

    def broken(*_: object) -> None:
        raise RuntimeError("a timeline bug")

    monkeypatch.setattr(live._transitions, "deleted", broken)
    live.delete(KUSTOMIZATIONS, apps)  # must not raise into the watch of its kind
    assert types(live.evaluate()) == []
    assert [r.getMessage() for r in caplog.records] == ["the timeline failed on a change; skipped it"]


def test_a_delete_the_model_cannot_take_is_logged_and_the_next_ones_still_apply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    live = LiveModel(ModelConfig(), live_telemetry(KUSTOMIZATIONS), clock=Clock())
    live.upsert(KUSTOMIZATIONS, stuck("apps", since=T0 - timedelta(hours=1)))
    nameless = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {}}
    live.delete(KUSTOMIZATIONS, nameless)  # never produced by the decoder: stands for a bug
    assert types(live.evaluate()) == [("StuckReconciling", "apps")]
    assert [r.getMessage() for r in caplog.records] == ["the model failed on a change; skipped it"]


def test_the_synced_cache_is_frozen_out_of_garbage_collection_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full collections over a 50k-object cache stall the loop (BENCHMARKS.md); after the
    initial sync the cache is long-lived, so it is frozen once, not on every evaluation."""
    frozen: list[int] = []
    monkeypatch.setattr("watcher.kube.live.gc.freeze", lambda: frozen.append(1))
    unsynced = Telemetry(up=True, started=True)
    unsynced.kind(PODS.group, PODS.kind)
    live = LiveModel(ModelConfig(), unsynced, clock=Clock())
    live.evaluate()
    assert frozen == []
    synced = LiveModel(ModelConfig(), live_telemetry(PODS), clock=Clock())
    synced.evaluate()
    synced.evaluate()
    assert frozen == [1]


async def test_full_collections_wait_for_the_initial_sync_and_resume_once_it_is_frozen() -> None:
    """A full collection during the sync walks the whole half-built cache (BENCHMARKS.md): they
    are deferred until the sync is done, then the usual thresholds come back."""
    usual = gc.get_threshold()
    telemetry = Telemetry(up=True, started=True)
    pods = telemetry.kind(PODS.group, PODS.kind)
    live = LiveModel(ModelConfig(), telemetry, debounce=0, tick=0.01, clock=Clock())
    evaluating = asyncio.create_task(live.run())
    try:
        await poll(lambda: gc.get_threshold()[2] > 1_000_000, what="full collections deferred")
        assert gc.get_threshold()[:2] == usual[:2]
        pods.synced = True
        await poll(lambda: gc.get_threshold() == usual, what="the usual thresholds back after the sync")
    finally:
        evaluating.cancel()
        gc.set_threshold(*usual)


async def test_a_watcher_stopped_before_its_sync_gives_the_usual_collection_thresholds_back() -> None:
    usual = gc.get_threshold()
    telemetry = Telemetry(up=True, started=True)
    telemetry.kind(PODS.group, PODS.kind)
    live = LiveModel(ModelConfig(), telemetry, debounce=0, tick=0.01, clock=Clock())
    evaluating = asyncio.create_task(live.run())
    await poll(lambda: gc.get_threshold() != usual, what="full collections deferred")
    evaluating.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await evaluating
    assert gc.get_threshold() == usual


def test_objects_no_reflector_could_read_are_counted_with_the_evaluation_that_lists_them() -> None:
    telemetry = live_telemetry(KUSTOMIZATIONS)
    live = LiveModel(ModelConfig(), telemetry, clock=Clock())
    ledger = Ledger(KUSTOMIZATIONS, live, telemetry.kind(KUSTOMIZATIONS.group, KUSTOMIZATIONS.kind))
    ledger.set_aside(("apps", "odd"), "status.conditions is not a list", {"uid": "u1"}, ledger.malformed)
    listed = live.evaluate()
    ledger.set_aside(("apps", "odder"), "status.conditions is not a list", {"uid": "u2"}, ledger.malformed)
    assert telemetry.malformed_now() == 2, "the reflector already counts the second"
    assert listed is not None
    assert listed.unreadable == 1, "the published answer counts what it lists"
    assert [r.subject["name"] for r in listed.rejected] == ["odd"]
    again = live.evaluate()
    assert again is not None
    assert again.unreadable == 2
    assert [r.subject["name"] for r in again.rejected] == ["odd", "odder"]
    assert again.at(T0 + timedelta(hours=1)).unreadable == 2, "a later moment of the same answer too"


def test_a_kind_listed_after_an_evaluation_is_unjudged_until_the_next_one_judges_it() -> None:
    telemetry = live_telemetry()
    listing = telemetry.kind(KUSTOMIZATIONS.group, KUSTOMIZATIONS.kind)  # its initial list runs
    live = LiveModel(ModelConfig(), telemetry, clock=Clock())
    live.upsert(KUSTOMIZATIONS, stuck("apps", since=T0 - timedelta(hours=2)))
    before = live.evaluate()
    assert before is not None
    assert types(before) == [], "a kind not listed yet is not judged"

    listing.synced = listing.live = True  # the list finished after that evaluation
    assert telemetry.synced
    assert telemetry.unjudged(before.blind) == ["Kustomization.kustomize.toolkit.fluxcd.io"]
    after = live.evaluate()
    assert after is not None
    assert types(after) == [("StuckReconciling", "apps")]
    assert telemetry.unjudged(after.blind) == []
