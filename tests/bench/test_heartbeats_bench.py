"""bench/heartbeats.py runs end to end at a tiny size and measures what it says it does."""

from __future__ import annotations

import pytest

from bench.heartbeats import RECORDED, expositions, flux_objects, main
from watcher.model.ingest.controller_metrics import ControllerMetrics, parse_controller_metrics


def test_each_controllers_exposition_is_a_real_recording_scaled_to_its_objects() -> None:
    objs = flux_objects(20)
    for exp in expositions(objs):
        read = parse_controller_metrics(exp.render())
        assert isinstance(read, ControllerMetrics), exp.controller
        assert not read.problems
        assert len(read.objects) == len(exp.prefixes) > 0
        assert exp.prefixes[0].count("\n") == 12  # the recorded block: 11 buckets and a sum before the count
    assert {exp.controller for exp in expositions(objs)} == set(RECORDED)


def test_objects_reconcile_at_their_interval_and_a_restart_moves_every_one() -> None:
    objs = flux_objects(20)
    exp = next(e for e in expositions(objs) if e.controller == "kustomize-controller")
    assert set(exp.periods) == {20}  # Kustomizations: 10m every 30 s
    assert sum(exp.reconcile(n) for n in range(1, 21)) == len(exp.counts)
    exp.restart()
    assert set(exp.counts) == {1}


def test_the_benchmark_runs_a_tiny_cluster_and_reports_every_figure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # its own check: a healthy cluster's rounds raise no finding (it raises if they do)
    assert main(["--per-controller", "20", "--rounds", "2", "--repeat", "1", "--http"]) == 0
    out = capsys.readouterr().out
    for row in ("| first read (1 rounds) |", "| steady state (2 rounds) |", "| after a restart (1 rounds) |"):
        assert row in out
    assert "added by the heartbeats" in out
    assert "HeartbeatReader, one round of 5 over loopback" in out
