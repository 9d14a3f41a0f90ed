"""bench/fleet.py keeps working on a tiny fleet: the synthetic series load into the real
Prometheus through promtool, every fleet query is answered there, and the fleet measured is the
one the data describes (one cluster stopped, one cut off from its API server, tofu-controller
down in the rest). No number from the benchmark is asserted."""

from __future__ import annotations

import json
from pathlib import Path

from bench import fleet
from watcher.fleet.queries import Filters, queries


def test_the_fleet_benchmark_measures_every_query_on_the_fleet_its_data_describes(tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    assert fleet.main(["--clusters", "4", "--objects", "20", "--runs", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["queries"]) == {*queries(cluster_label="cluster", filters=Filters()), "matrix"}
    assert result["clusters"] == {"unknown": 1, "stale": 1, "critical": 2, "warning": 0, "healthy": 0}
    assert (result["matrix_rows"], result["matrix_bounded"]) == (20, False)
    assert result["queries"]["matrix"]["series"] == 4 * 20 - 20, "the stopped cluster has no current cell"
