"""`analyze` with controller metrics recorded next to the snapshot (`*.prom`): heartbeats judged.

The snapshot is the lab's `recovered` checkpoint and the metrics are real Flux controllers'
recordings (tests/lab/recordings), each behind the header that says whose read it is and when.
Hostile metrics files are in tests/hostile/test_snapshot_metrics.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from watcher.cli import main

RECORDINGS = Path(__file__).resolve().parents[1] / "lab" / "recordings"
CONTROLLERS = ("helm-controller", "kustomize-controller", "source-controller")
NOW = "2026-12-07T07:36:10Z"
"""Just after the lab's `recovered` checkpoint (07:36:03.7), while every Lease is fresh."""


def body(checkpoint: str, controller: str) -> str:
    return (RECORDINGS / "metrics" / checkpoint / f"{controller}.txt").read_text()


def recorded(directory: Path, controller: str, at: str, text: str, *, name: str | None = None) -> Path:
    """One read as docs/analyze.md says to record it: the header, then the exposition as served."""
    path = directory / (name or f"{controller}-{at.replace(':', '')}.prom")
    path.write_text(f"# stalewatch-read controller={controller} at={at}\n{text}")
    return path


def lab_snapshot(tmp_path: Path) -> Path:
    directory = tmp_path / "snapshot"
    directory.mkdir()
    shutil.copy(RECORDINGS / "snapshots" / "recovered.json", directory / "objects.json")
    return directory


def analyze(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["analyze", "--now", NOW, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def heartbeats(out: str) -> dict[str, tuple[str, str]]:
    report: dict[str, Any] = orjson.loads(out)
    return {beat["controller"]: (beat["state"], beat["detail"]) for beat in report["heartbeats"]}


def test_controllers_whose_recorded_counters_moved_are_reconciling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    for controller in CONTROLLERS:
        recorded(directory, controller, "2026-12-07T07:25:07Z", body("early", controller))
        recorded(directory, controller, "2026-12-07T07:36:03Z", body("recovered", controller))
    code, out, err = analyze(capsys, "-o", "json", str(directory))
    assert (code, err) == (0, "")
    assert heartbeats(out) == {controller: ("Reconciling", "") for controller in CONTROLLERS}
    assert orjson.loads(out)["findings"] == []


def test_a_controller_the_snapshot_has_no_metrics_for_is_unknown_and_said_never_reconciling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    for controller in ("helm-controller", "kustomize-controller"):
        recorded(directory, controller, "2026-12-07T07:25:07Z", body("early", controller))
        recorded(directory, controller, "2026-12-07T07:36:03Z", body("recovered", controller))
    code, out, err = analyze(capsys, str(directory))
    assert (code, err) == (0, "")
    assert "all healthy" not in out
    assert "source-controller     Unknown: source-controller's heartbeat is unknown: never read." in out
    assert "kustomize-controller  Reconciling (its counters last moved by 2026-12-07T07:36:03Z)" in out


def test_a_controller_whose_recorded_counters_did_not_move_is_one_root_with_its_overdue_objects_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same real exposition read 15 minutes apart: nothing moved while its Kustomizations
    (interval 1m) were due. The fold of a really stuck controller is the example's."""
    directory = lab_snapshot(tmp_path)
    for at in ("2026-12-07T07:21:03Z", "2026-12-07T07:36:03Z"):
        recorded(directory, "kustomize-controller", at, body("recovered", "kustomize-controller"))
    code, out, _ = analyze(capsys, "-o", "json", str(directory))
    assert code == 1
    findings = orjson.loads(out)["findings"]
    [root] = [f for f in findings if f["root_cause"] is None]
    assert (root["type"], root["subject"]["name"]) == ("ControllerStuck", "kustomize-controller")
    under = sorted(f["subject"]["name"] for f in findings if f["root_cause"] == root["id"])
    assert under == ["apps", "on-missing", "path-missing", "rejected"]
    assert {f["type"] for f in findings if f["root_cause"] == root["id"]} == {"NotReconciling"}


def test_a_snapshot_without_metrics_says_nothing_of_reconciling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    code, out, _ = analyze(capsys, "-o", "json", str(directory))
    assert (code, orjson.loads(out)["heartbeats"]) == (0, [])
    code, out, _ = analyze(capsys, str(directory))
    assert "heartbeat" not in out


def test_reads_are_judged_in_time_order_whatever_order_their_files_sort_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-10.prom` sorts before `-9.prom`: the time in each file orders the reads, not its name.
    Fed in name order, the later read would come first and the earlier one be refused."""
    directory = lab_snapshot(tmp_path)
    recorded(
        directory,
        "kustomize-controller",
        "2026-12-07T07:36:03Z",
        body("recovered", "kustomize-controller"),
        name="ks-10.prom",
    )
    recorded(
        directory,
        "kustomize-controller",
        "2026-12-07T07:25:07Z",
        body("early", "kustomize-controller"),
        name="ks-9.prom",
    )
    code, out, err = analyze(capsys, "-o", "json", str(directory))
    assert (code, err) == (0, "")
    assert heartbeats(out)["kustomize-controller"] == ("Reconciling", "")


def test_a_read_after_the_moment_evaluated_is_not_used_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    recorded(
        directory, "kustomize-controller", "2026-12-07T07:36:03Z", body("recovered", "kustomize-controller")
    )
    late = recorded(
        directory, "kustomize-controller", "2026-12-07T08:00:00Z", body("recovered", "kustomize-controller")
    )
    code, out, err = analyze(capsys, "-o", "json", str(directory))
    assert code == 0
    assert err.splitlines() == [
        f"stalewatch: warning: {late}: read at 2026-12-07T08:00:00Z, after the moment evaluated "
        "(2026-12-07T07:36:10Z); not used"
    ]
    assert heartbeats(out)["kustomize-controller"][0] == "Reconciling"


def test_the_stuck_example_is_one_controller_stuck_root_with_every_overdue_kustomization_under_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """examples/kustomize-controller-stuck: the real controller, held by one reconcile, recorded."""
    example = Path(__file__).resolve().parents[2] / "examples" / "kustomize-controller-stuck"
    code = main(["analyze", "--now", "2026-12-07T12:54:15Z", "-o", "json", str(example)])
    findings = orjson.loads(capsys.readouterr().out)["findings"]
    assert code == 1
    [stuck] = [f for f in findings if f["type"] == "ControllerStuck"]
    assert (stuck["root_cause"], stuck["subject"]["name"]) == (None, "kustomize-controller")
    assert (stuck["evidence"]["depth"], stuck["evidence"]["active_workers"]) == (4, 1)
    under = {(f["type"], f["subject"]["name"]) for f in findings if f["root_cause"] == stuck["id"]}
    assert under == {
        ("NotReconciling", "apps"),
        ("ReconcileRequestIgnored", "apps"),
        *(
            (kind, queued)
            for queued in ("queued-a", "queued-b", "queued-c")
            for kind in ("NotReconciling", "GenerationNotObserved")
        ),
    }
    assert [f["id"] for f in findings if f["root_cause"] is None] == [stuck["id"]]
