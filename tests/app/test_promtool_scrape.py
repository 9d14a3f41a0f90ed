"""`promtool check metrics` passes on a real scrape of `stalewatch run` mid-incident, when every
family (findings, StateSets, controller reasons, revisions, watcher health) has samples."""

from __future__ import annotations

import subprocess

import pytest

from tests.app.test_incidents import THRESHOLDS, tofu_down
from tests.controlplane.harness import ControlPlane
from tests.kube.support import Service, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

FAMILIES = (
    "stalewatch_finding",
    "stalewatch_object_status",
    "stalewatch_controller_down_reason",
    "stalewatch_revision_info",
    "stalewatch_up",
    "stalewatch_watched_objects",
)


async def test_a_real_scrape_during_the_tofu_incident_passes_promtool_check_metrics(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    scenario = tofu_down()
    for obj in scenario.setup(namespace):
        await kube.create(obj)
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace], thresholds=THRESHOLDS)
    async with stalewatch_running(settings) as service:
        for step in scenario.steps[:3]:  # controller down, stale Terraforms, blocked Kustomization
            await step.act(kube, namespace)
        body = await poll(lambda: mid_incident(service), within=5, what="a scrape with the whole incident")

    for family in FAMILIES:
        assert f"\n{family}{{" in body or f"\n{family} " in body, family
    assert promtool_check_metrics(body) == ""


async def mid_incident(service: Service) -> str:
    """The scrape once the blocked Kustomization's finding is in it, else ""."""
    status, body = await service.get("/metrics")
    return body if status == 200 and 'type="DependencyBlocked"' in body else ""


def promtool_check_metrics(body: str) -> str:
    """promtool's complaints about an exposition; empty when it has none."""
    lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
    return "" if lint.returncode == 0 else lint.stdout + lint.stderr
