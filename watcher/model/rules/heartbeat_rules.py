"""Is a controller that is up actually reconciling? Judged from its own counters, `now` passed in.

An object's status cannot say so (a successful no-op reconcile writes nothing); its controller's
per-object counter can (see ingest/controller_metrics.py). Two rules:

- `not_reconciling`: one object's counter has not moved for longer than its due window (its
  interval, or Flux's retry back-off cap while it is not Ready, + its timeout + a slack for
  jitter), or it has no series at all while its controller reports others.
- `controller_stuck`: the controller is up, yet nothing moved while an object was due, or its
  work queue has held items with no completion for a threshold, or one reconcile has run longer
  than any of its objects' timeouts allow.

Both are only ever an alarm when the controller is up and its heartbeat is known: a controller
that is down is ControllerDown's (rules/controllers.py), and a heartbeat that could not be read
is UNKNOWN, never quiet (healthy) and never an alarm. Verdicts are this module's own type; the
engine's heartbeat tracker (store/beats.py) makes the alarms NotReconciling and ControllerStuck
findings. Messages spell times, never ages: a finding is cached between evaluations.

The store (store/heartbeats.py) produces the `ControllerBeat` and `ObjectBeat` read here; they
are declared here because rules sit below the store.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from watcher.model.ingest.kinds import HELM_GROUP, KUSTOMIZE_GROUP, SOURCE_GROUP
from watcher.model.ingest.objects import (
    condition,
    dig,
    format_duration,
    is_deleting,
    parse_duration,
    text,
    time_at,
)
from watcher.model.types import Thresholds, rfc3339

NOT_RECONCILING = "NotReconciling"
CONTROLLER_STUCK = "ControllerStuck"


class Outcome(StrEnum):
    ALARM = "alarm"
    QUIET = "quiet"
    """Looked, and nothing is wrong (or nothing is expected: suspended, deleting)."""
    UNKNOWN = "unknown"
    """Could not look: never counted as healthy."""
    ELSEWHERE = "elsewhere"
    """Another rule's: the controller is down (ControllerDown)."""


class Liveness(StrEnum):
    """ControllerDown's verdict on the controller's workload and Lease, as the engine has it."""

    UP = "up"
    DOWN = "down"
    UNKNOWN = "unknown"


class Reason(StrEnum):
    """Why, from a FIXED set (these become metric labels when wired)."""

    COUNTER_NOT_MOVED = "CounterNotMoved"
    NO_SERIES = "NoSeries"
    NO_RECONCILES_WHILE_DUE = "NoReconcilesWhileDue"
    QUEUE_NOT_DRAINING = "QueueNotDraining"
    PROCESSOR_RUNNING_LONG = "ProcessorRunningLong"
    RECONCILING = "Reconciling"
    WITHIN_WINDOW = "WithinWindow"
    SUSPENDED = "Suspended"
    DELETING = "Deleting"
    NOT_PERIODIC = "NotPeriodic"
    CONTROLLER_DOWN = "ControllerDown"
    LIVENESS_UNKNOWN = "LivenessUnknown"
    HEARTBEAT_UNKNOWN = "HeartbeatUnknown"
    COUNTER_UNKNOWN = "CounterUnknown"
    NO_INTERVAL = "NoInterval"
    NO_OBJECT_SERIES = "NoObjectSeries"


@dataclass(frozen=True, slots=True)
class HeartbeatThresholds:
    """The heartbeat fields of the model's Thresholds (declared, with their defaults and why,
    in types.Thresholds; set in the config's `thresholds.`)."""

    slack: timedelta
    jitter_fraction: float
    retry_backoff_cap: timedelta
    stale_after: timedelta
    queue_not_draining: timedelta
    processor_floor: timedelta


def heartbeat_thresholds(thresholds: Thresholds) -> HeartbeatThresholds:
    return HeartbeatThresholds(
        slack=thresholds.heartbeat_slack,
        jitter_fraction=thresholds.heartbeat_jitter_fraction,
        retry_backoff_cap=thresholds.heartbeat_retry_backoff_cap,
        stale_after=thresholds.heartbeat_stale_after,
        queue_not_draining=thresholds.queue_not_draining,
        processor_floor=thresholds.processor_floor,
    )


DEFAULT_HEARTBEAT_THRESHOLDS = heartbeat_thresholds(Thresholds())


@dataclass(frozen=True, slots=True)
class ControllerBeat:
    """What the store knows of one controller's heartbeat, at one moment."""

    controller: str
    unknown: str
    """Why the heartbeat cannot be judged ("" when it can): never read, last read failed, stale."""
    watched_since: datetime | None = None
    """First good read of the current process (a restart starts it again)."""
    last_read_at: datetime | None = None
    last_moved_at: datetime | None = None
    """Last read at which any counter (an object's or a reconcile total) moved."""
    last_completed_at: datetime | None = None
    """Last read at which the reconcile totals moved (a reconcile completed)."""
    queued_since: datetime | None = None
    """First read of the current run of reads with work queued (depth > 0)."""
    depth: float | None = 0.0
    longest_running_seconds: float | None = 0.0
    active_workers: float | None = 0.0
    object_series: int = 0
    """How many objects the last good read had a counter for."""
    objects_complete: bool = True
    """False when the last good read lost a per-object line: an absent series is not known absent."""


@dataclass(frozen=True, slots=True)
class ObjectBeat:
    """One object's counter as the store has it."""

    present: bool
    """It had a series in the last good read."""
    count_known: bool = True
    first_seen: datetime | None = None
    moved_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    rule: str
    outcome: Outcome
    reason: Reason
    message: str
    since: datetime | None = None
    """When it became overdue/stuck (alarms), else None."""
    recheck_at: datetime | None = None
    """When the verdict changes with no new read (a quiet object becoming due), else None."""
    evidence: dict[str, Any] = field(default_factory=dict)
    """What an alarm shows; a quiet object's verdict carries none (nothing reads it, and every
    object of a controller is judged again on its first read)."""
    window: timedelta | None = None
    """The object's due window when it was computed (NotReconciling), so its caller need not
    compute it again."""


_DEFAULT_TIMEOUTS: Mapping[tuple[str, str], timedelta] = {
    (HELM_GROUP, "HelmRelease"): timedelta(minutes=5),
    (SOURCE_GROUP, "GitRepository"): timedelta(seconds=60),
    (SOURCE_GROUP, "OCIRepository"): timedelta(seconds=60),
    (SOURCE_GROUP, "Bucket"): timedelta(seconds=60),
    (SOURCE_GROUP, "HelmRepository"): timedelta(seconds=60),
}
"""spec.timeout when unset, from each kind's API (GetTimeout or its kubebuilder default); a kind
absent here (HelmChart has no timeout) gets 0. Kustomization's is computed: `_kustomization_timeout`."""
_KUSTOMIZATION_TIMEOUT_FLOOR = timedelta(seconds=30)


def due_window(obj: Mapping[str, Any], thresholds: HeartbeatThresholds) -> timedelta | None:
    """How long the object's counter may rest: None when its interval cannot be read."""
    interval, timeout = dig(obj, "spec", "interval"), dig(obj, "spec", "timeout")
    ready = condition(obj, "Ready")
    return _window(
        text(obj, "apiVersion").partition("/")[0],
        text(obj, "kind"),
        interval if isinstance(interval, str) else None,  # a duration is text (and a cache key)
        timeout if isinstance(timeout, str) else None,
        # A failed reconcile (Ready=False) is retried on Flux's exponential back-off; one never
        # reconciled (no Ready yet) or in progress (Unknown) is not backing off: the interval holds.
        failed=ready is not None and ready.get("status") == "False",
        thresholds=thresholds,
    )


@functools.lru_cache(maxsize=1024)
def _window(
    group: str,
    kind: str,
    interval_text: Any,
    timeout_text: Any,
    *,
    failed: bool,
    thresholds: HeartbeatThresholds,
) -> timedelta | None:
    """A few distinct (kind, interval, timeout) per cluster: computed once each, not per object
    per read (a controller's first read judges every object it reconciles)."""
    interval = parse_duration(interval_text)
    if interval is None or interval <= timedelta(0):
        return None
    gap = max(interval, thresholds.retry_backoff_cap) if failed else interval
    return (
        gap
        + _timeout(group, kind, interval, timeout_text)
        + thresholds.slack
        + interval * thresholds.jitter_fraction
    )


def _timeout(group: str, kind: str, interval: timedelta, timeout_text: str | None) -> timedelta:
    written = parse_duration(timeout_text)
    if (group, kind) == (KUSTOMIZE_GROUP, "Kustomization"):
        # kustomize-controller's GetTimeout: spec.timeout, else interval - 30s; never under 30s
        return max(
            written if written is not None else interval - timedelta(seconds=30), _KUSTOMIZATION_TIMEOUT_FLOOR
        )
    if written is not None:
        return written
    return _DEFAULT_TIMEOUTS.get((group, kind), timedelta(0))


def _not_periodic(obj: Mapping[str, Any]) -> bool:
    """An OCI HelmRepository is not reconciled on an interval (source-controller leaves it static)."""
    return (
        text(obj, "apiVersion").partition("/")[0] == SOURCE_GROUP
        and text(obj, "kind") == "HelmRepository"
        and text(obj, "spec", "type") == "oci"
    )


def _precondition(rule: str, liveness: Liveness, beat: ControllerBeat) -> Verdict | None:
    """The near misses both rules share: not our call (down), or we could not look."""
    if liveness is Liveness.DOWN:
        return Verdict(
            rule, Outcome.ELSEWHERE, Reason.CONTROLLER_DOWN, f"{beat.controller} is down: ControllerDown's."
        )
    if liveness is Liveness.UNKNOWN:
        return Verdict(
            rule, Outcome.UNKNOWN, Reason.LIVENESS_UNKNOWN, f"Whether {beat.controller} is up is not known."
        )
    if beat.unknown:
        return Verdict(
            rule,
            Outcome.UNKNOWN,
            Reason.HEARTBEAT_UNKNOWN,
            f"{beat.controller}'s heartbeat is unknown: {beat.unknown}.",
            evidence={"controller": beat.controller, "last_read": rfc3339(beat.last_read_at)},
        )
    return None


def not_reconciling(
    obj: Mapping[str, Any],
    *,
    beat: ObjectBeat,
    controller: ControllerBeat,
    liveness: Liveness,
    now: datetime,
    thresholds: HeartbeatThresholds = DEFAULT_HEARTBEAT_THRESHOLDS,
) -> Verdict:
    """NotReconciling for one object of `controller`, or why not."""
    rule = NOT_RECONCILING
    if dig(obj, "spec", "suspend") is True:
        return Verdict(rule, Outcome.QUIET, Reason.SUSPENDED, "Suspended: no reconcile is expected.")
    if is_deleting(obj):
        return Verdict(rule, Outcome.QUIET, Reason.DELETING, "Being deleted: its counter is dropped.")
    if _not_periodic(obj):
        return Verdict(
            rule,
            Outcome.QUIET,
            Reason.NOT_PERIODIC,
            "An OCI HelmRepository is not reconciled on an interval.",
        )
    shared = _precondition(rule, liveness, controller)
    if shared is not None:
        return shared
    window = due_window(obj, thresholds)
    if window is None:
        return Verdict(
            rule,
            Outcome.UNKNOWN,
            Reason.NO_INTERVAL,
            f"spec.interval {str(dig(obj, 'spec', 'interval'))[:40]!r} is not a duration: "
            "no due time to judge by.",
        )
    if (beat.present and not beat.count_known) or (not beat.present and not controller.objects_complete):
        return Verdict(
            rule,
            Outcome.UNKNOWN,
            Reason.COUNTER_UNKNOWN,
            "Its reconcile counter is unreadable (or may be on a line of its controller's metrics that was).",
        )
    if not beat.present and controller.object_series == 0:
        return Verdict(
            rule,
            Outcome.UNKNOWN,
            Reason.NO_OBJECT_SERIES,
            f"{controller.controller} reports no per-object counter at all: "
            "it cannot say which objects it reconciles.",
        )
    starts = [controller.watched_since, beat.first_seen if beat.present else None, beat.moved_at]
    if not beat.present:
        starts.append(time_at(obj, "metadata", "creationTimestamp"))
    reference = max((t for t in starts if t is not None), default=now)
    due = reference + window
    if now <= due:
        return Verdict(
            rule, Outcome.QUIET, Reason.WITHIN_WINDOW, "Within its due window.", recheck_at=due, window=window
        )
    evidence = {
        "controller": controller.controller,
        "interval": text(obj, "spec", "interval"),
        "window": format_duration(window),
        "last_reconciled": rfc3339(beat.moved_at),
        "watched_since": rfc3339(controller.watched_since),
    }
    seen = (
        f"last seen reconciled at {rfc3339(beat.moved_at)}"
        if beat.moved_at is not None
        else f"not seen reconciled since {rfc3339(reference)}"
    )
    if beat.present:
        return Verdict(
            rule,
            Outcome.ALARM,
            Reason.COUNTER_NOT_MOVED,
            f"{controller.controller} is up but has not reconciled it: {seen}, "
            f"past its interval {evidence['interval']} + timeout + slack ({evidence['window']}).",
            since=due,
            evidence=evidence,
            window=window,
        )
    return Verdict(
        rule,
        Outcome.ALARM,
        Reason.NO_SERIES,
        f"{controller.controller} is up and reports {controller.object_series} other objects, "
        f"but none of this one since {rfc3339(reference)} (its window {evidence['window']}): "
        "a shard, label selector or watched namespace that excludes it?",
        since=due,
        evidence=evidence,
        window=window,
    )


def _queue(controller: ControllerBeat) -> str:
    """What on-call checks first (runbook): how much waits, and how many workers are busy."""
    depth = "unknown" if controller.depth is None else f"{controller.depth:g}"
    workers = controller.active_workers
    busy = "unknown" if workers is None else f"{workers:g}"
    return f"work queue depth {depth}, active workers {busy}"


def controller_stuck(
    controller: ControllerBeat,
    *,
    windows: Iterable[timedelta],
    liveness: Liveness,
    now: datetime,
    thresholds: HeartbeatThresholds = DEFAULT_HEARTBEAT_THRESHOLDS,
) -> Verdict:
    """ControllerStuck, or why not. `windows`: the due windows of its objects that are due at all
    (not suspended, not deleting, interval readable), from `due_window`."""
    rule = CONTROLLER_STUCK
    shared = _precondition(rule, liveness, controller)
    if shared is not None:
        return shared
    windows = list(windows)
    evidence = {
        "controller": controller.controller,
        "depth": controller.depth,
        "active_workers": controller.active_workers,
        "longest_running_seconds": controller.longest_running_seconds,
        "last_completed": rfc3339(controller.last_completed_at),
        "last_moved": rfc3339(controller.last_moved_at),
    }
    last = (
        f"last completed a reconcile at {rfc3339(controller.last_completed_at)}"
        if controller.last_completed_at is not None
        else "no reconcile completed since watching began"
    )
    last = f"{_queue(controller)}; {last}"
    quiet_since = max(
        (t for t in (controller.watched_since, controller.last_moved_at) if t is not None), default=now
    )
    if windows and now - quiet_since > min(windows):
        return Verdict(
            rule,
            Outcome.ALARM,
            Reason.NO_RECONCILES_WHILE_DUE,
            f"{controller.controller} is up but no counter moved since {rfc3339(quiet_since)} "
            f"while its objects are due every {format_duration(min(windows), rough=True)} at most; {last}.",
            since=quiet_since + min(windows),
            evidence=evidence,
        )
    queued = controller.queued_since
    completed = controller.last_completed_at
    if (
        queued is not None
        and (completed is None or completed <= queued)
        and now - queued > thresholds.queue_not_draining
    ):
        return Verdict(
            rule,
            Outcome.ALARM,
            Reason.QUEUE_NOT_DRAINING,
            f"{controller.controller}'s work queue has not drained since {rfc3339(queued)} "
            f"and no reconcile completed; {last}.",
            since=queued + thresholds.queue_not_draining,
            evidence=evidence,
        )
    limit = max([thresholds.processor_floor, *windows])
    running = controller.longest_running_seconds
    if running is not None and running > limit.total_seconds():
        return Verdict(
            rule,
            Outcome.ALARM,
            Reason.PROCESSOR_RUNNING_LONG,
            f"One of {controller.controller}'s reconciles has run for "
            f"{format_duration(timedelta(seconds=running), rough=True)}, "
            "longer than any of its objects allows "
            f"({format_duration(limit, rough=True)}); {last}.",
            since=now - timedelta(seconds=running) + limit,
            evidence=evidence,
        )
    if controller.depth is None or running is None:
        return Verdict(
            rule,
            Outcome.UNKNOWN,
            Reason.HEARTBEAT_UNKNOWN,
            f"{controller.controller}'s work queue sample is unreadable: whether it is stuck is not known.",
            evidence=evidence,
        )
    flips = [quiet_since + min(windows)] if windows else []
    if queued is not None and (completed is None or completed <= queued):
        flips.append(queued + thresholds.queue_not_draining)
    return Verdict(
        rule,
        Outcome.QUIET,
        Reason.RECONCILING,
        f"{controller.controller} is reconciling.",
        recheck_at=min((t for t in flips if t > now), default=None),
        evidence=evidence,
    )
