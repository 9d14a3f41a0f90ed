"""The processes under test, measured from outside: start time, RSS, CPU, HTTP timings.

stalewatch and kube-state-metrics are each started as a user would start them, against
the same API server, and measured the same way (/proc for memory and CPU, HTTP for the rest),
so neither gets an advantage from being observed differently.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.kinds import API_VERSIONS

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    """A started process with its log file; stop() terminates only this process."""

    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0

    def start(self) -> Proc:
        out = self.log.open("ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **self.env}, cwd=ROOT
        )
        out.close()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss(self) -> int:
        """Resident set size in bytes (VmRSS)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {self.pid}")

    def cpu(self) -> float:
        """User + system CPU seconds used so far."""
        return sum(self.cpu_times())

    def cpu_times(self) -> tuple[float, float]:
        """(user, system) CPU seconds used so far: utime and stime of /proc/<pid>/stat."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / TICKS, int(fields[12]) / TICKS

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def commit() -> str:
    """The commit measured, with `+dirty` when the tree differs from it."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True
    )
    return head + ("+dirty" if dirty.stdout.strip() else "")


async def fetch(session: aiohttp.ClientSession, url: str) -> tuple[int, bytes, float]:
    """(status, body, seconds) of one GET; connection errors count as status 0."""
    started = time.perf_counter()
    try:
        async with session.get(url) as response:
            body = await response.read()
            return response.status, body, time.perf_counter() - started
    except (TimeoutError, aiohttp.ClientError, ConnectionError):
        return 0, b"", time.perf_counter() - started


async def wait_until_ok(session: aiohttp.ClientSession, url: str, proc: Proc, *, within: float) -> float:
    """Seconds from the process start until `url` answers 200 (polled every 20 ms)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.argv[0]} exited early; see {proc.log}")
        status, _, _ = await fetch(session, url)
        if status == 200:
            return time.monotonic() - proc.started
        await asyncio.sleep(0.02)
    raise TimeoutError(f"{url} not OK after {within:.0f}s; see {proc.log}")


def stalewatch(kubeconfig: Path, port: int, log: Path) -> Proc:
    """`stalewatch run` as documented; WorkloadUnhealthy and ObjectFailing at 0s so a broken Pod
    or a Certificate that fails to issue is a finding at once (detection latency measures the
    pipeline, not the threshold)."""
    argv = [sys.executable, "-m", "watcher", "run", "--kubeconfig", str(kubeconfig)]
    argv += ["--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
    thresholds = {
        "STALEWATCH_THRESHOLDS__WORKLOAD_UNHEALTHY": "0s",
        "STALEWATCH_THRESHOLDS__OBJECT_FAILING": "0s",
    }
    return Proc(argv, log, env=thresholds)


def barelist(kubeconfig: Path, log: Path) -> Proc:
    return Proc([sys.executable, "-m", "bench.barelist", "--kubeconfig", str(kubeconfig)], log)


# -- kube-state-metrics ----------------------------------------------------------------------

KSM_RESOURCES = "pods,deployments,statefulsets,daemonsets,replicasets,leases"
"""The built-in kinds stalewatch watches that kube-state-metrics can export (it has no Events)."""

_REVISION_PATHS: dict[str, list[str]] = {
    "Kustomization": ["status", "lastAppliedRevision"],
    "HelmRelease": ["status", "lastAttemptedRevision"],
    "Terraform": ["status", "lastAppliedRevision"],
}
FLUX_KINDS = (
    "Kustomization",
    "HelmRelease",
    "GitRepository",
    "OCIRepository",
    "HelmRepository",
    "HelmChart",
    "Bucket",
    "Terraform",
)


def ksm_config() -> dict[str, Any]:
    """A CustomResourceState config in the shape of Flux's monitoring example: one
    gotk_resource_info series per object, with ready/suspended/revision labels."""
    resources = []
    for kind in FLUX_KINDS:
        group, _, version = API_VERSIONS[kind].rpartition("/")
        labels: dict[str, list[str]] = {
            "exported_namespace": ["metadata", "namespace"],
            "ready": ["status", "conditions", "[type=Ready]", "status"],
            "reason": ["status", "conditions", "[type=Ready]", "reason"],
            "suspended": ["spec", "suspend"],
            "revision": _REVISION_PATHS.get(kind, ["status", "artifact", "revision"]),
        }
        if kind in _REVISION_PATHS:
            labels["source_name"] = ["spec", "sourceRef", "name"]
        resources.append(
            {
                "groupVersionKind": {"group": group, "version": version, "kind": kind},
                "metricNamePrefix": "gotk",
                "metrics": [
                    {
                        "name": "resource_info",
                        "help": f"The current state of a {kind} resource.",
                        "each": {"type": "Info", "info": {"labelsFromPath": {"name": ["metadata", "name"]}}},
                        "labelsFromPath": labels,
                    }
                ],
            }
        )
    return {"kind": "CustomResourceStateMetrics", "spec": {"resources": resources}}


def ksm(binary: Path, kubeconfig: Path, port: int, telemetry_port: int, workdir: Path) -> Proc:
    config = workdir / "ksm-config.yaml"
    config.write_text(yaml.safe_dump(ksm_config(), sort_keys=False))
    argv = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--resources={KSM_RESOURCES}",
        f"--custom-resource-state-config-file={config}",
        "--host=127.0.0.1",
        f"--port={port}",
        "--telemetry-host=127.0.0.1",
        f"--telemetry-port={telemetry_port}",
        "--v=0",
    ]
    return Proc(argv, workdir / "ksm.log")


def count_series(body: bytes, prefix: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line.startswith(prefix))
