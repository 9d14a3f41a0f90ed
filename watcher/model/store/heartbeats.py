"""Each controller's heartbeat: its reads over time, and from them when its counters last moved.

A counter's value means nothing alone; only its movement between two reads does. So:

- The first good read of a controller is a baseline: nothing is known to have moved, and each
  object is "watched since" then (the rules only call it overdue once it has been watched for
  longer than its due window).
- A counter that changed between two good reads moved at the later read (dated late, never
  early: an alarm comes later, never falsely). Down counts as moved: the controller restarted.
- A series that appears after the first read moved (a Flux controller creates an object's series
  on its first reconcile), and so did every series after a restart (process_start_time_seconds
  changed, or the reconcile totals went down): the new process only has series it has reconciled.
  A restart also starts `watched_since` again, so an object the new process has not reconciled
  yet gets a full window.
- A series that disappears is kept as absent (Flux drops a deleted object's series; a restart
  drops them all) for `forget_after`, then forgotten: memory is bounded by the series one read
  may hold (ingest bounds it) plus a day of churn.
- A failed read changes no counter; it makes the heartbeat unknown until a good read, as does a
  last good read older than `stale_after`. A read dated before the last one is refused (`read`
  returns False), never applied out of order.

Pure: reads and moments in, `ControllerBeat`/`ObjectBeat` (declared with the rules) out.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from watcher.model.ingest.controller_metrics import OBJECT_COUNT, ControllerMetrics, ObjectRef
from watcher.model.rules.heartbeat_rules import ControllerBeat, ObjectBeat

FORGET_AFTER = timedelta(days=1)
_RESTART_TOLERANCE = 1.0
"""Seconds process_start_time_seconds may wobble (it is a float computed per scrape)."""


@dataclass(slots=True)
class _Series:
    value: float | None
    first_seen: datetime
    moved_at: datetime | None
    absent_since: datetime | None = None


@dataclass(slots=True)
class _Controller:
    last_read_at: datetime | None = None
    last_good_at: datetime | None = None
    problem: str = "never read"
    watched_since: datetime | None = None
    started_at: float | None = None
    total: float | None = None
    last_moved_at: datetime | None = None
    last_completed_at: datetime | None = None
    queued_since: datetime | None = None
    depth: float | None = 0.0
    longest_running_seconds: float | None = 0.0
    active_workers: float | None = 0.0
    object_series: int = 0
    objects_complete: bool = True
    objects: dict[ObjectRef, _Series] = field(default_factory=dict)
    whole: bool = True
    """Since changes() was last asked: something every object's verdict reads changed."""
    changed: set[ObjectRef] = field(default_factory=set)
    """Since changes() was last asked: the objects whose ObjectBeat changed."""


class Heartbeats:
    """Every tracked controller's reads; `controller()` and `object()` say what they amount to."""

    def __init__(self, *, forget_after: timedelta = FORGET_AFTER) -> None:
        self._forget_after = forget_after
        self._controllers: dict[str, _Controller] = {}

    def read(
        self,
        controller: str,
        *,
        at: datetime,
        samples: ControllerMetrics | None = None,
        problem: str | None = None,
    ) -> bool:
        """One read of `controller` at `at`: its samples, or the problem that kept it from being
        read (exactly one). False when refused: dated before the last read."""
        if (samples is None) == (problem is None):
            raise ValueError("a read has either samples or a problem")
        state = self._controllers.setdefault(controller, _Controller())
        if state.last_read_at is not None and at < state.last_read_at:
            return False
        state.last_read_at = at
        before = _shared(state)
        if samples is None:
            state.problem = problem or "unreadable"
            state.whole = state.whole or _shared(state) != before
            return True
        state.problem = ""
        first = state.watched_since is None
        total = samples.reconciles_total()
        restarted = not first and _restarted(state, samples, total)
        if first or restarted:
            state.watched_since = at
        # a reconcile completed: the totals changed, or a new process has counted any at all
        if total and (restarted or (state.total is not None and total != state.total)):
            state.last_completed_at = at
            state.last_moved_at = at
        state.last_good_at = at
        state.started_at = samples.started_at
        state.total = total
        if _objects(state, samples, at=at, first=first, restarted=restarted):
            state.last_moved_at = at
        self._forget(state, at)
        _queues(state, samples, at)
        state.whole = state.whole or first or restarted or _shared(state) != before
        return True

    def changes(self, controller: str) -> tuple[bool, frozenset[ObjectRef]]:
        """What the reads since the last call changed, and forget it: (whether something every
        object's verdict reads changed, the objects whose own counter's record changed). The
        engine judges again only those (a read of 10k unmoved counters changes nothing)."""
        state = self._controllers.get(controller)
        if state is None:
            return False, frozenset()
        whole, changed = state.whole, frozenset(state.changed)
        state.whole = False
        state.changed.clear()
        return whole, changed

    def good_until(self, controller: str, *, stale_after: timedelta) -> datetime | None:
        """The first moment its heartbeat is stale with no further read (None: it is not good
        now). Stale is strictly older than `stale_after`, hence the microsecond."""
        state = self._controllers.get(controller)
        if state is None or state.problem or state.last_good_at is None:
            return None
        return state.last_good_at + stale_after + timedelta(microseconds=1)

    def controller(self, controller: str, *, now: datetime, stale_after: timedelta) -> ControllerBeat:
        state = self._controllers.get(controller) or _Controller()
        unknown = state.problem
        if not unknown and state.last_good_at is not None and now - state.last_good_at > stale_after:
            unknown = f"its last good read is older than {int(stale_after.total_seconds())}s"
        if not unknown and state.total is None:
            unknown = "its reconcile totals are unreadable"
        return ControllerBeat(
            controller=controller,
            unknown=unknown,
            watched_since=state.watched_since,
            last_read_at=state.last_read_at,
            last_moved_at=state.last_moved_at,
            last_completed_at=state.last_completed_at,
            queued_since=state.queued_since,
            depth=state.depth,
            longest_running_seconds=state.longest_running_seconds,
            active_workers=state.active_workers,
            object_series=state.object_series,
            objects_complete=state.objects_complete,
        )

    def object(self, controller: str, ref: ObjectRef) -> ObjectBeat:
        state = self._controllers.get(controller)
        series = state.objects.get(ref) if state is not None else None
        if series is None:
            return ObjectBeat(present=False)
        return ObjectBeat(
            present=series.absent_since is None,
            count_known=series.value is not None,
            first_seen=series.first_seen,
            moved_at=series.moved_at,
        )

    def _forget(self, state: _Controller, at: datetime) -> None:
        gone = [
            ref
            for ref, series in state.objects.items()
            if series.absent_since is not None and at - series.absent_since > self._forget_after
        ]
        for ref in gone:
            del state.objects[ref]
        state.changed.update(gone)


def _shared(state: _Controller) -> tuple[object, ...]:
    """What every object's verdict reads of its controller's record (besides time)."""
    return (
        state.problem,
        state.watched_since,
        state.total is None,
        state.objects_complete,
        state.object_series == 0,
    )


def _restarted(state: _Controller, samples: ControllerMetrics, total: float | None) -> bool:
    before, now = state.started_at, samples.started_at
    if before is not None and now is not None and abs(before - now) > _RESTART_TOLERANCE:
        return True
    return total is not None and state.total is not None and total < state.total


def _objects(
    state: _Controller, samples: ControllerMetrics, *, at: datetime, first: bool, restarted: bool
) -> bool:
    """Update every object's series; True when any moved."""
    any_moved = False
    for ref, value in samples.objects.items():
        series = state.objects.get(ref)
        if series is None or series.absent_since is not None:
            moved = not first  # it appeared: its controller reconciled it since the last read
        else:
            moved = restarted or (value is not None and series.value is not None and value != series.value)
        if series is None:
            ref = (sys.intern(ref[0]), sys.intern(ref[1]), ref[2])  # kinds and namespaces: held once each
            state.objects[ref] = _Series(value=value, first_seen=at, moved_at=at if moved else None)
            state.changed.add(ref)
        else:
            if moved or series.absent_since is not None or (series.value is None) != (value is None):
                state.changed.add(ref)
            series.value, series.absent_since = value, None
            if moved:
                series.moved_at = at
        any_moved = any_moved or moved
    state.objects_complete = OBJECT_COUNT not in samples.incomplete
    for ref, series in state.objects.items():
        if state.objects_complete and series.absent_since is None and ref not in samples.objects:
            series.absent_since = at  # with lines lost, what is missing may be among them: unchanged
            state.changed.add(ref)
    state.object_series = len(samples.objects)
    return any_moved


def _queues(state: _Controller, samples: ControllerMetrics, at: datetime) -> None:
    """Only the reconcilers' own queues (named like a controller in reconcile_total); others
    (e.g. DynamicClientCertificate, a library's cert rotation) say nothing about reconciling."""
    queues = [queue for name, queue in samples.queues.items() if name in samples.reconciles]
    state.depth = _sum(queue.depth for queue in queues)
    longest = [queue.longest_running_seconds for queue in queues]
    state.longest_running_seconds = (
        None if None in longest else max((v for v in longest if v is not None), default=0.0)
    )
    state.active_workers = _sum(samples.active_workers.values())
    if state.depth is None or state.depth <= 0:
        state.queued_since = None
    elif state.queued_since is None:
        state.queued_since = at


def _sum(values: Iterable[float | None]) -> float | None:
    numbers = list(values)
    return None if None in numbers else sum(n for n in numbers if n is not None)
