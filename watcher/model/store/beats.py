"""The heartbeat tracker: controllers' reads made NotReconciling and ControllerStuck findings.

The engine feeds it one read per controller (HealthModel.heartbeat) and asks, per object of a
tracked controller, for its NotReconciling candidate (`judge`); after the objects it asks for
each controller's ControllerStuck and heartbeat (`refresh`). Incremental like the rest:

- a read marks only the objects whose own counter's record changed (store/heartbeats.py
  `changes`), or all of the controller's objects when something they all read changed (the
  heartbeat became known or unknown, a restart, the per-object family lost a line);
- a quiet object's verdict carries the moment it falls due (`recheck_at`), which the engine
  keeps with its other deadlines; a controller's goes in `due` (stuck or not) and `stale`
  (its heartbeat goes unknown with no read: then all its objects are judged again);
- ControllerStuck reads only the shortest and longest due window of the controller's objects,
  kept as a count of each window, not by walking them.

A controller here is a heartbeat key: a workload's name (shards.beat_name: a Flux controller's
main Deployment is named like its ControllerSpec, each shard `<name>-shardN` has its own), what
the reader reads and what an object's claim names as the workload serving it (controllers.Claim),
so a shard's objects are judged against that shard's counters alone. Liveness is
ControllerDown's: up when one of the visible workloads of that name is, down when all are,
unknown when none is. Before any read the tracker is off: no controller is said to have a
heartbeat at all (`heartbeat` None), rather than every one unknown.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from watcher.model.ingest.controller_metrics import ControllerMetrics, Unreadable
from watcher.model.ingest.objects import Key, subject_of
from watcher.model.rules.context import new_finding
from watcher.model.rules.controllers import ControllerState
from watcher.model.rules.heartbeat_rules import (
    Liveness,
    Outcome,
    Reason,
    Verdict,
    controller_stuck,
    due_window,
    heartbeat_thresholds,
    not_reconciling,
)
from watcher.model.rules.shards import beat_name
from watcher.model.store.deadlines import Deadlines
from watcher.model.store.heartbeats import Heartbeats
from watcher.model.types import Finding, FindingType, Heartbeat, HeartbeatState, ModelConfig

_NOT_DUE = frozenset({Reason.SUSPENDED, Reason.DELETING, Reason.NOT_PERIODIC, Reason.NO_INTERVAL})
"""An object with one of these verdicts has no due window: it does not make its controller due."""


def controller_key(name: str) -> Key:
    """A controller's place in a Deadlines heap (keyed by object Key): not an object's key."""
    return Key("stalewatch.heartbeat", "Controller", "", name)


@dataclass(frozen=True, slots=True)
class Stuck:
    """A controller's ControllerStuck verdict and the heartbeat it shows."""

    verdict: Verdict
    heartbeat: Heartbeat
    finding: Finding | None


class HeartbeatTracker:
    """The heartbeats, and the findings the engine keeps from them (see the module docstring)."""

    def __init__(self, config: ModelConfig) -> None:
        self._config = config
        self._thresholds = heartbeat_thresholds(config.thresholds)
        self._beats = Heartbeats()
        self.on = False
        """Whether any read came at all: until then no controller's heartbeat is judged."""
        self._windows: dict[str, Counter[timedelta]] = defaultdict(Counter)
        self._window_of: dict[Key, tuple[str, timedelta]] = {}
        self._pairs: dict[tuple[str, timedelta], tuple[str, timedelta]] = {}
        self._overdue: dict[str, set[Key]] = defaultdict(set)
        self._liveness: dict[str, Liveness] = {}
        self._workload: dict[str, ControllerState] = {}
        self._stuck: dict[str, Stuck] = {}
        self._dirty: set[str] = set()
        self._went_stale: set[str] = set()
        self._due = Deadlines()
        """When a controller's ControllerStuck may flip with no read."""
        self._stale = Deadlines()
        """When a controller's heartbeat goes stale with no read: its objects are judged again."""

    # -- Reads -----------------------------------------------------------------------------------

    def read(self, controller: str, *, at: datetime, read: ControllerMetrics | Unreadable) -> bool:
        """Take one read; False when refused (dated before the last one)."""
        if isinstance(read, Unreadable):
            taken = self._beats.read(controller, at=at, problem=read.reason)
        else:
            taken = self._beats.read(controller, at=at, samples=read)
        if taken:
            if not self.on:  # from now on, every controller's heartbeat is judged, read or not
                self.on = True
                self._dirty.update(self._liveness)
            self._dirty.add(controller)
            good = self._beats.good_until(controller, stale_after=self._thresholds.stale_after)
            self._stale.schedule(controller_key(controller), good)
        return taken

    def changes(self, controller: str) -> tuple[bool, frozenset[tuple[str, str, str]]]:
        """What the last reads changed (Heartbeats.changes); all its objects after its heartbeat
        went stale: they were judged unknown then, and a read that moves nothing would leave them so."""
        whole, refs = self._beats.changes(controller)
        if controller in self._went_stale:
            self._went_stale.discard(controller)
            whole = True
        return whole, refs

    def pop_due(self, now: datetime) -> tuple[list[str], bool]:
        """The controllers whose heartbeat went stale (their objects are to be judged again), and
        whether any controller fell due at all (marked for `refresh`)."""
        due = [key.name for key in self._due.pop_due(now)]
        stale = [key.name for key in self._stale.pop_due(now)]
        self._dirty.update(due, stale)
        self._went_stale.update(stale)
        return stale, bool(due or stale)

    def set_controllers(self, states: Sequence[ControllerState]) -> list[str]:
        """The visible controller verdicts; the names whose liveness changed (their objects are
        to be judged again). A controller whose up workload changed is judged again too."""
        liveness: dict[str, Liveness] = {}
        workload: dict[str, ControllerState] = {}
        for state in states:
            name = beat_name(state)
            if state.health.up:
                liveness[name] = Liveness.UP
                workload.setdefault(name, state)
            else:
                liveness.setdefault(name, Liveness.DOWN)
        changed = sorted(
            n for n in liveness.keys() | self._liveness.keys() if liveness.get(n) != self._liveness.get(n)
        )
        self._dirty.update(changed)
        self._dirty.update(n for n in workload if workload[n].health != _health(self._workload.get(n)))
        self._liveness, self._workload = liveness, workload
        return changed

    def liveness(self, controller: str) -> Liveness:
        return self._liveness.get(controller, Liveness.UNKNOWN)

    # -- Objects ---------------------------------------------------------------------------------

    def judge(
        self, key: Key, obj: Mapping[str, Any], controller: str | None, *, own: bool = True, now: datetime
    ) -> tuple[Finding | None, datetime | None]:
        """The object's NotReconciling candidate (None: not overdue, or not known) and the
        moment that may change with no read. `controller`: the heartbeat key it is judged by;
        `own`: the workload serves it (else, no workload serving it, its absence from that read
        is what is judged, and it counts neither in that workload's due windows nor overdue)."""
        if not self.on or controller is None:
            self.forget(key)
            return None, None
        beats = self._beats
        verdict = not_reconciling(
            obj,
            beat=beats.object(controller, (key.kind, key.namespace, key.name)),
            controller=beats.controller(controller, now=now, stale_after=self._thresholds.stale_after),
            liveness=self.liveness(controller),
            now=now,
            thresholds=self._thresholds,
        )
        window = (
            None
            if verdict.reason in _NOT_DUE or not own
            else verdict.window or due_window(obj, self._thresholds)  # judged before its window
        )
        self._file(key, controller if own else None, window, overdue=own and verdict.outcome is Outcome.ALARM)
        if verdict.outcome is not Outcome.ALARM:
            return None, verdict.recheck_at
        evidence = {**verdict.evidence, "reason": str(verdict.reason)}
        found = new_finding(
            self._config,
            FindingType.NOT_RECONCILING,
            subject_of(obj),
            verdict.message,
            verdict.since,
            evidence,
        )
        return found, None

    def forget(self, key: Key) -> None:
        """The object is gone, or no controller's any more."""
        self._file(key, None, None, overdue=False)

    def _file(self, key: Key, controller: str | None, window: timedelta | None, *, overdue: bool) -> None:
        old = self._window_of.get(key)
        new = (controller, window) if controller is not None and window is not None else None
        if new is not None:  # a few distinct windows per controller: each pair held once, not per object
            new = self._pairs.setdefault(new, new)
        if old != new:
            for entry, step in ((old, -1), (new, 1)):
                if entry is not None:
                    counts = self._windows[entry[0]]
                    bounds = _bounds(counts)
                    counts[entry[1]] += step
                    if counts[entry[1]] <= 0:
                        del counts[entry[1]]
                        self._pairs.pop(entry, None)
                    if _bounds(counts) != bounds:
                        self._dirty.add(entry[0])
            if new is None:
                del self._window_of[key]
            else:
                self._window_of[key] = new
        for name, keys in self._overdue.items():
            if key in keys and name != controller:
                keys.discard(key)
                self._dirty.add(name)
        if controller is not None and (key in self._overdue[controller]) != overdue:
            (self._overdue[controller].add if overdue else self._overdue[controller].discard)(key)
            self._dirty.add(controller)

    # -- Controllers -----------------------------------------------------------------------------

    def refresh(self, now: datetime) -> bool:
        """Judge the marked controllers again; True when a ControllerStuck finding changed."""
        changed = False
        dirty, self._dirty = self._dirty, set()
        for name in sorted(dirty):
            old = self._stuck.get(name)
            new = self._judge(name, now) if self.on else None
            if new is None:
                self._stuck.pop(name, None)
                self._due.schedule(controller_key(name), None)
            else:
                self._stuck[name] = new
                self._due.schedule(controller_key(name), new.verdict.recheck_at)
            if (old.finding if old else None) != (new.finding if new else None):
                changed = True
        return changed

    def _judge(self, name: str, now: datetime) -> Stuck:
        beat = self._beats.controller(name, now=now, stale_after=self._thresholds.stale_after)
        counts = self._windows.get(name)
        windows = list(_bounds(counts)) if counts else []
        liveness = self.liveness(name)
        verdict = controller_stuck(
            beat, windows=windows, liveness=liveness, now=now, thresholds=self._thresholds
        )
        overdue = len(self._overdue.get(name, ()))
        state = {
            Outcome.ALARM: HeartbeatState.STUCK,
            Outcome.QUIET: HeartbeatState.RECONCILING,
        }.get(verdict.outcome, HeartbeatState.UNKNOWN)
        detail = "" if state is HeartbeatState.RECONCILING else verdict.message
        heartbeat = Heartbeat(state, detail, beat.last_moved_at, verdict.since, overdue)
        workload = self._workload.get(name)
        finding = None
        if verdict.outcome is Outcome.ALARM and workload is not None:
            evidence = {
                **verdict.evidence,
                "reason": str(verdict.reason),
                "overdue_objects": overdue,
                "due_objects": sum(counts.values()) if counts else 0,
            }
            subject = workload.health.subject
            finding = new_finding(
                self._config, FindingType.CONTROLLER_STUCK, subject, verdict.message, verdict.since, evidence
            )
        return Stuck(verdict, heartbeat, finding)

    def findings(self) -> list[Finding]:
        """Every ControllerStuck, by controller name."""
        return [s.finding for _, s in sorted(self._stuck.items()) if s.finding is not None]

    def heartbeat(self, controller: str) -> Heartbeat | None:
        """What the page and /metrics show; None while no heartbeat is read at all."""
        if not self.on:
            return None
        stuck = self._stuck.get(controller)
        if stuck is None:
            return Heartbeat(HeartbeatState.UNKNOWN, f"{controller}'s heartbeat is not judged yet.", None)
        return stuck.heartbeat


def _health(state: ControllerState | None) -> object:
    return state.health if state is not None else None


def _bounds(counts: Counter[timedelta] | None) -> tuple[timedelta, ...]:
    """The shortest and longest window: all ControllerStuck reads of them."""
    if not counts:
        return ()
    return (min(counts), max(counts))
