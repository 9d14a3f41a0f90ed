"""A helm-controller that is up and reconciles nothing: the e2e's ControllerStuck incident.

stalewatch reads a controller's heartbeat from its leader Pod (`status.podIP`, the Deployment
template's container port `http-prom`, `GET /metrics`; docs/design/heartbeats.md "Reader"). Here
the Pod's IP is 127.0.0.1 and the port is a loopback server in the test process serving the
**real** helm-controller v1.6.4 exposition the lab recorded
(`tests/lab/recordings/metrics/recovered/helm-controller.txt`), with only this changed:

- `namespace="flux-system"` becomes the incident's namespace and the recorded HelmReleases
  `no-wait` and `wait-fails` become `frontend` and `backend`: the series must name this
  namespace's objects.
- While reconciling, every read adds 1 to each HelmRelease's
  `gotk_reconcile_duration_seconds_count` and 2 to `controller_runtime_reconcile_total
  {result="success"}` (one reconcile of each per read), so stalewatch sees it move and knows
  when it last completed a reconcile (`stalewatch_controller_last_reconcile_timestamp_seconds`).
- Stuck, the counters stay where the last moving read left them; the controller runs with
  `--concurrent=1` (`controller_runtime_max_concurrent_reconciles` 1, the recording has Flux's
  default 4), its one worker is held by backend's reconcile (`controller_runtime_active_workers`
  1, `workqueue_longest_running_processor_seconds` and `workqueue_unfinished_work_seconds` the
  time since the freeze) and frontend waits behind it (`workqueue_depth` 1), as the lab's real
  stuck kustomize-controller did (tests/lab/stuck.py). Every other series is as recorded.

Why helm-controller, not kustomize-controller: three other incidents run a kustomize-controller
Deployment. Controllers are matched by Deployment name across namespaces, so one named like
theirs would share their heartbeat key, and the first in namespace order (not this one) is the
one read and the one serving every Kustomization of every incident. HelmRelease is helm-
controller's only kind, and the only other HelmRelease is sibling-revision-skew's `podinfo`
(interval 10m, default timeout 5m): this helm-controller serves it too, as one helm-controller
serves a cluster, but its window (15 minutes after this incident's first read, or its creation)
is longer than the module runs, so it is never overdue here and nothing of that incident moves.

Timing: the HelmReleases' window is interval 5s + timeout 2s + heartbeat_slack 1s + 1% of the
interval. `queue_not_draining` and `processor_floor` are longer than that, so the root's alarm is
NoReconcilesWhileDue, which comes due at the same moment as both objects' NotReconciling
(CounterNotMoved): the root never fires without its symptoms, and no symptom is ever a root.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.export.promstack import loopback
from tests.kube.objects import deployment, flux, lease, pod, ready, running
from tests.kube.support import poll
from tests.kubeclient import Kube

HC = "helm-controller"
RECORDING = Path(__file__).parents[1] / "lab" / "recordings" / "metrics" / "recovered" / f"{HC}.txt"
RENAMED = {"no-wait": "frontend", "wait-fails": "backend"}
RELEASES = tuple(RENAMED.values())
QUEUE = 'controller="helmrelease",name="helmrelease"'
READS_WITHIN = 30.0
"""Deadline for stalewatch's reads (one a second) of the controller reconciling."""

HEARTBEAT_SETTINGS = {
    "heartbeat_interval": "1s",
    "heartbeat_timeout": "900ms",
    "thresholds.heartbeat_slack": "1s",
    "thresholds.heartbeat_jitter_fraction": "0.01",
    "thresholds.heartbeat_stale_after": "10s",
    "thresholds.queue_not_draining": "20s",
    "thresholds.processor_floor": "30s",
}
"""Test-sized heartbeats for `stalewatch run` (tests/lab/test_lab_stuck.py's thresholds): read
every second; stale after 10 missed reads (a loaded machine must not make it Unknown)."""

_MOVING = re.compile(
    r'^((?:gotk_reconcile_duration_seconds_count\{kind="HelmRelease",.*\}|'
    r'controller_runtime_reconcile_total\{controller="helmrelease",result="success"\}) )(\d+)$',
    re.M,
)


def heartbeat_args() -> list[str]:
    return [arg for name, value in HEARTBEAT_SETTINGS.items() for arg in ("--set", f"{name}={value}")]


def _set(text: str, series: str, value: float) -> str:
    """`series`'s sample set to `value`; it must be in the recording exactly once."""
    line = re.compile(rf"^{re.escape(series)} \S+$", re.M)
    changed, count = line.subn(f"{series} {value:.6f}", text)
    if count != 1:
        raise AssertionError(f"{series} is in {RECORDING} {count} times, not once")
    return changed


class StuckHelmController:
    """The controller's objects, its /metrics, and the two acts: seen reconciling, then stuck."""

    def __init__(self, namespace: str) -> None:
        text = RECORDING.read_text().replace('namespace="flux-system"', f'namespace="{namespace}"')
        for old, new in RENAMED.items():
            text = text.replace(f'name="{old}"', f'name="{new}"')
        self._recorded = text
        self._lock = threading.Lock()
        self.moving_reads = 0
        self._held_since: float | None = None
        self.port: int | None = None

    # -- /metrics -----------------------------------------------------------------------------

    def exposition(self) -> str:
        """One read: moving until `freeze`, then frozen with one reconcile held."""
        with self._lock:
            if self._held_since is None:
                self.moving_reads += 1
            moved, held_since = self.moving_reads, self._held_since
        text = _MOVING.sub(
            lambda m: f"{m[1]}{int(m[2]) + moved * (2 if 'result=' in m[1] else 1)}", self._recorded
        )
        if held_since is None:
            return text
        held = time.monotonic() - held_since
        for series, value in (
            ('controller_runtime_max_concurrent_reconciles{controller="helmrelease"}', 1),
            ('controller_runtime_active_workers{controller="helmrelease"}', 1),
            (f'workqueue_depth{{{QUEUE},priority="0"}}', 1),
            (f"workqueue_longest_running_processor_seconds{{{QUEUE}}}", held),
            (f"workqueue_unfinished_work_seconds{{{QUEUE}}}", held),
        ):
            text = _set(text, series, value)
        return text

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Its /metrics on a free loopback port (`port`) for as long as the block runs."""
        controller = self

        class Metrics(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = controller.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        with loopback(Metrics) as self.port:
            yield

    # -- Objects and acts ---------------------------------------------------------------------

    def setup(self, ns: str) -> list[dict[str, Any]]:
        """helm-controller as `flux install` runs it, its Pod Ready at 127.0.0.1 and the leader
        (its Lease held for an hour), and two Ready HelmReleases of one OCI chart."""
        if self.port is None:
            raise AssertionError("setup before serving: the Deployment needs the metrics port")
        workload = deployment(ns, HC, image="ghcr.io/fluxcd/helm-controller:v1.6.4")
        [container] = workload["spec"]["template"]["spec"]["containers"]
        container["args"] = ["--concurrent=1"]
        container["ports"] = [{"name": "http-prom", "containerPort": self.port, "protocol": "TCP"}]
        leader = pod(ns, HC, status={**running(), "podIP": "127.0.0.1"})
        holder = f"{leader['metadata']['name']}_5d2e"
        chart = {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "OCIRepository",
            "metadata": {"name": "charts", "namespace": ns},
            "spec": {"interval": "10m", "url": "oci://ghcr.io/acme/charts", "ref": {"tag": "1.0.0"}},
            "status": {"observedGeneration": 1, **ready(artifact={"revision": "1.0.0@sha256:" + "d" * 64})},
        }
        releases = [
            flux(
                "HelmRelease",
                ns,
                name,
                spec={
                    "interval": "5s",
                    "timeout": "2s",
                    "chartRef": {"kind": "OCIRepository", "name": "charts"},
                },
                status=ready("Helm upgrade succeeded"),
            )
            for name in RELEASES
        ]
        return [
            workload,
            leader,
            lease(ns, f"{HC}-leader-election", holder=holder, duration=3600),
            chart,
            *releases,
        ]

    async def reconciling(self, _: Kube, __: str) -> None:
        """Until stalewatch has read the counters moving (3 reads: the first is its baseline)."""
        await poll(lambda: self.moving_reads >= 3, within=READS_WITHIN, what=f"3 reads of {HC}'s /metrics")

    async def stuck(self, _: Kube, __: str) -> None:
        with self._lock:
            self._held_since = time.monotonic()
