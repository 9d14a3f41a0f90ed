"""Heartbeat state: what a controller's reads over time say moved, and when its heartbeat is
unknown. Real reads first (the recorded checkpoints, in order), then one named case per rule of
movement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watcher.model.ingest.controller_metrics import ControllerMetrics, Queue, parse_controller_metrics
from watcher.model.rules.heartbeat_rules import ObjectBeat
from watcher.model.store.heartbeats import Heartbeats

RECORDINGS = Path(__file__).parents[1] / "lab" / "recordings" / "metrics"
T0 = datetime(2026, 12, 7, 7, 25, tzinfo=UTC)
S30 = timedelta(seconds=30)
STALE = timedelta(seconds=90)
KC = "kustomize-controller"
A = ("Kustomization", "flux-system", "a")
B = ("Kustomization", "flux-system", "b")


def metrics(
    objects: dict[tuple[str, str, str], float | None] | None = None,
    *,
    total: float | None = 10,
    started: float | None = 1000.0,
    depth: float | None = 0,
    longest: float | None = 0,
) -> ControllerMetrics:
    return ControllerMetrics(
        objects=objects if objects is not None else {A: 1, B: 1},
        reconciles={"kustomization": {"success": total}},
        active_workers={"kustomization": 1},
        queues={
            "kustomization": Queue(depth=depth, longest_running_seconds=longest),
            "DynamicClientCertificate": Queue(depth=9, longest_running_seconds=9999),
        },
        started_at=started,
    )


def recorded(checkpoint: str) -> ControllerMetrics:
    parsed = parse_controller_metrics((RECORDINGS / checkpoint / f"{KC}.txt").read_bytes())
    assert isinstance(parsed, ControllerMetrics)
    return parsed


def test_the_recorded_checkpoints_in_order_move_what_was_reconciled_and_drop_what_was_deleted() -> None:
    beats = Heartbeats()
    early, failing = T0, T0 + timedelta(minutes=10, seconds=30)
    beats.read(KC, at=early, samples=recorded("early"))
    beats.read(KC, at=failing, samples=recorded("failing"))
    apps = ("Kustomization", "flux-system", "apps")
    gone = ("Kustomization", "flux-system", "gone")
    assert beats.object(KC, apps) == ObjectBeat(present=True, first_seen=early, moved_at=failing)
    assert beats.object(KC, gone) == ObjectBeat(present=False, first_seen=early, moved_at=None)
    beat = beats.controller(KC, now=failing, stale_after=STALE)
    assert (beat.unknown, beat.last_completed_at, beat.watched_since, beat.object_series) == (
        "",
        failing,
        early,
        4,
    )


def test_the_first_read_is_a_baseline_nothing_is_known_to_have_moved() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics())
    assert beats.object(KC, A) == ObjectBeat(present=True, first_seen=T0, moved_at=None)
    beat = beats.controller(KC, now=T0, stale_after=STALE)
    assert (beat.last_moved_at, beat.last_completed_at, beat.watched_since) == (None, None, T0)


def test_a_counter_that_did_not_change_did_not_move() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics())
    beats.read(KC, at=T0 + S30, samples=metrics())
    assert beats.object(KC, A).moved_at is None
    assert beats.controller(KC, now=T0 + S30, stale_after=STALE).last_moved_at is None


def test_a_counter_that_went_up_moved_at_the_later_read() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics())
    beats.read(KC, at=T0 + S30, samples=metrics({A: 2, B: 1}, total=11))
    assert beats.object(KC, A).moved_at == T0 + S30
    assert beats.object(KC, B).moved_at is None
    beat = beats.controller(KC, now=T0 + S30, stale_after=STALE)
    assert beat.last_moved_at == beat.last_completed_at == T0 + S30


def test_a_counter_that_went_down_is_a_restart_and_counts_as_movement() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics({A: 5, B: 5}, total=10))
    beats.read(KC, at=T0 + S30, samples=metrics({A: 1, B: 1}, total=2, started=None))
    assert beats.object(KC, A).moved_at == beats.object(KC, B).moved_at == T0 + S30
    assert beats.controller(KC, now=T0 + S30, stale_after=STALE).watched_since == T0 + S30


def test_a_new_process_start_time_is_a_restart_even_when_a_counter_comes_back_equal() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics({A: 1}, total=1))
    beats.read(KC, at=T0 + S30, samples=metrics({A: 1}, total=1, started=2000.0))
    assert beats.object(KC, A).moved_at == T0 + S30
    assert beats.controller(KC, now=T0 + S30, stale_after=STALE).last_completed_at == T0 + S30


def test_a_series_that_appears_after_the_first_read_was_reconciled_in_between() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics({A: 1}))
    beats.read(KC, at=T0 + S30, samples=metrics({A: 1, B: 1}))
    assert beats.object(KC, B) == ObjectBeat(present=True, first_seen=T0 + S30, moved_at=T0 + S30)


def test_a_series_that_disappears_is_absent_then_forgotten_after_the_bound() -> None:
    beats = Heartbeats(forget_after=timedelta(minutes=5))
    beats.read(KC, at=T0, samples=metrics({A: 1, B: 1}))
    beats.read(KC, at=T0 + S30, samples=metrics({A: 1}))
    assert beats.object(KC, B) == ObjectBeat(present=False, first_seen=T0, moved_at=None)
    beats.read(KC, at=T0 + timedelta(minutes=6), samples=metrics({A: 1}))
    assert beats.object(KC, B) == ObjectBeat(present=False)


def test_a_nan_counter_is_unknown_and_the_next_good_value_is_only_a_baseline() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics({A: 1}))
    beats.read(KC, at=T0 + S30, samples=metrics({A: None}))
    assert beats.object(KC, A).count_known is False
    beats.read(KC, at=T0 + 2 * S30, samples=metrics({A: 3}))
    assert beats.object(KC, A) == ObjectBeat(present=True, first_seen=T0, moved_at=None)


UNKNOWN = {
    "never_read": ([], "never read"),
    "last_read_failed": ([("ok", T0), ("problem", T0 + S30)], "connection refused"),
    "last_good_read_is_stale": ([("ok", T0)], "its last good read is older than 90s"),
    "reconcile_totals_unreadable": ([("nan_total", T0 + 2 * S30)], "its reconcile totals are unreadable"),
}


@pytest.mark.parametrize("case", UNKNOWN)
def test_a_heartbeat_that_cannot_be_judged_is_unknown_with_its_reason(case: str) -> None:
    reads, reason = UNKNOWN[case]
    beats = Heartbeats()
    for kind, at in reads:
        if kind == "problem":
            beats.read(KC, at=at, problem="connection refused")
        else:
            beats.read(KC, at=at, samples=metrics(total=None if kind == "nan_total" else 10))
    assert beats.controller(KC, now=T0 + timedelta(seconds=100), stale_after=STALE).unknown == reason


def test_a_failed_read_between_two_good_ones_loses_no_movement() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics({A: 1}))
    beats.read(KC, at=T0 + S30, problem="timeout")
    beats.read(KC, at=T0 + 2 * S30, samples=metrics({A: 2}, total=11))
    assert beats.object(KC, A).moved_at == T0 + 2 * S30
    assert beats.controller(KC, now=T0 + 2 * S30, stale_after=STALE).unknown == ""


def test_a_read_dated_before_the_last_is_refused_not_applied() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0 + S30, samples=metrics({A: 1}))
    assert beats.read(KC, at=T0, samples=metrics({A: 9})) is False
    assert beats.object(KC, A).moved_at is None


def test_a_read_needs_samples_or_a_problem() -> None:
    with pytest.raises(ValueError, match="either samples or a problem"):
        Heartbeats().read(KC, at=T0)


def test_queued_since_is_the_first_read_of_the_current_run_with_work_queued() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics(depth=0))
    beats.read(KC, at=T0 + S30, samples=metrics(depth=3))
    beats.read(KC, at=T0 + 2 * S30, samples=metrics(depth=2))
    beat = beats.controller(KC, now=T0 + 2 * S30, stale_after=STALE)
    assert (beat.queued_since, beat.depth) == (T0 + S30, 2)
    beats.read(KC, at=T0 + 3 * S30, samples=metrics(depth=0))
    assert beats.controller(KC, now=T0 + 3 * S30, stale_after=STALE).queued_since is None


def test_only_the_reconcilers_own_queues_count_not_a_librarys() -> None:
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=metrics(depth=0, longest=4))
    beat = beats.controller(KC, now=T0, stale_after=STALE)
    assert (beat.depth, beat.longest_running_seconds) == (0, 4)


def test_the_objects_of_one_kind_and_namespace_hold_its_kind_and_namespace_once() -> None:
    # each parsed line's labels are new strings; 10k objects would hold 20k copies of a few words
    parsed = parse_controller_metrics(
        'controller_runtime_reconcile_total{controller="kustomization",result="success"} 2\n'
        + "".join(
            f'gotk_reconcile_duration_seconds_count{{kind="Kustomization",name="{n}",namespace="apps"}} 1\n'
            for n in ("a", "b")
        )
    )
    assert isinstance(parsed, ControllerMetrics)
    beats = Heartbeats()
    beats.read(KC, at=T0, samples=parsed)
    first, second = beats._controllers[KC].objects
    assert first[0] is second[0]
    assert first[1] is second[1]
