"""source-controller down with real Flux: every source it serves is a cached report under one root.

Its own lab (the module before leaves kustomize-controller broken): two GitRepositories and a
Kustomization reconcile, then source-controller dies and its new Pod cannot pull its image."""

from __future__ import annotations

from typing import Any

import pytest

from tests.lab.lab import Lab, wait_for
from tests.lab.manifests import NAMESPACE, git_repository, kustomization
from tests.lab.probes import findings, judged_current, reported
from tests.lab.scenarios import GITREPOSITORIES, KUSTOMIZATIONS, is_ready, take_down_source_controller

pytestmark = pytest.mark.cluster


def test_source_controller_down_is_one_root_with_every_source_stale_under_it(
    lab: Lab, stalewatch: str
) -> None:
    lab.apply(git_repository(lab.git_url), git_repository(lab.git_url, "second"), kustomization())
    for resource, name in ((GITREPOSITORIES, "lab"), (GITREPOSITORIES, "second"), (KUSTOMIZATIONS, "apps")):
        wait_for(f"{name} Ready", lambda r=resource, n=name: is_ready(lab.get(r, n)), timeout=120)
    for kind, name in (("GitRepository", "lab"), ("GitRepository", "second"), ("Kustomization", "apps")):
        wait_for(f"stalewatch sees {name} Current", lambda k=kind, n=name: judged_current(stalewatch, k, n))
    assert findings(stalewatch)["findings"] == []

    take_down_source_controller(lab)

    root_id = "ControllerDown/Deployment/flux-system/source-controller"
    found: dict[str, dict[str, Any]] = wait_for(
        "stalewatch reports source-controller down", lambda: reported(stalewatch, root_id), timeout=90
    )
    root = found[root_id]
    assert (root["severity"], root["root_cause"], root["evidence"]["reason"]) == (
        "critical",
        None,
        "ImagePullBackOff",
    )
    for name in ("lab", "second"):
        assert found[f"StatusStale/GitRepository/{NAMESPACE}/{name}"]["root_cause"] == root_id
    affected = {(a["kind"], a["name"]) for a in root["affected"]}
    assert {("GitRepository", "lab"), ("GitRepository", "second")} <= affected
    assert [f for f in found.values() if f["root_cause"] is None] == [root]
