"""The heartbeat reader: every `interval`, each tracked controller's own /metrics, read from its
Pods and handed to the model, one `HealthModel.heartbeat` call per controller per round.

Where to read comes from the model (`HealthModel.metrics_targets()`: the leader Pod's IP, else
every Ready Pod's, on the port its workload names). Everything here is bounded: `max_bytes` of
answer (counted after decompression, so a gzip bomb stops there too), `timeout` seconds per read,
`concurrency` reads at once; the parser bounds the series. A read that fails is an `Unreadable`
naming why (unreachable, timed out, HTTP 403, too large, not controller-runtime's metrics) and is
handed to the model like any read, so that controller's heartbeat is unknown, never skipped and
never healthy. A target with no endpoint (no Ready Pod, no IP, no port) is read as Unreadable too.

Without a known leader every Ready Pod is read and the one that has completed the most
reconciles stands for the controller: only the leader reconciles, a follower's counters stay
at 0, and it stays the same Pod from read to read until leadership moves (which the store sees
as the restart it is). If any of those Pods cannot be read, the read is Unreadable: the one
missing could be the leader, and a follower's still counters would raise a false alarm.

With `prometheus` (heartbeat_prometheus.py) the same targets are read through a Prometheus
query API instead, each read dated by when Prometheus scraped it; the rest is unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import aiohttp

from watcher.logs import fields, get_logger
from watcher.model.ingest.controller_metrics import (
    MAX_EXPOSITION_BYTES,
    ControllerMetrics,
    Unreadable,
    parse_controller_metrics,
)
from watcher.model.rules.metrics_targets import MetricsTarget
from watcher.telemetry import Telemetry

if TYPE_CHECKING:
    from watcher.kube.heartbeat_prometheus import PrometheusReads

log = get_logger("heartbeats")

Read = ControllerMetrics | Unreadable
Deliver = Callable[[str, Read, datetime | None], None]
"""Hands one controller's read to the model (LiveModel.heartbeat), with when it was taken (None:
now, on delivery)."""


class HeartbeatReader:
    """Reads every target `targets()` names, every `interval` seconds while `ready()` says so."""

    def __init__(
        self,
        targets: Callable[[], list[MetricsTarget]],
        deliver: Deliver,
        telemetry: Telemetry,
        *,
        interval: float,
        timeout: float,
        concurrency: int = 4,
        max_bytes: int = MAX_EXPOSITION_BYTES,
        ready: Callable[[], bool] = lambda: True,
        prometheus: PrometheusReads | None = None,
    ) -> None:
        self.targets, self._deliver, self._telemetry = targets, deliver, telemetry
        """Called each round; the lab test points it at its host processes."""
        self.interval, self.timeout, self.max_bytes = interval, timeout, max_bytes
        self._limit = asyncio.Semaphore(concurrency)
        self._ready, self._prometheus = ready, prometheus
        self._session: aiohttp.ClientSession | None = None
        self._failing: dict[str, str] = {}
        """Per controller, why its last read failed: logged when that starts or changes."""

    async def __aenter__(self) -> HeartbeatReader:
        # no keep-alive: a Pod's IP may go to another Pod between two rounds
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        if self._prometheus is not None:
            await self._prometheus.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
        if self._prometheus is not None:
            await self._prometheus.__aexit__(*exc)

    async def run(self) -> None:
        """Until cancelled: a round, then wait out the rest of the interval (rounds never overlap)."""
        async with self:
            while True:
                started = time.monotonic()
                try:
                    if self._ready():  # before the sync, the model does not know every controller yet
                        await self.read_all()
                except Exception:  # a bug here must not end the reads
                    log.exception("a heartbeat round failed")
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def read_all(self) -> None:
        """One round: every target read concurrently (within `concurrency`), each delivered."""
        await asyncio.gather(*(self._read_target(t) for t in self.targets()))

    async def _read_target(self, target: MetricsTarget) -> None:
        started = time.monotonic()
        read: Read
        at: datetime | None = None
        if target.problem and self._prometheus is None:
            result, read = "no_endpoint", Unreadable(target.problem)
        else:
            try:
                if self._prometheus is not None:  # it needs no port or IP, only the Pods' names
                    async with self._limit:
                        result, read, at = await self._prometheus.read(target)
                else:
                    reads = await asyncio.gather(*(self._read_pod(target, p, ip) for p, ip in target.pods))
                    result, read = choose(reads)
            except Exception as error:  # a bug here is this controller's unknown, not a lost read
                log.exception(
                    "reading a controller's metrics failed", extra=fields(controller=target.controller)
                )
                result, read = (
                    "unparsable",
                    Unreadable(f"stalewatch failed reading it: {type(error).__name__}"),
                )
        self._telemetry.heartbeat_read(target.controller, result, time.monotonic() - started)
        self._log(target.controller, read)
        self._deliver(target.controller, read, at)

    def _log(self, controller: str, read: Read) -> None:
        reason = read.reason if isinstance(read, Unreadable) else ""
        if reason and self._failing.get(controller) != reason:
            log.warning(
                "heartbeat unknown: its metrics cannot be read",
                extra=fields(controller=controller, reason=reason),
            )
        elif not reason and controller in self._failing:
            log.info("heartbeat read again", extra=fields(controller=controller))
        if reason:
            self._failing[controller] = reason
        else:
            self._failing.pop(controller, None)

    async def _read_pod(self, target: MetricsTarget, pod: str, ip: str) -> tuple[str, Read]:
        host = f"[{ip}]" if ":" in ip else ip
        url = f"http://{host}:{target.port}/metrics"
        where = f"pod {pod} ({url})"
        async with self._limit:
            result, body = await self._fetch(url, where)
        if body is None:
            return result, Unreadable(self._reason(result, where))
        read = await asyncio.to_thread(parse_controller_metrics, bytes(body), max_bytes=self.max_bytes)
        if isinstance(read, Unreadable):
            return "unparsable", Unreadable(f"{where}: {read.reason}")
        return "ok", read

    async def _fetch(self, url: str, where: str) -> tuple[str, bytearray | None]:
        assert self._session is not None, "use `async with HeartbeatReader(...)`"
        try:
            async with self._session.get(
                url, timeout=aiohttp.ClientTimeout(total=self.timeout), allow_redirects=False
            ) as response:
                if response.status != 200:
                    return f"http_error:{response.status}", None
                if (response.content_length or 0) > self.max_bytes:
                    return "too_large", None
                body = bytearray()
                async for chunk in response.content.iter_chunked(1 << 16):
                    body += chunk
                    if len(body) > self.max_bytes:
                        return "too_large", None
                return "ok", body
        except TimeoutError:
            return "timeout", None
        except (aiohttp.ClientError, OSError) as error:
            return f"unreachable:{' '.join((str(error) or type(error).__name__).split())[:200]}", None

    def _reason(self, result: str, where: str) -> str:
        """The Unreadable reason of a fetch that gave no body (`result` as _fetch says it)."""
        what, _, detail = result.partition(":")
        if what == "timeout":
            return f"{where}: no answer within {self.timeout:g}s"
        if what == "too_large":
            return f"{where}: the answer is larger than {self.max_bytes} bytes"
        if what == "http_error":
            return f"{where}: HTTP {detail}"
        return f"{where}: unreachable: {detail}"


def choose(reads: list[tuple[str, Read]]) -> tuple[str, Read]:
    """One read per controller: the failed one if any failed, else the one with most reconciles."""
    for result, read in reads:
        if isinstance(read, Unreadable):
            return result.partition(":")[0], read
    good = [read for _, read in reads if isinstance(read, ControllerMetrics)]
    if not good:
        return "no_endpoint", Unreadable("no Pod to read")
    best = max(good, key=lambda r: (r.reconciles_total() is not None, r.reconciles_total() or 0.0))
    return "ok", best
