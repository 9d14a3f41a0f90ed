"""watcher.model.views.impact, one named case per rule: what follows from an object going away or
stopping, on a small world of two teams' stacks, a CRD, its controller and a chart source."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.model.builders import crd, deployment, helm_chart, helm_release, kustomization
from watcher.model.ingest.objects import Key
from watcher.model.ingest.projection import project
from watcher.model.store.graph import Store
from watcher.model.types import DEFAULT_CONTROLLERS, ControllerSpec
from watcher.model.views.impact import impact
from watcher.model.views.impact_tree import Effect, Outcome, SnapshotSight

Obj = dict[str, Any]
WIDGETS = "widgets.acme.io"
SPEC = ControllerSpec(name="widget-controller", groups=("acme.io",))
OTHER = ControllerSpec(name="widget-controller-v2", groups=("acme.io",))
HELM = "helm.toolkit.fluxcd.io"
KS = "kustomize.toolkit.fluxcd.io"


def helm_labels(namespace: str, name: str) -> dict[str, str]:
    return {f"{HELM}/name": name, f"{HELM}/namespace": namespace}


def widget(namespace: str, name: str, **annotations: str) -> Obj:
    labels = {f"{KS}/name": "team-a", f"{KS}/namespace": "flux-system"}
    meta = {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}
    return {"apiVersion": "acme.io/v1", "kind": "Widget", "metadata": meta, "status": {}}


def world(
    *,
    keep: bool = False,
    prune_disabled: bool = False,
    no_prune: bool = False,
    second_controller: bool = False,
) -> list[Obj]:
    widgets = crd("widgets", "acme.io", "Widget")
    widgets["metadata"]["labels"] = helm_labels("platform", "platform")
    if keep:
        widgets["metadata"]["annotations"] = {"helm.sh/resource-policy": "keep"}
    chart = helm_chart("platform-platform", "platform")  # helm-controller's, for HelmRelease platform
    chart["metadata"]["labels"] = helm_labels("platform", "platform")
    chart["spec"]["sourceRef"]["namespace"] = "flux-system"
    controller = deployment("widget-controller", "ops", labels=helm_labels("ops", "widgets-operator"))
    objs = [
        widgets,
        controller,
        helm_release("platform", "platform"),
        helm_release("widgets-operator", "ops"),
        widget(
            "team-a", "w1", **({"kustomize.toolkit.fluxcd.io/prune": "disabled"} if prune_disabled else {})
        ),
        kustomization("team-a", inventory=["team-a_w1_acme.io_Widget"]),
        kustomization("team-b", depends_on=["team-a"]),
        kustomization("team-c", depends_on=["team-b"]),
        chart,
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "HelmRepository",
            "metadata": {"name": "podinfo", "namespace": "flux-system"},
            "spec": {"url": "https://charts.example"},
        },
    ]
    if no_prune:
        next(o for o in objs if o["metadata"]["name"] == "team-a")["spec"]["prune"] = False
    if second_controller:
        objs.append(deployment("widget-controller-v2", "ops"))
    return objs


def store_of(objs: list[Obj]) -> Store:
    store = Store()
    for obj in objs:
        store.put(project(obj))
    return store


def effects(target: Key, objs: list[Obj], *, controllers: tuple[ControllerSpec, ...] = (SPEC,)) -> set[Any]:
    store = store_of(objs)
    found = impact(
        target, store, controllers=(*controllers, *DEFAULT_CONTROLLERS), sight=SnapshotSight(store)
    )
    return {(node.effect, node.key.kind, node.key.name) for node in found.root.walk() if node.key != target}


CRD = Key("apiextensions.k8s.io", "CustomResourceDefinition", "", WIDGETS)
PLATFORM = Key(HELM, "HelmRelease", "platform", "platform")
CONTROLLER = Key("apps", "Deployment", "ops", "widget-controller")
TEAM_A = Key(KS, "Kustomization", "flux-system", "team-a")
REPOSITORY = Key("source.toolkit.fluxcd.io", "HelmRepository", "flux-system", "podinfo")
BLOCKED_CHAIN = {(Effect.BLOCKED, "Kustomization", n) for n in ("team-a", "team-b", "team-c")}

Case = tuple[Key, Callable[[], list[Obj]], tuple[ControllerSpec, ...], set[Any]]


@pytest.mark.parametrize(
    ("target", "objects", "controllers", "expected"),
    [
        pytest.param(
            CRD,
            world,
            (SPEC,),
            {
                (Effect.DELETED, "Widget", "w1"),
                (Effect.CANNOT_WATCH, "Deployment", "widget-controller"),
                *BLOCKED_CHAIN,
            },
            id="a-crd-gone-deletes-its-objects-its-controller-cannot-watch-their-installer-is-blocked",
        ),
        pytest.param(
            PLATFORM,
            world,
            (SPEC,),
            {
                (Effect.REMOVED, "CustomResourceDefinition", WIDGETS),
                (Effect.REMOVED, "HelmChart", "platform-platform"),
                (Effect.DELETED, "Widget", "w1"),
                (Effect.CANNOT_WATCH, "Deployment", "widget-controller"),
                *BLOCKED_CHAIN,
            },
            id="a-release-removes-what-it-installed-and-what-follows-from-that",
        ),
        pytest.param(
            PLATFORM,
            lambda: world(keep=True),
            (SPEC,),
            {
                (Effect.KEPT, "CustomResourceDefinition", WIDGETS),
                (Effect.REMOVED, "HelmChart", "platform-platform"),
            },
            id="a-crd-with-resource-policy-keep-stays-when-its-release-goes",
        ),
        pytest.param(
            TEAM_A,
            lambda: world(prune_disabled=True),
            (SPEC,),
            {
                (Effect.KEPT, "Widget", "w1"),
                (Effect.BLOCKED, "Kustomization", "team-b"),
                (Effect.BLOCKED, "Kustomization", "team-c"),
            },
            id="an-object-with-prune-disabled-stays-and-dependsOn-is-followed-transitively",
        ),
        pytest.param(
            TEAM_A,
            lambda: world(no_prune=True),
            (SPEC,),
            {
                (Effect.KEPT, "Widget", "w1"),
                (Effect.BLOCKED, "Kustomization", "team-b"),
                (Effect.BLOCKED, "Kustomization", "team-c"),
            },
            id="a-kustomization-with-prune-false-leaves-what-it-applied",
        ),
        pytest.param(
            CONTROLLER,
            world,
            (SPEC,),
            {(Effect.UNRECONCILED, "Widget", "w1"), *BLOCKED_CHAIN},
            id="a-stopped-controller-leaves-its-objects-unreconciled-and-the-stack-waiting-on-them-blocked",
        ),
        pytest.param(
            CONTROLLER,
            lambda: world(second_controller=True),
            (SPEC, OTHER),
            set(),
            id="another-controller-running-for-the-kind-means-nothing-breaks",
        ),
        pytest.param(
            REPOSITORY,
            world,
            (SPEC,),
            {(Effect.BLOCKED, "HelmChart", "platform-platform"), (Effect.BLOCKED, "HelmRelease", "platform")},
            id="a-source-gone-blocks-the-charts-built-from-it-and-their-releases",
        ),
    ],
)
def test_what_follows_from_an_object_going(
    target: Key,
    objects: Callable[[], list[Obj]],
    controllers: tuple[ControllerSpec, ...],
    expected: set[Any],
) -> None:
    assert effects(target, objects(), controllers=controllers) == expected


def test_a_kind_it_reads_that_was_not_looked_at_makes_nothing_found_unknown_never_nothing() -> None:
    objs = [o for o in world() if o["kind"] != "HelmChart"]
    store = store_of(objs)
    found = impact(REPOSITORY, store, controllers=DEFAULT_CONTROLLERS, sight=SnapshotSight(store))
    assert found.broken == []
    assert found.blind == ("HelmChart: none in the snapshot",)
    assert found.outcome is Outcome.UNKNOWN


def test_each_object_appears_once_under_the_first_cause_that_reaches_it() -> None:
    store = store_of(world())
    found = impact(CRD, store, controllers=(SPEC, *DEFAULT_CONTROLLERS), sight=SnapshotSight(store))
    keys = [node.key for node in found.root.walk()]
    assert len(keys) == len(set(keys))
    [w1] = [n for n in found.root.children if n.key.kind == "Widget"]
    assert [c.key.name for c in w1.children] == ["team-a"]
    assert w1.stack == TEAM_A
