"""`stalewatch run` with its garbage collections counted and timed, for bench/liveprofile.py only.

A sampling profiler sees a collection as the Python line that allocated when it started, so the
collector's share of the CPU would hide in whatever code happened to allocate. This wrapper adds a
`gc.callbacks` hook (which costs two clock reads per collection) and writes the totals per
generation to $BENCH_GC_STATS each time the process gets SIGUSR1. Then it runs
`python -m watcher` with the same arguments, unchanged.

    python -m bench.traced run --kubeconfig ... --listen ...
"""

from __future__ import annotations

import gc
import os
import runpy
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

STATS_ENV = "BENCH_GC_STATS"  # not STALEWATCH_*: stalewatch warns about those it does not know

_totals = {str(gen): {"collections": 0, "cpu_seconds": 0.0, "collected": 0} for gen in range(3)}
_started = [0.0]


def _collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.thread_time()
        return
    total = _totals[str(info["generation"])]
    total["collections"] += 1
    total["cpu_seconds"] += time.thread_time() - _started[0]
    total["collected"] += info["collected"]


def _dump(signum: int, frame: FrameType | None) -> None:
    Path(os.environ[STATS_ENV]).write_bytes(orjson.dumps(_totals))


def main() -> None:
    gc.callbacks.append(_collection)
    signal.signal(signal.SIGUSR1, _dump)
    sys.argv = ["stalewatch", *sys.argv[1:]]
    runpy.run_module("watcher", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
