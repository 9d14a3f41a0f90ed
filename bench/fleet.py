"""What the fleet's queries cost a real Prometheus holding a large fleet.

`python -m bench.fleet [--clusters 50] [--objects 2000] [--runs 7]` writes synthetic `stalewatch_*`
series of that many clusters (each with that many Kustomizations, HelmReleases and Terraforms)
as OpenMetrics, loads them into a TSDB with `promtool tsdb create-blocks-from openmetrics`, starts
the real Prometheus on it, and runs every query of watcher/fleet/queries.py at the data's last
instant: Prometheus' own evaluation time and the samples it touched (`stats=all`), the wall time
seen by the fleet's client, the series returned; then the whole fleet (every query at once, the
builder) and the page rendered. Medians of `--runs`. Writes bench/results/fleet.json and prints a
Markdown table for BENCHMARKS.md.

The fleet in the data: every cluster reports every 15 s for 70 minutes, except the last one,
which stopped 20 minutes before the end (unknown), and one before it whose stalewatch cannot
reach its API server (stale). Five clusters have tofu-controller down (a critical root, its
Terraforms' StatusStale symptoms); one object in ten runs an older revision in a fifth of the
clusters (a RevisionSkew root there, and skew in the matrix). Only the families the fleet reads
are loaded; Prometheus selects by metric name, so others would not be touched by these queries.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import aiohttp

from bench.kinds import CONTROLLERS
from tests.export.promstack import PROMETHEUS, free_port, process_running
from watcher.export.metrics import DOWN_REASONS
from watcher.fleet.page import render_fleet
from watcher.fleet.prom import Prometheus
from watcher.fleet.queries import Filters, matrix_query, queries
from watcher.fleet.server import FleetSource

RESULTS = Path(__file__).resolve().parent / "results" / "fleet.json"
KINDS = (("Kustomization", 0.5), ("HelmRelease", 0.3), ("Terraform", 0.2))
REV_OLD, REV_NEW = "main@sha1:" + "1" * 40, "main@sha1:" + "2" * 40
UP_SPAN, UP_EVERY = 70 * 60, 15
OBJECT_SPAN, OBJECT_EVERY = 5 * 60, 60
"""Object series carry the last 5 minutes only (what an instant query's lookback reads)."""


def objects(count: int) -> list[tuple[str, str, str]]:
    made = []
    for kind, share in KINDS:
        made += [(kind, f"team-{i % 40:02d}", f"{kind.lower()}-{i:05d}") for i in range(int(count * share))]
    return made


def write_openmetrics(out: TextIO, *, clusters: int, count: int, end: int) -> int:
    """The fleet's series up to `end` (Unix seconds); returns the number of samples."""
    names = [f"c{i:02d}" for i in range(clusters)]
    stopped, stale = names[-1], names[-2] if clusters > 2 else ""
    down = set(names[:5])
    behind = set(names[clusters - clusters // 5 : clusters]) if clusters > 1 else set()
    gitops = objects(count)
    samples = 0

    def series(family: str, labels: dict[str, str], value: float, times: Iterator[int]) -> None:
        nonlocal samples
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        for at in times:
            out.write(f"{family}{{{text}}} {value} {at}\n")
            samples += 1

    def last(cluster: str) -> int:
        return end - 20 * 60 if cluster == stopped else end

    def up_times(cluster: str) -> Iterator[int]:
        return iter(range(end - UP_SPAN, last(cluster) + 1, UP_EVERY))

    def object_times(cluster: str) -> Iterator[int]:
        return iter(range(last(cluster) - OBJECT_SPAN, last(cluster) + 1, OBJECT_EVERY))

    def scraped(cluster: str) -> dict[str, str]:
        return {"cluster": cluster, "instance": f"stalewatch.{cluster}:8080", "job": "stalewatch"}

    for family in ("stalewatch_up", "stalewatch_synced"):
        out.write(f"# TYPE {family} gauge\n")
        for c in names:
            series(family, scraped(c), 0.0 if family == "stalewatch_up" and c == stale else 1.0, up_times(c))
    out.write("# TYPE stalewatch_revision_info gauge\n")
    for c in names:
        for n, (kind, ns, name) in enumerate(gitops):
            applied = REV_OLD if c in behind and n % 10 == 0 else REV_NEW
            source = f"GitRepository/{ns}/repo" if kind != "HelmRelease" else f"HelmChart/{ns}/{name}"
            labels = {**scraped(c), "kind": kind, "namespace": ns, "name": name, "source": source}
            series(
                "stalewatch_revision_info",
                {**labels, "revision": REV_NEW, "applied_revision": applied},
                1.0,
                object_times(c),
            )
    out.write("# TYPE stalewatch_finding gauge\n")
    for c in names:
        tofu = {"kind": "Deployment", "namespace": "flux-system", "name": "tofu-controller"}
        tofu_root = {"root_type": "ControllerDown", **{f"root_{k}": v for k, v in tofu.items()}}
        if c in down:
            labels = {
                **scraped(c),
                "type": "ControllerDown",
                "severity": "critical",
                **tofu,
                "root": "true",
                **tofu_root,
            }
            series("stalewatch_finding", labels, 1.0, object_times(c))
            for kind, ns, name in gitops:
                if kind == "Terraform":
                    symptom = {
                        "type": "StatusStale",
                        "severity": "info",
                        "kind": kind,
                        "namespace": ns,
                        "name": name,
                    }
                    series(
                        "stalewatch_finding",
                        {**scraped(c), **symptom, "root": "false", **tofu_root},
                        1.0,
                        object_times(c),
                    )
        if c in behind:
            for n, (kind, ns, name) in enumerate(gitops):
                if n % 10 == 0:
                    where = {"kind": kind, "namespace": ns, "name": name}
                    own = {"root_type": "RevisionSkew", **{f"root_{k}": v for k, v in where.items()}}
                    labels = {
                        **scraped(c),
                        "type": "RevisionSkew",
                        "severity": "warning",
                        **where,
                        "root": "true",
                        **own,
                    }
                    series("stalewatch_finding", labels, 1.0, object_times(c))
    out.write("# TYPE stalewatch_controller_up gauge\n")
    for c in names:
        for name in CONTROLLERS:
            up = 0.0 if c in down and name == "tofu-controller" else 1.0
            labels = {**scraped(c), "namespace": "flux-system", "name": name, "kind": "Deployment"}
            series("stalewatch_controller_up", labels, up, object_times(c))
    out.write("# TYPE stalewatch_controller_down_reason gauge\n")
    for c in names:
        for name in CONTROLLERS:
            for reason in DOWN_REASONS:
                on = 1.0 if c in down and name == "tofu-controller" and reason == "ImagePullBackOff" else 0.0
                labels = {**scraped(c), "namespace": "flux-system", "name": name, "reason": reason}
                series("stalewatch_controller_down_reason", labels, on, object_times(c))
    out.write("# EOF\n")
    return samples


async def measure(url: str, *, at: datetime, runs: int) -> dict[str, Any]:
    """Every fleet query, then the whole fleet and its page, `runs` times each."""
    asked = queries(cluster_label="cluster", filters=Filters())
    per_query: dict[str, Any] = {}
    async with aiohttp.ClientSession() as session, Prometheus(url, timeout=60) as prometheus:

        async def cost(expr: str) -> dict[str, Any]:
            evals, walls, touched, returned = [], [], 0, 0
            for _ in range(runs):
                form = {"query": expr, "time": f"{at.timestamp():.3f}", "stats": "all"}
                async with session.post(f"{url}/api/v1/query", data=form) as response:
                    body = await response.json()
                assert body["status"] == "success", body
                stats = body["data"]["stats"]
                evals.append(stats["timings"]["evalTotalTime"])
                touched = stats["samples"]["totalQueryableSamples"]
                started = time.perf_counter()
                answer = await prometheus.query(expr, at=at)
                walls.append(time.perf_counter() - started)
                assert answer.error is None, answer.error
                returned = len(answer.result)
            return {
                "eval_ms": statistics.median(evals) * 1000,
                "wall_ms": statistics.median(walls) * 1000,
                "samples": touched,
                "series": returned,
            }

        for name, expr in asked.items():
            per_query[name] = await cost(expr)
        rows = (await prometheus.query(asked["matrix_rows"], at=at)).result
        per_query["matrix"] = await cost(matrix_query(rows, cluster_label="cluster", filters=Filters()))
        source = FleetSource(
            prometheus, "cluster", 120.0, {}, reuse=0.0, clock=lambda: at
        )  # every run asks the store
        walls, renders, page = [], [], b""
        for _ in range(runs):
            started = time.perf_counter()
            fleet = await source.fleet(Filters())
            walls.append(time.perf_counter() - started)
            started = time.perf_counter()
            page = render_fleet(fleet)
            renders.append(time.perf_counter() - started)
        document = fleet.to_dict()
    return {
        "queries": per_query,
        "fleet_ms": statistics.median(walls) * 1000,
        "render_ms": statistics.median(renders) * 1000,
        "page_bytes": len(page),
        "json_bytes": len(json.dumps(document)),
        "clusters": {
            state: sum(c["state"] == state for c in document["clusters"])
            for state in ("unknown", "stale", "critical", "warning", "healthy")
        },
        "root_lines": len(document["roots"]),
        "matrix_rows": len(document["rows"]),
        "matrix_bounded": document["matrix_bounded"],
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| query | series returned | samples touched | Prometheus eval | fleet client wall |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, q in result["queries"].items():
        lines.append(
            f"| `{name}` | {q['series']:,} | {q['samples']:,} | "
            f"{q['eval_ms']:.1f} ms | {q['wall_ms']:.1f} ms |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--objects", type=int, default=2000, help="GitOps objects per cluster")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--workdir", type=Path, help="kept afterwards (default: a temporary directory)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="stalewatch-fleet-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    end = int(time.time()) // 60 * 60 - 60
    data, tsdb = workdir / "fleet.om", workdir / "tsdb"
    shutil.rmtree(tsdb, ignore_errors=True)
    started = time.perf_counter()
    with data.open("w") as out:
        samples = write_openmetrics(out, clusters=args.clusters, count=args.objects, end=end)
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(data), str(tsdb)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    loaded = time.perf_counter() - started
    port = free_port()
    (workdir / "prometheus.yaml").write_text("global: {}\n")
    command = [
        PROMETHEUS,
        f"--config.file={workdir / 'prometheus.yaml'}",
        f"--storage.tsdb.path={tsdb}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=10y",
    ]
    with process_running(command, f"http://127.0.0.1:{port}/-/ready", workdir / "prometheus.log"):
        result = asyncio.run(
            measure(f"http://127.0.0.1:{port}", at=datetime.fromtimestamp(end, UTC), runs=args.runs)
        )
    result.update(
        clusters_in_data=args.clusters,
        objects_per_cluster=args.objects,
        samples=samples,
        load_seconds=loaded,
        runs=args.runs,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(
        f"whole fleet: {result['fleet_ms']:.0f} ms; page render {result['render_ms']:.0f} ms, "
        f"{result['page_bytes']:,} bytes"
    )
    print(json.dumps({k: v for k, v in result.items() if k != "queries"}))
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
