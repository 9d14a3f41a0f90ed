"""pipeline.scaling's incident churn, split by the kind of object each event changed.

The cluster of a recording is loaded and its whole churn played at the recording's clock, then the
clock moves ten minutes past the recording (every controller's Lease expired) and the first
INCIDENT churn events are played again, each upserted and evaluated, as `pipeline.scaling` times
its "incident: churn event" row; this says which kinds of change that mean is made of (a change
that runs correlation over every finding that is not a satellite costs a pass; one that does not,
its object's judgement).

    python -m bench.scaling_kinds STREAM
"""

from __future__ import annotations

import collections
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from bench import pipeline, side
from watcher.model.engine import HealthModel
from watcher.model.types import ModelConfig

INCIDENT = 200
"""As pipeline.scaling's `incidents`."""


def by_kind(stream: Path) -> dict[str, Any]:
    lines = stream.read_bytes().splitlines()
    now, ended = side.clocks(pipeline, stream, lines)
    model = HealthModel(ModelConfig())
    churn = []
    for line in pipeline.watch_lines(lines):
        kind, obj = pipeline.decode(line)
        if kind == "ADDED":
            model.upsert(obj, now=now)
        else:
            churn.append(obj)
    model.evaluate(now)
    for obj in churn:
        model.upsert(obj, now=now)
        model.evaluate(now)
    later = ended + timedelta(minutes=10)
    findings = len(model.evaluate(later).findings)
    costs: dict[str, list[float]] = collections.defaultdict(list)
    for obj in churn[:INCIDENT]:
        started = time.process_time()
        model.upsert(obj, now=later)
        model.evaluate(later)
        costs[obj["kind"]].append(time.process_time() - started)
    spent = [c for kind in costs.values() for c in kind]
    return {
        "incident_findings": findings,
        "incident_event_ms_mean": sum(spent) / max(1, len(spent)) * 1e3,
        "kinds": {
            kind: {"events": len(c), "ms_mean": sum(c) / len(c) * 1e3, "ms_max": max(c) * 1e3}
            for kind, c in sorted(costs.items())
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m bench.scaling_kinds STREAM\n")
        return 2
    sys.stdout.write(orjson.dumps(by_kind(Path(args[0])), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
