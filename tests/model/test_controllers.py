"""Controller liveness: every down reason, and the near-misses that are not an outage."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    SEC,
    Obj,
    deployment,
    git_repository,
    kustomization,
    lease,
    pod,
    run,
)
from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project
from watcher.model.types import CONTROLLER_DOWN_REASONS, ControllerSpec, FindingType, ModelConfig

KC = "kustomize-controller"
IMAGE = "ghcr.io/fluxcd/kustomize-controller:v1.3.0"


def kc(
    *, available: int = 1, replicas: int = 1, lease_renewed: timedelta | None = 2 * SEC, **pod_state: Any
) -> list[Obj]:
    """kustomize-controller with one Pod in the given state and (optionally) its Lease."""
    objs = [
        deployment(KC, replicas=replicas, available=available, image=IMAGE),
        pod(f"{KC}-7d9f-x2x4z", app=KC, image=IMAGE, **pod_state),
    ]
    if lease_renewed is not None:
        objs.append(lease(f"{KC}-leader-election", holder=f"{KC}-7d9f-x2x4z_0c1f", renewed=lease_renewed))
    return objs


EXPIRED = 10 * MIN

CASES = [
    pytest.param(kc(), True, "Available", id="running-ready-with-fresh-lease-is-up"),
    pytest.param(
        kc(available=0, ready=False, waiting="ImagePullBackOff", lease_renewed=EXPIRED),
        False,
        "ImagePullBackOff",
        id="image-pull-backoff",
    ),
    pytest.param(
        kc(available=0, ready=False, waiting="ErrImagePull", lease_renewed=None),
        False,
        "ErrImagePull",
        id="err-image-pull-without-lease",
    ),
    pytest.param(
        kc(available=0, ready=False, waiting="CrashLoopBackOff", restarts=9, lease_renewed=EXPIRED),
        False,
        "CrashLoopBackOff",
        id="crash-loop",
    ),
    pytest.param(
        kc(
            available=0,
            ready=False,
            waiting="CrashLoopBackOff",
            last_terminated="OOMKilled",
            lease_renewed=EXPIRED,
        ),
        False,
        "OOMKilled",
        id="oom-killed",
    ),
    pytest.param(
        kc(available=0, ready=False, waiting="CreateContainerConfigError", lease_renewed=EXPIRED),
        False,
        "CreateContainerConfigError",
        id="create-container-config-error",
    ),
    pytest.param(
        kc(available=0, ready=False, unschedulable=True, lease_renewed=EXPIRED),
        False,
        "Unschedulable",
        id="unschedulable",
    ),
    pytest.param(
        kc(available=0, ready=False, lease_renewed=EXPIRED), False, "NotReady", id="running-not-ready"
    ),
    pytest.param(
        [deployment(KC, available=0)], False, "NoAvailableReplicas", id="no-available-replica-and-no-pods"
    ),
    pytest.param(kc(lease_renewed=EXPIRED), False, "LeaseExpired", id="hung-leader-behind-a-running-pod"),
    pytest.param(
        [
            *kc(lease_renewed=None),
            lease(f"{KC}-leader-election", holder=f"{KC}-5c6d-gone1_9a", renewed=EXPIRED),
        ],
        True,
        "Available",
        id="expired-lease-of-a-pod-long-gone-is-history",
    ),
    pytest.param(kc(replicas=0, available=0), False, "ScaledToZero", id="scaled-to-zero"),
    pytest.param(
        kc(available=0, ready=False, waiting="CrashLoopBackOff", restarts=1, lease_renewed=10 * SEC),
        True,
        "Restarting",
        id="restart-within-lease-duration-is-not-down",
    ),
    pytest.param(
        kc(lease_renewed=34 * SEC), True, "Available", id="lease-renewed-within-its-duration-is-not-expired"
    ),
    pytest.param(
        kc(lease_renewed=36 * SEC), False, "LeaseExpired", id="lease-one-second-past-its-duration-is-expired"
    ),
]


@pytest.mark.parametrize(("objs", "up", "reason"), CASES)
def test_controller_liveness(objs: list[Obj], up: bool, reason: str) -> None:
    evaluation = run(objs, git_repository(), kustomization("apps"))

    [health] = evaluation.controllers
    assert (health.up, health.reason, health.name) == (up, reason, KC)
    assert health.up or health.reason in CONTROLLER_DOWN_REASONS
    down = [f for f in evaluation.findings if f.type is FindingType.CONTROLLER_DOWN]
    assert [f.id for f in down] == ([] if up else [f"ControllerDown/Deployment/flux-system/{KC}"])
    stale = [f.subject["name"] for f in evaluation.findings if f.type is FindingType.STATUS_STALE]
    assert stale == ([] if up else ["apps"])


def test_controller_down_evidence_names_pod_waiting_reason_and_image() -> None:
    evaluation = run(
        kc(
            available=0,
            ready=False,
            waiting="ImagePullBackOff",
            waiting_message="Back-off pulling image",
            lease_renewed=EXPIRED,
        )
    )

    [down] = evaluation.roots
    assert {k: down.evidence[k] for k in ("pod", "waiting_reason", "image", "lease")} == {
        "pod": f"{KC}-7d9f-x2x4z",
        "waiting_reason": "ImagePullBackOff",
        "image": IMAGE,
        "lease": f"{KC}-leader-election",
    }
    assert down.since == NOW - EXPIRED + timedelta(seconds=35, microseconds=123456)  # renewTime + duration


def test_controller_whose_deployment_is_not_in_the_input_is_unknown_not_down() -> None:
    stuck = kustomization("apps")
    evaluation = run(git_repository(), stuck)

    assert evaluation.controllers == []
    assert evaluation.findings == []
    assert [o.stale for o in evaluation.objects if o.subject["kind"] == "Kustomization"] == [False]


def test_blind_to_deployments_and_pods_invents_no_controller_down() -> None:
    model = HealthModel(ModelConfig())
    for obj in [
        *kc(available=0, ready=False, waiting="ImagePullBackOff", lease_renewed=EXPIRED),
        kustomization("apps"),
    ]:
        model.upsert(project(obj), now=NOW)

    model.set_blind({"Deployment", "Pod", "Lease"})
    evaluation = model.evaluate(NOW)

    assert evaluation.controllers == []
    assert evaluation.findings == []


def test_blind_to_pods_judges_the_controller_on_its_deployment_alone() -> None:
    model = HealthModel(ModelConfig())
    for obj in kc(available=1, ready=False, waiting="ImagePullBackOff", lease_renewed=None):
        model.upsert(project(obj), now=NOW)

    model.set_blind({"Pod"})

    [health] = model.evaluate(NOW).controllers
    assert (health.up, health.reason) == (True, "Available")


def test_controller_matched_by_selector_labels_in_its_namespace() -> None:
    spec = ControllerSpec(
        name="infra",
        groups=("infra.contrib.fluxcd.io",),
        namespace="tofu",
        selector={"app.kubernetes.io/name": "tf-controller"},
    )
    labelled = deployment("anything", "tofu", labels={"app.kubernetes.io/name": "tf-controller"})
    elsewhere = deployment("anything", "other", labels={"app.kubernetes.io/name": "tf-controller"})

    evaluation = run(labelled, elsewhere, config=ModelConfig(controllers=(spec,)))

    assert [(c.name, c.subject["namespace"]) for c in evaluation.controllers] == [("infra", "tofu")]


def test_a_healthy_controller_pod_of_another_replicaset_is_not_counted() -> None:
    stranger = pod(f"{KC}-5c6d-zzzzz", app=KC, template_hash="5c6d", ready=True)
    stranger["metadata"]["ownerReferences"][0]["name"] = "someone-else-5c6d"
    objs = [
        deployment(KC, available=0),
        pod(f"{KC}-7d9f-x2x4z", app=KC, ready=False, waiting="ImagePullBackOff"),
        stranger,
    ]

    [health] = run(objs).controllers

    assert (health.up, health.reason) == (False, "ImagePullBackOff")
