"""The lab runs the real Flux controllers: they reconcile Git into the cluster, and when one dies
its pod, Deployment and Lease say so the way they do in a cluster. These are the states the rest
of the suite writes by hand; here real controllers write them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from tests.lab.lab import Lab, condition, wait_for
from tests.lab.manifests import NAMESPACE, git_repository, kustomization
from tests.lab.probes import findings, judged_current, reported

pytestmark = pytest.mark.cluster

GITREPOSITORIES = "gitrepositories.source.toolkit.fluxcd.io"
KUSTOMIZATIONS = "kustomizations.kustomize.toolkit.fluxcd.io"


def ready(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The object, once its controller has observed its generation and set Ready=True."""
    cond = condition(obj, "Ready")
    observed = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return obj if cond and cond["status"] == "True" and observed else None


def renewed_at(lease: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(lease["spec"]["renewTime"])


def test_real_controllers_reconcile_git_into_the_cluster_and_stalewatch_finds_nothing_wrong(
    lab: Lab, stalewatch: str
) -> None:
    lab.apply(git_repository(lab.git_url), kustomization())

    repo = wait_for("GitRepository Ready", lambda: ready(lab.get(GITREPOSITORIES, "lab")), timeout=120)
    revision = repo["status"]["artifact"]["revision"]
    assert revision.startswith("main@sha1:")
    assert (condition(repo, "Ready") or {}).get("reason") == "Succeeded"
    assert condition(repo, "ArtifactInStorage") is not None

    ks = wait_for("Kustomization Ready", lambda: ready(lab.get(KUSTOMIZATIONS, "apps")), timeout=120)
    assert (condition(ks, "Ready") or {}).get("reason") == "ReconciliationSucceeded"
    assert ks["status"]["lastAppliedRevision"] == revision
    config = lab.get("configmap", "lab-config", namespace="default")
    assert config["data"] == {"greeting": "hello from git"}
    assert config["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == "apps"

    # A new commit travels the same way: Git server -> source-controller -> kustomize-controller.
    changed = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "lab-config", "namespace": "default"},
    }
    sha = lab.push({"apps/configmap.yaml": yaml.safe_dump(changed | {"data": {"greeting": "pushed"}})})
    now = datetime.now(UTC).isoformat()
    # What `flux reconcile source git` does, rather than waiting out the interval.
    request = f"reconcile.fluxcd.io/requestedAt={now}"
    lab.kubectl("annotate", "--overwrite", f"--namespace={NAMESPACE}", f"{GITREPOSITORIES}/lab", request)
    wait_for(
        "Kustomization applied the pushed commit",
        lambda: (
            lab.get(KUSTOMIZATIONS, "apps").get("status", {}).get("lastAppliedRevision") == f"main@sha1:{sha}"
        ),
        timeout=120,
    )
    assert lab.get("configmap", "lab-config", namespace="default")["data"] == {"greeting": "pushed"}

    # stalewatch, with default thresholds, sees the real controllers' states as healthy.
    wait_for(
        "stalewatch sees the Kustomization Current",
        lambda: judged_current(stalewatch, "Kustomization", "apps"),
    )
    report = findings(stalewatch)
    assert report["findings"] == [], report["findings"]
    assert report["summary"]["up"] is True
    assert report["summary"]["synced"] is True


def test_a_hung_controller_is_down_once_its_lease_expires_and_clears_when_it_resumes(
    lab: Lab, stalewatch: str
) -> None:
    """SIGSTOP: the process and its Pod look alive; only the Lease tells. SIGCONT heals it."""
    root_id = "ControllerDown/Deployment/flux-system/kustomize-controller"
    lab.pause("kustomize-controller")
    try:
        found = wait_for(
            "stalewatch reports kustomize-controller hung",
            lambda: reported(stalewatch, root_id),
            timeout=lab.lease("kustomize-controller")["spec"]["leaseDurationSeconds"] + 60,
            interval=1,
        )
    finally:
        lab.resume("kustomize-controller")
    root = found[root_id]
    assert (root["severity"], root["root_cause"], root["evidence"]["reason"]) == (
        "critical",
        None,
        "LeaseExpired",
    )
    assert lab.pod("kustomize-controller")["status"]["phase"] == "Running"
    stale = found[f"StatusStale/Kustomization/{NAMESPACE}/apps"]
    assert stale["root_cause"] == root_id
    assert [f for f in found.values() if f["root_cause"] is None] == [root]

    wait_for(
        "stalewatch clears every finding once the controller renews its Lease again",
        lambda: findings(stalewatch)["findings"] == [],
        timeout=60,
        interval=1,
    )


def test_killed_controller_in_image_pull_backoff_is_one_root_with_its_kustomization_stale(
    lab: Lab, stalewatch: str
) -> None:
    """Runs last: kustomize-controller stays down for the rest of the module."""
    pod = lab.pods["kustomize-controller"]
    assert lab.lease_holder("kustomize-controller") == pod

    lab.kill("kustomize-controller")
    lab.break_pod("kustomize-controller")

    def unavailable() -> dict[str, Any] | None:
        deployment = lab.get("deployment", "kustomize-controller")
        status = deployment.get("status", {})
        return deployment if status.get("unavailableReplicas") == 1 else None

    deployment = wait_for("Deployment has no available replica", unavailable, timeout=60)
    assert deployment["status"].get("availableReplicas", 0) == 0
    available = condition(deployment, "Available")
    assert available is not None
    assert (available["status"], available["reason"]) == ("False", "MinimumReplicasUnavailable")
    [container] = lab.pod("kustomize-controller")["status"]["containerStatuses"]
    assert container["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert container["image"] == f"ghcr.io/fluxcd/kustomize-controller:{lab.versions['kustomize-controller']}"
    assert not container["ready"]
    events = lab.kubectl(
        "get", "events", f"--namespace={NAMESPACE}", f"--field-selector=involvedObject.name={pod}"
    )
    assert f'Back-off pulling image "{container["image"]}"' in events

    # The Lease keeps naming the dead pod and its last renewal; source-controller, alive, renews its
    # own meanwhile, which shows the wait was long enough to see a renewal.
    lease = lab.lease("kustomize-controller")
    last = renewed_at(lease)
    expires = last + timedelta(seconds=lease["spec"]["leaseDurationSeconds"])
    alive_before = renewed_at(lab.lease("source-controller"))
    wait_for(
        "kustomize-controller's Lease past its duration",
        lambda: datetime.now(UTC) > expires + timedelta(seconds=1),
        timeout=lease["spec"]["leaseDurationSeconds"] + 30,
        interval=1,
    )
    after = lab.lease("kustomize-controller")
    assert renewed_at(after) == last
    assert lab.lease_holder("kustomize-controller") == pod
    assert renewed_at(lab.lease("source-controller")) > alive_before

    # stalewatch names the one root cause: the controller, down in ImagePullBackOff, with the
    # Kustomization it reconciles under it as a cached, stale report.
    root_id = "ControllerDown/Deployment/flux-system/kustomize-controller"

    found = wait_for(
        "stalewatch reports kustomize-controller down", lambda: reported(stalewatch, root_id), timeout=60
    )
    root = found[root_id]
    assert (root["severity"], root["root_cause"], root["evidence"]["reason"]) == (
        "critical",
        None,
        "ImagePullBackOff",
    )
    affected = {(a["kind"], a["namespace"], a["name"]) for a in root["affected"]}
    assert ("Kustomization", NAMESPACE, "apps") in affected, affected
    stale = found[f"StatusStale/Kustomization/{NAMESPACE}/apps"]
    assert stale["root_cause"] == root_id
    roots = [f for f in found.values() if f["root_cause"] is None]
    assert roots == [root], [r["id"] for r in roots]
