"""What heartbeats cost: 5 controllers' own /metrics, 10k objects each, read every 30 s.

Issue 43's scenario, in process, on one thread:

* **The model** holds the Flux objects those counters belong to: bench/workload.py's Cluster with
  only its flux-system controllers (Deployment, Pod, leader Lease each: all up) and GitOps kinds,
  about PER_CONTROLLER objects per controller: source-controller's HelmCharts (one per
  HelmRelease) and its few sources, kustomize-controller's Kustomizations, helm-controller's
  HelmReleases, tofu-controller's Terraforms, and notification-controller's Receivers (built here:
  the Cluster has none). Objects are projected (`project`) and upserted as a snapshot is.
* **The expositions** are a real recording scaled (tests/lab/recordings/metrics/recovered/): its
  lines around the per-object family as recorded, and per object the recorded block of one
  object (`gotk_reconcile_duration_seconds` buckets, sum and count: 13 lines) with the object's
  kind, name and namespace in it, so bytes per object are a real controller's. tofu- and
  notification-controller, which the lab does not run, use kustomize-controller's recording with
  its controller renamed. The count moves when the object reconciles; the reconcile totals move
  with them.
* **Rounds** every READ_EVERY: an object reconciles at a round when its spec.interval says so
  (interval / 30 s rounds apart, each object at its own phase), so about 30 s / interval of the
  objects move per read, as with real intervals. The first read (a baseline: every series is new)
  and a read after a restart (process_start_time_seconds changed: every series moved) are
  measured too.

Per read: bytes, CPU of `parse_controller_metrics`, CPU of `HealthModel.heartbeat`; per round,
CPU of `HealthModel.evaluate` after the round's five reads, against the same evaluation of a model
that reads no heartbeats (the same objects, the same moments); and bytes the heartbeats add
(tracemalloc, after a collection). CPU is process time, median over the rounds/repetitions,
because other processes share the machine. `--http` also times one round of kube/heartbeats.py's
HeartbeatReader against 5 loopback servers in a child process (so their CPU is not counted).

Usage: python -m bench.heartbeats [--per-controller 10000] [--rounds 8] [--repeat 5] [--http]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.kinds import CONTROLLERS, FLUX_NS, Obj, sha
from bench.synthetic import objects, uid_of
from bench.workload import Cluster
from watcher.model.engine import HealthModel
from watcher.model.ingest.controller_metrics import OBJECT_COUNT, parse_controller_metrics
from watcher.model.ingest.objects import parse_duration
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig

RECORDINGS = Path(__file__).parents[1] / "tests" / "lab" / "recordings" / "metrics" / "recovered"
READ_EVERY = timedelta(seconds=30)
"""heartbeat_interval's default."""
PER_CONTROLLER = 10_000
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
RECORDED = {
    "source-controller": ("source-controller", ""),
    "kustomize-controller": ("kustomize-controller", ""),
    "helm-controller": ("helm-controller", ""),
    "tofu-controller": ("kustomize-controller", "terraform"),
    "notification-controller": ("kustomize-controller", "receiver"),
}
"""Controller -> (the recording its exposition scales, the controller-runtime name it is renamed to)."""
_BLOCK = re.compile(r'kind="[^"]*",name="[^"]*",namespace="[^"]*"')
_TOTAL = re.compile(r'^(controller_runtime_reconcile_total\{controller="[^"]*",result="success"\}) .*$', re.M)
_START = re.compile(r"^process_start_time_seconds .*$", re.M)
Ref = tuple[str, str, str]


# -- The cluster -----------------------------------------------------------------------------------


def flux_objects(per: int) -> list[Obj]:
    """The controllers (up) and about `per` GitOps objects for each, projected as a snapshot is."""
    sources = {"GitRepository": max(1, per // 200), "OCIRepository": max(1, per // 1000)}
    sources |= {"HelmRepository": max(1, per // 500), "Bucket": max(1, per // 2000)}
    releases = max(1, per - sum(sources.values()))  # each with its HelmChart: source-controller's
    mix = {
        "Pod": len(CONTROLLERS) + 1,
        "Deployment": 1,
        "ReplicaSet": 1,
        "Event": 1,
        "Lease": len(CONTROLLERS),
    }
    mix |= sources | {"HelmChart": releases, "HelmRelease": releases, "Kustomization": per, "Terraform": per}
    mix |= {"Certificate": 1, "Job": 1}
    built = Cluster(5 * per, NOW, mix=mix)
    out = []
    for key, obj in objects(built):
        if obj["kind"] == "Namespace":
            continue
        meta = obj["metadata"]
        meta.setdefault("uid", uid_of(key))
        meta.setdefault("creationTimestamp", built.ago(days=3))
        out.append(project(obj))
    out.extend(project(receiver(built, i)) for i in range(per))
    return out


def receiver(built: Cluster, index: int) -> Obj:
    """A notification-controller Receiver as it serves one ready (v1: reconciled on spec.interval)."""
    name, namespace = f"hook-{index:05d}", built.ns(index)
    path = f"/hook/{sha(namespace, name)}"
    return {
        "apiVersion": "notification.toolkit.fluxcd.io/v1",
        "kind": "Receiver",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generation": 1,
            "uid": uid_of(("Receiver", namespace, name)),
            "creationTimestamp": built.ago(days=3),
            "finalizers": ["finalizers.fluxcd.io"],
        },
        "spec": {
            "type": "github",
            "interval": "10m",
            "events": ["push"],
            "secretRef": {"name": "webhook-token"},
            "resources": [{"kind": "GitRepository", "name": built.repo(index)[1]}],
        },
        "status": {
            "observedGeneration": 1,
            "webhookPath": path,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": f"Receiver initialized for path: {path}",
                    "lastTransitionTime": built.ago(hours=2),
                    "observedGeneration": 1,
                }
            ],
        },
    }


def controller_of(obj: Obj) -> str | None:
    group = obj["apiVersion"].split("/")[0]
    return {
        "source.toolkit.fluxcd.io": "source-controller",
        "kustomize.toolkit.fluxcd.io": "kustomize-controller",
        "helm.toolkit.fluxcd.io": "helm-controller",
        "infra.contrib.fluxcd.io": "tofu-controller",
        "notification.toolkit.fluxcd.io": "notification-controller",
    }.get(group)


def loaded(objs: list[Obj]) -> HealthModel:
    model = HealthModel(ModelConfig())
    for obj in objs:
        model.upsert(obj, now=NOW)
    model.evaluate(NOW)
    return model


# -- The expositions -------------------------------------------------------------------------------


@dataclass
class Exposition:
    """One controller's /metrics: the recording's lines around the per-object family, and per
    object the recorded block of one object with this object's labels and count."""

    controller: str
    head: str
    tail: str
    prefixes: list[str]
    """Per object: its block up to the count's value."""
    periods: list[int]
    """Per object: rounds between two reconciles (spec.interval / READ_EVERY)."""
    phases: list[int]
    counts: list[int] = field(default_factory=list)
    started: float = 1.79662812626e09

    def render(self) -> bytes:
        total = sum(self.counts)
        head = _TOTAL.sub(lambda m: f"{m.group(1)} {total}", self.head, count=1)
        head = _START.sub(f"process_start_time_seconds {self.started:.11e}", head)
        body = "".join(f"{prefix}{count}\n" for prefix, count in zip(self.prefixes, self.counts, strict=True))
        return (head + body + self.tail).encode()

    def reconcile(self, round_number: int) -> int:
        """The objects due at this round reconcile (their count moves); how many."""
        moved = 0
        for i, (period, phase) in enumerate(zip(self.periods, self.phases, strict=True)):
            if (round_number - phase) % period == 0:
                self.counts[i] += 1
                moved += 1
        return moved

    def restart(self) -> None:
        """A new process: a new start time, and every series it has counted once."""
        self.started += 3600.0
        self.counts = [1] * len(self.counts)


def exposition(controller: str, objs: list[Obj]) -> Exposition:
    recording, rename = RECORDED[controller]
    lines = (RECORDINGS / f"{recording}.txt").read_text().splitlines(keepends=True)
    family = [i for i, line in enumerate(lines) if line.startswith("gotk_reconcile_duration_seconds_")]
    first, last = family[0], family[-1]
    count_at = next(i for i in family if lines[i].startswith(OBJECT_COUNT))
    block = "".join(lines[first:count_at]) + lines[count_at].rsplit(" ", 1)[0] + " "
    head, tail = "".join(lines[:first]), "".join(lines[last + 1 :])
    if rename:
        head, tail = (part.replace('"kustomization"', f'"{rename}"') for part in (head, tail))
    prefixes, periods, phases = [], [], []
    for obj in objs:
        meta = obj["metadata"]
        labels = f'kind="{obj["kind"]}",name="{meta["name"]}",namespace="{meta["namespace"]}"'
        prefixes.append(_BLOCK.sub(labels, block))
        interval = parse_duration(obj["spec"].get("interval")) or timedelta(minutes=10)
        period = max(1, round(interval / READ_EVERY))
        periods.append(period)
        phases.append(int(sha(obj["kind"], meta["namespace"], meta["name"])[:8], 16) % period)
    return Exposition(controller, head, tail, prefixes, periods, phases, counts=[5] * len(objs))


def expositions(objs: list[Obj]) -> list[Exposition]:
    by_controller: dict[str, list[Obj]] = {name: [] for name in RECORDED}
    for obj in objs:
        name = controller_of(obj)
        if name is not None:
            by_controller[name].append(obj)
    return [exposition(name, of) for name, of in by_controller.items()]


# -- Measuring -------------------------------------------------------------------------------------


@dataclass
class Round:
    """One round's costs: per controller (bytes, parse CPU, heartbeat CPU), then the evaluation."""

    reads: list[tuple[int, float, float]]
    evaluate: float
    bare: float
    moved: int


def cpu(work: Callable[[], Any]) -> tuple[Any, float]:
    started = time.process_time()
    out = work()
    return out, time.process_time() - started


def renew(model: HealthModel, leases: list[Obj], *, at: datetime) -> None:
    """The leaders renew their Leases (as they do every few seconds; not measured)."""
    renewed = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for lease in leases:
        model.upsert({**lease, "spec": {**lease["spec"], "renewTime": renewed}}, now=at)


def one_round(model: HealthModel, bare: HealthModel, exps: list[Exposition], *, at: datetime) -> Round:
    """Every controller read once (rendered, parsed, handed to the model), then both models evaluated."""
    reads = []
    for exp in exps:
        body = exp.render()
        read, parse = cpu(lambda body=body: parse_controller_metrics(body))
        _, beat = cpu(lambda exp=exp, read=read: model.heartbeat(exp.controller, at=at, read=read))
        reads.append((len(body), parse, beat))
        del body, read
    _, evaluate = cpu(lambda: model.evaluate(at))
    _, bare_evaluate = cpu(lambda: bare.evaluate(at))
    return Round(reads, evaluate, bare_evaluate, 0)


def repetition(objs: list[Obj], *, rounds: int) -> dict[str, list[Round]]:
    """A fresh model: the first read, `rounds` steady rounds, a restart of every controller, and
    one steady round after it (the moment after a restart: what moves is what is due again)."""
    model, bare = loaded(objs), loaded(objs)
    exps = expositions(objs)
    out: dict[str, list[Round]] = {"first": [], "steady": [], "restart": []}
    leases = [obj for obj in objs if obj["kind"] == "Lease" and obj["metadata"]["namespace"] == FLUX_NS]
    at = NOW
    gc.collect()
    gc.freeze()  # as the watcher does after its sync (SyncCollections): the loaded objects are not scanned
    for number in range(rounds + 2):
        at += READ_EVERY
        moved = 0
        if number == rounds + 1:
            for exp in exps:
                exp.restart()
            moved = sum(len(exp.counts) for exp in exps)
        elif number:
            moved = sum(exp.reconcile(number) for exp in exps)
        renew(model, leases, at=at)
        renew(bare, leases, at=at)
        measured = one_round(model, bare, exps, at=at)
        measured.moved = moved
        kind = "first" if number == 0 else "restart" if number == rounds + 1 else "steady"
        out[kind].append(measured)
        findings = model.evaluate(at).findings
        if findings:
            first = findings[0]
            raise AssertionError(
                f"{len(findings)} findings in a healthy cluster: {first.type} {first.message[:300]}"
            )
    gc.unfreeze()
    return out


def footprint(objs: list[Obj], *, rounds: int, heartbeats: bool, traced: bool) -> int:
    """Bytes a loaded model holds after the first read and `rounds` steady rounds (Leases renewed,
    evaluated each round), with its heartbeats read or not: tracemalloc's count after a
    collection (`traced`), else the RSS it added (`rss_in_child`: in a fresh process)."""
    exps = expositions(objs) if heartbeats else []
    leases = [obj for obj in objs if obj["kind"] == "Lease" and obj["metadata"]["namespace"] == FLUX_NS]
    gc.collect()
    if traced:
        tracemalloc.start()
    before = rss()
    model = loaded(objs)
    at = NOW
    for number in range(rounds + 1):
        at += READ_EVERY
        renew(model, leases, at=at)
        for exp in exps:
            if number:
                exp.reconcile(number)
            model.heartbeat(exp.controller, at=at, read=parse_controller_metrics(exp.render()))
        model.evaluate(at)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] if traced else rss() - before
    tracemalloc.stop()
    del model
    return held


def rss_in_child(*, per: int, rounds: int, heartbeats: bool) -> int:
    """`footprint`'s RSS in a fresh process: in this one, memory freed by earlier runs is reused."""
    args = [
        "--per-controller",
        str(per),
        "--rounds",
        str(rounds),
        "--rss",
        "heartbeats" if heartbeats else "bare",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "bench.heartbeats", *args], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- The reader's I/O ------------------------------------------------------------------------------

_SERVER = """
import asyncio, sys
from aiohttp import web

async def main(paths):
    runners = []
    for path in paths:
        body = open(path, "rb").read()
        app = web.Application()
        app.router.add_get("/metrics", lambda _, body=body: web.Response(body=body))
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
    print(" ".join(str(r.addresses[0][1]) for r in runners), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main(sys.argv[1:]))
"""
"""5 /metrics servers in a child process (their CPU is not this process'), until stdin closes."""


def reader_rounds(exps: list[Exposition], *, repeat: int) -> list[float]:
    """CPU of this process for one HeartbeatReader round (fetch over loopback + parse), `repeat` times."""
    from watcher.kube.heartbeats import HeartbeatReader
    from watcher.model.rules.metrics_targets import MetricsTarget
    from watcher.telemetry import Telemetry

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for exp in exps:
            path = Path(tmp) / f"{exp.controller}.txt"
            path.write_bytes(exp.render())
            paths.append(str(path))
        child = subprocess.Popen(
            [sys.executable, "-c", _SERVER, *paths], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None
            ports = [int(p) for p in child.stdout.readline().split()]
            targets = [
                MetricsTarget(
                    exp.controller,
                    f"Deployment/{FLUX_NS}/{exp.controller}",
                    port,
                    "bench",
                    ((f"{exp.controller}-0", "127.0.0.1"),),
                    None,
                    "",
                )
                for exp, port in zip(exps, ports, strict=True)
            ]
            return asyncio.run(
                _read_rounds(targets, repeat=repeat, reader=HeartbeatReader, telemetry=Telemetry)
            )
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=10)


async def _read_rounds(targets: list[Any], *, repeat: int, reader: Any, telemetry: Any) -> list[float]:
    delivered: list[Any] = []
    out = []
    async with reader(
        lambda: targets, lambda c, r, at=None: delivered.append(r), telemetry(), interval=30.0, timeout=30.0
    ) as read:
        for _ in range(repeat):
            delivered.clear()
            started = time.process_time()
            await read.read_all()
            out.append(time.process_time() - started)
            failed = [r.reason for r in delivered if not hasattr(r, "objects")]
            if failed or len(delivered) != len(targets):
                raise AssertionError(f"the reader delivered {len(delivered)} reads, failed: {failed}")
    return out


# -- The report ------------------------------------------------------------------------------------


def measure(*, per: int, rounds: int, repeat: int, http: bool) -> dict[str, Any]:
    """Every figure of the report: medians over `repeat` fresh models (`rounds` steady rounds each)."""
    load = [os.getloadavg()]
    objs = flux_objects(per)
    runs = [repetition(objs, rounds=rounds) for _ in range(repeat)]
    out: dict[str, Any] = {"per_controller": {}, "objects": sum(1 for o in objs if controller_of(o))}
    for exp in expositions(objs):
        out["per_controller"][exp.controller] = len(exp.prefixes)
    for kind in ("first", "steady", "restart"):
        measured = [r for run in runs for r in run[kind]]
        reads = [read for r in measured for read in r.reads]
        out[kind] = {
            "rounds": len(measured),
            "moved": statistics.median(r.moved for r in measured),
            "bytes": statistics.median(b for b, _, _ in reads),
            "parse": statistics.median(p for _, p, _ in reads),
            "heartbeat": statistics.median(h for _, _, h in reads),
            "round_reads": statistics.median(sum(p + h for _, p, h in r.reads) for r in measured),
            "evaluate": statistics.median(r.evaluate for r in measured),
            "bare": statistics.median(r.bare for r in measured),
            "round": statistics.median(
                sum(p + h for _, p, h in r.reads) + r.evaluate - r.bare for r in measured
            ),
        }
    tracked = out["objects"]
    bare, read = (footprint(objs, rounds=rounds, heartbeats=h, traced=True) for h in (False, True))
    out["traced"] = {"bare": bare / tracked, "added": (read - bare) / tracked}
    bare, read = (rss_in_child(per=per, rounds=rounds, heartbeats=h) for h in (False, True))
    out["rss"] = {"bare": bare / tracked, "added": (read - bare) / tracked}
    if http:
        out["reader"] = statistics.median(reader_rounds(expositions(objs), repeat=max(5, repeat)))
    load.append(os.getloadavg())
    out["load"] = load
    return out


def report(result: dict[str, Any]) -> list[str]:
    per_round = READ_EVERY.total_seconds()
    lines = [
        f"{result['objects']:,} objects: "
        + ", ".join(f"{c} {n:,}" for c, n in result["per_controller"].items()),
        "load average (1, 5, 15 min) before and after: "
        + " -> ".join(", ".join(f"{v:.2f}" for v in load) for load in result["load"]),
        "",
        "| read | objects moved (all 5) | bytes per read | parse per read | heartbeat per read "
        "| evaluate after the round | without heartbeats | round, all 5 | share of a core per 30 s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, name in (("first", "first read"), ("steady", "steady state"), ("restart", "after a restart")):
        r = result[kind]
        lines.append(
            f"| {name} ({r['rounds']} rounds) | {r['moved']:,.0f} | {r['bytes'] / 2**20:.1f} MiB "
            f"| {r['parse'] * 1e3:.0f} ms | {r['heartbeat'] * 1e3:.1f} ms | {r['evaluate'] * 1e3:.0f} ms "
            f"| {r['bare'] * 1e3:.1f} ms | {r['round'] * 1e3:.0f} ms | {r['round'] / per_round:.1%} |"
        )
    traced, held = result["traced"], result["rss"]
    lines += [
        "",
        f"bytes per tracked object: the model without heartbeats {traced['bare']:,.0f} B (tracemalloc), "
        f"{held['bare']:,.0f} B (RSS); added by the heartbeats {traced['added']:,.0f} B (tracemalloc), "
        f"{held['added']:,.0f} B (RSS)",
    ]
    if "reader" in result:
        lines.append(
            f"HeartbeatReader, one round of 5 over loopback (fetch + parse, this process' CPU): "
            f"{result['reader'] * 1e3:.0f} ms, {result['reader'] / per_round:.1%} of a core"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-controller", type=int, default=PER_CONTROLLER)
    parser.add_argument("--rounds", type=int, default=8, help="steady rounds per repetition")
    parser.add_argument("--repeat", type=int, default=5, help="fresh models (first read, restart: one each)")
    parser.add_argument("--http", action="store_true", help="also time the reader over loopback")
    parser.add_argument("--rss", choices=("bare", "heartbeats"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss:  # rss_in_child's child: one footprint, printed
        objs = flux_objects(args.per_controller)
        print(footprint(objs, rounds=args.rounds, heartbeats=args.rss == "heartbeats", traced=False))
        return 0
    result = measure(per=args.per_controller, rounds=args.rounds, repeat=args.repeat, http=args.http)
    print("\n".join(report(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
