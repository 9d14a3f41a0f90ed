"""The synthetic stream served to a real `stalewatch run`, as an API server serves list and watch.

The API server here cannot hold 200,000 objects in the time a run has (it creates about 220
objects/s), so this process plays its part from bench/synthetic.py's stream, and `stalewatch run`
is started as a user starts it (bench/procs.py), its kubeconfig pointing here (plain HTTP on
127.0.0.1). Only what stalewatch asks is answered:
  * GET /version (its reachability probe);
  * a collection's list (limit/continue pages of the stream's ADDED objects, as they were written;
    an empty list for a kind the stream has none of);
  * its watch (watch=1): held open; once the churn starts, each of the kind's MODIFIED lines is
    written at its time in the sidecar, then the stream stays open until the end.
Field selectors are not evaluated: the stream holds only what the recording's selectors let
through. Nothing else of an API server is imitated (no auth, no bookmarks, no 410s).

Measured: start to /readyz, RSS once synced and after a first /metrics scrape, RSS and CPU under
the churn (scraped once per 15 s, as Prometheus would), and per probe (a line that breaks a healthy
Pod) the time from that line being written to the socket to `/api/v1/findings` naming the Pod
(polled every 20 ms, as bench/run.py's detection does).

With --down SCENARIO (bench/incidents.py) the same during an incident: once synced, the outage is
written to the watches (the controllers' Pods crash-looping, their Deployments and ReplicaSets
without an available replica) and their leader Leases are no longer renewed; when
/api/v1/findings names every one of them ControllerDown, the churn (without the down
controllers' own writes) is played as above, while /api/v1/findings and the page `/` are also
fetched PAGES times each, spread through the churn: response time and body size.

Usage: python -m bench.served STREAM [--workdir DIR] [--down SCENARIO]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from bench import cpu, envelope, incidents, pipeline, procs, synthetic
from bench.kinds import FLUX_NS
from tests.controlplane.harness import free_port

PAGE_LIMIT = 500
PAGES = 20
"""Fetches of /api/v1/findings and of `/` each, spread through the churn of an incident."""
ADDED = b'{"type":"ADDED","object":'


_TIMESTAMP = re.compile(rb'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z"')


def shifted(line: bytes, by: timedelta) -> bytes:
    """Every RFC 3339 timestamp in the line moved by `by` (the stream's clock to the serving one)."""

    def move(found: re.Match[bytes]) -> bytes:
        moment = datetime.fromisoformat(found[1].decode()) + by
        return b'"' + moment.strftime("%Y-%m-%dT%H:%M:%S").encode() + (found[2] or b"") + b'Z"'

    return _TIMESTAMP.sub(move, line)


class Served:
    """The stream's objects by collection path, and the churn lines with their times and paths.

    The stream's clock is moved to this process's: every timestamp shifted by the time between
    the stream's `now` and the moment it is loaded. The controllers' leader Leases are renewed
    every 10 s from the start, as live leaders renew them (the sync of a large cluster takes
    longer than a Lease lasts), in the lists too; the churn's own Lease renewals are those. With controllers
    `down`, the churn holds none of their writes (bench/incidents.py).
    """

    def __init__(self, stream: Path, down: tuple[str, ...] = ()) -> None:
        self.sidecar = orjson.loads(stream.with_suffix(".json").read_bytes())
        by = datetime.now(UTC) - datetime.fromisoformat(self.sidecar["now"])
        paths = {f"{r.api_version}/{r.kind}": r.path for r in pipeline.watched()}
        marks = envelope.marked(self.sidecar)
        self.items: dict[str, list[bytes]] = defaultdict(list)
        self.tail: list[tuple[float, str, bytes, envelope.Mark | None]] = []
        self.leases: list[tuple[int, dict[str, Any]]] = []
        """The leader Leases, each with its place in the Leases' list."""
        self.down, self.stopped = down, False
        self.workloads: list[tuple[str, dict[str, Any]]] = []
        """(path, object) of the flux-system controllers' workloads, as an outage writes them."""
        start, times = self.sidecar["tail_start"], self.sidecar["tail_times"]
        with stream.open("rb") as lines:
            for index, raw in enumerate(lines):
                line = shifted(raw.rstrip(b"\n"), by)
                written = orjson.loads(line)["object"]
                path = paths[f"{written['apiVersion']}/{written['kind']}"]
                leader = written["kind"] == "Lease" and written["metadata"]["name"].endswith(
                    "-leader-election"
                )
                if index < start:
                    self.items[path].append(line[len(ADDED) : -1])
                    if leader:
                        self.leases.append((len(self.items[path]) - 1, written))
                    elif written["metadata"].get("namespace") == FLUX_NS:
                        self.workloads.append((path, written))
                elif not leader and not incidents.silenced(written, down):
                    self.tail.append((times[index - start], path, line, marks.get(index)))
        self.lease_path = paths["coordination.k8s.io/v1/Lease"]
        self.version = 1000 + self.sidecar["lines"]
        self.watches: dict[str, list[asyncio.Queue[bytes | None]]] = defaultdict(list)
        self.begun = 0.0
        self.renewed = datetime.now(UTC)
        """When the leader Leases were last renewed (the clock their renewTime is written in)."""
        self.written: dict[tuple[str, str], float] = {}
        """When each probe's line was written to its watch."""
        self.healed: set[tuple[str, str]] = set()
        """Probed Pods whose healing line was written."""

    def send(self, path: str, line: bytes) -> None:
        for queue in self.watches[path]:
            queue.put_nowait(line)

    async def renew(self) -> None:
        """The leader Leases renewed every 10 s until cancelled, each a MODIFIED on the Lease watches."""
        while True:
            self.renewed = datetime.now(UTC)
            renewed = self.renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            for at, lease in self.leases:
                if self.stopped and incidents.leader_lease(lease, self.down):
                    continue
                self.version += 1
                lease["spec"]["renewTime"] = renewed
                lease["metadata"]["resourceVersion"] = str(self.version)
                self.items[self.lease_path][at] = orjson.dumps(lease)  # a list serves it renewed
                self.send(self.lease_path, orjson.dumps({"type": "MODIFIED", "object": lease}))
            await asyncio.sleep(synthetic.LEASE_EVERY)

    def fail(self) -> datetime:
        """Writes the outage of the down controllers and stops renewing their Leases; returns
        when their Leases run out: their last renewal plus the duration."""
        self.stopped = True
        since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for path, obj in self.workloads:
            written = incidents.outage(obj, self.down, since=since)
            if written is not None:
                self.version += 1
                written["metadata"]["resourceVersion"] = str(self.version)
                self.send(path, orjson.dumps({"type": "MODIFIED", "object": written}))
        lasting = max(lease["spec"]["leaseDurationSeconds"] for _, lease in self.leases)
        return self.renewed + timedelta(seconds=lasting)

    async def churn(self) -> None:
        """The churn lines, each at its time after the start, on the watches of its kind."""
        self.begun = time.monotonic()
        for at, path, line, _ in self.tail:
            delay = self.begun + at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.send(path, line)

    def stop(self) -> None:
        for queues in self.watches.values():
            for queue in queues:
                queue.put_nowait(None)

    async def version_info(self, request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "34", "gitVersion": "v1.34.4"})

    async def collection(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("1", "true"):
            return await self.watch(request)
        items = self.items.get(request.path, [])
        first = int(request.query.get("continue") or 0)
        last = first + int(request.query.get("limit") or PAGE_LIMIT)
        token = str(last) if last < len(items) else ""
        meta = {"resourceVersion": str(self.version), "continue": token}
        body = b'{"kind":"List","apiVersion":"v1","metadata":' + orjson.dumps(meta) + b',"items":['
        body += b",".join(items[first:last]) + b"]}"
        return web.Response(body=body, content_type="application/json")

    async def watch(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.watches[request.path].append(queue)
        marks = {line: mark for _, path, line, mark in self.tail if mark and path == request.path}
        try:
            while (line := await queue.get()) is not None:
                await response.write(line + b"\n")
                mark = marks.get(line)
                if mark is not None and mark[0] == "probe":
                    self.written[mark[1]] = time.monotonic()
                elif mark is not None:
                    self.healed.add(mark[1])
        finally:
            self.watches[request.path].remove(queue)
        return response


def kubeconfig(path: Path, port: int) -> Path:
    cluster = {"name": "served", "cluster": {"server": f"http://127.0.0.1:{port}"}}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "served", "user": {}}],
        "contexts": [{"name": "served", "context": {"cluster": "served", "user": "served"}}],
        "current-context": "served",
    }
    path.write_bytes(orjson.dumps(config))
    return path


def pods_named(findings: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, name) of every Pod a served WorkloadUnhealthy finding names."""
    return {
        (subject.get("namespace", ""), subject["name"])
        for finding in findings
        if finding["type"] == "WorkloadUnhealthy"
        for subject in (finding["subject"], *finding.get("affected", ()))
        if subject["kind"] == "Pod"
    }


async def detect(
    session: aiohttp.ClientSession, base: str, served: Served, *, within: float
) -> tuple[list[float], int]:
    """Polls /api/v1/findings every 20 ms: per probe, written to the watch -> named in a finding;
    and how many probes were healed before a poll saw them (no latency to take)."""
    latencies: list[float] = []
    healed = 0
    probes = {(ns, name) for _, ns, name in served.sidecar["probes"]}
    deadline = time.monotonic() + within
    while probes and time.monotonic() < deadline:
        _, body, _ = await procs.fetch(session, f"{base}/api/v1/findings")
        found = time.monotonic()
        sent = [pod for pod in served.written.keys() & probes if f'"{pod[1]}"'.encode() in body]
        if sent:
            named = pods_named(orjson.loads(body)["findings"])
            for pod in sent:
                if pod in named:
                    latencies.append(found - served.written[pod])
                    probes.discard(pod)
        for pod in served.healed & probes:
            probes.discard(pod)
            healed += 1
        await asyncio.sleep(0.02)
    return latencies, healed


def down_named(findings: list[dict[str, Any]]) -> set[str]:
    """Names of the controllers a served ControllerDown finding names."""
    return {finding["subject"]["name"] for finding in findings if finding["type"] == "ControllerDown"}


async def outage(session: aiohttp.ClientSession, base: str, served: Served) -> dict[str, Any]:
    """The outage written, then /api/v1/findings polled until it names every down controller
    ControllerDown: seconds from the outage written to its Leases running out, and from then to
    served (stalewatch's part)."""
    written = datetime.now(UTC)
    expires = served.fail()
    while True:
        _, body, _ = await procs.fetch(session, f"{base}/api/v1/findings")
        if b'"ControllerDown"' in body and set(served.down) <= down_named(orjson.loads(body)["findings"]):
            break
        if datetime.now(UTC) > expires + timedelta(minutes=1):
            raise TimeoutError(f"no ControllerDown for every one of {served.down} a minute after expiry")
        await asyncio.sleep(0.02)
    seen = datetime.now(UTC)
    return {
        "down": list(served.down),
        "leases_expired_after_seconds": (expires - written).total_seconds(),
        "served_after_expiry_seconds": (seen - expires).total_seconds(),
        "findings": len(orjson.loads(body)["findings"]),
    }


async def pages(session: aiohttp.ClientSession, base: str, *, every: float) -> dict[str, Any]:
    """/api/v1/findings and `/`, each fetched PAGES times `every` seconds apart: time and size."""
    timed: dict[str, list[float]] = {"findings": [], "page": []}
    sizes: dict[str, int] = {}
    findings = 0
    for _ in range(PAGES):
        for name, path in (("findings", "/api/v1/findings"), ("page", "/")):
            status, body, seconds = await procs.fetch(session, base + path)
            if status != 200:
                raise RuntimeError(f"{path} answered {status} during the incident")
            timed[name].append(seconds)
            sizes[name] = len(body)
            if name == "findings":
                findings = len(orjson.loads(body)["findings"])
        await asyncio.sleep(every)
    out: dict[str, Any] = {"fetches": PAGES, "findings_served": findings}
    for name, times in timed.items():
        times.sort()
        out[name] = {
            "p50_seconds": statistics.median(times),
            "p99_seconds": envelope.pct(times, 0.99),
            "bytes": sizes[name],
        }
    return out


async def measure(stream: Path, workdir: Path, down: tuple[str, ...] = ()) -> dict[str, Any]:
    served = Served(stream, down)
    app = web.Application()
    app.router.add_get("/version", served.version_info)
    app.router.add_get("/{path:.*}", served.collection)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    renewer = asyncio.create_task(served.renew())
    sw_port = free_port()
    config = kubeconfig(workdir / "kubeconfig.json", port)
    proc = procs.stalewatch(config, sw_port, workdir / "stalewatch.log").start()
    base = f"http://127.0.0.1:{sw_port}"
    out: dict[str, Any] = {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            out["sync_seconds"] = await procs.wait_until_ok(session, f"{base}/readyz", proc, within=900)
            await asyncio.sleep(3)
            _, body, _ = await procs.fetch(session, f"{base}/api/v1/findings")
            out["objects_held"] = orjson.loads(body)["summary"]["objects"]
            out["rss_bytes_synced"] = proc.rss()
            status, metrics, seconds = await procs.fetch(session, f"{base}/metrics")
            out["first_scrape"] = {"status": status, "bytes": len(metrics), "seconds": seconds}
            out["rss_bytes_scraped"] = proc.rss()
            seconds = served.sidecar["churn_seconds"]
            if down:
                out["outage"] = await outage(session, base, served)
                fetched = asyncio.create_task(pages(session, base, every=seconds / PAGES))
            before = proc.cpu()
            churn = asyncio.create_task(served.churn())
            stop = asyncio.Event()
            scrapes = asyncio.create_task(
                cpu._scrape_every(session, f"{base}/metrics", cpu.SCRAPE_EVERY, stop)
            )
            latencies, healed = await detect(session, base, served, within=seconds + 10)
            latencies.sort()
            elapsed = time.monotonic() - served.begun
            stop.set()
            await churn
            out["churn"] = {
                "seconds": elapsed,
                "cpu_cores": (proc.cpu() - before) / elapsed,
                "rss_bytes": proc.rss(),
                "scrapes": await scrapes,
            }
            if down:
                out["pages"] = await fetched
            out["detection"] = {
                "probes": len(served.sidecar["probes"]),
                "seen": len(latencies),
                "healed_before_seen": healed,
                "p50_seconds": statistics.median(latencies) if latencies else None,
                "p99_seconds": envelope.pct(latencies, 0.99),
                "max_seconds": latencies[-1] if latencies else None,
            }
    finally:
        renewer.cancel()
        served.stop()
        proc.stop()
        await runner.cleanup()
    out["load_average"] = os.getloadavg()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stream", type=Path)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--down", choices=incidents.SCENARIOS, default=None, help="an incident")
    args = parser.parse_args(argv)
    workdir = args.workdir or args.stream.parent
    down = incidents.SCENARIOS[args.down] if args.down else ()
    result = asyncio.run(measure(args.stream, workdir, down))
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
