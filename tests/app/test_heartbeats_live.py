"""Heartbeats read by `stalewatch run` against the real API server: a source-controller whose
Pod (status.podIP 127.0.0.1, its Deployment's container port http-prom on an in-process
server) serves the lab's recorded exposition.

The recording frozen -> ControllerStuck, its GitRepositories NotReconciling folded under it;
then the same exposition with every counter moving on each read -> both clear. Timings are
test-sized: reads every 300 ms, a GitRepository's window interval 1s + timeout 1s + slack 1s.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import deployment, flux, lease, pod, ready, running
from tests.kube.support import Service, metric, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kube.test_heartbeat_reader import serving
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

SC = "source-controller"
RECORDING = Path(__file__).parents[1] / "lab" / "recordings" / "metrics" / "recovered" / f"{SC}.txt"
THRESHOLDS = {
    "heartbeat_slack": "1s",
    "heartbeat_jitter_fraction": 0.001,
    "heartbeat_retry_backoff_cap": "1s",
    "heartbeat_stale_after": "3s",
}
_COUNTS = re.compile(
    r"^((?:gotk_reconcile_duration_seconds_count|controller_runtime_reconcile_total)\{.*\}) (\d+)$", re.M
)


class Exposition:
    """The recorded source-controller's /metrics, its objects moved into `namespace`; while
    `moving`, every counter goes up by one on each read."""

    def __init__(self, namespace: str) -> None:
        self.text = RECORDING.read_text().replace('namespace="flux-system"', f'namespace="{namespace}"')
        self.moving, self.reads = False, 0

    async def handler(self, _: web.Request) -> web.StreamResponse:
        self.reads += 1
        if not self.moving:
            return web.Response(text=self.text)
        moved = _COUNTS.sub(lambda m: f"{m[1]} {int(m[2]) + self.reads}", self.text)
        return web.Response(text=moved)


@pytest.fixture
async def metrics_server(namespace: str) -> AsyncIterator[tuple[Exposition, int]]:
    exposition = Exposition(namespace)
    async with serving(exposition.handler) as port:
        yield exposition, port


async def findings(service: Service) -> dict[str, Any]:
    return {f["id"]: f for f in (await service.findings())["findings"]}


async def test_a_controller_whose_counters_rest_is_stuck_and_clears_once_they_move(
    control_plane: ControlPlane, kube: Kube, namespace: str, metrics_server: tuple[Exposition, int]
) -> None:
    exposition, port = metrics_server
    workload = deployment(namespace, SC)
    workload["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "http-prom", "containerPort": port, "protocol": "TCP"}
    ]
    await kube.create(workload)
    controller_pod = pod(namespace, SC, status={**running(), "podIP": "127.0.0.1"})
    await kube.create(controller_pod)
    holder = f"{controller_pod['metadata']['name']}_2f1c"
    await kube.create(lease(namespace, f"{SC}-leader-election", holder=holder, duration=3600))
    for name in ("lab", "missing"):
        spec = {"interval": "1s", "timeout": "1s", "url": "https://example.com/lab.git"}
        await kube.create(flux("GitRepository", namespace, name, spec=spec, status=ready(since=None)))

    settings = settings_for(
        control_plane.kubeconfig,
        include_namespaces=[namespace],
        thresholds=THRESHOLDS,
        heartbeat_interval="300ms",
        heartbeat_timeout="250ms",
    )
    async with stalewatch_running(settings) as service:
        stuck = f"ControllerStuck/Deployment/{namespace}/{SC}"
        overdue = [f"NotReconciling/GitRepository/{namespace}/{name}" for name in ("lab", "missing")]

        async def folded() -> dict[str, Any] | None:
            found = await findings(service)
            return (
                found
                if stuck in found and all(found.get(o, {}).get("root_cause") == stuck for o in overdue)
                else None
            )

        found = await poll(folded, within=20, what="ControllerStuck with both GitRepositories folded")
        assert found[stuck]["severity"] == "critical"
        assert exposition.reads >= 2
        reads = metric(
            await service.metrics(), "stalewatch_heartbeat_reads_total", controller=SC, result="ok"
        )
        assert reads is not None
        assert reads >= 2

        exposition.moving = True

        async def cleared() -> bool:
            found = await findings(service)
            return stuck not in found and not any(o in found for o in overdue)

        await poll(cleared, within=20, what="the stuck controller cleared once its counters move")
