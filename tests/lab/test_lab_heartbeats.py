"""Heartbeats read from the real Flux controllers: a healthy lab is all Reconciling, and nothing
is NotReconciling or ControllerStuck once every object has been watched past its due window.

stalewatch reads the lab as tests/lab/reading.py sets it up (targets at the controllers' host
ports; 1s slack, 1% jitter), so a GitRepository (interval 1m, timeout 60s) is due after about
2m1s and a Kustomization (1m, timeout floor 30s) after 1m31s.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.kube.support import Samples, metric, poll
from tests.lab.lab import Lab, wait_for
from tests.lab.manifests import CONTROLLERS, git_repository, kustomization
from tests.lab.reading import reading_the_lab
from tests.lab.test_lab import GITREPOSITORIES, KUSTOMIZATIONS, ready

pytestmark = pytest.mark.cluster

WATCHED = 150.0
"""Seconds stalewatch watches the healthy lab: past every object's due window."""


def heartbeat(samples: Samples, controller: str) -> float | None:
    """stalewatch_controller_heartbeat's Reconciling series (its labels include `name`)."""
    labels = {"namespace": "flux-system", "name": controller, "state": "Reconciling"}
    return samples.get(("stalewatch_controller_heartbeat", frozenset(labels.items())))


async def test_a_healthy_lab_reads_every_controllers_heartbeat_and_finds_none_stuck(lab: Lab) -> None:
    lab.apply(git_repository(lab.git_url), kustomization())
    wait_for("GitRepository Ready", lambda: ready(lab.get(GITREPOSITORIES, "lab")), timeout=120)
    wait_for("Kustomization Ready", lambda: ready(lab.get(KUSTOMIZATIONS, "apps")), timeout=120)
    async with reading_the_lab(lab) as service:

        async def reconciling() -> bool:
            samples = await service.metrics()
            return all(heartbeat(samples, c) == 1 for c in CONTROLLERS)

        await poll(reconciling, within=30, what="every controller's heartbeat Reconciling")
        await asyncio.sleep(WATCHED)
        samples = await service.metrics()
        for controller in CONTROLLERS:
            assert heartbeat(samples, controller) == 1, controller
            reads = {
                result: metric(
                    samples, "stalewatch_heartbeat_reads_total", controller=controller, result=result
                )
                for result in ("ok", "unreachable", "timeout", "http_error", "too_large", "unparsable")
            }
            assert reads["ok"] is not None
            assert reads["ok"] >= WATCHED / 2 / 2, (controller, reads)  # about every 2 s
            assert {r: n for r, n in reads.items() if r != "ok" and n} == {}, controller
        found = [f["id"] for f in (await service.findings())["findings"]]
        assert [f for f in found if f.startswith(("NotReconciling/", "ControllerStuck/"))] == []
