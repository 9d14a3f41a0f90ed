"""NotReconciling and ControllerStuck: one named case per rule, each alarm beside its near miss
(suspended, within interval + timeout, controller down is ControllerDown's, a heartbeat that
could not be read is unknown: never quiet, never an alarm)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from watcher.model.rules.heartbeat_rules import (
    DEFAULT_HEARTBEAT_THRESHOLDS,
    ControllerBeat,
    Liveness,
    ObjectBeat,
    Outcome,
    Reason,
    controller_stuck,
    due_window,
    not_reconciling,
)

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
KC = "kustomize-controller"


def flux(
    kind: str = "Kustomization",
    *,
    group: str = "kustomize.toolkit.fluxcd.io/v1",
    interval: str = "10m",
    timeout: str | None = None,
    ready: str = "True",
    suspend: bool = False,
    created: datetime = NOW - timedelta(days=1),
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"interval": interval, **spec}
    if timeout is not None:
        body["timeout"] = timeout
    if suspend:
        body["suspend"] = True
    return {
        "apiVersion": group,
        "kind": kind,
        "metadata": {
            "name": "apps",
            "namespace": "flux-system",
            "creationTimestamp": f"{created:%Y-%m-%dT%H:%M:%SZ}",
        },
        "spec": body,
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "x", "message": "y"}]},
    }


WATCHED = NOW - timedelta(hours=2)
UP = ControllerBeat(
    controller=KC, unknown="", watched_since=WATCHED, last_moved_at=NOW - MIN, object_series=3
)


def seen(moved_ago: timedelta | None) -> ObjectBeat:
    return ObjectBeat(
        present=True, first_seen=WATCHED, moved_at=None if moved_ago is None else NOW - moved_ago
    )


# A Ready 10m Kustomization: 10m + timeout (10m - 30s) + slack 1m + 10% of 10m = 21m30s
WINDOW = timedelta(minutes=21, seconds=30)

NOT_RECONCILING: dict[str, tuple[dict[str, Any], ObjectBeat, ControllerBeat, Liveness, Outcome, Reason]] = {
    "counter_not_moved_past_interval_timeout_and_slack_alarms": (
        flux(),
        seen(WINDOW + MIN),
        UP,
        Liveness.UP,
        Outcome.ALARM,
        Reason.COUNTER_NOT_MOVED,
    ),
    "counter_moved_within_interval_timeout_and_slack_is_quiet": (
        flux(),
        seen(WINDOW - MIN),
        UP,
        Liveness.UP,
        Outcome.QUIET,
        Reason.WITHIN_WINDOW,
    ),
    "never_moved_but_watched_for_less_than_its_window_is_quiet": (
        flux(),
        ObjectBeat(present=True, first_seen=NOW - 5 * MIN),
        replace(UP, watched_since=NOW - 5 * MIN),
        Liveness.UP,
        Outcome.QUIET,
        Reason.WITHIN_WINDOW,
    ),
    "never_moved_and_watched_for_longer_than_its_window_alarms": (
        flux(),
        seen(None),
        UP,
        Liveness.UP,
        Outcome.ALARM,
        Reason.COUNTER_NOT_MOVED,
    ),
    "no_series_while_its_controller_reports_others_alarms": (
        flux(),
        ObjectBeat(present=False),
        UP,
        Liveness.UP,
        Outcome.ALARM,
        Reason.NO_SERIES,
    ),
    "no_series_for_an_object_created_within_its_window_is_quiet": (
        flux(created=NOW - 5 * MIN),
        ObjectBeat(present=False),
        UP,
        Liveness.UP,
        Outcome.QUIET,
        Reason.WITHIN_WINDOW,
    ),
    "no_series_while_its_controller_reports_none_at_all_is_unknown": (
        flux(),
        ObjectBeat(present=False),
        replace(UP, object_series=0),
        Liveness.UP,
        Outcome.UNKNOWN,
        Reason.NO_OBJECT_SERIES,
    ),
    "suspended_is_quiet_however_long_the_counter_rested": (
        flux(suspend=True),
        seen(timedelta(days=9)),
        UP,
        Liveness.UP,
        Outcome.QUIET,
        Reason.SUSPENDED,
    ),
    "controller_down_is_controller_downs_not_an_alarm_here": (
        flux(),
        seen(timedelta(days=9)),
        UP,
        Liveness.DOWN,
        Outcome.ELSEWHERE,
        Reason.CONTROLLER_DOWN,
    ),
    "controller_liveness_unknown_is_unknown": (
        flux(),
        seen(timedelta(days=9)),
        UP,
        Liveness.UNKNOWN,
        Outcome.UNKNOWN,
        Reason.LIVENESS_UNKNOWN,
    ),
    "metrics_unreadable_is_unknown_never_quiet_never_an_alarm": (
        flux(),
        seen(timedelta(days=9)),
        replace(UP, unknown="connection refused"),
        Liveness.UP,
        Outcome.UNKNOWN,
        Reason.HEARTBEAT_UNKNOWN,
    ),
    "a_nan_counter_is_unknown": (
        flux(),
        ObjectBeat(present=True, count_known=False, first_seen=WATCHED),
        UP,
        Liveness.UP,
        Outcome.UNKNOWN,
        Reason.COUNTER_UNKNOWN,
    ),
    "an_unreadable_interval_is_unknown": (
        flux(interval="soon"),
        seen(timedelta(days=9)),
        UP,
        Liveness.UP,
        Outcome.UNKNOWN,
        Reason.NO_INTERVAL,
    ),
    "an_oci_helm_repository_is_not_reconciled_on_an_interval": (
        flux("HelmRepository", group="source.toolkit.fluxcd.io/v1", type="oci"),
        seen(timedelta(days=9)),
        UP,
        Liveness.UP,
        Outcome.QUIET,
        Reason.NOT_PERIODIC,
    ),
    "a_failing_object_may_rest_as_long_as_fluxs_retry_backoff_cap": (
        flux("GitRepository", group="source.toolkit.fluxcd.io/v1", interval="1m", ready="False"),
        seen(15 * MIN),
        UP,
        Liveness.UP,
        Outcome.QUIET,
        Reason.WITHIN_WINDOW,
    ),
    "a_failing_object_past_the_backoff_cap_alarms": (
        flux("GitRepository", group="source.toolkit.fluxcd.io/v1", interval="1m", ready="False"),
        seen(18 * MIN),
        UP,
        Liveness.UP,
        Outcome.ALARM,
        Reason.COUNTER_NOT_MOVED,
    ),
    # Ready=Unknown is Flux's "reconciliation in progress": no back-off, the interval holds
    # (1m + 60s + 1m + 6s), as for an object never reconciled (its queue wait is the same).
    "an_object_in_progress_is_not_given_the_backoff": (
        flux("GitRepository", group="source.toolkit.fluxcd.io/v1", interval="1m", ready="Unknown"),
        seen(4 * MIN),
        UP,
        Liveness.UP,
        Outcome.ALARM,
        Reason.COUNTER_NOT_MOVED,
    ),
}


@pytest.mark.parametrize("case", NOT_RECONCILING)
def test_not_reconciling(case: str) -> None:
    obj, beat, controller, liveness, outcome, reason = NOT_RECONCILING[case]
    verdict = not_reconciling(obj, beat=beat, controller=controller, liveness=liveness, now=NOW)
    assert (verdict.outcome, verdict.reason) == (outcome, reason), verdict.message


def test_a_not_reconciling_alarm_names_its_controller_last_reconcile_and_interval() -> None:
    """Times spelled, never ages: the finding is cached between evaluations."""
    verdict = not_reconciling(flux(), beat=seen(30 * MIN), controller=UP, liveness=Liveness.UP, now=NOW)
    assert verdict.message == (
        "kustomize-controller is up but has not reconciled it: last seen reconciled at 2026-12-07T11:30:00Z, "
        "past its interval 10m + timeout + slack (21m30s)."
    )
    assert verdict.since == NOW - 30 * MIN + WINDOW
    assert verdict.evidence["last_reconciled"] == "2026-12-07T11:30:00Z"


def test_a_quiet_object_says_when_it_becomes_due() -> None:
    verdict = not_reconciling(flux(), beat=seen(MIN), controller=UP, liveness=Liveness.UP, now=NOW)
    assert verdict.recheck_at == NOW - MIN + WINDOW


DUE_WINDOWS: dict[str, tuple[dict[str, Any], timedelta]] = {
    "kustomization_timeout_defaults_to_interval_minus_30s": (flux(interval="10m"), WINDOW),
    "kustomization_timeout_is_never_under_30s": (
        flux(interval="30s", timeout="5s"),
        timedelta(seconds=30 + 30 + 60 + 3),
    ),
    "helm_release_timeout_defaults_to_5m": (
        flux("HelmRelease", group="helm.toolkit.fluxcd.io/v2", interval="10m"),
        timedelta(minutes=10 + 5 + 1 + 1),
    ),
    "git_repository_timeout_defaults_to_60s": (
        flux("GitRepository", group="source.toolkit.fluxcd.io/v1", interval="5m"),
        timedelta(minutes=5 + 1 + 1, seconds=30),
    ),
    "a_written_timeout_is_taken": (
        flux("HelmRelease", group="helm.toolkit.fluxcd.io/v2", interval="10m", timeout="30m"),
        timedelta(minutes=10 + 30 + 1 + 1),
    ),
    "helm_chart_has_no_timeout": (
        flux("HelmChart", group="source.toolkit.fluxcd.io/v1", interval="10m"),
        timedelta(minutes=10 + 1 + 1),
    ),
    "an_object_never_reconciled_has_no_retry_backoff_to_wait_for (no Ready condition at all)": (
        {**flux(interval="10m"), "status": {}},
        WINDOW,
    ),
}


@pytest.mark.parametrize("case", DUE_WINDOWS)
def test_due_window_is_interval_plus_the_kinds_timeout_plus_slack(case: str) -> None:
    obj, window = DUE_WINDOWS[case]
    assert due_window(obj, DEFAULT_HEARTBEAT_THRESHOLDS) == window


STUCK_UP = ControllerBeat(
    controller=KC, unknown="", watched_since=WATCHED, last_moved_at=NOW - MIN, last_completed_at=NOW - MIN
)

STUCK: dict[str, tuple[ControllerBeat, list[timedelta], Liveness, Outcome, Reason]] = {
    "counters_not_moved_while_objects_are_due_alarms": (
        replace(STUCK_UP, last_moved_at=NOW - 30 * MIN),
        [WINDOW],
        Liveness.UP,
        Outcome.ALARM,
        Reason.NO_RECONCILES_WHILE_DUE,
    ),
    "counters_resting_within_the_shortest_window_is_quiet": (
        replace(STUCK_UP, last_moved_at=NOW - 20 * MIN),
        [WINDOW],
        Liveness.UP,
        Outcome.QUIET,
        Reason.RECONCILING,
    ),
    "counters_resting_with_no_object_due_is_quiet": (
        replace(STUCK_UP, last_moved_at=NOW - timedelta(days=1)),
        [],
        Liveness.UP,
        Outcome.QUIET,
        Reason.RECONCILING,
    ),
    "queue_held_with_no_completion_past_the_threshold_alarms": (
        replace(STUCK_UP, depth=4, queued_since=NOW - 6 * MIN, last_completed_at=NOW - 7 * MIN),
        [WINDOW],
        Liveness.UP,
        Outcome.ALARM,
        Reason.QUEUE_NOT_DRAINING,
    ),
    "queue_held_but_completions_since_is_quiet": (
        replace(STUCK_UP, depth=4, queued_since=NOW - 6 * MIN, last_completed_at=NOW - MIN),
        [WINDOW],
        Liveness.UP,
        Outcome.QUIET,
        Reason.RECONCILING,
    ),
    "queue_held_for_less_than_the_threshold_is_quiet": (
        replace(STUCK_UP, depth=4, queued_since=NOW - 4 * MIN, last_completed_at=NOW - 7 * MIN),
        [WINDOW],
        Liveness.UP,
        Outcome.QUIET,
        Reason.RECONCILING,
    ),
    "a_reconcile_running_longer_than_any_object_allows_alarms": (
        replace(STUCK_UP, longest_running_seconds=23 * 60),
        [WINDOW],
        Liveness.UP,
        Outcome.ALARM,
        Reason.PROCESSOR_RUNNING_LONG,
    ),
    "a_reconcile_running_within_its_objects_longest_window_is_quiet": (
        replace(STUCK_UP, longest_running_seconds=20 * 60),
        [WINDOW],
        Liveness.UP,
        Outcome.QUIET,
        Reason.RECONCILING,
    ),
    "controller_down_is_controller_downs_not_stuck": (
        replace(STUCK_UP, last_moved_at=NOW - timedelta(days=1)),
        [WINDOW],
        Liveness.DOWN,
        Outcome.ELSEWHERE,
        Reason.CONTROLLER_DOWN,
    ),
    "metrics_unreadable_is_unknown_never_quiet_never_an_alarm": (
        replace(STUCK_UP, unknown="timeout", last_moved_at=NOW - timedelta(days=1)),
        [WINDOW],
        Liveness.UP,
        Outcome.UNKNOWN,
        Reason.HEARTBEAT_UNKNOWN,
    ),
    "an_unreadable_queue_sample_with_nothing_else_wrong_is_unknown": (
        replace(STUCK_UP, depth=None),
        [WINDOW],
        Liveness.UP,
        Outcome.UNKNOWN,
        Reason.HEARTBEAT_UNKNOWN,
    ),
}


@pytest.mark.parametrize("case", STUCK)
def test_controller_stuck(case: str) -> None:
    beat, windows, liveness, outcome, reason = STUCK[case]
    verdict = controller_stuck(beat, windows=windows, liveness=liveness, now=NOW)
    assert (verdict.outcome, verdict.reason) == (outcome, reason), verdict.message


def test_a_stuck_controller_names_its_queue_workers_and_last_completion() -> None:
    beat = replace(
        STUCK_UP, depth=4, active_workers=1, queued_since=NOW - 6 * MIN, last_completed_at=NOW - 7 * MIN
    )
    verdict = controller_stuck(beat, windows=[WINDOW], liveness=Liveness.UP, now=NOW)
    assert verdict.message == (
        "kustomize-controller's work queue has not drained since 2026-12-07T11:54:00Z and no reconcile "
        "completed; work queue depth 4, active workers 1; last completed a reconcile at 2026-12-07T11:53:00Z."
    )
    assert verdict.evidence["depth"] == 4
    assert verdict.evidence["active_workers"] == 1
    assert verdict.since == NOW - MIN


def test_a_reconciling_controller_says_when_it_becomes_stuck_with_no_new_read() -> None:
    beat = replace(STUCK_UP, last_moved_at=NOW - MIN, queued_since=NOW - MIN, depth=2, last_completed_at=None)
    verdict = controller_stuck(beat, windows=[WINDOW], liveness=Liveness.UP, now=NOW)
    assert verdict.outcome is Outcome.QUIET
    assert verdict.recheck_at == NOW - MIN + DEFAULT_HEARTBEAT_THRESHOLDS.queue_not_draining
