"""Records a real watch stream, then measures the pure pipeline on it, on one core.

Recording: one watch per kind stalewatch watches (same paths and field selectors), opened at
resourceVersion=0 so the API server first replays every object as ADDED, then delivers the
churn as MODIFIED; the raw lines are written to a file exactly as they arrived.

Measuring (`python -m bench.pipeline STREAM`), pinned to one CPU:
  * stalewatch: decode (the reflector's typed fast path, which falls back to orjson.loads ->
    project()) -> HealthModel.upsert -> evaluate, the way the watcher runs
    it (its passes paced as LiveModel paces them), with an evaluate() after EVERY event
    (the worst case), and ingest only (one evaluation at the end);
  * kubernetes-asyncio: Watch.unmarshal_event for the same lines into its default models
    (V1Pod, V1Deployment, CoreV1Event, ...; custom resources stay dicts, as it returns them);
  * scaling: with every ADDED object loaded, the cost of one churn event (upsert + evaluate).
Times are CPU time of this process (time.process_time), best of three, so that other work
on a shared machine does not count against the pipeline. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import inspect
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient

from watcher.kube.client import get
from watcher.kube.live import LiveModel, SyncCollections
from watcher.kube.pacing import Pacing
from watcher.kube.resources import BUILT_IN, ON_DEMAND_BY_KEY, Resource
from watcher.model.engine import HealthModel
from watcher.model.ingest.fastpath import fast_path
from watcher.model.types import ModelConfig

MODELS = {
    "Pod": "V1Pod",
    "Deployment": "V1Deployment",
    "StatefulSet": "V1StatefulSet",
    "DaemonSet": "V1DaemonSet",
    "ReplicaSet": "V1ReplicaSet",
    "Event": "CoreV1Event",
    "Lease": "V1Lease",
    "CustomResourceDefinition": "V1CustomResourceDefinition",
}
"""kubernetes-asyncio's model per built-in kind; custom resources deserialize to 'object' (a dict)."""


NO_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_read=None)
"""The benchmark's own lists and watches run until they are done or cancelled."""


def flux_resources() -> list[Resource]:
    """The custom kinds the benchmark creates, where the test CRDs (and bench/crds/) serve them."""
    from bench.kinds import API_VERSIONS

    out = []
    for kind, api_version in API_VERSIONS.items():
        group, _, version = api_version.rpartition("/")
        if "." in group and "k8s.io" not in group:
            plural = kind.lower()[:-1] + "ies" if kind.endswith("y") else kind.lower() + "s"
            out.append(Resource(group, version, kind, plural))
    return out


def listed_built_in() -> list[Resource]:
    """The built-in kinds the stacks apply that stalewatch watches because an inventory lists
    them (resources.ON_DEMAND: the Jobs)."""
    from bench.kinds import API_VERSIONS, STACK_KINDS

    keys = ((API_VERSIONS[kind].rpartition("/")[0], kind) for kind in STACK_KINDS)
    return [ON_DEMAND_BY_KEY[key] for key in keys if key in ON_DEMAND_BY_KEY]


def watched() -> list[Resource]:
    """Every kind stalewatch watches on the benchmark's cluster."""
    return [*BUILT_IN, *flux_resources(), *listed_built_in()]


async def record(api: ApiClient, path: Path, *, stop: asyncio.Event) -> int:
    """Streams every watched kind into `path` (one event per line) until `stop` is set."""
    count = 0
    with path.open("wb") as out:

        async def one(resource: Resource) -> None:
            nonlocal count
            query = [("watch", "1"), ("resourceVersion", "0"), ("timeoutSeconds", "3600")]
            if resource.field_selector:
                query.append(("fieldSelector", resource.field_selector))
            response = await get(api, resource.path, query, limits=NO_TIMEOUT)
            buffer = b""
            async with response:
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line:
                            out.write(line + b"\n")
                            count += 1

        tasks = [asyncio.create_task(one(r)) for r in watched()]
        await stop.wait()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return count


Line = tuple[bytes, str, str]
"""A recorded watch line with the apiVersion and kind of the watch it came from."""


def watch_lines(lines: list[bytes]) -> list[Line]:
    """Each line with its kind, which the reflector knows from the watch it opened."""
    out = []
    for line in lines:
        obj = orjson.loads(line)["object"]
        out.append((line, obj["apiVersion"], obj["kind"]))
    return out


def synced_at(lines: list[Line]) -> int:
    """The index of the last event of the initial replay: each kind's watch replays its
    objects as ADDED before anything else, and the recording interleaves the kinds' watches,
    so a kind with few objects is already streaming churn while the Pods are still replaying.
    The watcher counts itself synced (and freezes its cache) when every kind's replay is done."""
    done: set[tuple[str, str]] = set()
    last = -1
    for index, (line, api_version, kind) in enumerate(lines):
        if (api_version, kind) in done:
            continue
        if line.startswith(b'{"type":"ADDED"'):
            last = index
        else:
            done.add((api_version, kind))
    return last


def decode(line: Line) -> tuple[str, Mapping[str, Any]]:
    """A watch line as the reflector reads it (the typed fast path, else orjson + project())."""
    decoded = fast_path(line[1], line[2]).decode(line[0])
    assert decoded.object is not None, "the recording holds no BOOKMARK, ERROR or malformed object"
    return decoded.type, decoded.object


def replay_clock(lines: list[bytes]) -> datetime | None:
    """The clock to judge the recording at: the newest renewal of a controller's leader Lease
    among the ADDED events. Judged much later (say when the recording ended), those 40 s Leases
    have expired and the model would rightly be judging an incident, not the recorded cluster;
    objects written after this moment only carry timestamps ahead of it, which no rule counts."""
    newest = None
    for line in lines:
        if b'-leader-election"' in line and line.startswith(b'{"type":"ADDED"'):
            renewed = orjson.loads(line)["object"].get("spec", {}).get("renewTime")
            if renewed:
                moment = datetime.fromisoformat(renewed)
                newest = moment if newest is None else max(newest, moment)
    return newest


_LIVE = inspect.signature(LiveModel.__init__).parameters
DEBOUNCE, LONGEST = _LIVE["debounce"].default, _LIVE["longest"].default
"""The live watcher's pacing, LiveModel's defaults: a pass at least `debounce` after a change;
under a stream of changes the next pass waits Pacing.SHARE times the part of the last one's CPU
cost its changes do not explain, but never more than `longest` (watcher.kube.pacing)."""
CLOCK_EVERY = 16
"""Events between looks at the CPU clock (a system call of about 1 us, which the watcher, timed
by its event loop, does not make per event); 16 events are well under a millisecond of work."""


def stalewatch_pass(lines: list[Line], *, evaluate: str, now: datetime) -> float:
    """CPU seconds to push every line through decode -> project -> model -> evaluate, where
    `evaluate` is "each" (after every event: the worst case), "live" (paced as the watcher paces
    its passes, the watcher's own Pacing on this process's CPU clock: events never stop coming in
    a replay) or "end" (ingest only, one evaluation at the end). Garbage collection
    follows the watcher's policy (SyncCollections): full collections wait for the initial replay
    (every kind's ADDED events, see synced_at), which ends in one collection and a freeze,
    counted here as the watcher pays it."""
    model = HealthModel(ModelConfig())
    collections = SyncCollections()
    collections.defer()
    synced = synced_at(lines)
    clock = time.process_time
    pacing = Pacing(debounce=DEBOUNCE, longest=LONGEST)
    started = clock()
    due = started + pacing.delay(started)
    last = 0
    for index, line in enumerate(lines):
        kind, obj = decode(line)
        if index > synced and not collections.frozen:
            model.evaluate(now)
            collections.freeze()
        if kind == "DELETED":
            model.delete(obj, now=now)
        else:
            model.upsert(obj, now=now)
        if evaluate == "each":
            model.evaluate(now)
        elif evaluate == "live" and index % CLOCK_EVERY == 0 and clock() >= due:
            begun = clock()
            model.evaluate(now)
            ended = clock()
            pacing.passed(started=begun, ended=ended, cost=ended - begun, changes=index + 1 - last)
            last = index + 1
            due = ended + pacing.delay(ended)
    model.evaluate(now)
    elapsed = clock() - started
    collections.restore()
    gc.unfreeze()
    del model
    gc.collect()
    return elapsed


def _churn_costs(model: HealthModel, churn: list[Mapping[str, Any]], *, now: datetime) -> list[float]:
    costs = []
    for obj in churn:
        started = time.process_time()
        model.upsert(obj, now=now)
        model.evaluate(now)
        costs.append(time.process_time() - started)
    return sorted(costs)


def scaling(
    lines: list[Line], *, now: datetime, ended: datetime, sample: int | None = None, incidents: int = 200
) -> dict[str, float]:
    """Per-event cost (upsert + evaluate) of the churn, with the whole cluster loaded; then the
    same during an incident: ten minutes after the recording `ended` every controller's leader
    Lease has expired, so every controller is down and every GitOps object carries a finding.
    With `sample`, only the first `sample` churn events are timed, and `incidents` of them during
    the incident (bench/envelope.py at 200k)."""
    model = HealthModel(ModelConfig())
    churn = []
    for line in lines:
        kind, obj = decode(line)
        if kind == "ADDED":
            model.upsert(obj, now=now)
        else:
            churn.append(obj)
    model.evaluate(now)
    costs = _churn_costs(model, churn[:sample], now=now)
    if not costs:
        return {"churn_events": 0}
    later = ended + timedelta(minutes=10)
    started = time.process_time()
    incident = model.evaluate(later)
    first = time.process_time() - started
    during = _churn_costs(model, churn[:incidents], now=later)
    return {
        "churn_events": len(costs),
        "churn_event_us_mean": statistics.fmean(costs) * 1e6,
        "churn_event_us_p50": costs[len(costs) // 2] * 1e6,
        "churn_event_us_p99": costs[min(len(costs) - 1, int(len(costs) * 0.99))] * 1e6,
        "incident_findings": len(incident.findings),
        "incident_first_evaluate_ms": first * 1e3,
        "incident_event_ms_mean": statistics.fmean(during) * 1e3,
    }


def retained(lines: list[Line], *, now: datetime) -> dict[str, float]:
    """Bytes the model keeps per object once every ADDED object is loaded (tracemalloc, after
    a collection): the model's own footprint, apart from the allocator's high-water marks."""
    tracemalloc.start()
    model = HealthModel(ModelConfig())
    loaded = 0
    for line in lines:
        kind, obj = decode(line)
        if kind == "ADDED":
            model.upsert(obj, now=now)
            loaded += 1
    model.evaluate(now)
    del obj
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {"model_objects": loaded, "model_bytes_per_object": held / max(1, loaded)}


async def k8s_asyncio_pass(lines: Iterable[bytes]) -> float:
    """Seconds for kubernetes-asyncio's own watch decoding into its default models."""
    from kubernetes_asyncio.watch import Watch

    decoder = Watch()
    kinds = [(orjson.loads(line)["object"]["kind"], line) for line in lines]
    started = time.process_time()
    for kind, line in kinds:
        decoder.unmarshal_event(line, MODELS.get(kind, "object"))
    elapsed = time.process_time() - started
    await decoder._api_client.close()
    return elapsed


def measure(stream: Path) -> dict[str, Any]:
    lines = stream.read_bytes().splitlines()
    types: dict[str, int] = {}
    for line in lines:
        kind = orjson.loads(line)["type"]
        types[kind] = types.get(kind, 0) + 1
    ended = datetime.fromtimestamp(stream.stat().st_mtime, UTC)
    now = replay_clock(lines) or ended
    watched = watch_lines(lines)
    gc.collect()
    full = min(stalewatch_pass(watched, evaluate="each", now=now) for _ in range(3))
    live = min(stalewatch_pass(watched, evaluate="live", now=now) for _ in range(3))
    ingest = min(stalewatch_pass(watched, evaluate="end", now=now) for _ in range(3))
    k8s = min(asyncio.run(k8s_asyncio_pass(lines)) for _ in range(3))
    return {
        "events": len(lines),
        "event_types": types,
        "bytes": sum(map(len, lines)),
        "stalewatch_events_per_s": len(lines) / live,
        "stalewatch_each_events_per_s": len(lines) / full,
        "stalewatch_ingest_events_per_s": len(lines) / ingest,
        "k8s_asyncio_events_per_s": len(lines) / k8s,
        "ratio_vs_k8s_asyncio": k8s / live,
        "ratio_each_vs_k8s_asyncio": k8s / full,
        **scaling(watched, now=now, ended=ended),
        **retained(watched, now=now),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Pipeline throughput on a recorded watch stream.")
    parser.add_argument("stream", type=Path)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU (default: the last one)")
    args = parser.parse_args(argv)
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    result = {"cpu": cpu, **measure(args.stream)}
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
