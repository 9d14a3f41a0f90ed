"""CPU of the processes under test on identical work: the same windows, the same churn, the same scrapes.

Each process is asked exactly what a Prometheus would ask it, one `/metrics` scrape every
SCRAPE_EVERY seconds, and nothing else: no probes, no `/api/v1/findings`, no `/healthz`. Both run
during the same window, so they see the same watch events from the same API server. Their CPU is
read from /proc (utime + stime) at the window's start and end: CPU seconds are what a process
spent, which contention on a shared machine changes far less than wall time (a little, through
caches and frequency; never by the time it waits for a core).

Two windows per size: idle (no writes to the API server but the flux-system Leases renewed every
10 s, which every live cluster has) and churn (CHURN_RATE status changes per second).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench import procs
from bench.generate import Churn

SCRAPE_EVERY = 15.0
"""Prometheus' default scrape_interval in most distributions (kube-prometheus, Flux's example)."""
SETTLE_SECONDS = 10.0
"""Before the first window: kube-state-metrics' and stalewatch's garbage after their sync scrapes."""


@dataclass(frozen=True)
class Target:
    name: str
    proc: procs.Proc
    metrics_url: str


async def _scrape_every(session: aiohttp.ClientSession, url: str, every: float, stop: asyncio.Event) -> int:
    """Scrapes at 0, every, 2*every, ... until `stop`: how many answered 200."""
    answered, started = 0, time.monotonic()
    tick = 0
    while not stop.is_set():
        status, _, _ = await procs.fetch(session, url)
        answered += status == 200
        tick += 1
        delay = started + tick * every - time.monotonic()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
    return answered


async def window(
    session: aiohttp.ClientSession,
    targets: list[Target],
    *,
    churn: Churn | None,
    rate: float,
    seconds: float,
    scrape_every: float = SCRAPE_EVERY,
) -> dict[str, Any]:
    """One window: each target's CPU seconds, cores and RSS, scrapes answered, churn writes."""
    stop = asyncio.Event()
    before = {t.name: t.proc.cpu_times() for t in targets}
    started = time.monotonic()
    scrapers = {
        t.name: asyncio.create_task(_scrape_every(session, t.metrics_url, scrape_every, stop))
        for t in targets
    }
    if churn is None:
        writes = 0
        await asyncio.sleep(seconds)
    else:
        writes = await churn.run(rate=rate, seconds=seconds)
    elapsed = time.monotonic() - started
    after = {t.name: t.proc.cpu_times() for t in targets}
    stop.set()
    out: dict[str, Any] = {"seconds": elapsed, "writes_per_s": writes / elapsed}
    for t in targets:
        user, system = (a - b for a, b in zip(after[t.name], before[t.name], strict=True))
        out[t.name] = {
            "cpu_seconds": user + system,
            "cpu_user_seconds": user,
            "cpu_system_seconds": system,
            "cpu_cores": (user + system) / elapsed,
            "rss_bytes": t.proc.rss(),
            "scrapes": await scrapers[t.name],
        }
    return out


async def windows(
    session: aiohttp.ClientSession,
    targets: list[Target],
    *,
    churn: Churn,
    rate: float,
    seconds: float,
    scrape_every: float = SCRAPE_EVERY,
) -> dict[str, Any]:
    """The idle window, then the churn window, for every target at once."""
    common = {"rate": rate, "seconds": seconds, "scrape_every": scrape_every}
    return {
        "scrape_every_seconds": scrape_every,
        "idle": await window(session, targets, churn=None, **common),
        "churn": await window(session, targets, churn=churn, **common),
    }
