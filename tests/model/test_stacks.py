"""Stacks: one tree per root Kustomization, each row judged as stalewatch judges it.

Objects are built as Flux, helm-controller, tofu-controller and kube-controller-manager write
them (tests/model/builders.py), projected and fed to the real HealthModel, whose evaluation and
snapshot the forest is built from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    SHA_N,
    SHA_N1,
    Obj,
    cond,
    controller,
    controller_down,
    deployment,
    flux,
    git_repository,
    helm_chart,
    helm_release,
    helm_upgrade_failed,
    kustomization,
    terraform,
)
from watcher.model.engine import HealthModel
from watcher.model.ingest.objects import Key
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig
from watcher.model.views.row_verdicts import Verdict
from watcher.model.views.stacks import STACK_KINDS, Forest, Row, build_forest

REV_A, REV_B = f"main@sha1:{SHA_N}", f"main@sha1:{SHA_N1}"
TOFU_IMAGE = "ghcr.io/flux-iac/tofu-controller:v0.16.0-rc.5"


def ks(name: str) -> str:
    return f"flux-system_{name}_kustomize.toolkit.fluxcd.io_Kustomization"


def tf(name: str) -> str:
    return f"flux-system_{name}_infra.contrib.fluxcd.io_Terraform"


def hr(name: str) -> str:
    return f"flux-system_{name}_helm.toolkit.fluxcd.io_HelmRelease"


def deploy(name: str, namespace: str = "flux-system") -> str:
    return f"{namespace}_{name}_apps_Deployment"


def forest(*objs: Obj | Iterable[Obj], blind: Iterable[str] = ()) -> Forest:
    model = HealthModel(ModelConfig())
    for item in objs:
        for obj in [item] if isinstance(item, dict) else item:
            model.upsert(project(obj), now=NOW)
    model.set_blind(blind)
    evaluation = model.evaluate(NOW)
    return build_forest(model.snapshot(STACK_KINDS), evaluation)


def row(found: Forest, kind: str, name: str) -> Row:
    (match,) = [r for s in found.stacks for r in s.rows if (r.key.kind, r.key.name) == (kind, name)]
    return match


HEALTH_CHECK_FAILED = cond(
    "Ready",
    "False",
    "HealthCheckFailed",
    "health check failed after 5m0s: timeout waiting for: [Terraform/flux-system/vpc status: 'InProgress']",
    ago=35 * MIN,
)


def tofu_stack(*, infra: list[Obj] | None = None) -> list[Obj]:
    """flux-system applies infra (two Terraforms) and apps; tofu-controller cannot pull its
    image; `infra`: the conditions of the Kustomization that health-checks the Terraforms."""
    return [
        *flux(leases=False),
        *controller_down("tofu-controller", TOFU_IMAGE),
        git_repository("flux-system"),
        git_repository("infra"),
        kustomization("flux-system", inventory=[ks("infra"), ks("apps")]),
        kustomization("infra", source="infra", inventory=[tf("vpc"), tf("dns")], conditions=infra),
        kustomization("apps"),
        terraform("vpc"),
        terraform("dns"),
    ]


@dataclass(frozen=True)
class Case:
    objects: Callable[[], list[Obj]]
    check: Callable[[Forest], Any]
    expected: Any
    blind: tuple[str, ...] = ()


def shape(found: Forest) -> list[list[tuple[int, str]]]:
    return [[(r.depth, r.key.name) for r in s.rows] for s in found.stacks]


def verdicts(found: Forest) -> dict[str, Verdict]:
    return {r.key.name: r.verdict for s in found.stacks for r in s.rows}


CASES = [
    pytest.param(
        Case(tofu_stack, shape, [[(0, "flux-system"), (1, "apps"), (1, "infra"), (2, "dns"), (2, "vpc")]]),
        id="a-root-is-a-kustomization-no-inventory-lists-its-children-sit-under-their-parent",
    ),
    pytest.param(
        Case(
            lambda: [*flux(leases=False), git_repository(), kustomization("a"), kustomization("b")],
            lambda f: [s.root.name for s in f.stacks],
            ["a", "b"],
        ),
        id="two-kustomizations-nobody-applied-are-two-stacks",
    ),
    pytest.param(
        Case(
            lambda: [
                *flux(leases=False),
                git_repository(revision=REV_B),
                kustomization("apps", applied=REV_A),
            ],
            lambda f: (
                row(f, "Kustomization", "apps").revision,
                row(f, "Kustomization", "apps").applied,
                row(f, "Kustomization", "apps").skew,
            ),
            (REV_B, REV_A, True),
        ),
        id="an-applied-revision-behind-its-sources-artifact-is-skew",
    ),
    pytest.param(
        Case(
            lambda: [
                *flux(leases=False),
                git_repository(revision=REV_A),
                kustomization("apps", applied=REV_A),
            ],
            lambda f: row(f, "Kustomization", "apps").skew,
            False,
        ),
        id="the-same-revision-is-no-skew",
    ),
    pytest.param(
        Case(
            tofu_stack,
            lambda f: [
                (r.verdict, r.status) for r in (row(f, "Terraform", "vpc"), row(f, "Terraform", "dns"))
            ],
            [(Verdict.STALE, "Current"), (Verdict.STALE, "Current")],
        ),
        id="a-terraform-whose-controller-is-down-is-stale-not-its-cached-ready",
    ),
    pytest.param(
        Case(
            tofu_stack,
            lambda f: (lambda r: (r.name, r.alive, r.reason, r.workload and r.workload["name"]))(
                row(f, "Terraform", "vpc").reconciler
            ),
            ("tofu-controller", False, "ImagePullBackOff", "tofu-controller"),
        ),
        id="the-row-names-its-controller-down-with-the-reason",
    ),
    pytest.param(
        Case(
            tofu_stack,
            lambda f: (lambda r: (r.name, r.alive))(row(f, "Kustomization", "infra").reconciler),
            ("kustomize-controller", True),
        ),
        id="the-row-names-its-controller-alive",
    ),
    pytest.param(
        Case(
            lambda: [
                *flux(leases=False),
                git_repository(),
                helm_chart("flux-system-podinfo", version="6.6.0"),
                kustomization("apps", inventory=[hr("podinfo")]),
                helm_upgrade_failed("podinfo", attempted="6.6.0"),
            ],
            lambda f: (row(f, "HelmRelease", "podinfo").attempted, row(f, "HelmRelease", "podinfo").applied),
            ("6.6.0", "6.5.0"),
        ),
        id="a-helmrelease-shows-the-chart-attempted-and-the-chart-still-deployed",
    ),
    pytest.param(
        Case(
            lambda: [
                *flux(leases=False),
                git_repository(),
                kustomization("apps", inventory=[hr("podinfo")]),
                helm_release("podinfo"),
                deployment(
                    "podinfo",
                    labels={
                        "helm.toolkit.fluxcd.io/name": "podinfo",
                        "helm.toolkit.fluxcd.io/namespace": "flux-system",
                    },
                ),
            ],
            shape,
            [[(0, "apps"), (1, "podinfo"), (2, "podinfo")]],
        ),
        id="the-workloads-a-helmrelease-installed-sit-under-it",
    ),
    pytest.param(
        Case(
            lambda: [
                *flux(leases=False),
                git_repository(),
                kustomization("apps", inventory=[deploy("web", "shop")]),
            ],
            lambda f: (row(f, "Deployment", "web").verdict, row(f, "Deployment", "web").reason),
            (Verdict.MISSING, "applied by Kustomization flux-system/apps but not in the cluster"),
        ),
        id="an-inventory-entry-not-in-the-cluster-is-missing",
    ),
    pytest.param(
        Case(
            lambda: [
                *flux(leases=False),
                git_repository(),
                kustomization("infra", inventory=[tf("vpc")]),
                terraform("vpc"),
            ],
            lambda f: row(f, "Terraform", "vpc").verdict,
            Verdict.NOT_JUDGED,
            blind=("Terraform",),
        ),
        id="a-kind-stalewatch-cannot-see-is-not-judged-never-current",
    ),
    pytest.param(
        Case(
            lambda: [
                *flux(leases=False),
                git_repository(),
                kustomization(
                    "apps",
                    conditions=[
                        cond("Ready", "False", "BuildFailed", "kustomize build failed", ago=30 * MIN)
                    ],
                ),
            ],
            lambda f: (row(f, "Kustomization", "apps").verdict, row(f, "Kustomization", "apps").reason),
            (Verdict.FAILING, "ReconcileFailed"),
        ),
        id="an-object-with-a-finding-is-failing",
    ),
    pytest.param(
        Case(
            lambda: tofu_stack(infra=[HEALTH_CHECK_FAILED]),
            lambda f: (f.stacks[0].worst, f.stacks[0].stale, f.stacks[0].failing, len(f.stacks[0].rows)),
            (Verdict.FAILING, 2, 1, 5),
        ),
        id="the-header-rolls-up-the-worst-verdict-and-how-many-are-stale-or-failing",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_stacks(case: Case) -> None:
    assert case.check(forest(case.objects(), blind=case.blind)) == case.expected


def test_a_stack_lists_an_object_once_under_its_shallowest_parent_and_chains_up_to_the_root() -> None:
    found = forest(
        *flux(leases=False),
        git_repository(),
        kustomization("root", inventory=[ks("mid"), tf("vpc")]),
        kustomization("mid", inventory=[tf("vpc")]),
        terraform("vpc"),
    )
    assert shape(found) == [[(0, "root"), (1, "mid"), (1, "vpc")]]
    chain = [
        r.key.name for r in found.chain(Key("infra.contrib.fluxcd.io", "Terraform", "flux-system", "vpc"))
    ]
    assert chain == ["vpc", "root"]


def test_flux_system_applying_itself_is_still_a_root_and_a_cycle_still_gets_a_stack() -> None:
    found = forest(
        *flux(leases=False),
        git_repository(),
        kustomization("flux-system", inventory=[ks("flux-system"), ks("apps")]),
        kustomization("apps"),
        kustomization("ping", inventory=[ks("pong")]),
        kustomization("pong", inventory=[ks("ping")]),
    )
    assert shape(found) == [[(0, "flux-system"), (1, "apps")], [(0, "ping"), (1, "pong")]]


def test_the_worst_stacks_come_first() -> None:
    found = forest(
        *flux(leases=False),
        git_repository(),
        kustomization("a-fine"),
        kustomization(
            "b-broken",
            conditions=[cond("Ready", "False", "BuildFailed", "kustomize build failed", ago=30 * MIN)],
        ),
    )
    assert [(s.root.name, s.worst) for s in found.stacks] == [
        ("b-broken", Verdict.FAILING),
        ("a-fine", Verdict.CURRENT),
    ]
    assert verdicts(found) == {"a-fine": Verdict.CURRENT, "b-broken": Verdict.FAILING}


def test_an_object_prune_left_behind_sits_under_its_former_kustomization_marked_orphaned() -> None:
    """PruneOrphan: Terraform dns was removed from infra's build (its inventory lists vpc only) and
    not pruned; the stack shows it where it came from, failing, and says why."""
    owned = {
        "kustomize.toolkit.fluxcd.io/name": "infra",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    }
    dns = terraform("dns")
    dns["metadata"]["labels"] = owned
    found = forest(
        *flux(),
        controller("tofu-controller"),
        git_repository("flux-system"),
        git_repository("infra"),
        kustomization("flux-system", inventory=[ks("infra")]),
        kustomization("infra", source="infra", inventory=[tf("vpc")]),
        terraform("vpc"),
        dns,
    )
    assert shape(found) == [[(0, "flux-system"), (1, "infra"), (2, "dns"), (2, "vpc")]]
    orphan = row(found, "Terraform", "dns")
    assert (orphan.parent, orphan.orphaned) == (
        Key("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "infra"),
        True,
    )
    assert (orphan.verdict, orphan.reason) == (Verdict.FAILING, "PruneOrphan")
    assert not row(found, "Terraform", "vpc").orphaned
