"""CRDOwnershipRisk: a CRD one stack installs and another stack's controller needs, before Helm
or kustomize-controller deletes it; and CRDRemoved naming that installer once it happened.

The world: tofu-controller reconciles Terraform (infra.contrib.fluxcd.io); its CRD carries
the ownership marks Helm (meta.helm.sh/release-*), helm-controller (helm.toolkit.fluxcd.io/*)
and kustomize-controller (kustomize.toolkit.fluxcd.io/*, status.inventory) write.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    Obj,
    by_id,
    controller,
    crd,
    deployment,
    flux,
    git_repository,
    helm_release,
    kustomization,
    run,
    terraform,
)
from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project
from watcher.model.types import Finding, FindingType

RISK_ID = "CRDOwnershipRisk/CustomResourceDefinition/terraforms.infra.contrib.fluxcd.io"
REMOVED_ID = "CRDRemoved/CustomResourceDefinition/terraforms.infra.contrib.fluxcd.io"
CRD_INVENTORY_ID = "_terraforms.infra.contrib.fluxcd.io_apiextensions.k8s.io_CustomResourceDefinition"


def helm_owned(release: str, namespace: str) -> dict[str, dict[str, str]]:
    """What helm-controller and Helm write on an object a HelmRelease installed."""
    return {
        "labels": {
            "app.kubernetes.io/managed-by": "Helm",
            "helm.toolkit.fluxcd.io/name": release,
            "helm.toolkit.fluxcd.io/namespace": namespace,
        },
        "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace},
    }


def plain_helm_owned(release: str, namespace: str) -> dict[str, dict[str, str]]:
    """What `helm install` alone writes (no HelmRelease manages the release)."""
    return {
        "labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace},
    }


def kustomize_owned(name: str, namespace: str = "flux-system") -> dict[str, dict[str, str]]:
    return {
        "labels": {
            "kustomize.toolkit.fluxcd.io/name": name,
            "kustomize.toolkit.fluxcd.io/namespace": namespace,
        }
    }


def marked(obj: Obj, *marks: Mapping[str, Mapping[str, str]]) -> Obj:
    meta = obj["metadata"]
    for mark in marks:
        for field, values in mark.items():
            meta[field] = {**meta.get(field, {}), **values}
    return obj


def terraform_crd(*marks: Mapping[str, Mapping[str, str]]) -> Obj:
    return marked(crd("terraforms", "infra.contrib.fluxcd.io", "Terraform"), *marks)


def tofu(*marks: Mapping[str, Mapping[str, str]]) -> list[Obj]:
    """tofu-controller's Deployment (marked as installed by ...), its Pod and Lease."""
    workload, *rest = controller("tofu-controller")
    return [marked(workload, *marks), *rest]


def in_stack(obj: Obj, stack: str) -> Obj:
    return marked(obj, kustomize_owned(stack))


def world(crd_obj: Obj, controller_objs: list[Obj], *extra: Obj) -> list[Obj]:
    return [
        *flux(),
        *controller_objs,
        crd_obj,
        git_repository("infra"),
        helm_release("platform", "team-a"),
        helm_release("tofu", "team-b"),
        in_stack(terraform("vpc", "data"), "infra-data"),
        in_stack(terraform("rds", "data"), "infra-data"),
        terraform("dns", "edge"),
        *extra,
    ]


def risks(objs: list[Obj]) -> list[Finding]:
    return [f for f in run(objs).findings if f.type is FindingType.CRD_OWNERSHIP_RISK]


@pytest.mark.parametrize(
    ("objs", "installed_by"),
    [
        pytest.param(
            world(terraform_crd(helm_owned("platform", "team-a")), tofu(helm_owned("tofu", "team-b"))),
            ["HelmRelease team-a/platform"],
            id="crd_of_one_helm_release_reconciled_by_a_controller_another_release_deployed",
        ),
        pytest.param(
            world(
                terraform_crd(plain_helm_owned("legacy", "team-a")),
                tofu(plain_helm_owned("legacy-tofu", "team-b")),
            ),
            ["Helm release team-a/legacy"],
            id="plain_helm_releases_without_a_helmrelease_count_as_releases",
        ),
        pytest.param(
            world(terraform_crd(kustomize_owned("crds")), tofu(helm_owned("tofu", "team-b"))),
            ["Kustomization flux-system/crds"],
            id="crd_labelled_by_a_kustomization_reconciled_by_a_helm_release_controller",
        ),
        pytest.param(
            world(
                terraform_crd(),
                tofu(kustomize_owned("controllers")),
                kustomization("crds", inventory=[CRD_INVENTORY_ID]),
            ),
            ["Kustomization flux-system/crds"],
            id="crd_listed_in_a_kustomization_inventory_reconciled_by_another_kustomization_controller",
        ),
        pytest.param(
            world(
                terraform_crd(helm_owned("platform", "team-a")),
                tofu(helm_owned("platform", "team-a")),
                kustomization("crds", inventory=[CRD_INVENTORY_ID]),
            ),
            ["HelmRelease team-a/platform", "Kustomization flux-system/crds"],
            id="crd_claimed_by_two_installers_is_a_risk_even_with_its_controller_in_one_of_them",
        ),
    ],
)
def test_crd_another_stack_depends_on_is_a_risk_naming_its_installers(
    objs: list[Obj], installed_by: list[str]
) -> None:
    [risk] = risks(objs)

    assert risk.id == RISK_ID
    assert risk.is_root
    assert risk.evidence["installed_by"] == installed_by
    assert risk.evidence["objects"] == 3
    assert risk.evidence["stacks"] == {"Kustomization flux-system/infra-data": 2, "no stack": 1}
    assert {s["name"] for s in risk.affected} >= {"vpc", "rds", "dns"}
    assert risk.message.startswith(
        f"Removing or upgrading {installed_by[0]} deletes"
        if len(installed_by) == 1
        else f"{' and '.join(installed_by)} each install"
    )
    assert "3 Terraform objects" in risk.message
    assert "helm.sh/resource-policy: keep" in risk.message


def test_the_risk_names_the_controller_and_the_release_that_deployed_it() -> None:
    [risk] = risks(world(terraform_crd(helm_owned("platform", "team-a")), tofu(helm_owned("tofu", "team-b"))))

    assert risk.evidence["controllers"] == [
        {
            "name": "tofu-controller",
            "workload": "Deployment flux-system/tofu-controller",
            "deployed_by": "HelmRelease team-b/tofu",
        }
    ]
    assert (
        "tofu-controller (Deployment flux-system/tofu-controller, deployed by HelmRelease team-b/tofu)"
        in (risk.message)
    )
    assert risk.severity == "warning"


@pytest.mark.parametrize(
    "objs",
    [
        pytest.param(
            world(terraform_crd(helm_owned("platform", "team-a")), tofu(helm_owned("platform", "team-a"))),
            id="crd_and_its_only_consumer_controller_in_the_same_release",
        ),
        pytest.param(
            world(
                terraform_crd(
                    helm_owned("platform", "team-a"), {"annotations": {"helm.sh/resource-policy": "keep"}}
                ),
                tofu(helm_owned("tofu", "team-b")),
            ),
            id="crd_kept_by_helm_resource_policy_keep",
        ),
        pytest.param(
            world(terraform_crd(), tofu(helm_owned("tofu", "team-b"))),
            id="crd_not_installed_by_any_release_or_kustomization",
        ),
        pytest.param(
            world(
                terraform_crd({"labels": {"app.kubernetes.io/managed-by": "Helm"}}),
                tofu(helm_owned("tofu", "team-b")),
            ),
            id="managed_by_helm_alone_names_no_release",
        ),
        pytest.param(
            world(terraform_crd(helm_owned("platform", "team-a")), tofu()),
            id="crd_whose_controller_no_release_deployed",
        ),
        pytest.param(
            [*world(terraform_crd(helm_owned("platform", "team-a")), [])],
            id="crd_whose_kind_no_running_controller_reconciles",
        ),
    ],
)
def test_near_misses_are_no_risk(objs: list[Obj]) -> None:
    assert risks(objs) == []


def test_a_crd_being_deleted_is_no_longer_a_risk_but_a_removal_naming_its_installer() -> None:
    """The risk came true: the CRD is going, CRDRemoved is the root, naming the release."""
    objs = world(terraform_crd(helm_owned("platform", "team-a")), tofu(helm_owned("tofu", "team-b")))
    model = HealthModel()
    for obj in objs:
        model.upsert(project(obj), now=NOW)
    assert RISK_ID in by_id(model.evaluate(NOW))

    going = terraform_crd(helm_owned("platform", "team-a"))
    going["metadata"]["deletionTimestamp"] = "2024-05-01T12:01:00Z"
    model.upsert(project(going), now=NOW + MIN)
    findings = by_id(model.evaluate(NOW + MIN))

    assert RISK_ID not in findings
    removal = findings[REMOVED_ID]
    assert removal.is_root
    assert removal.evidence["installed_by"] == ["HelmRelease team-a/platform"]
    assert "installed by HelmRelease team-a/platform" in removal.message
    assert {s["name"] for s in removal.affected} == {"vpc", "rds", "dns"}


def test_the_live_model_sees_the_risk_appear_and_go_as_the_controller_moves() -> None:
    """The risk depends on another object than the CRD: its controller's Deployment."""
    model = HealthModel()
    objs = world(terraform_crd(helm_owned("platform", "team-a")), tofu(helm_owned("platform", "team-a")))
    for obj in objs:
        model.upsert(project(obj), now=NOW)
    assert RISK_ID not in by_id(model.evaluate(NOW))

    moved = marked(
        deployment("tofu-controller", image="ghcr.io/fluxcd/tofu-controller:v1.3.0"),
        helm_owned("tofu", "team-b"),
    )
    model.upsert(project(moved), now=NOW + MIN)
    assert RISK_ID in by_id(model.evaluate(NOW + MIN))

    kept = terraform_crd(
        helm_owned("platform", "team-a"), {"annotations": {"helm.sh/resource-policy": "keep"}}
    )
    model.upsert(project(kept), now=NOW + 2 * MIN)
    assert RISK_ID not in by_id(model.evaluate(NOW + 2 * MIN))


def test_objects_created_later_are_counted_in_the_risk() -> None:
    model = HealthModel()
    for obj in world(terraform_crd(helm_owned("platform", "team-a")), tofu(helm_owned("tofu", "team-b"))):
        model.upsert(project(obj), now=NOW)
    assert by_id(model.evaluate(NOW))[RISK_ID].evidence["objects"] == 3

    model.upsert(project(in_stack(terraform("cdn", "edge"), "infra-edge")), now=NOW + MIN)

    risk = by_id(model.evaluate(NOW + MIN))[RISK_ID]
    assert risk.evidence["objects"] == 4
    assert risk.evidence["stacks"]["Kustomization flux-system/infra-edge"] == 1
