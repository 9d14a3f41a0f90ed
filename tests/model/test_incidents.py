"""The incidents stalewatch exists for: each must come out as exactly one root."""

from __future__ import annotations

from tests.model.builders import (
    MIN,
    SHA_N,
    Obj,
    cond,
    deployment,
    event,
    flux,
    git_repository,
    helm_chart,
    helm_release,
    kustomization,
    lease,
    names,
    pod,
    run,
    terraform,
)
from watcher.model.types import FindingType

TOFU_IMAGE = "ghcr.io/flux-iac/tofu-controller:v0.16.0-rc.5"
TERRAFORMS = ("vpc", "eks", "dns")


def tofu_incident() -> list[Obj]:
    """tofu-controller cannot pull its image; its Terraform CRs keep their last status
    (Ready=True and Reconciling=True), the Kustomization that health-checks them fails, and
    the Kustomizations that depend on that one wait forever."""
    stuck = [
        cond(
            "Ready",
            "True",
            "TerraformAppliedSucceed",
            f"Applied successfully: main@sha1:{SHA_N}",
            ago=50 * MIN,
        ),
        cond("Reconciling", "True", "Progressing", "Reconciliation in progress", ago=40 * MIN),
    ]
    return [
        *flux(),
        deployment("tofu-controller", available=0, image=TOFU_IMAGE),
        pod(
            "tofu-controller-7d9f-abcde",
            app="tofu-controller",
            image=TOFU_IMAGE,
            ready=False,
            waiting="ImagePullBackOff",
            waiting_message=f'Back-off pulling image "{TOFU_IMAGE}"',
            created=45 * MIN,
        ),
        lease("tf-controller", holder="tofu-controller-6c8b-qwert_7f1e", renewed=46 * MIN, duration=15),
        event(
            "tofu-controller-7d9f-abcde.17c2a",
            kind="Pod",
            involved="tofu-controller-7d9f-abcde",
            reason="Failed",
            message=f'Failed to pull image "{TOFU_IMAGE}": not found',
            count=12,
            first=44 * MIN,
            last=MIN,
        ),
        git_repository("infra"),
        *(terraform(name, conditions=stuck) for name in TERRAFORMS),
        kustomization(
            "infra",
            inventory=[f"flux-system_{name}_infra.contrib.fluxcd.io_Terraform" for name in TERRAFORMS],
            conditions=[
                cond(
                    "Ready",
                    "False",
                    "HealthCheckFailed",
                    "health check failed after 5m0s: timeout waiting for: "
                    "[Terraform/flux-system/vpc status: 'InProgress']",
                    ago=35 * MIN,
                ),
                cond("Reconciling", "True", "ProgressingWithRetry", "Detecting drift", ago=36 * MIN),
            ],
        ),
        *(
            kustomization(
                name,
                depends_on=["infra"],
                conditions=[
                    cond(
                        "Ready",
                        "False",
                        "DependencyNotReady",
                        "dependency 'flux-system/infra' is not ready",
                        ago=30 * MIN,
                    )
                ],
            )
            for name in ("apps", "monitoring")
        ),
    ]


def test_tofu_controller_image_pull_backoff_is_one_controller_down_root() -> None:
    evaluation = run(tofu_incident())

    [root] = evaluation.roots
    assert root.id == "ControllerDown/Deployment/flux-system/tofu-controller"
    assert root.evidence["pod"] == "tofu-controller-7d9f-abcde"
    assert root.evidence["waiting_reason"] == "ImagePullBackOff"
    assert root.evidence["image"] == TOFU_IMAGE
    assert names(root.affected) == {
        *(f"Terraform/flux-system/{name}" for name in TERRAFORMS),
        "Kustomization/flux-system/infra",
        "Kustomization/flux-system/apps",
        "Kustomization/flux-system/monitoring",
    }
    assert root.message.startswith(
        "tofu-controller in flux-system is down: pod tofu-controller-7d9f-abcde is in ImagePullBackOff "
        f"(image {TOFU_IMAGE}). 3 objects it reconciles report a cached status"
    )


def test_tofu_incident_terraform_crs_are_stale_not_stuck_and_kustomizations_blocked() -> None:
    findings = run(tofu_incident()).findings
    kinds = {(f.type, f.subject["name"]) for f in findings}

    assert {(FindingType.STATUS_STALE, name) for name in TERRAFORMS} <= kinds
    assert not any(t is FindingType.STUCK_RECONCILING and n in TERRAFORMS for t, n in kinds)
    blocked = {f.subject["name"]: f for f in findings if f.type is FindingType.DEPENDENCY_BLOCKED}
    assert set(blocked) == {"infra", "apps", "monitoring"}
    assert all(
        f.root_cause == "ControllerDown/Deployment/flux-system/tofu-controller"
        for f in findings
        if not f.is_root
    )


def test_healthy_cluster_has_no_findings() -> None:
    evaluation = run(
        flux(),
        git_repository(),
        kustomization(
            "flux-system", inventory=["flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization"]
        ),
        kustomization("apps"),
        helm_chart("flux-system-podinfo"),
        helm_release("podinfo"),
    )

    assert evaluation.findings == []
    assert len(evaluation.controllers) == 4
    assert all(c.up for c in evaluation.controllers)
