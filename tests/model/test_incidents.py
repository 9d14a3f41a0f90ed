"""The incidents stalewatch exists for: each must come out as exactly one root."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from tests.model.builders import (
    MIN,
    SHA_N,
    SHA_N1,
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
    waiting_on,
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
        *(waiting_on(name, "infra", ago=30 * MIN) for name in ("apps", "monitoring")),
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


def forgotten_reconciling() -> list[Obj]:
    """kustomize-controller (alive) finished, set Ready=True and never cleared Reconciling=True."""
    forgot = kustomization(
        "apps",
        conditions=[
            cond(
                "Ready",
                "True",
                "ReconciliationSucceeded",
                f"Applied revision: main@sha1:{SHA_N}",
                ago=50 * MIN,
            ),
            cond("Reconciling", "True", "Progressing", "Reconciliation in progress", ago=45 * MIN),
        ],
    )
    return [*flux(), git_repository(), forgot]


def test_reconciling_left_true_with_ready_is_one_stuck_reconciling_root_saying_ready_is_true() -> None:
    evaluation = run(forgotten_reconciling())

    [root] = evaluation.roots
    assert root.id == "StuckReconciling/Kustomization/flux-system/apps"
    assert "It also says Ready=True: the controller finished but never cleared Reconciling" in root.message
    assert root.affected == []
    assert evaluation.findings == [root]


DRY_RUN_FORBIDDEN = (
    'Deployment/apps/config dry-run failed (Forbidden): deployments.apps "config" is forbidden: '
    'User "system:serviceaccount:flux-system:kustomize-controller" cannot patch resource "deployments" '
    'in API group "apps" in the namespace "apps"'
)


def child_on_old_revision() -> list[Obj]:
    """Root Kustomization with two children: deploy-apps applied N, deploy-config failed its
    dry-run (Forbidden) and still runs N-1."""
    children = [
        "flux-system_deploy-apps_kustomize.toolkit.fluxcd.io_Kustomization",
        "flux-system_deploy-config_kustomize.toolkit.fluxcd.io_Kustomization",
    ]
    return [
        *flux(),
        git_repository(revision=f"main@sha1:{SHA_N}", updated=30 * MIN),
        kustomization("flux-system", inventory=children),
        kustomization("deploy-apps", applied=f"main@sha1:{SHA_N}"),
        kustomization(
            "deploy-config",
            applied=f"main@sha1:{SHA_N1}",
            attempted=f"main@sha1:{SHA_N}",
            conditions=[
                cond("Ready", "False", "ReconciliationFailed", DRY_RUN_FORBIDDEN, ago=29 * MIN),
                cond(
                    "Reconciling", "True", "ProgressingWithRetry", "Reconciliation in progress", ago=29 * MIN
                ),
            ],
        ),
    ]


def test_child_failing_to_apply_the_new_revision_is_one_revision_skew_root_with_its_message() -> None:
    [root] = run(child_on_old_revision()).roots

    assert root.id == "RevisionSkew/Kustomization/flux-system/deploy-config"
    assert DRY_RUN_FORBIDDEN in root.message
    assert "Kustomization flux-system/deploy-apps" in root.message
    assert root.evidence["applied_revision"] == f"main@sha1:{SHA_N1}"
    assert root.evidence["source_revision"] == f"main@sha1:{SHA_N}"
    assert root.affected == []


def release_with_crash_looping_pod() -> list[Obj]:
    """HelmRelease Ready=True after an upgrade whose new Pod crash-loops (the old one still serves)."""
    image = "ghcr.io/stefanprodan/podinfo:6.5.1"
    helm_labels = {"helm.toolkit.fluxcd.io/name": "podinfo", "helm.toolkit.fluxcd.io/namespace": "apps"}
    rolling = deployment(
        "podinfo",
        "apps",
        image=image,
        labels=helm_labels,
        conditions=[
            cond(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                ago=300 * MIN,
            ),
            cond(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                'ReplicaSet "podinfo-7d9f" is progressing.',
                ago=20 * MIN,
            ),
        ],
    )
    return [
        *flux(),
        helm_chart("apps-podinfo", "apps", version="6.5.1"),
        helm_release("podinfo", "apps", chart_version="6.5.1"),
        rolling,
        pod(
            "podinfo-5c6d-old01",
            "apps",
            app="podinfo",
            template_hash="5c6d",
            image="ghcr.io/stefanprodan/podinfo:6.5.0",
            created=300 * MIN,
        ),
        pod(
            "podinfo-7d9f-new01",
            "apps",
            app="podinfo",
            image=image,
            ready=False,
            waiting="CrashLoopBackOff",
            waiting_message="back-off 5m0s restarting failed container=podinfo",
            restarts=7,
            last_terminated="Error",
            created=20 * MIN,
        ),
        event(
            "podinfo-7d9f-new01.17c2b",
            "apps",
            kind="Pod",
            involved="podinfo-7d9f-new01",
            reason="BackOff",
            message="Back-off restarting failed container podinfo",
            count=80,
            first=19 * MIN,
            last=MIN,
        ),
    ]


def test_helm_release_ready_while_its_new_pod_crash_loops_is_one_release_root() -> None:
    evaluation = run(release_with_crash_looping_pod())

    [root] = evaluation.roots
    assert root.id == "ReleaseReadyWorkloadFailing/HelmRelease/apps/podinfo"
    assert names(root.affected) == {"Pod/apps/podinfo-7d9f-new01"}
    pod_finding = next(f for f in evaluation.findings if f.type is FindingType.WORKLOAD_UNHEALTHY)
    assert pod_finding.root_cause == root.id
    assert "CrashLoopBackOff" in root.message


def test_tofu_incident_with_kustomizations_depending_on_terraform_by_name_is_one_root() -> None:
    objs = [o for o in tofu_incident() if o["metadata"]["name"] != "infra" or o["kind"] != "Kustomization"]
    for obj in objs:
        if obj["kind"] == "Kustomization" and obj["metadata"]["name"] in ("apps", "monitoring"):
            by_name = (
                {"name": "vpc"} if obj["metadata"]["name"] == "apps" else {"name": "eks", "kind": "Terraform"}
            )
            obj["spec"]["dependsOn"] = [by_name]

    [root] = run(objs).roots

    assert root.id == "ControllerDown/Deployment/flux-system/tofu-controller"
    assert names(root.affected) == {
        *(f"Terraform/flux-system/{name}" for name in TERRAFORMS),
        "Kustomization/flux-system/apps",
        "Kustomization/flux-system/monitoring",
    }


GOLDEN = Path(__file__).parent / "golden" / "incidents.json"
INCIDENTS = {
    "tofu-controller-image-pull-backoff": tofu_incident,
    "forgotten-reconciling": forgotten_reconciling,
    "child-on-old-revision": child_on_old_revision,
    "release-with-crash-looping-pod": release_with_crash_looping_pod,
}


def test_incident_findings_match_the_golden_json() -> None:
    """What `analyze --output json` shows for each incident, word for word.

    After an intended change of wording, regenerate with
    STALEWATCH_UPDATE_GOLDEN=1 pytest tests/model/test_incidents.py and review the diff.
    """
    rendered = {name: [f.to_dict() for f in run(build()).findings] for name, build in INCIDENTS.items()}
    text = orjson.dumps(rendered, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
    if os.environ.get("STALEWATCH_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)

    assert text == GOLDEN.read_text()


def test_events_about_a_replaced_controller_pod_stay_with_the_controller() -> None:
    replaced = event(
        "tofu-controller-6c8b-qwert.17c1f",
        kind="Pod",
        involved="tofu-controller-6c8b-qwert",
        reason="BackOff",
        message="Back-off pulling image",
        count=40,
        first=44 * MIN,
        last=MIN,
    )

    [root] = run(tofu_incident(), replaced).roots

    assert root.id == "ControllerDown/Deployment/flux-system/tofu-controller"
    assert "BackOff x40: Back-off pulling image" in root.evidence["events"]
