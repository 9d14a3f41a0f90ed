"""The scenario table's failures, as a user causes them and fixes them, side by side in one lab.

Each failing object is named for what breaks it; they share the lab with the healthy pair
(GitRepository `lab`, Kustomization `apps`) and never touch it, so one recording (record.py)
holds them all. The fixes are what a user does: repair the URL, push the missing path, push the
corrected manifest, correct the chart's values.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from tests.lab.lab import Lab, condition
from tests.lab.manifests import CHART_FILES, NAMESPACE, git_repository, helm_release, kustomization

GITREPOSITORIES = "gitrepositories.source.toolkit.fluxcd.io"
KUSTOMIZATIONS = "kustomizations.kustomize.toolkit.fluxcd.io"
HELMRELEASES = "helmreleases.helm.toolkit.fluxcd.io"


def service(port: int) -> str:
    """./rejected: one Service; port 99999 is refused by the API server's validation."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "rejected", "namespace": "default"},
            "spec": {"ports": [{"port": port}], "selector": {"app": "rejected"}},
        }
    )


MISSING_PATH_FILE = "nope/configmap.yaml"
MISSING_PATH_CONTENT = yaml.safe_dump(
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope", "namespace": "default"}}
)


def break_all(lab: Lab) -> None:
    """Pushes the chart and the rejected manifest, then applies the healthy pair and every
    failing object:
    - GitRepository `missing` (its repository does not exist: 404) and Kustomization
      `on-missing` on it;
    - Kustomization `path-missing` (./nope is not in the repository);
    - Kustomization `rejected` (./rejected holds a Service the API server refuses);
    - HelmRelease `wait-fails` (Helm waits for its Deployment, whose Pods are in ImagePullBackOff)
      and `no-wait` (the same chart, wait disabled);
    - GitRepository and Kustomization `gone` (failing like `missing`), deleted later: their
      Events stay behind."""
    lab.push({**CHART_FILES, "rejected/service.yaml": service(99999)}, "lab: chart and a bad Service")
    broken = lab.git_url.rsplit("/", 1)[0] + "/does-not-exist"
    lab.apply(
        git_repository(lab.git_url),
        kustomization(),
        git_repository(broken, "missing"),
        kustomization("on-missing", source="missing"),
        kustomization("path-missing", path="./nope"),
        kustomization("rejected", path="./rejected"),
        helm_release("wait-fails", wait=True),
        helm_release("no-wait", wait=False),
        git_repository(broken, "gone"),
        kustomization("gone", source="gone"),
    )


def delete_the_deleted(lab: Lab) -> None:
    lab.kubectl("delete", f"--namespace={NAMESPACE}", f"{KUSTOMIZATIONS}/gone", f"{GITREPOSITORIES}/gone")


def heal_all(lab: Lab) -> None:
    """What a user does about each failure."""
    lab.apply(git_repository(lab.git_url, "missing"))
    lab.push({MISSING_PATH_FILE: MISSING_PATH_CONTENT, "rejected/service.yaml": service(80)}, "lab: fixes")
    lab.apply(
        helm_release("wait-fails", wait=True, fault=False), helm_release("no-wait", wait=False, fault=False)
    )
    now = datetime.now(UTC).isoformat()
    for name in ("lab",):  # what `flux reconcile source git lab` does: fetch the fixes now
        lab.kubectl(
            "annotate",
            "--overwrite",
            f"--namespace={NAMESPACE}",
            f"{GITREPOSITORIES}/{name}",
            f"reconcile.fluxcd.io/requestedAt={now}",
        )


HEALED = (
    (GITREPOSITORIES, "missing"),
    (KUSTOMIZATIONS, "on-missing"),
    (KUSTOMIZATIONS, "path-missing"),
    (KUSTOMIZATIONS, "rejected"),
    (HELMRELEASES, "wait-fails"),
    (HELMRELEASES, "no-wait"),
)


def is_ready(obj: dict[str, Any]) -> bool:
    cond = condition(obj, "Ready")
    observed = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return bool(cond and cond["status"] == "True" and observed)


def healed(lab: Lab) -> bool:
    """Every healed object Ready at its generation, and the charts' Deployments available."""
    if not all(is_ready(lab.get(resource, name)) for resource, name in HEALED):
        return False
    for name in ("wait-fails", "no-wait"):
        status = lab.get("deployment", f"default-{name}", namespace="default").get("status", {})
        if status.get("availableReplicas") != 1 or status.get("unavailableReplicas"):
            return False
    return True


def take_down_source_controller(lab: Lab) -> datetime:
    """source-controller killed, its new Pod in ImagePullBackOff; returns when its Lease expires."""
    lab.kill("source-controller")
    lab.break_pod("source-controller")
    lease = lab.lease("source-controller")
    renewed = datetime.fromisoformat(lease["spec"]["renewTime"])
    return renewed + timedelta(seconds=lease["spec"]["leaseDurationSeconds"])
