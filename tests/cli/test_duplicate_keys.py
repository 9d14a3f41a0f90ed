"""A YAML key set twice in a snapshot: the last value wins, as kubectl's loader keeps it, and a
warning names the file, the line and the key; the object is judged, nothing else changes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from watcher.cli import main

NOW = "2026-11-30T12:00:00Z"
TWICE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  namespace: apps
status:
  conditions:
  - type: Complete
    status: "True"
    type: Failed
    reason: BackoffLimitExceeded
    message: Job has reached the specified backoff limit
    lastTransitionTime: "2026-11-30T11:00:00Z"
"""


def test_a_key_set_twice_keeps_its_last_value_and_is_named_in_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "job.yaml"
    snapshot.write_text(TWICE)

    code = main(["analyze", "--now", NOW, "--output", "json", str(snapshot)])

    out = capsys.readouterr()
    assert code == 0
    assert out.err == (
        f"stalewatch: warning: {snapshot}: line 10: key 'type' is set twice; the last value is used, "
        "as kubectl does\n"
    )
    document = orjson.loads(out.out)
    assert [f["id"] for f in document["findings"]] == ["ObjectFailing/Job/apps/migrate"]
    assert document["summary"]["load_errors"] == 0


def test_a_file_of_many_keys_set_twice_names_ten_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = "".join(f"  k: {n}\n" for n in range(5000))
    snapshot = tmp_path / "many.yaml"
    snapshot.write_text(f"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n{keys}")

    code = main(["analyze", "--now", NOW, str(snapshot)])

    lines = capsys.readouterr().err.splitlines()
    assert code == 0
    assert len(lines) == 11
    assert (
        lines[-1]
        == f"stalewatch: warning: {snapshot}: and 4989 more keys set twice; the last value of each is used"
    )
