"""Hostile heartbeat reads through the engine: whatever the reader hands HealthModel.heartbeat(),
no traceback, no false alarm, no false "reconciling", and no work for series the model holds no
object of."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.model.builders import FLUX_NS, MIN, NOW, flux, kustomization
from tests.model.test_heartbeat_engine import KC, S30, metrics
from watcher.model.engine import HealthModel
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.controller_metrics import ControllerMetrics, parse_controller_metrics
from watcher.model.ingest.projection import project
from watcher.model.types import HeartbeatState


def model_of(*objs: dict[str, object]) -> HealthModel:
    model = HealthModel()
    for obj in [*flux(leases=False), *objs]:
        model.upsert(project(obj), now=NOW)
    model.evaluate(NOW)
    return model


def kc_state(evaluation: Evaluation) -> HeartbeatState | None:
    beat = next(c for c in evaluation.controllers if c.name == KC).heartbeat
    return beat.state if beat is not None else None


def test_a_read_dated_before_the_last_is_ignored_never_applied_out_of_order() -> None:
    model = model_of(kustomization("apps"))
    for i in range(47):  # unchanged for 23 minutes: stuck
        model.heartbeat(KC, at=NOW + i * S30, read=metrics({"apps": 1}))
    late = NOW + 46 * S30
    model.heartbeat(KC, at=NOW + MIN, read=metrics({"apps": 9}))  # an old read arriving late
    evaluation = model.evaluate(late)
    assert kc_state(evaluation) is HeartbeatState.STUCK


def test_a_read_of_a_controller_nobody_configured_judges_nothing_and_raises_nothing() -> None:
    model = model_of(kustomization("apps"))
    model.heartbeat("not-a-controller", at=NOW, read=metrics({"apps": 1}))
    evaluation = model.evaluate(NOW + 30 * MIN)
    assert evaluation.findings == []
    assert kc_state(evaluation) is HeartbeatState.UNKNOWN  # heartbeats are read now; KC's never was


@pytest.mark.parametrize("interval", ["forever", "1e400h", "-5m", "0s", ""])
def test_an_object_whose_interval_cannot_be_read_is_never_overdue(interval: str) -> None:
    model = model_of(kustomization("apps", interval=interval), kustomization("infra"))
    for i in range(47):
        model.heartbeat(KC, at=NOW + i * S30, read=metrics({"apps": 1, "infra": 1 + i // 10}))
    evaluation = model.evaluate(NOW + 46 * S30)
    assert [f.type for f in evaluation.findings] == []


def test_a_counter_that_is_not_a_number_is_unknown_never_overdue() -> None:
    model = model_of(kustomization("apps"), kustomization("infra"))

    def series(name: str, value: str) -> str:
        labels = f'kind="Kustomization",name="{name}",namespace="{FLUX_NS}"'
        return f"gotk_reconcile_duration_seconds_count{{{labels}}} {value}\n"

    body = 'controller_runtime_reconcile_total{controller="kustomization",result="success"} 5\n'
    for i in range(47):
        read = parse_controller_metrics(body + series("apps", "NaN") + series("infra", str(i)))
        assert isinstance(read, ControllerMetrics)
        model.heartbeat(KC, at=NOW + i * S30, read=read)
    evaluation = model.evaluate(NOW + 46 * S30)
    assert evaluation.findings == []


def test_series_of_objects_the_model_does_not_hold_cost_no_judging(monkeypatch: pytest.MonkeyPatch) -> None:
    """100k series of Kustomizations stalewatch does not see (another cluster's, a hostile
    endpoint's): a read marks none of the model's objects, so nothing is judged again."""
    model = model_of(kustomization("apps"))
    strangers = {f"x{i}": 1 for i in range(100_000)}
    model.heartbeat(KC, at=NOW, read=metrics({"apps": 1, **strangers}))
    model.evaluate(NOW)
    judged: list[object] = []
    original = HealthModel._refresh_object

    def counting(self: HealthModel, key: object, now: datetime) -> None:
        judged.append(key)
        original(self, key, now)  # type: ignore[arg-type]

    monkeypatch.setattr(HealthModel, "_refresh_object", counting)
    moved = {name: 2 for name in strangers}
    model.heartbeat(KC, at=NOW + timedelta(seconds=30), read=metrics({"apps": 1, **moved}))
    model.evaluate(NOW + timedelta(seconds=30))
    assert judged == []
