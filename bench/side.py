"""One tree's own pipeline on a recording: the worker `bench/compare.py` starts per tree and round.

It is run as a file (`runpy`) with the tree under test first on `sys.path` (its checkout is the
working directory and PYTHONPATH), so `bench.pipeline` and `watcher` are that tree's own: the
old code is measured by the old benchmark's functions, unedited, and the new code by the new
ones. Only what both trees' `bench/pipeline.py` define is called (watch_lines, replay_clock,
decode, stalewatch_pass, scaling), and nothing here is imported from the new tree: this file is
the boundary. Imports at the top are the standard library and orjson only.

Modes (one fresh process each, pinned to one CPU):
  * passes: the best of PASSES or more per cadence (as the watcher evaluates, after every event, at the end),
    then the churn-event and incident costs of `scaling`, the least of SCALINGS runs;
  * rss: the recording read line by line (the lines are not held) through the tree's decode into
    its HealthModel, with the watcher's collection policy, then one evaluation: the process's RSS
    growth over what it was after imports, per object held.

Usage: python -c RUNNER bench/side.py TREE STREAM MODE (see compare.RUNNER)
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

PASSES, AT_LEAST, AT_MOST = 3, 2.0, 40
"""Passes per cadence in one process, the best kept (CPU time, as bench/pipeline.py does): at
least PASSES, and more until they took AT_LEAST CPU seconds in all (AT_MOST passes). A short
recording (1k: about 0.1 s a pass) is otherwise decided by where its one or two paced
evaluations happen to fall in three passes. Both trees follow the same rule (the count each
ran is kept beside its figure)."""
SCALINGS = 3
"""Runs of the tree's `scaling` (a model loaded, its churn events and the incident's first
evaluation timed one by one), the least of each figure kept: a single evaluation is one
measurement, and whether a full garbage collection falls inside it decided the incident's first
evaluation (23 or 41 ms at 1k, the same tree, round to round)."""
CADENCES = {"live": "events_per_s", "each": "each_events_per_s", "end": "ingest_events_per_s"}
"""stalewatch_pass's cadence -> the result's key."""


def rss() -> int:
    """VmRSS of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def trim() -> None:
    """Give the C heap's free pages back (glibc's malloc_trim) before the baseline is read. What
    imports and the warm-up allocated and freed leaves free room in the heap, more or less of
    it by chance of layout: objects placed there later add nothing to RSS, and two trees holding
    the same bytes differed by 200-400 KB for that alone (the same in-use bytes by mallinfo2).
    From a trimmed heap, the growth is what the held objects take."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def clocks(pipeline: Any, stream: Path, lines: list[bytes]) -> tuple[datetime, datetime]:
    """(now, ended) as the tree's pipeline.measure() takes them."""
    ended = datetime.fromtimestamp(stream.stat().st_mtime, UTC)
    return pipeline.replay_clock(lines) or ended, ended


def passes(pipeline: Any, stream: Path) -> dict[str, Any]:
    lines = stream.read_bytes().splitlines()
    now, ended = clocks(pipeline, stream, lines)
    watched = pipeline.watch_lines(lines)
    gc.collect()
    out: dict[str, Any] = {"events": len(lines)}
    for cadence, key in CADENCES.items():
        times = [pipeline.stalewatch_pass(watched, evaluate=cadence, now=now) for _ in range(PASSES)]
        while sum(times) < AT_LEAST and len(times) < AT_MOST:
            times.append(pipeline.stalewatch_pass(watched, evaluate=cadence, now=now))
        out[key] = len(lines) / min(times)
        out[f"{key}_passes"] = len(times)
    runs = [pipeline.scaling(watched, now=now, ended=ended) for _ in range(SCALINGS)]
    out.update({key: min(run[key] for run in runs) for key in runs[0]})
    return out


def held(pipeline: Any, stream: Path) -> dict[str, Any]:
    from watcher.kube.live import SyncCollections
    from watcher.model.engine import HealthModel
    from watcher.model.types import ModelConfig

    with stream.open("rb") as lines:
        now, _ = clocks(pipeline, stream, [line for line in lines if b'-leader-election"' in line])
    warm_up(pipeline, stream, now=now)
    gc.collect()
    trim()
    before = rss()
    model = HealthModel(ModelConfig())
    collections = SyncCollections()
    collections.defer()
    keys: set[tuple[str, str, str, str]] = set()
    with stream.open("rb") as lines:
        for raw in lines:
            line = raw.rstrip(b"\n")
            written = orjson.loads(line)["object"]
            api_version, kind, meta = written["apiVersion"], written["kind"], written["metadata"]
            key = (api_version, kind, meta.get("namespace", ""), meta["name"])
            del written, meta
            event, obj = pipeline.decode((line, api_version, kind))
            if event == "DELETED":
                model.delete(obj, now=now)
                keys.discard(key)
            else:
                model.upsert(obj, now=now)
                keys.add(key)
    model.evaluate(now)
    collections.freeze()
    grown = rss() - before
    return {"objects": len(keys), "rss_bytes": rss(), "rss_bytes_per_object": grown / max(1, len(keys))}


def warm_up(pipeline: Any, stream: Path, *, now: datetime) -> None:
    """The first WARM_UP events, and the first event of every kind after them, through a
    throwaway model, so that what the code builds once on first use (decoders, caches, lazily
    imported modules) is not counted per object held. Every kind: a decoder built per kind on
    first use (the new code generates each kind's Structs and steps then, the old defined them
    at import) is a fixed cost, and the first 200 events do not reach every kind."""
    from watcher.model.engine import HealthModel
    from watcher.model.types import ModelConfig

    model = HealthModel(ModelConfig())
    seen: set[tuple[str, str]] = set()
    with stream.open("rb") as lines:
        for index, raw in enumerate(lines):
            line = pipeline.watch_lines([raw.rstrip(b"\n")])[0]
            if index < WARM_UP or line[1:] not in seen:
                seen.add(line[1:])
                model.upsert(pipeline.decode(line)[1], now=now)
    model.evaluate(now)


WARM_UP = 200
MODES = {"passes": passes, "rss": held}


def main(argv: list[str]) -> int:
    tree, stream, mode = Path(argv[0]).resolve(), Path(argv[1]), argv[2]
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    pipeline = importlib.import_module("bench.pipeline")
    import watcher

    where = Path(watcher.__file__).resolve()
    if tree not in where.parents:
        sys.stderr.write(f"side: watcher was imported from {where}, not from {tree}\n")
        return 2
    result = {"tree": str(tree), **MODES[mode](pipeline, stream)}
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
