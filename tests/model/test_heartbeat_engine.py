"""Heartbeats through the engine: a sequence of controller reads over time -> the findings, folded.

Each case feeds HealthModel.heartbeat() with kustomize-controller's metrics every 30 s (as the
reader will) while the clock runs, and asserts the findings at the end: which type on which
object, and which root each points at. Kustomizations are Ready with a 10m interval: their due
window is 10m + 9m30s (timeout) + 1m (slack) + 1m (jitter) = 21m30s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.model.builders import FLUX_NS, MIN, NOW, Obj, controller_down, flux, kustomization
from watcher.model.engine import HealthModel
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.controller_metrics import ControllerMetrics, Unreadable, parse_controller_metrics
from watcher.model.ingest.objects import key_of
from watcher.model.ingest.projection import project
from watcher.model.store.beats import HeartbeatTracker
from watcher.model.types import ControllerHealth, FindingType, HeartbeatState, ModelConfig

KC = "kustomize-controller"
S30 = timedelta(seconds=30)
NS = FLUX_NS
RECORDINGS = Path(__file__).parents[1] / "lab" / "recordings" / "metrics"
NAMES = ("apps", "infra", "tenants")


def metrics(
    counts: Mapping[str, int], *, depth: int = 0, running: float = 0.0, started: float = 1.7e9
) -> ControllerMetrics:
    """kustomize-controller's /metrics as controller-runtime writes it: one counter per object,
    the reconcile total their sum."""
    queue = 'controller="kustomization",name="kustomization"'
    total = sum(counts.values())
    lines = [
        "# TYPE controller_runtime_reconcile_total counter",
        f'controller_runtime_reconcile_total{{controller="kustomization",result="success"}} {total}',
        'controller_runtime_active_workers{controller="kustomization"} 1',
        f'workqueue_depth{{{queue},priority="0"}} {depth}',
        f"workqueue_longest_running_processor_seconds{{{queue}}} {running}",
        f"process_start_time_seconds {started}",
        *(
            f'gotk_reconcile_duration_seconds_count{{kind="Kustomization",name="{obj}",namespace="{NS}"}} {n}'
            for obj, n in counts.items()
        ),
    ]
    parsed = parse_controller_metrics("\n".join(lines) + "\n")
    assert isinstance(parsed, ControllerMetrics), parsed
    return parsed


Read = Callable[[int], ControllerMetrics | Unreadable | None]
"""The read at step i (every 30 s from NOW); None: no read then."""


def moving(*names: str, still: tuple[str, ...] = ()) -> Read:
    """`names` reconciled every 5 minutes (10 reads); `still` reported but never moving."""
    return lambda i: metrics({**{n: 1 + i // 10 for n in names}, **dict.fromkeys(still, 1)})


def unchanged(*names: str, depth: int = 0) -> Read:
    return lambda i: metrics(dict.fromkeys(names, 1), depth=depth)


@dataclass
class Case:
    read: Read
    minutes: int
    objects: list[Obj] = field(default_factory=lambda: [kustomization(n) for n in NAMES])
    controllers: list[Obj] = field(default_factory=lambda: flux(leases=False))
    findings: dict[str, str | None] = field(default_factory=dict)
    """Expected findings: id -> the id of its root (None: a root)."""
    heartbeat: HeartbeatState = HeartbeatState.RECONCILING


STUCK = f"ControllerStuck/Deployment/{FLUX_NS}/{KC}"


def nr(name: str) -> str:
    return f"NotReconciling/Kustomization/{FLUX_NS}/{name}"


CASES: dict[str, Case] = {
    "a_controller_whose_counters_move_has_no_finding": Case(moving(*NAMES), minutes=40),
    "an_object_whose_counter_rests_past_its_window_is_not_reconciling_alone": Case(
        moving("infra", "tenants", still=("apps",)), minutes=23, findings={nr("apps"): None}
    ),
    "an_object_within_its_window_is_not_yet_overdue": Case(
        moving("infra", "tenants", still=("apps",)), minutes=21
    ),
    "a_controller_whose_counters_all_rest_is_stuck_with_its_objects_folded_under_it": Case(
        unchanged(*NAMES),
        minutes=23,
        findings={STUCK: None, **{nr(n): STUCK for n in NAMES}},
        heartbeat=HeartbeatState.STUCK,
    ),
    "an_object_with_no_series_while_its_controller_reports_others_is_not_reconciling": Case(
        moving("infra", "tenants"), minutes=23, findings={nr("apps"): None}
    ),
    "a_work_queue_that_does_not_drain_is_stuck_before_any_object_is_due": Case(
        unchanged(*NAMES, depth=3), minutes=6, findings={STUCK: None}, heartbeat=HeartbeatState.STUCK
    ),
    "a_suspended_object_is_not_expected_to_move": Case(
        moving("infra", "tenants", still=("apps",)),
        minutes=30,
        objects=[kustomization("apps", suspend=True), kustomization("infra"), kustomization("tenants")],
    ),
    "unreadable_metrics_are_unknown_never_an_alarm": Case(
        lambda i: metrics(dict.fromkeys(NAMES, 1)) if i == 0 else Unreadable("connection refused"),
        minutes=40,
        heartbeat=HeartbeatState.UNKNOWN,
    ),
    "a_heartbeat_no_longer_read_goes_unknown_and_its_alarms_with_it": Case(
        lambda i: metrics(dict.fromkeys(NAMES, 1)) if i <= 50 else None,
        minutes=30,
        heartbeat=HeartbeatState.UNKNOWN,
    ),
    "reads_that_resume_after_a_stale_gap_judge_every_object_again": Case(
        lambda i: None if 2 <= i <= 8 else metrics(dict.fromkeys(NAMES, 1)),
        minutes=23,
        findings={STUCK: None, **{nr(n): STUCK for n in NAMES}},
        heartbeat=HeartbeatState.STUCK,
    ),
    "a_down_controller_is_controller_down_not_stuck": Case(
        unchanged(*NAMES),
        minutes=30,
        controllers=[o for o in flux(leases=False) if KC not in o["metadata"]["name"]]
        + controller_down(KC, "ghcr.io/fluxcd/kustomize-controller:v9"),
        findings={
            f"ControllerDown/Deployment/{FLUX_NS}/{KC}": None,
            **{
                f"StatusStale/Kustomization/{FLUX_NS}/{n}": f"ControllerDown/Deployment/{FLUX_NS}/{KC}"
                for n in NAMES
            },
        },
        heartbeat=HeartbeatState.UNKNOWN,
    ),
}


def feed(case: Case) -> tuple[HealthModel, Evaluation]:
    model = HealthModel()
    for obj in [*case.controllers, *case.objects]:
        model.upsert(project(obj), now=NOW)
    evaluation = model.evaluate(NOW)
    for i in range(case.minutes * 2 + 1):
        at = NOW + i * S30
        read = case.read(i)
        if read is not None:
            model.heartbeat(KC, at=at, read=read)
        evaluation = model.evaluate(at)
    return model, evaluation


def kc(evaluation: Evaluation) -> ControllerHealth:
    return next(c for c in evaluation.controllers if c.name == KC)


@pytest.mark.parametrize("name", CASES)
def test_heartbeat_reads_over_time(name: str) -> None:
    case = CASES[name]
    _, evaluation = feed(case)
    found = {f.id: f.root_cause for f in evaluation.findings}
    assert found == case.findings
    beat = kc(evaluation).heartbeat
    assert beat is not None
    assert beat.state is case.heartbeat, beat.detail


def test_a_stuck_controller_is_one_root_naming_its_overdue_objects() -> None:
    _, evaluation = feed(
        CASES["a_controller_whose_counters_all_rest_is_stuck_with_its_objects_folded_under_it"]
    )
    stuck = next(f for f in evaluation.findings if f.type is FindingType.CONTROLLER_STUCK)
    assert sorted(s["name"] for s in stuck.affected) == sorted(NAMES)
    assert stuck.message == (
        f"{KC} is up but no counter moved since 2024-05-01T12:00:00Z while its objects are due every "
        "21m30s at most; work queue depth 0, active workers 1; no reconcile completed since watching began. "
        "3 of the 3 objects it reconciles on an interval are overdue."
    )
    assert stuck.evidence["reason"] == "NoReconcilesWhileDue"
    heartbeat = kc(evaluation).heartbeat
    assert heartbeat is not None
    assert heartbeat.overdue == 3


def test_before_any_read_no_controller_has_a_heartbeat_and_nothing_changes() -> None:
    model = HealthModel()
    for obj in [*flux(leases=False), kustomization("apps")]:
        model.upsert(project(obj), now=NOW)
    evaluation = model.evaluate(NOW + 60 * MIN)
    assert all(c.heartbeat is None for c in evaluation.controllers)
    assert evaluation.findings == []


def test_a_controller_never_read_is_unknown_once_heartbeats_are_read() -> None:
    _, evaluation = feed(CASES["a_controller_whose_counters_move_has_no_finding"])
    source = next(c for c in evaluation.controllers if c.name == "source-controller")
    assert source.heartbeat is not None
    assert source.heartbeat.state is HeartbeatState.UNKNOWN
    assert "never read" in source.heartbeat.detail


def test_a_read_judges_again_only_the_heartbeat_of_the_objects_whose_counter_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read re-judges the heartbeat of what it changed, and no object's other rules."""
    model = HealthModel()
    for obj in [*flux(leases=False), *(kustomization(f"k{i}") for i in range(50))]:
        model.upsert(project(obj), now=NOW)
    counts = {f"k{i}": 1 for i in range(50)}
    model.heartbeat(KC, at=NOW, read=metrics(counts))
    model.evaluate(NOW)
    judged: dict[str, list[str]] = {"_refresh_object": [], "_refresh_beat": []}
    for name, calls in judged.items():
        original = getattr(HealthModel, name)

        def counting(
            self: HealthModel, key: Any, now: datetime, *, _o: Any = original, _c: Any = calls
        ) -> None:
            _c.append(key.name)
            _o(self, key, now)

        monkeypatch.setattr(HealthModel, name, counting)
    model.heartbeat(KC, at=NOW + S30, read=metrics({**counts, "k7": 2}))
    model.evaluate(NOW + S30)
    assert judged == {"_refresh_object": [], "_refresh_beat": ["k7"]}
    judged["_refresh_beat"].clear()
    model.heartbeat(KC, at=NOW + 2 * S30, read=metrics({**counts, "k7": 2}))
    model.evaluate(NOW + 2 * S30)
    assert judged == {"_refresh_object": [], "_refresh_beat": []}


def test_the_lab_recording_of_a_controller_that_stops_reconciling_is_one_stuck_root() -> None:
    """kustomize-controller's recorded /metrics (tests/lab/recordings), read unchanged for 23
    minutes: every Kustomization it reported is overdue, folded under ControllerStuck."""
    body = (RECORDINGS / "early" / "kustomize-controller.txt").read_bytes()
    recorded = parse_controller_metrics(body)
    assert isinstance(recorded, ControllerMetrics)
    names = sorted(ref[2] for ref in recorded.objects)
    case = Case(lambda i: recorded, minutes=23, objects=[kustomization(n) for n in names])
    _, evaluation = feed(case)
    found = {f.id: f.root_cause for f in evaluation.findings}
    assert found == {STUCK: None, **{nr(n): STUCK for n in names}}


def test_a_stuck_controller_that_goes_down_is_controller_down_and_no_longer_stuck() -> None:
    model, evaluation = feed(
        CASES["a_controller_whose_counters_all_rest_is_stuck_with_its_objects_folded_under_it"]
    )
    assert STUCK in {f.id for f in evaluation.findings}
    later = NOW + 24 * MIN
    healthy_pod = next(o for o in flux(leases=False) if o["kind"] == "Pod" and KC in o["metadata"]["name"])
    model.delete(project(healthy_pod), now=later)
    for obj in controller_down(KC, "ghcr.io/fluxcd/kustomize-controller:v9"):
        model.upsert(project(obj), now=later)
    model.heartbeat(KC, at=later, read=unchanged(*NAMES)(0))
    evaluation = model.evaluate(later)
    assert {f.type for f in evaluation.findings} == {FindingType.CONTROLLER_DOWN, FindingType.STATUS_STALE}


def test_objects_with_one_due_window_share_one_record_of_it_not_one_each() -> None:
    tracker = HeartbeatTracker(ModelConfig())
    tracker.read(KC, at=NOW, read=metrics(dict.fromkeys(NAMES, 1)))
    keys = [key_of(project(kustomization(name))) for name in NAMES]
    for key, name in zip(keys, NAMES, strict=True):
        tracker.judge(key, project(kustomization(name)), KC, now=NOW)
    records = {id(tracker._window_of[key]) for key in keys}
    assert len(records) == 1
    for key in keys:
        tracker.forget(key)
    assert tracker._pairs == {}  # a window no object has any more is not kept
