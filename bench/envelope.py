"""The maximum-size cluster from its synthetic stream (bench/synthetic.py): memory, throughput, detection.

Two processes, each pinned to one CPU, on the same stream:

  * pipeline: bench/pipeline.py's passes, timed in CPU seconds as for the recorded sizes (as the
    watcher paces its passes, best of three; ingest only),
    and its churn-event and incident costs with the whole cluster loaded;
  * live: stalewatch's own watch-side objects, without a socket: one Reflector per watched kind,
    each fed its kind's lines through the reflector's line handling (Reflector._event: decode,
    its key store, the sink), into a LiveModel (the watcher's debounced evaluation loop) with
    WorkloadUnhealthy at 0 s as bench/procs.py runs stalewatch. The initial replay ends with the
    reflectors' commit (what a completed list does) and one evaluation, which freezes the cache as
    the watcher does; RSS is read then, with stalewatch's whole import footprint loaded
    (watcher.app). Then the churn tail is played in real time, each line at its time in the
    sidecar, while LiveModel.run() evaluates as it does live. A probe is a line that breaks a
    healthy Pod: its detection latency is from the moment that line was due (its arrival;
    a line the busy loop takes later still counts from then) to the end of the first
    evaluation whose findings name the Pod as WorkloadUnhealthy (the one the watcher would serve).

  * incident: one of bench/incidents.py's outages, in process (see incident()).

Usage: python -m bench.envelope pipeline|live STREAM, or incident STREAM SCENARIO
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from bench import incidents, pipeline, side
from bench.kinds import CONTROLLERS, FLUX_NS

PASSES = 3
SAMPLE, INCIDENT = 300, 20
"""Churn events timed one by one with the whole cluster loaded (an evaluation after each), and
during the incident (every GitOps object a finding)."""
OUTAGE_SAMPLE = 200
"""Churn events timed one by one during each of bench/incidents.py's outages."""


def throughput(stream: Path) -> dict[str, Any]:
    """As bench/pipeline.py measures a recording, except what would take hours at this size: no
    pass with an evaluation after every event (one per event, for some 226,000 events), and the
    churn-event costs on the first SAMPLE churn events (INCIDENT during the incident), not all."""
    lines = stream.read_bytes().splitlines()
    now, ended = side.clocks(pipeline, stream, lines)
    watched = pipeline.watch_lines(lines)
    del lines
    gc.collect()
    live = min(pipeline.stalewatch_pass(watched, evaluate="live", now=now) for _ in range(PASSES))
    ingest = pipeline.stalewatch_pass(watched, evaluate="end", now=now)
    events = len(watched)
    return {
        "events": events,
        "stalewatch_events_per_s": events / live,
        "stalewatch_ingest_events_per_s": events / ingest,
        "passes": PASSES,
        "churn_sample": SAMPLE,
        "incident_sample": INCIDENT,
        **pipeline.scaling(watched, now=now, ended=ended, sample=SAMPLE, incidents=INCIDENT),
    }


Mark = tuple[str, tuple[str, str]]
"""("probe" or "heal", (namespace, name)) of a churn line that breaks a healthy Pod or heals it."""


def marked(sidecar: dict[str, Any]) -> dict[int, Mark]:
    """The sidecar's probe and heal lines by index."""
    marks: dict[int, Mark] = {index: ("probe", (ns, name)) for index, ns, name in sidecar["probes"]}
    marks.update({index: ("heal", (ns, name)) for index, ns, name in sidecar.get("heals", ())})
    return marks


_ROUTE = re.compile(
    rb'^\{"type":"\w+","object":\{"(?:kind":"(\w+)","apiVersion":"([^"]+)"|apiVersion":"([^"]+)","kind":"(\w+)")'
)


_KEY = re.compile(rb'"metadata":\{"name":"([^"]+)"(?:,"namespace":"([^"]+)")?')


def key(line: bytes) -> tuple[str, str]:
    """(namespace, name) of a watch line's object, as the API server writes metadata first."""
    found = _KEY.search(line)
    if found is None:
        meta = orjson.loads(line)["object"]["metadata"]
        return meta.get("namespace", ""), meta["name"]
    return (found[2] or b"").decode(), found[1].decode()


def route(line: bytes) -> str:
    """'apiVersion/kind' of a watch line, read from its first bytes (as the reflector knows it
    from the watch it opened; parsing the whole line here would be the benchmark's cost)."""
    found = _ROUTE.match(line)
    if found is None:
        written = orjson.loads(line)["object"]
        return f"{written['apiVersion']}/{written['kind']}"
    kind, api_version = (found[1], found[2]) if found[1] else (found[4], found[3])
    return f"{api_version.decode()}/{kind.decode()}"


def _probe_names(evaluation: Any) -> set[tuple[str, str]]:
    """(namespace, name) of every Pod a WorkloadUnhealthy finding names (subject or affected)."""
    names = set()
    for finding in evaluation.findings:
        if finding.type == "WorkloadUnhealthy":
            for subject in (finding.subject, *finding.affected):
                if subject["kind"] == "Pod":
                    names.add((subject["namespace"], subject["name"]))
    return names


def live(stream: Path) -> dict[str, Any]:
    import watcher.app  # noqa: F401  (stalewatch run's whole import footprint, as its RSS has)
    from watcher.kube.link import Link
    from watcher.kube.live import LiveModel
    from watcher.kube.reflector import Reflector, WatchOptions
    from watcher.model.types import ModelConfig, Thresholds
    from watcher.telemetry import Telemetry

    sidecar = orjson.loads(stream.with_suffix(".json").read_bytes())
    now = datetime.fromisoformat(sidecar["now"])
    begun: float | None = None

    def clock() -> datetime:
        return now if begun is None else now + timedelta(seconds=time.monotonic() - begun)

    pending: dict[tuple[str, str], float] = {}
    latencies: list[float] = []
    healed: list[tuple[str, str]] = []
    evaluations = 0

    class Timed(LiveModel):
        def evaluate(self) -> Any:
            nonlocal evaluations
            evaluation = super().evaluate()
            done = time.monotonic()
            evaluations += 1
            if pending and evaluation is not None:
                for pod in _probe_names(evaluation) & pending.keys():
                    latencies.append(done - pending.pop(pod))
                if not pending:
                    seen.set()
            return evaluation

    tail_start = sidecar["tail_start"]
    marks = marked(sidecar)
    tail: list[tuple[float, str, bytes, Mark | None]] = []
    with stream.open("rb") as lines:
        for index, raw in enumerate(lines):
            if index >= tail_start:
                line = raw.rstrip(b"\n")
                at = sidecar["tail_times"][index - tail_start]
                tail.append((at, route(line), line, marks.get(index)))
    gc.collect()
    rss_imports = side.rss()
    telemetry = Telemetry()
    thresholds = dataclasses.replace(Thresholds(), workload_unhealthy=timedelta(0))
    model = Timed(ModelConfig(thresholds=thresholds), telemetry, clock=clock)
    link = Link(telemetry, lambda up: None)
    reflectors = {
        resource.api_version + "/" + resource.kind: Reflector(
            None, resource, model, telemetry, link, options=WatchOptions()
        )
        for resource in pipeline.watched()
    }
    telemetry.up = telemetry.started = True
    model.collections.defer()
    listed: dict[str, set[tuple[str, str]]] = defaultdict(set)
    """Per kind, the keys replayed: what the completed list commits."""
    started = time.process_time()
    with stream.open("rb") as lines:
        for index, raw in enumerate(lines):
            if index == tail_start:
                break
            line = raw.rstrip(b"\n")
            kind = route(line)
            reflectors[kind]._event(line)
            listed[kind].add(key(line))
    for name, reflector in reflectors.items():
        reflector._commit(listed[name], {}, reflector.rv or "", "initial")
    model.evaluate()
    replay_cpu = time.process_time() - started
    assert model.collections.frozen, "the first evaluation after the sync freezes the cache"
    synced = {"objects": telemetry.objects(), "rss_bytes": side.rss(), "replay_cpu_seconds": replay_cpu}
    synced["rss_bytes_above_imports"] = synced["rss_bytes"] - rss_imports
    latest = model.latest
    synced["findings"] = len(latest.findings) if latest is not None else 0

    seen = asyncio.Event()

    async def churn() -> dict[str, Any]:
        nonlocal begun
        runner = asyncio.create_task(model.run())
        cpu = time.process_time()
        begun = start = time.monotonic()
        for at, kind, line, mark in tail:
            delay = start + at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if mark is not None and mark[0] == "probe":
                pending[mark[1]] = start + at
                seen.clear()
            elif mark is not None and pending.pop(mark[1], None) is not None:
                healed.append(mark[1])  # healed before an evaluation named it: no latency to take
            reflectors[kind]._event(line)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(seen.wait(), 5)  # the last probes' evaluation
        elapsed = time.monotonic() - start
        spent = time.process_time() - cpu
        runner.cancel()
        return {"seconds": elapsed, "cpu_seconds": spent, "cpu_cores": spent / elapsed}

    window = asyncio.run(churn())
    ordered = sorted(latencies)
    return {
        **synced,
        "rss_bytes_imports": rss_imports,
        "tail_bytes_held": sum(len(line) for _, _, line, _ in tail),
        "churn": {
            **window,
            "events": len(tail),
            "events_per_s": len(tail) / sidecar["churn_seconds"],
            "evaluations": evaluations,
            "rss_bytes": side.rss(),
        },
        "detection": {
            "probes": len(sidecar["probes"]),
            "seen": len(ordered),
            "healed_before_seen": len(healed),
            "unseen": len(pending),
            "p50_seconds": statistics.median(ordered) if ordered else None,
            "p99_seconds": pct(ordered, 0.99),
            "max_seconds": ordered[-1] if ordered else None,
        },
    }


def pct(ordered: list[float], q: float) -> float | None:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else None


def incident(stream: Path, scenario: str) -> dict[str, Any]:
    """One outage of bench/incidents.py in process, one core, CPU time, as pipeline.scaling times
    the churn. The cluster (its ADDED events) is loaded and evaluated healthy, the cache frozen as
    the watcher freezes it once synced. Then the outage's writes (the down controllers crashed
    right after their Leases' last renewal, in the stream's ADDED events; the others renew theirs
    again, as live leaders do) and the first evaluation, a second after those Leases ran out: it
    must name every down controller ControllerDown. Then OUTAGE_SAMPLE of the churn events the
    incident still writes (no Lease renewal: the clock stands still), each upserted and evaluated."""
    from watcher.kube.live import SyncCollections
    from watcher.model.engine import HealthModel
    from watcher.model.types import ModelConfig

    down = incidents.SCENARIOS[scenario]
    lines = stream.read_bytes().splitlines()
    now, _ = side.clocks(pipeline, stream, lines)
    watched = pipeline.watch_lines(lines)
    del lines
    collections = SyncCollections()
    collections.defer()
    model = HealthModel(ModelConfig())
    churn: list[pipeline.Line] = []
    controllers: list[dict[str, Any]] = []
    for line in watched:
        kind, obj = pipeline.decode(line)
        if kind != "ADDED":
            churn.append(line)
            continue
        model.upsert(obj, now=now)
        if key(line[0])[0] == FLUX_NS:
            controllers.append(orjson.loads(line[0])["object"])
    healthy = model.evaluate(now)
    collections.freeze()
    leases = [obj for obj in controllers if incidents.leader_lease(obj, CONTROLLERS)]
    stopped = [obj for obj in leases if incidents.leader_lease(obj, down)]
    later = max(map(_expiry, stopped)) + timedelta(seconds=1)
    since = stopped[0]["spec"]["renewTime"]
    written = [made for obj in controllers if (made := incidents.outage(obj, down, since=since))]
    for lease in leases:
        if not incidents.leader_lease(lease, down):
            lease["spec"]["renewTime"] = later.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            written.append(lease)
    for obj in written:
        raw = orjson.dumps({"type": "MODIFIED", "object": obj})
        model.upsert(pipeline.decode((raw, obj["apiVersion"], obj["kind"]))[1], now=later)
    started = time.process_time()
    first = model.evaluate(later)
    first_seconds = time.process_time() - started
    named = {f.subject["name"] for f in first.findings if f.type == "ControllerDown"}
    if not set(down) <= named:
        raise SystemExit(f"{scenario}: ControllerDown names {sorted(named)}, not every one of {down}")
    still = [line for line in churn if _still_written(line[0], down)][:OUTAGE_SAMPLE]
    costs = pipeline._churn_costs(model, [pipeline.decode(line)[1] for line in still], now=later)
    p99 = pct(costs, 0.99)
    return {
        "scenario": scenario,
        "down": list(down),
        "findings_healthy": len(healthy.findings),
        "findings": len(first.findings),
        "controller_down": sorted(named),
        "first_evaluate_ms": first_seconds * 1e3,
        "churn_events": len(costs),
        "event_ms_mean": statistics.fmean(costs) * 1e3 if costs else None,
        "event_ms_p99": p99 * 1e3 if p99 is not None else None,
    }


def _still_written(line: bytes, down: tuple[str, ...]) -> bool:
    obj = orjson.loads(line)["object"]
    return not incidents.silenced(obj, down) and not incidents.leader_lease(obj, CONTROLLERS)


def _expiry(lease: dict[str, Any]) -> datetime:
    renewed = datetime.fromisoformat(lease["spec"]["renewTime"])
    return renewed + timedelta(seconds=lease["spec"]["leaseDurationSeconds"])


MODES = {"pipeline": throughput, "live": live}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    scenario = len(args) == 3 and args[0] == "incident" and args[2] in incidents.SCENARIOS
    if not scenario and (len(args) != 2 or args[0] not in MODES):
        usage = f"{'|'.join(MODES)} STREAM, or incident STREAM {'|'.join(incidents.SCENARIOS)}"
        sys.stderr.write(f"usage: python -m bench.envelope {usage}\n")
        return 2
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    result = incident(Path(args[1]), args[2]) if scenario else MODES[args[0]](Path(args[1]))
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
