"""What an evaluation costs under churn with every controller up, as the watcher paces it.

The cluster of a recording is loaded and most of its churn played (SHARE of the events), at a
clock ten minutes past the recording, every controller's Lease renewed at that clock (so
workloads the churn left failing are findings, and no controller is down: the correlation of
a normal day); then the rest is played in batches of BATCH events (about what the reflectors'
read hold gathers at the benchmark's churn rate), each batch followed by an evaluation, timed
(what Pacing weighs, watcher.kube.live). `pipeline.scaling` and `scaling_kinds` time a churn
event on a freshly loaded cluster and during an incident, neither of which this is.

    python -m bench.steady STREAM [--batch N]

Run with another tree first on PYTHONPATH to measure its code.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from bench import pipeline, side
from watcher.model.engine import HealthModel
from watcher.model.types import FindingType, ModelConfig

SHARE = 0.8
BATCH = 8


def renewed(line: pipeline.Line, stamp: str) -> pipeline.Line:
    """A Lease's event with its renewTime moved to `stamp` (its controller up at the clock)."""
    raw, api_version, kind = line
    if kind != "Lease":
        return line
    event = orjson.loads(raw)
    event["object"].setdefault("spec", {})["renewTime"] = stamp
    return orjson.dumps(event), api_version, kind


def measure(stream: Path, *, batch: int = BATCH) -> dict[str, Any]:
    lines = stream.read_bytes().splitlines()
    _, ended = side.clocks(pipeline, stream, lines)
    at = ended + timedelta(minutes=10)
    stamp = (at - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    events = [renewed(line, stamp) for line in pipeline.watch_lines(lines)]
    model = HealthModel(ModelConfig())

    def play(line: pipeline.Line) -> None:
        kind, obj = pipeline.decode(line)
        if kind == "DELETED":
            model.delete(obj, now=at)
        else:
            model.upsert(obj, now=at)

    cut = int(len(events) * SHARE)
    for line in events[:cut]:
        play(line)
    model.evaluate(at)
    evaluated: list[float] = []
    rest = events[cut:]
    for start in range(0, len(rest), batch):
        for line in rest[start : start + batch]:
            play(line)
        began = time.process_time()
        model.evaluate(at)
        evaluated.append(time.process_time() - began)
    evaluated.sort()
    findings = model.evaluate(at).findings
    return {
        "batch": batch,
        "passes": len(evaluated),
        "findings": len(findings),
        "controllers_down": sum(1 for f in findings if f.type is FindingType.CONTROLLER_DOWN),
        "evaluate_ms_mean": statistics.mean(evaluated) * 1e3,
        "evaluate_ms_p99": evaluated[int(len(evaluated) * 0.99)] * 1e3,
        "evaluate_ms_max": evaluated[-1] * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stream", type=Path)
    parser.add_argument("--batch", type=int, default=BATCH)
    args = parser.parse_args(argv)
    result = measure(args.stream, batch=args.batch)
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
