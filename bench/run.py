"""Runs the whole benchmark, one fresh API server + etcd per size, and writes bench/results/.

Per size: create the cluster; record a watch stream under churn; time a bare list and
stalewatch's initial sync (3 runs each, alternating); with stalewatch running measure RSS and
/metrics scrapes (with a /healthz poller for event-loop stalls); start kube-state-metrics next to
it (sync, RSS, scrape); with both running, their CPU over the same windows, idle and then under
churn, each scraped as a Prometheus would and asked nothing else (`bench/cpu.py`); with
kube-state-metrics stopped, stalewatch's detection latency under churn, its own window; finally
the pure pipeline on the recorded stream, pinned to one core, and the old code's pipeline beside
this code's on the same recording (bench/compare.py). After the sizes, the maximum-size cluster
(150,000 Pods, 50,000 GitOps objects) from a synthetic stream made with the largest size's
recording (bench/synthetic.py), measured in process (bench/envelope.py) and served to a real
`stalewatch run` (bench/served.py), healthy and then during each incident of bench/incidents.py.

Usage: python -m bench.run --sizes 1000,10000,50000 [--ksm PATH] [--out bench/results]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench import cpu, incidents, procs, synthetic
from bench.compare import OLD_REF
from bench.generate import Churn, client_for, populate
from bench.kinds import CONTROLLERS
from bench.pipeline import NO_TIMEOUT, record
from bench.workload import Cluster
from tests.controlplane.harness import ControlPlane, binaries_dir, free_port
from tests.kubeclient import Kube
from watcher.kube.client import get

CRDS = (procs.ROOT / "tests" / "crds", procs.ROOT / "bench" / "crds")
"""Flux's and tofu-controller's (the tests'), then the stacks' own Certificate (bench/stack.py)."""
RUNS = 3
PROBES = 30
CERTIFICATE_PROBES = 10
CHURN_RATE = 50.0
CPU_WINDOW = 60.0
"""Seconds of each CPU window: four scrapes at Prometheus' 15 s interval."""


def start_plane() -> ControlPlane:
    plane = ControlPlane(bin_dir=binaries_dir())
    plane.start()
    for crds in CRDS:
        plane.kubectl("apply", "--server-side", "-f", str(crds))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    plane.wait_listable(sorted(p.stem.split("-", 1)[1] for crds in CRDS for p in crds.glob("*.yaml")))
    return plane


def log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed_run(proc: procs.Proc) -> float:
    """Wall seconds from start to exit of a short-lived process (the bare list)."""
    proc.start()
    assert proc.proc is not None
    code = await asyncio.to_thread(proc.proc.wait)
    if code != 0:
        raise RuntimeError(f"{proc.argv} exited {code}; see {proc.log}")
    return time.monotonic() - proc.started


async def scrape(session: aiohttp.ClientSession, base: str, *, times: int = 5) -> dict[str, Any]:
    """/metrics render time and size, and the longest /healthz answer while each scrape ran."""
    durations, stalls, size = [], [], 0
    for _ in range(times):
        done = asyncio.Event()
        worst = 0.0

        async def poll(done: asyncio.Event) -> None:
            nonlocal worst
            while not done.is_set():
                _, _, seconds = await procs.fetch(session, f"{base}/healthz")
                worst = max(worst, seconds)
                await asyncio.sleep(0.005)

        poller = asyncio.create_task(poll(done))
        status, body, seconds = await procs.fetch(session, f"{base}/metrics")
        done.set()
        await poller
        if status != 200:
            raise RuntimeError(f"{base}/metrics answered {status}")
        durations.append(seconds)
        stalls.append(worst)
        size = len(body)
        await asyncio.sleep(0.5)
    return {
        "metrics_seconds_p50": statistics.median(durations),
        "metrics_seconds_max": max(durations),
        "metrics_bytes": size,
        "healthz_during_scrape_max_seconds": max(stalls),
    }


def has_finding(document: bytes, name: str, finding_type: str = "WorkloadUnhealthy") -> bool:
    """Whether a finding of `finding_type` names the object (a Pod's WorkloadUnhealthy, unless
    told). Parsed only once the name is in it: during the churn's incident the document holds
    thousands of findings, and parsing each poll's copy took CPU from the measured process."""
    if f'"{name}"'.encode() not in document:
        return False
    for finding in orjson.loads(document)["findings"]:
        subjects = [finding["subject"], *finding.get("affected", ())]
        if finding["type"] == finding_type and any(s["name"] == name for s in subjects):
            return True
    return False


async def watch_one_pod(churn: Churn, namespace: str, pod: str, opened: asyncio.Future[bool]) -> float:
    """When a plain client watching just this Pod sees it change: the API server's own share
    of the detection latency (PATCH accepted, committed, fanned out to watchers). `opened` is
    set to whether the Pod was ready when the watch began (its first line, ADDED)."""
    query = [("watch", "1"), ("fieldSelector", f"metadata.name={pod}")]
    response = await get(churn.kube.api, f"/api/v1/namespaces/{namespace}/pods", query, limits=NO_TIMEOUT)
    async with response:
        async for line in response.content:
            if opened.done() and b'"MODIFIED"' in line[:40]:
                return time.time()
            if not opened.done():
                conditions = orjson.loads(line)["object"].get("status", {}).get("conditions", [])
                opened.set_result(any(c["type"] == "Ready" and c["status"] == "True" for c in conditions))
    raise RuntimeError(f"watch on Pod {namespace}/{pod} ended early")


async def detection(session: aiohttp.ClientSession, base: str, churn: Churn) -> dict[str, Any]:
    """Break one healthy Pod at a time while churn runs; time until the finding is served.

    Times are from the moment the API server accepted the PATCH (its answer arrived), as the
    issue defines it; from the moment it was sent is reported too, and a plain watch on the Pod
    shows how much of it is the API server's own fan-out: per probe, the time from that watch
    seeing the change to the finding being served is what stalewatch adds (it can be negative:
    the two watches are separate streams of the same API server).
    """
    rng = random.Random(5)
    timings: dict[str, list[float]] = {
        "accept": [],
        "delivery": [],
        "api": [],
        "api_sent": [],
        "after_watch": [],
        "metrics": [],
    }
    probes = 0
    while probes < PROBES:
        namespace, pod = rng.choice([p for p in churn.pods if p not in churn.broken_pods])
        churn.probed.add((namespace, pod))
        opened: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        watcher = asyncio.create_task(watch_one_pod(churn, namespace, pod, opened))
        if not await asyncio.wait_for(opened, 30):
            # A churn write in flight when the Pod was picked broke it first: breaking it again
            # would change nothing (no watch event, nothing to time). Another Pod is probed.
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            churn.probed.discard((namespace, pod))
            continue
        probes += 1
        sent, accepted = await churn.set_pod(namespace, pod, broken=True)
        marker = f'name="{pod}"'.encode()
        while True:
            _, body, _ = await procs.fetch(session, f"{base}/api/v1/findings")
            if body and has_finding(body, pod):
                found = time.time()
                break
            if time.time() - sent > 30:
                raise TimeoutError(f"no finding for Pod {namespace}/{pod} after 30s")
            await asyncio.sleep(0.02)
        delivered = await asyncio.wait_for(watcher, 30)
        while True:
            _, body, _ = await procs.fetch(session, f"{base}/metrics")
            if marker in body and any(
                line.startswith(b"stalewatch_finding{") and marker in line for line in body.split(b"\n")
            ):
                timings["metrics"].append(time.time() - accepted)
                break
            await asyncio.sleep(0.05)
        timings["accept"].append(accepted - sent)
        timings["delivery"].append(delivered - sent)
        timings["api"].append(found - accepted)
        timings["api_sent"].append(found - sent)
        timings["after_watch"].append(found - delivered)
        await churn.set_pod(namespace, pod, broken=False)
        churn.probed.discard((namespace, pod))
        await asyncio.sleep(0.3)
    names = {
        "accept": "patch_answered",
        "delivery": "watch_delivery",
        "api": "findings_api",
        "api_sent": "findings_api_from_sent",
        "after_watch": "findings_api_after_watch",
        "metrics": "metrics",
    }
    out: dict[str, Any] = {"probes": PROBES}
    for key, name in names.items():
        out[f"{name}_p50_seconds"] = pct(timings[key], 0.5)
        out[f"{name}_p99_seconds"] = pct(timings[key], 0.99)
    return out


async def certificate_detection(session: aiohttp.ClientSession, base: str, churn: Churn) -> dict[str, Any]:
    """The extra kinds' probe: while churn runs, one listed Certificate at a time fails to issue
    (Ready=False DoesNotExist, Issuing=False Failed); timed from the PATCH accepted to
    /api/v1/findings serving an ObjectFailing finding on it (stalewatch runs with
    STALEWATCH_THRESHOLDS__OBJECT_FAILING=0s), then it is issued again."""
    rng = random.Random(6)
    times = []
    for _ in range(CERTIFICATE_PROBES):
        healthy = [c for c in churn.certificates if c not in churn.renewing and c not in churn.probed]
        namespace, name = rng.choice(healthy)
        churn.probed.add((namespace, name))
        sent, accepted = await churn.set_certificate(namespace, name, failing=True)
        while True:
            _, body, _ = await procs.fetch(session, f"{base}/api/v1/findings")
            if body and has_finding(body, name, "ObjectFailing"):
                times.append(time.time() - accepted)
                break
            if time.time() - sent > 30:
                raise TimeoutError(f"no ObjectFailing finding for Certificate {namespace}/{name} after 30s")
            await asyncio.sleep(0.02)
        await churn.set_certificate(namespace, name, failing=False)
        churn.probed.discard((namespace, name))
        await asyncio.sleep(0.3)
    return {
        "certificate_probes": CERTIFICATE_PROBES,
        "certificate_p50_seconds": pct(times, 0.5),
        "certificate_p99_seconds": pct(times, 0.99),
    }


async def under_churn(churn: Churn, proc: procs.Proc, seconds: float) -> dict[str, float]:
    """CPU cores the process used while the API server took churn at CHURN_RATE for `seconds`
    and the detection probes polled it (not comparable with kube-state-metrics: see bench/cpu.py)."""
    cpu = proc.cpu()
    writes = await churn.run(rate=CHURN_RATE, seconds=seconds)
    return {
        "churn_writes_per_s": writes / seconds,
        "cpu_cores_under_churn": (proc.cpu() - cpu) / seconds,
        "rss_bytes_under_churn": proc.rss(),
    }


async def start_stalewatch(
    session: aiohttp.ClientSession, plane: ControlPlane, workdir: Path
) -> tuple[procs.Proc, str, dict[str, Any]]:
    """Sync (RUNS times, alternating with the bare list), then RSS and scrapes of the last run,
    which is left running for the CPU windows and the detection probes."""
    out: dict[str, Any] = {"sync_seconds": [], "barelist_seconds": []}
    proc = None
    for run in range(RUNS):
        out["barelist_seconds"].append(
            await timed_run(procs.barelist(plane.kubeconfig, workdir / "barelist.log"))
        )
        port = free_port()
        proc = procs.stalewatch(plane.kubeconfig, port, workdir / f"stalewatch-{run}.log").start()
        base = f"http://127.0.0.1:{port}"
        try:
            out["sync_seconds"].append(await procs.wait_until_ok(session, f"{base}/readyz", proc, within=600))
        finally:
            if run < RUNS - 1:
                proc.stop()
    assert proc is not None
    try:
        await asyncio.sleep(3)
        _, body, _ = await procs.fetch(session, f"{base}/api/v1/findings")
        out["objects_held"] = orjson.loads(body)["summary"]["objects"]
        out["rss_bytes"] = proc.rss()
        out["scrape"] = await scrape(session, base)
    except BaseException:
        proc.stop()
        raise
    out["sync_seconds_median"] = statistics.median(out["sync_seconds"])
    out["barelist_seconds_median"] = statistics.median(out["barelist_seconds"])
    out["sync_overhead_ratio"] = out["sync_seconds_median"] / out["barelist_seconds_median"]
    return proc, base, out


async def probe_stalewatch(
    session: aiohttp.ClientSession, proc: procs.Proc, base: str, churn: Churn
) -> dict[str, Any]:
    """Detection latency under churn, in a window of its own (the probes poll hard): the Pods'
    probes, then the listed Certificates'."""
    load = asyncio.create_task(under_churn(churn, proc, 55))
    out: dict[str, Any] = {"detection": await detection(session, base, churn)}
    out["detection"].update(await certificate_detection(session, base, churn))
    out["detection"]["churn_still_running"] = not load.done()
    out.update(await load)
    out["cpu_seconds_total"] = proc.cpu()
    return out


async def start_ksm(
    session: aiohttp.ClientSession, binary: Path, plane: ControlPlane, workdir: Path, cluster: Cluster
) -> tuple[procs.Proc, str, dict[str, Any]]:
    """Started and synced (every Pod and a gotk series exported), then RSS and scrapes; left running."""
    port, telemetry = free_port(), free_port()
    proc = procs.ksm(binary, plane.kubeconfig, port, telemetry, workdir).start()
    base = f"http://127.0.0.1:{port}"
    pods = len(cluster.app_pods()) + len(CONTROLLERS)
    out: dict[str, Any] = {}
    try:
        while True:
            if not proc.alive():
                raise RuntimeError(f"kube-state-metrics exited; see {proc.log}")
            status, body, _ = await procs.fetch(session, f"{base}/metrics")
            if (
                status == 200
                and procs.count_series(body, b"kube_pod_info{") >= pods
                and procs.count_series(body, b"gotk_resource_info{")
            ):
                out["sync_seconds"] = time.monotonic() - proc.started
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(3)
        out["gotk_series"] = procs.count_series(body, b"gotk_resource_info{")
        out["rss_bytes"] = proc.rss()
        durations = []
        for _ in range(3):
            _, body, seconds = await procs.fetch(session, f"{base}/metrics")
            durations.append(seconds)
        out["scrape"] = {"metrics_seconds_p50": statistics.median(durations), "metrics_bytes": len(body)}
    except BaseException:
        proc.stop()
        raise
    return proc, base, out


async def measure_processes(
    plane: ControlPlane, churn: Churn, workdir: Path, cluster: Cluster, *, ksm: Path | None
) -> dict[str, Any]:
    """stalewatch, then kube-state-metrics next to it; both through the same CPU windows;
    then stalewatch alone through the detection probes."""
    result: dict[str, Any] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        sw, sw_base, result["stalewatch"] = await start_stalewatch(session, plane, workdir)
        try:
            targets = [cpu.Target("stalewatch", sw, f"{sw_base}/metrics")]
            kp = None
            if ksm is not None:
                log(f"{cluster.size}: kube-state-metrics next to stalewatch (sync, memory, scrape)")
                kp, ksm_base, result["ksm"] = await start_ksm(session, ksm, plane, workdir, cluster)
                targets.append(cpu.Target("ksm", kp, f"{ksm_base}/metrics"))
            try:
                log(f"{cluster.size}: CPU side by side, idle then under churn ({CPU_WINDOW:.0f} s each)")
                await asyncio.sleep(cpu.SETTLE_SECONDS)
                result["cpu"] = await cpu.windows(
                    session, targets, churn=churn, rate=CHURN_RATE, seconds=CPU_WINDOW
                )
            finally:
                if kp is not None:
                    kp.stop()
            log(f"{cluster.size}: stalewatch detection probes under churn")
            result["stalewatch"].update(await probe_stalewatch(session, sw, sw_base, churn))
        finally:
            sw.stop()
    return result


async def python(*args: str) -> dict[str, Any]:
    """`python -m ARGS` in a process of its own; its one line of JSON."""
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", *args], cwd=procs.ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"python -m {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}")
    result: dict[str, Any] = orjson.loads(done.stdout)
    return result


async def run_pipeline(stream: Path) -> dict[str, Any]:
    """The pure pipeline on a recorded stream, in its own process pinned to one core."""
    log(f"pipeline on {stream} (one core)")
    return await python("bench.pipeline", str(stream))


async def run_compare(stream: Path, *, old: str) -> dict[str, Any]:
    """The old and the new code on the same recording, alternating (bench/compare.py)."""
    log(f"old ({old}) and new code side by side on {stream}")
    return await python("bench.compare", str(stream), "--old", old)


async def run_envelope(workdir: Path, served_from: Path, *, pods: int, gitops: int) -> dict[str, Any]:
    """The maximum-size cluster from a synthetic stream (bench/synthetic.py, bench/envelope.py),
    its API-server additions taken from `served_from`, a real recording of this run."""
    stream = workdir / "stream.jsonl"
    log(f"envelope: writing a synthetic stream of {pods:,} Pods and {gitops:,} GitOps objects")
    made = ["--pods", str(pods), "--gitops", str(gitops), "--served-from", str(served_from)]
    result: dict[str, Any] = {"stream": await python("bench.synthetic", str(stream), *made)}
    result["calibration"] = {"real": synthetic.sizes(served_from), "synthetic": synthetic.sizes(stream)}
    log("envelope: the pipeline on it (one core)")
    result["pipeline"] = await python("bench.envelope", "pipeline", str(stream))
    log("envelope: held by the watcher's reflectors and live model, then its churn played in real time")
    result["live"] = await python("bench.envelope", "live", str(stream))
    log("envelope: served to a real stalewatch run, then its churn")
    result["served"] = await python("bench.served", str(stream), "--workdir", str(workdir))
    result["incidents"] = await run_incidents(workdir, stream)
    result["load_average"] = os.getloadavg()
    return result


async def run_incidents(workdir: Path, stream: Path) -> dict[str, Any]:
    """Each incident of bench/incidents.py on the synthetic stream, in process and served."""
    out: dict[str, Any] = {}
    for scenario, title in incidents.TITLES.items():
        log(f"envelope, {title}: in process (one core)")
        measured = {"pipeline": await python("bench.envelope", "incident", str(stream), scenario)}
        log(f"envelope, {title}: served to a real stalewatch run, then its churn")
        made = ["--workdir", str(workdir), "--down", scenario]
        measured["served"] = await python("bench.served", str(stream), *made)
        out[scenario] = measured
    return out


async def bench_size(size: int, *, ksm: Path | None, workdir: Path, old: str | None) -> dict[str, Any]:
    plane = await asyncio.to_thread(start_plane)
    result: dict[str, Any] = {"size": size}
    try:
        async with await client_for(plane.kubeconfig) as api:
            kube = Kube(api)
            cluster = Cluster(size, datetime.now(UTC))
            log(f"{size}: creating the cluster")
            started = time.monotonic()
            created = await populate(kube, cluster)
            result["created"] = created
            result["objects"] = sum(created.values())
            result["create_seconds"] = time.monotonic() - started
            churn = Churn(kube, cluster)
            await churn.renew_leases()  # creation took a while: the recording starts with live leaders
            leases = asyncio.create_task(churn.keep_leases())
            try:
                log(f"{size}: recording the watch stream under churn")
                stream, stop = workdir / "stream.jsonl", asyncio.Event()
                recorder = asyncio.create_task(record(api, stream, stop=stop))
                await asyncio.sleep(5 + size / 5000)
                result["stream_churn_writes"] = await churn.run(rate=CHURN_RATE, seconds=15)
                await asyncio.sleep(2)
                stop.set()
                result["stream_events"] = await recorder
                log(f"{size}: stalewatch (sync x{RUNS}, memory, scrape)")
                result.update(await measure_processes(plane, churn, workdir, cluster, ksm=ksm))
            finally:
                result["churn_failures"] = churn.failures
                leases.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await leases
    finally:
        await asyncio.to_thread(plane.stop)
    # after the API server and etcd are gone: nothing else may run on the pipeline's core
    result["pipeline"] = await run_pipeline(stream)
    if old is not None:
        result["compare"] = await run_compare(stream, old=old)
    result["load_average"] = os.getloadavg()
    return result


async def baseline(workdir: Path) -> int:
    """stalewatch's RSS once synced against an API server with only the CRDs: the empty baseline."""
    plane = await asyncio.to_thread(start_plane)
    try:
        port = free_port()
        proc = procs.stalewatch(plane.kubeconfig, port, workdir / "stalewatch.log").start()
        try:
            async with aiohttp.ClientSession() as session:
                await procs.wait_until_ok(session, f"http://127.0.0.1:{port}/readyz", proc, within=120)
            await asyncio.sleep(3)
            return proc.rss()
        finally:
            proc.stop()
    finally:
        await asyncio.to_thread(plane.stop)


def machine(ksm: Path | None) -> dict[str, Any]:
    import kubernetes_asyncio

    bins = binaries_dir()
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": procs.commit(),
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        ),
        "memory_gib": round(int(Path("/proc/meminfo").read_text().split()[1]) / 1024**2, 1),
        "python": platform.python_version(),
        "kubernetes_asyncio": kubernetes_asyncio.__version__,
        "controlplane": bins.name,
        "kube_state_metrics": ksm.parent.name if ksm else None,
        "kernel": platform.release(),
        "load_average_start": os.getloadavg(),
    }


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="stalewatch benchmarks, side by side with kube-state-metrics."
    )
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--ksm", type=Path, help="kube-state-metrics binary (bench/build_ksm.sh builds it)")
    parser.add_argument("--out", type=Path, default=procs.ROOT / "bench" / "results")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/stalewatch-bench"))
    parser.add_argument(
        "--pipeline-only",
        action="store_true",
        help="re-measure only the pipeline (and the old code beside it) on the streams a previous run "
        "recorded in --workdir, and the envelope",
    )
    parser.add_argument("--old", default=OLD_REF, help="the old code to measure beside this one")
    parser.add_argument("--no-compare", action="store_true", help="measure only this code's pipeline")
    parser.add_argument("--envelope-pods", type=int, default=synthetic.PODS)
    parser.add_argument("--envelope-gitops", type=int, default=synthetic.GITOPS)
    parser.add_argument("--no-envelope", action="store_true", help="skip the synthetic maximum-size cluster")
    parser.add_argument(
        "--incidents-only",
        action="store_true",
        help="re-measure only the incidents on the synthetic stream a previous run wrote in --workdir",
    )
    args = parser.parse_args(argv)
    old = None if args.no_compare else args.old
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    lock = (args.workdir / ".lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.stderr.write(
            f"another benchmark is running in {args.workdir}: two would corrupt each other's recordings\n"
        )
        return 1
    if args.incidents_only:
        path = args.out / "envelope.json"
        result = orjson.loads(path.read_bytes()) if path.exists() else {}
        stream = args.workdir / "envelope" / "stream.jsonl"
        result["incidents"] = await run_incidents(stream.parent, stream)
        path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        return 0
    if args.pipeline_only:
        for size in sizes:
            path = args.out / f"size-{size}.json"
            result = orjson.loads(path.read_bytes())
            stream = args.workdir / str(size) / "stream.jsonl"
            result["pipeline"] = await run_pipeline(stream)
            if old is not None:
                result["compare"] = await run_compare(stream, old=old)
            path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        await envelope(args, sizes)
        return 0
    (args.workdir / "baseline").mkdir(parents=True, exist_ok=True)
    log("baseline: stalewatch on an API server with only the CRDs")
    info = machine(args.ksm)
    info["baseline_rss_bytes"] = await baseline(args.workdir / "baseline")
    (args.out / "machine.json").write_bytes(orjson.dumps(info, option=orjson.OPT_INDENT_2))
    for size in sizes:
        (args.workdir / str(size)).mkdir(parents=True, exist_ok=True)
        result = await bench_size(size, ksm=args.ksm, workdir=args.workdir / str(size), old=old)
        path = args.out / f"size-{size}.json"
        path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        log(f"{size}: wrote {path}")
    await envelope(args, sizes)
    return 0


async def envelope(args: argparse.Namespace, sizes: list[int]) -> None:
    """The synthetic maximum-size cluster, from the largest size's recording."""
    if args.no_envelope or not sizes:
        return
    served_from = args.workdir / str(max(sizes)) / "stream.jsonl"
    (args.workdir / "envelope").mkdir(parents=True, exist_ok=True)
    result = await run_envelope(
        args.workdir / "envelope", served_from, pods=args.envelope_pods, gitops=args.envelope_gitops
    )
    path = args.out / "envelope.json"
    path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    log(f"envelope: wrote {path}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
