"""Flux sharding with the real controllers: a Kustomization labelled for a shard no controller runs.

Every lab controller runs as a sharded install's main one, `--watch-label-selector=
!sharding.fluxcd.io/key` (on its command line and in its Deployment, where stalewatch reads it),
and takes the Lease Flux names after that selector (the lab waits for it: the name is checked
against the real controller). A Kustomization labelled `sharding.fluxcd.io/key: shard9` is then
reconciled by nobody: stalewatch names the shard at once (ShardNotServed, from the Deployments'
selectors alone), and its NotReconciling follows within interval + timeout + slack of the first
heartbeat read, folded under that root. The unlabelled Kustomization stays quiet. Heartbeat
targets are pointed at the controllers' host ports and thresholds are test-sized, as in
test_lab_heartbeats.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.support import poll
from tests.lab.lab import Lab, wait_for
from tests.lab.manifests import NAMESPACE, git_repository, kustomization
from tests.lab.reading import reading_the_lab
from tests.lab.test_lab import GITREPOSITORIES, KUSTOMIZATIONS, ready

pytestmark = pytest.mark.cluster

SHARD_KEY = "sharding.fluxcd.io/key"
ROOT = f"ShardNotServed/Shard/{NAMESPACE}/kustomize-controller-shard9"
SHARDED = f"Kustomization/{NAMESPACE}/sharded"
DUE = 60 + 30 + 1 + 0.6
"""Seconds the sharded Kustomization is due after stalewatch starts watching it: interval 1m,
timeout 30s (kustomize-controller's floor), slack 1s, jitter 1% of the interval."""


def labelled(obj: dict[str, Any], key: str) -> dict[str, Any]:
    obj["metadata"]["labels"] = {SHARD_KEY: key}
    return obj


async def test_an_object_of_a_shard_nobody_runs_is_one_shard_root_with_its_not_reconciling_under_it(
    lab: Lab,
) -> None:
    lab.apply(git_repository(lab.git_url), kustomization(), labelled(kustomization("sharded"), "shard9"))
    wait_for("Kustomization Ready", lambda: ready(lab.get(KUSTOMIZATIONS, "apps")), timeout=120)
    assert ready(lab.get(GITREPOSITORIES, "lab"))
    async with reading_the_lab(lab) as service:

        async def found() -> dict[str, dict[str, Any]]:
            return {f["id"]: f for f in (await service.findings())["findings"]}

        at_once = await poll(lambda: _with(found, ROOT), within=15, what="the shard root")
        root = at_once[ROOT]
        assert root["severity"] == "critical"
        assert "labelled sharding.fluxcd.io/key=shard9: 1 object waits" in root["message"]
        assert "kustomize-controller: --watch-label-selector=!sharding.fluxcd.io/key" in root["message"]
        assert at_once[f"StatusStale/{SHARDED}"]["root_cause"] == ROOT
        assert not any(f.startswith("NotReconciling/") for f in at_once)

        overdue = await poll(
            lambda: _with(found, f"NotReconciling/{SHARDED}"), within=DUE + 30, what="its NotReconciling"
        )
        assert overdue[f"NotReconciling/{SHARDED}"]["root_cause"] == ROOT
        assert overdue[f"NotReconciling/{SHARDED}"]["evidence"]["reason"] == "NoSeries"
        assert sorted(overdue) == sorted([ROOT, f"StatusStale/{SHARDED}", f"NotReconciling/{SHARDED}"])
        assert {s["name"] for s in overdue[ROOT]["affected"]} == {"sharded"}


async def _with(found: Any, wanted: str) -> dict[str, dict[str, Any]] | None:
    """The findings once `wanted` is among them."""
    now: dict[str, dict[str, Any]] = await found()
    return now if wanted in now else None
