"""Where the live process's CPU goes: `stalewatch run` profiled idle and under churn.

One fresh API server with a cluster of --size objects; stalewatch started through bench/traced.py
(its garbage collections timed); once synced, two windows like bench/cpu.py's (idle, then churn at
CHURN_RATE, one /metrics scrape every 15 s and nothing else), each sampled by py-spy attached to
the running process (`pip install py-spy`; non-blocking, so it does not stop the process it
samples; only stacks holding the GIL, so a thread waiting in epoll or in a read is not counted as
busy: what is left is the user time of Python code and of C code called with the GIL held, while
system time shows in /proc's stime). Each window's samples are attributed to one job per stack
(JOBS, first match wins) and written with the window's CPU seconds and collections to
--out/liveprofile-<size>.json, with the raw py-spy stacks next to it.

    python -m bench.liveprofile --size 10000 --seconds 60 [--out /tmp/stalewatch-bench/profile]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench import cpu, procs, run, traced
from bench.generate import Churn, client_for, populate
from bench.workload import Cluster
from tests.controlplane.harness import free_port
from tests.kubeclient import Kube

Frame = tuple[str, str]  # (function, file)
Match = Callable[[Sequence[Frame]], bool]


def _any(file: str, function: str = "") -> Match:
    """Some frame of the stack is in a file matching `file` (and a function matching `function`)."""
    files, functions = re.compile(file), re.compile(function)
    return lambda stack: any(files.search(f) and functions.search(fn) for fn, f in stack)


JOBS: tuple[tuple[str, Match], ...] = (
    ("garbage collection (seen in the timing hook)", _any(r"bench/traced", r"_collection")),
    ("logging", _any(r"/logging/")),
    ("correlation", _any(r"watcher/model/(correlate/|store/(owners|working))")),
    ("evaluation (rules, kstatus, health rows)", _any(r"watcher/(model/engine|kube/live)", r"evaluate")),
    ("/metrics render", _any(r"watcher/export/")),
    ("HTTP handlers (web/)", _any(r"watcher/web/")),
    ("decode (fast path, projection)", _any(r"watcher/model/ingest/(fastpath|projection)")),
    ("model upsert", _any(r"watcher/(model/|kube/live)")),
    ("watch stream reading (reflector, aiohttp client)", _any(r"watcher/kube/reflector", r"_stream|_watch")),
    ("reflector, other", _any(r"watcher/kube/reflector")),
    ("kube client (kubernetes_asyncio, auth)", _any(r"kubernetes_asyncio|watcher/kube/client")),
    ("telemetry, watchdog, tracing", _any(r"watcher/(telemetry|tracing|export/watcher_metrics)")),
    ("aiohttp server (requests, protocol)", _any(r"aiohttp/web")),
    ("aiohttp, other", _any(r"aiohttp/")),
    ("asyncio event loop (timers, callbacks, selector)", _any(r"asyncio/")),
)


def parse_raw(text: str) -> list[tuple[list[Frame], int]]:
    """py-spy's raw (collapsed) format: `frame;frame;... count`, root first, frame `fn (file:line)`."""
    stacks = []
    for line in text.splitlines():
        head, _, count = line.rpartition(" ")
        if not head:
            continue
        frames = []
        for part in head.split(";"):
            name, _, where = part.partition(" (")
            frames.append((name, where.rsplit(":", 1)[0]))
        stacks.append((frames, int(count)))
    return stacks


def job(stack: Sequence[Frame]) -> str:
    return next((name for name, match in JOBS if match(stack)), "other")


def breakdown(stacks: list[tuple[list[Frame], int]], *, top: int = 25) -> dict[str, Any]:
    """Samples per job, and the functions most often on top of the stack (self) and anywhere in it."""
    jobs: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for frames, count in stacks:
        jobs[job(frames)] += count
        if frames:
            own[_name(frames[-1])] += count
        for name in {_name(f) for f in frames}:
            inclusive[name] += count
    total = sum(jobs.values()) or 1
    return {
        "samples": total,
        "jobs": {name: n / total for name, n in jobs.most_common()},
        "self": {name: n / total for name, n in own.most_common(top)},
        "inclusive": {name: n / total for name, n in inclusive.most_common(top)},
    }


def _name(frame: Frame) -> str:
    function, file = frame
    for marker in ("/watcher/", "/site-packages/", "/lib/python3.11/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{function} ({file})"


async def _counters(session: aiohttp.ClientSession, target: cpu.Target) -> tuple[float, float, float]:
    """(count, sum of seconds) of stalewatch's own evaluation histogram and the watch events it
    received (every kind and type), read from one scrape."""
    _, body, _ = await procs.fetch(session, target.metrics_url)
    values = {b"count": 0.0, b"sum": 0.0, b"events": 0.0}
    for line in body.split(b"\n"):
        name, _, value = line.rpartition(b" ")
        if name in (
            b"stalewatch_evaluation_duration_seconds_count",
            b"stalewatch_evaluation_duration_seconds_sum",
        ):
            values[name.rsplit(b"_", 1)[1]] = float(value)
        elif name.startswith(b"stalewatch_events_total{"):
            values[b"events"] += float(value)
    return values[b"count"], values[b"sum"], values[b"events"]


async def _findings(session: aiohttp.ClientSession, target: cpu.Target) -> int:
    _, body, _ = await procs.fetch(session, target.metrics_url.replace("/metrics", "/api/v1/findings"))
    return len(orjson.loads(body)["findings"])


def _gc(path: Path, proc: procs.Proc) -> dict[str, Any]:
    path.unlink(missing_ok=True)
    os.kill(proc.pid, signal.SIGUSR1)  # bench/traced.py writes its totals
    for _ in range(100):
        if path.exists() and path.stat().st_size:
            return dict(orjson.loads(path.read_bytes()))
        time.sleep(0.05)
    raise RuntimeError(f"no garbage-collection stats from pid {proc.pid}")


async def profiled_window(
    session: aiohttp.ClientSession,
    target: cpu.Target,
    *,
    churn: Churn | None,
    seconds: float,
    out: Path,
    gc_stats: Path,
    rate: int,
) -> dict[str, Any]:
    counted = await _counters(session, target)
    gc_before = _gc(gc_stats, target.proc)
    spy = await asyncio.create_subprocess_exec(
        *_py_spy(target.proc.pid, seconds=seconds, out=out, rate=rate),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    await asyncio.sleep(1)  # attached
    measured = await cpu.window(session, [target], churn=churn, rate=run.CHURN_RATE, seconds=seconds)
    _, err = await spy.communicate()
    if spy.returncode != 0:
        raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-2000:]}")
    gc_after = _gc(gc_stats, target.proc)
    count, total, events = (
        after - before for after, before in zip(await _counters(session, target), counted, strict=True)
    )
    stacks = parse_raw(await asyncio.to_thread(out.read_text))
    gc_window = {gen: {k: gc_after[gen][k] - gc_before[gen][k] for k in gc_after[gen]} for gen in gc_after}
    result = {**measured, "events_per_s": events / seconds, "gc": gc_window, "profile": breakdown(stacks)}
    # the two scrapes read around the window are outside its CPU figures, inside its evaluations
    result["evaluations"] = {
        "count": count,
        "wall_seconds": total,
        "findings_after": await _findings(session, target),
    }
    result["gc_share_of_cpu"] = sum(g["cpu_seconds"] for g in gc_window.values()) / max(
        1e-9, measured[target.name]["cpu_seconds"]
    )
    return result


def _py_spy(pid: int, *, seconds: float, out: Path, rate: int) -> list[str]:
    binary = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if binary is None:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    duration = str(int(seconds) + 2)
    return [
        *(binary, "record", "--pid", str(pid), "--duration", duration, "--rate", str(rate)),
        *("--nonblocking", "--gil", "--format", "raw", "--output", str(out)),
    ]


async def profile(size: int, *, seconds: float, out: Path, rate: int) -> dict[str, Any]:
    plane = await asyncio.to_thread(run.start_plane)
    result: dict[str, Any] = {"size": size, "seconds": seconds, "rate_hz": rate, "commit": procs.commit()}
    try:
        async with await client_for(plane.kubeconfig) as api:
            kube = Kube(api)
            cluster = Cluster(size, datetime.now(UTC))
            run.log(f"{size}: creating the cluster")
            result["objects"] = sum((await populate(kube, cluster)).values())
            churn = Churn(kube, cluster)
            await churn.renew_leases()
            leases = asyncio.create_task(churn.keep_leases())
            port, gc_stats = free_port(), out / "gc.json"
            proc = procs.stalewatch(plane.kubeconfig, port, out / "stalewatch.log")
            proc.argv[1:3] = ["-m", "bench.traced"]
            proc.env[traced.STATS_ENV] = str(gc_stats)
            proc.start()
            try:
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                    base = f"http://127.0.0.1:{port}"
                    result["sync_seconds"] = await procs.wait_until_ok(
                        session, f"{base}/readyz", proc, within=600
                    )
                    await asyncio.sleep(cpu.SETTLE_SECONDS)
                    target = cpu.Target("stalewatch", proc, f"{base}/metrics")
                    for name, load in (("idle", None), ("churn", churn)):
                        run.log(f"{size}: profiling stalewatch, {name}, {seconds:.0f} s")
                        result[name] = await profiled_window(
                            session,
                            target,
                            churn=load,
                            seconds=seconds,
                            out=out / f"{name}-{size}.txt",
                            gc_stats=gc_stats,
                            rate=rate,
                        )
            finally:
                proc.stop()
                leases.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await leases
    finally:
        await asyncio.to_thread(plane.stop)
    return result


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--out", type=Path, default=Path("/tmp/stalewatch-bench/profile"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = await profile(args.size, seconds=args.seconds, out=args.out, rate=args.rate)
    path = args.out / f"liveprofile-{args.size}.json"
    path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    run.log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
