"""PolicyDenied: a policy denial that keeps recurring, in Events or a Flux object's conditions.

One named case per rule and near-miss, then how it correlates: the root of the trying object's
RetryLoop and ReconcileFailed and of the DependencyBlocked of what waits on it, with the stacks
above the trying object as its blast radius.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    Obj,
    by_id,
    cond,
    deployment,
    event,
    flux,
    git_repository,
    helm_release,
    kustomization,
    meta,
    names,
    run,
    waiting_on,
    warning_about,
)
from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project
from watcher.model.types import FindingType, ModelConfig, Thresholds

HOUR = 60 * MIN
KS = "Kustomization/flux-system"
GW = "EdgeGateway/checkout/storefront"
GATEKEEPER = (
    'failed to ensure Service checkout/storefront-lb: services "storefront-lb" is forbidden: '
    "admission webhook "
    '"validation.gatekeeper.sh" denied the request: [deny-public-loadbalancers] Service type LoadBalancer is '
    "not allowed in namespace checkout"
)
KYVERNO_DRY_RUN = (
    'Deployment/apps/web dry-run failed (Forbidden): admission webhook "validate.kyverno.svc-fail" '
    "denied the "
    "request: \n\nresource Deployment/apps/web was blocked due to the following policies \n\n"
    "disallow-privilege-escalation:\n  autogen-privilege-escalation: 'validation error: Privilege "
    "escalation is "
    "disallowed.'\n"
)
VAP_INSTALL = (
    'Helm install failed for release apps/edge with chart edge@1.2.0: services "edge" is forbidden: '
    "ValidatingAdmissionPolicy 'no-loadbalancers' with binding 'no-loadbalancers-apps' denied request: "
    "failed expression: object.spec.type != 'LoadBalancer'"
)


def gateway(labels: dict[str, str] | None = None) -> Obj:
    """The custom resource edge-gateway-controller reconciles (a kind no configured controller claims)."""
    return {
        "apiVersion": "edge.acme.io/v1alpha1",
        "kind": "EdgeGateway",
        "metadata": meta("storefront", "checkout", labels=labels),
        "spec": {"exposure": "LoadBalancer"},
    }


def reconcile_error(
    *,
    count: int,
    first: timedelta,
    last: timedelta,
    message: str = GATEKEEPER,
    reason: str = "ReconcileError",
) -> Obj:
    """edge-gateway-controller's Warning Event about the EdgeGateway it fails to reconcile."""
    found = event(
        f"storefront.{reason.lower()}",
        "checkout",
        kind="EdgeGateway",
        involved="storefront",
        api_version="edge.acme.io/v1alpha1",
        reason=reason,
        message=message,
        count=count,
        first=first,
        last=last,
    )
    found["source"] = {"component": "edge-gateway-controller"}
    found["reportingComponent"] = "edge-gateway-controller"
    return found


def dry_run_denied(name: str = "apps", *, ago: timedelta, interval: str = "10m") -> Obj:
    return kustomization(
        name,
        interval=interval,
        conditions=[cond("Ready", "False", "ReconciliationFailed", KYVERNO_DRY_RUN, ago=ago)],
    )


def upgrade_denied(*, ago: timedelta, stalled: bool = False) -> Obj:
    """A HelmRelease whose upgrade a ValidatingAdmissionPolicy denies; remediated by a rollback,
    or (stalled) out of retries."""
    conditions = [
        cond(
            "Ready",
            "False",
            "RollbackSucceeded",
            "Helm rollback to previous release apps/edge.v3 succeeded",
            ago=ago,
        ),
        cond("Released", "False", "UpgradeFailed", VAP_INSTALL.replace("install", "upgrade"), ago=ago),
    ]
    if stalled:
        conditions.append(
            cond("Stalled", "True", "RetriesExceeded", "Failed to upgrade after 3 attempt(s)", ago=ago)
        )
    return helm_release("edge", "apps", conditions=conditions)


def install_denied(*, ago: timedelta) -> Obj:
    return helm_release(
        "edge", "apps", conditions=[cond("Ready", "False", "InstallFailed", VAP_INSTALL, ago=ago)]
    )


CASES = [
    pytest.param(
        [gateway(), reconcile_error(count=40, first=30 * MIN, last=MIN)],
        {f"PolicyDenied/{GW}"},
        id="event-denial-recurring-is-policy-denied-not-retry-loop",
    ),
    pytest.param(
        [gateway(), reconcile_error(count=1, first=40 * MIN, last=40 * MIN)],
        set(),
        id="single-denial-that-stopped-is-nothing",
    ),
    pytest.param(
        [gateway(), reconcile_error(count=200, first=5 * HOUR, last=2 * HOUR)],
        set(),
        id="denials-that-stopped-two-hours-ago-are-history",
    ),
    pytest.param(
        [gateway(), reconcile_error(count=6, first=3 * MIN, last=MIN)],
        set(),
        id="denials-for-less-than-the-window-are-not-yet-policy-denied",
    ),
    pytest.param(
        [gateway(), reconcile_error(count=2, first=30 * MIN, last=MIN)],
        set(),
        id="two-denials-are-fewer-than-the-count",
    ),
    pytest.param(
        [
            gateway(),
            reconcile_error(
                count=40,
                first=30 * MIN,
                last=MIN,
                message='Internal error occurred: failed calling webhook "validation.gatekeeper.sh": context '
                "deadline exceeded",
            ),
        ],
        {f"RetryLoop/{GW}/ReconcileError"},
        id="webhook-that-cannot-be-called-stays-a-retry-loop",
    ),
    pytest.param(
        [dry_run_denied(ago=40 * MIN)],
        {f"PolicyDenied/{KS}/apps", f"ReconcileFailed/{KS}/apps"},
        id="kustomization-dry-run-denied-at-every-interval",
    ),
    pytest.param(
        [dry_run_denied(ago=15 * MIN)],
        set(),
        id="kustomization-denied-for-fewer-attempts-than-the-count",
    ),
    pytest.param(
        [dry_run_denied(ago=8 * MIN, interval="1m")],
        {f"PolicyDenied/{KS}/apps"},
        id="kustomization-on-a-short-interval-after-the-window",
    ),
    pytest.param(
        [upgrade_denied(ago=HOUR)],
        {"PolicyDenied/HelmRelease/apps/edge", "ReconcileFailed/HelmRelease/apps/edge"},
        id="helmrelease-upgrade-denied-read-from-released",
    ),
    pytest.param(
        [install_denied(ago=HOUR)],
        {"PolicyDenied/HelmRelease/apps/edge", "ReconcileFailed/HelmRelease/apps/edge"},
        id="helmrelease-install-denied-by-a-validating-admission-policy",
    ),
    pytest.param(
        [upgrade_denied(ago=HOUR, stalled=True)],
        {"Stalled/HelmRelease/apps/edge"},
        id="stalled-helmrelease-stopped-retrying-is-stalled-only",
    ),
    pytest.param(
        [
            kustomization(
                "apps",
                conditions=[
                    cond("Ready", "False", "ReconciliationFailed", "kustomize build failed", ago=HOUR)
                ],
            )
        ],
        {f"ReconcileFailed/{KS}/apps"},
        id="kustomization-failing-for-another-reason-is-reconcile-failed",
    ),
]


@pytest.mark.parametrize(("objects", "expected"), CASES)
def test_policy_denied_fires_on_recurring_denials_only(objects: list[Obj], expected: set[str]) -> None:
    assert set(by_id(run(flux(), git_repository(), objects))) == expected


def test_the_finding_names_policy_engine_denied_object_controller_how_often_and_since_when() -> None:
    found = by_id(run(flux(), gateway(), reconcile_error(count=40, first=30 * MIN, last=MIN)))[
        f"PolicyDenied/{GW}"
    ]

    assert found.since == NOW - 30 * MIN
    assert found.is_root
    assert found.evidence == {
        "engine": "gatekeeper",
        "policies": ["deny-public-loadbalancers"],
        "denials": [
            "deny-public-loadbalancers: Service type LoadBalancer is not allowed in namespace checkout"
        ],
        "webhook": "validation.gatekeeper.sh",
        "denied_object": 'services "storefront-lb"',
        "controller": "edge-gateway-controller",
        "count": 40,
        "last": "2024-05-01T11:59:00Z",
        "stacks": [],
    }
    for said in (
        "gatekeeper policy deny-public-loadbalancers",
        "edge-gateway-controller retried it 40 times",
    ):
        assert said in found.message


def test_a_flux_object_names_its_controller_and_interval() -> None:
    found = by_id(run(flux(), git_repository(), dry_run_denied(ago=40 * MIN)))[f"PolicyDenied/{KS}/apps"]

    assert (found.evidence["controller"], found.evidence["every"]) == ("kustomize-controller", "10m")
    assert "count" not in found.evidence, "a condition says how often it is retried, not how many times"
    assert found.evidence["denied_object"] == "Deployment/apps/web"
    assert found.evidence["denials"] == [
        "disallow-privilege-escalation/autogen-privilege-escalation: validation error: Privilege "
        "escalation is "
        "disallowed."
    ]


def test_it_is_the_root_of_the_objects_reconcile_failed_and_other_retry_loops() -> None:
    objects = [
        dry_run_denied(ago=HOUR),
        warning_about(
            "apps", count=30, first=HOUR, last=MIN, reason="ReconciliationFailed", message="retrying"
        ),
    ]

    findings = by_id(run(flux(), git_repository(), objects))

    root = f"PolicyDenied/{KS}/apps"
    assert findings[root].is_root
    assert findings[f"ReconcileFailed/{KS}/apps"].root_cause == root
    assert findings[f"RetryLoop/{KS}/apps/ReconciliationFailed"].root_cause == root


def test_it_is_the_root_of_what_waits_on_the_denied_object() -> None:
    objects = [dry_run_denied("infra", ago=HOUR), waiting_on("apps", "infra", ago=HOUR)]

    findings = by_id(run(flux(), git_repository(), objects))

    root = findings[f"PolicyDenied/{KS}/infra"]
    assert findings[f"DependencyBlocked/{KS}/apps"].root_cause == root.id
    assert names(root.affected) == {f"{KS}/apps"}


def test_events_and_the_condition_of_one_object_are_one_finding() -> None:
    kyverno_event = warning_about(
        "apps", count=12, first=2 * HOUR, last=2 * MIN, reason="ReconciliationFailed", message=KYVERNO_DRY_RUN
    )

    findings = by_id(run(flux(), git_repository(), dry_run_denied(ago=HOUR), kyverno_event))

    [denied] = [f for f in findings.values() if f.type is FindingType.POLICY_DENIED]
    assert denied.since == NOW - 2 * HOUR
    assert (denied.evidence["count"], denied.evidence["every"]) == (12, "10m")
    assert denied.evidence["policies"] == ["disallow-privilege-escalation"]


def test_the_stacks_above_the_trying_object_are_named_and_affected() -> None:
    team = kustomization(
        "team-checkout",
        labels={
            "kustomize.toolkit.fluxcd.io/name": "flux-system",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        },
    )
    top = kustomization(
        "flux-system",
        labels={
            "kustomize.toolkit.fluxcd.io/name": "flux-system",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        },
    )
    owned = gateway(
        {
            "kustomize.toolkit.fluxcd.io/name": "team-checkout",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        }
    )

    found = by_id(
        run(flux(), git_repository(), team, top, owned, reconcile_error(count=40, first=HOUR, last=MIN))
    )

    denied = found[f"PolicyDenied/{GW}"]
    assert denied.evidence["stacks"] == [f"{KS}/team-checkout", f"{KS}/flux-system"]
    assert names(denied.affected) == {f"{KS}/team-checkout", f"{KS}/flux-system"}
    assert (
        "Stacks affected: Kustomization flux-system/team-checkout, Kustomization flux-system/flux-system."
        in (denied.message)
    )


@pytest.mark.parametrize(
    ("thresholds", "expected"),
    [
        pytest.param(Thresholds(policy_denied_count=100), set(), id="count-above-the-events"),
        pytest.param(Thresholds(policy_denied_window=2 * HOUR), set(), id="window-longer-than-the-denials"),
        pytest.param(
            Thresholds(policy_denied_count=2, policy_denied_window=MIN), {f"PolicyDenied/{GW}"}, id="loose"
        ),
    ],
)
def test_count_and_window_come_from_the_config(thresholds: Thresholds, expected: set[str]) -> None:
    config = replace(ModelConfig(), thresholds=thresholds)

    evaluation = run(flux(), gateway(), reconcile_error(count=40, first=30 * MIN, last=MIN), config=config)

    assert set(by_id(evaluation)) == expected


def test_it_ends_by_itself_once_the_denials_stop() -> None:
    model = HealthModel()
    for obj in (*flux(leases=False), gateway(), reconcile_error(count=40, first=30 * MIN, last=MIN)):
        model.upsert(project(obj), now=NOW)

    assert [f.type for f in model.evaluate(NOW).findings] == [FindingType.POLICY_DENIED]
    assert model.evaluate(NOW + 30 * MIN).findings == []


def test_a_flux_object_becomes_policy_denied_when_its_attempts_are_due() -> None:
    model = HealthModel()
    for obj in (*flux(leases=False), git_repository(), dry_run_denied(ago=5 * MIN)):
        model.upsert(project(obj), now=NOW)

    assert model.evaluate(NOW).findings == []
    [root] = model.evaluate(NOW + 15 * MIN).roots
    assert root.type is FindingType.POLICY_DENIED


def denied_replicaset(namespace: str = "shop") -> list[Obj]:
    """A ReplicaSet of Deployment `web` and replicaset-controller's Event: its Pods are denied."""
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            **meta("web-7d9f", namespace),
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True}
            ],
        },
        "spec": {"replicas": 2},
        "status": {"replicas": 0, "observedGeneration": 1},
    }
    failed_create = event(
        "web-7d9f.1",
        namespace,
        kind="ReplicaSet",
        involved="web-7d9f",
        reason="FailedCreate",
        message='Error creating: admission webhook "validation.gatekeeper.sh" denied the request: '
        "[psp-privileged-container] Privileged container is not allowed: web",
        count=25,
        first=HOUR,
        last=MIN,
    )
    failed_create.update(
        source={"component": "replicaset-controller"}, reportingComponent="replicaset-controller"
    )
    return [replicaset, failed_create]


def test_a_ready_helmrelease_over_a_deployment_whose_pods_are_denied_is_the_denials_symptom() -> None:
    helm = {"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "shop"}
    release = helm_release("web", "shop")

    findings = by_id(
        run(
            flux(),
            git_repository(),
            release,
            deployment("web", "shop", available=0, labels=helm),
            denied_replicaset(),
        )
    )

    root = "PolicyDenied/ReplicaSet/shop/web-7d9f"
    assert findings[root].is_root
    assert findings["ReleaseReadyWorkloadFailing/HelmRelease/shop/web"].root_cause == root
    assert findings["WorkloadUnhealthy/Deployment/shop/web"].root_cause == root
    assert findings[root].evidence["stacks"] == ["HelmRelease/shop/web"]


def test_pods_a_policy_denies_name_the_stack_of_the_deployment_that_owns_their_replicaset() -> None:
    """kube-controller-manager's replicaset-controller retries the Pods of a ReplicaSet; its Event's
    message is the API server's answer (Error creating: ...). The ReplicaSet carries no stack's
    labels: its owning Deployment's does."""
    owned = {
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    }
    objects = [
        kustomization("apps", inventory=["shop_web_apps_Deployment"]),
        deployment("web", "shop", available=0, labels=owned),
        *denied_replicaset(),
    ]

    findings = by_id(run(flux(), git_repository(), objects))

    denied = findings["PolicyDenied/ReplicaSet/shop/web-7d9f"]
    assert (denied.evidence["controller"], denied.evidence["stacks"]) == (
        "replicaset-controller",
        [f"{KS}/apps"],
    )
    assert findings["WorkloadUnhealthy/Deployment/shop/web"].root_cause == denied.id, (
        "a Deployment with no Pods because they are denied is the denial's symptom"
    )
    assert names(denied.affected) == {"Deployment/shop/web", f"{KS}/apps"}
