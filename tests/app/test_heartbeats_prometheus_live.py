"""`stalewatch run --prometheus` against the real API server and a real Prometheus: the
source-controller's Pod is known to the cluster only (its Deployment names no metrics port, so a
direct read could not even start), Prometheus scrapes the recorded exposition, counters moving on
every scrape, labelled with the Pod's namespace and name as a PodMonitor labels them; stalewatch
reads its heartbeat through Prometheus, and it is Reconciling.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.app.test_heartbeats_live import SC, THRESHOLDS, Exposition
from tests.controlplane.harness import ControlPlane
from tests.kube.objects import deployment, flux, lease, pod, ready, running
from tests.kube.support import metric, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kube.test_heartbeat_prometheus import prometheus_scraping
from tests.kube.test_heartbeat_reader import serving
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster


async def test_a_controller_read_through_prometheus_is_reconciling(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    exposition = Exposition(namespace)
    exposition.moving = True
    await kube.create(deployment(namespace, SC))  # no http-prom port: Prometheus needs none
    controller_pod = pod(namespace, SC, status={**running(), "podIP": "127.0.0.1"})
    await kube.create(controller_pod)
    name = controller_pod["metadata"]["name"]
    await kube.create(lease(namespace, f"{SC}-leader-election", holder=f"{name}_2f1c", duration=3600))
    spec = {"interval": "1s", "timeout": "1s", "url": "https://example.com/lab.git"}
    await kube.create(flux("GitRepository", namespace, "lab", spec=spec, status=ready(since=None)))

    async with serving(exposition.handler) as port:
        with (
            tempfile.TemporaryDirectory(prefix="prom-live-") as workdir,
            prometheus_scraping(Path(workdir), [(port, {"namespace": namespace, "pod": name})]) as url,
        ):
            settings = settings_for(
                control_plane.kubeconfig,
                include_namespaces=[namespace],
                thresholds=THRESHOLDS,
                heartbeat_interval="300ms",
                heartbeat_timeout="250ms",
                heartbeat_prometheus=url,
            )
            async with stalewatch_running(settings) as service:
                labels = {"namespace": namespace, "name": SC, "state": "Reconciling"}

                async def read_past_every_window() -> bool:
                    """20 reads at 300 ms: past the GitRepository's 3 s window and stale_after."""
                    samples = await service.metrics()
                    ok = metric(samples, "stalewatch_heartbeat_reads_total", controller=SC, result="ok")
                    return (ok or 0) >= 20

                await poll(read_past_every_window, within=30, what="20 heartbeat reads through Prometheus")
                samples = await service.metrics()
                assert samples.get(("stalewatch_controller_heartbeat", frozenset(labels.items()))) == 1.0
                found = (await service.findings())["findings"]
                assert [f["id"] for f in found if f["type"] in ("ControllerStuck", "NotReconciling")] == []
