"""The timeline of what changed, as the live model records it: one named case per transition, and
the near misses that must record nothing (a resync, a scale, a restart, a reworded condition).

Driven through the real LiveModel and HealthModel, fed projections the way the reflectors feed
them: an initial list (upserts, then the end of the list), then changes, then an evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    SHA_N,
    SHA_N1,
    cond,
    deployment,
    flux,
    helm_release,
    kustomization,
    meta,
    pod,
    ready,
    terraform,
)
from watcher.kube.live import LiveModel
from watcher.kube.resources import Resource
from watcher.model.ingest.objects import key_of
from watcher.model.ingest.packed import Packed, pack
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig, Subject
from watcher.model.views.timeline import Change, Entry, Timeline, preceding
from watcher.telemetry import Telemetry

Obj = dict[str, Any]
KC = "kustomize-controller"
OLD_IMAGE = "ghcr.io/fluxcd/kustomize-controller:v1.3.0"
NEW_IMAGE = "ghcr.io/fluxcd/kustomize-controller:v1.4.0-rc.1"
UNDO = f"kubectl rollout undo deployment/{KC} -n flux-system"


def replicaset(
    deployment_name: str,
    template_hash: str,
    *,
    revision: int,
    image: str,
    replicas: int = 1,
    namespace: str = "flux-system",
    restarted_at: str | None = None,
) -> Obj:
    """A ReplicaSet as kube-controller-manager's deployment controller writes it: named after its
    Deployment and pod-template-hash, controlled by it, its rollout number in the revision
    annotation next to desired-replicas and max-replicas."""
    template_meta: Obj = {"labels": {"app": deployment_name, "pod-template-hash": template_hash}}
    if restarted_at:
        template_meta["annotations"] = {"kubectl.kubernetes.io/restartedAt": restarted_at}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta(
            f"{deployment_name}-{template_hash}",
            namespace,
            labels={"app": deployment_name, "pod-template-hash": template_hash},
            annotations={
                "deployment.kubernetes.io/desired-replicas": str(replicas),
                "deployment.kubernetes.io/max-replicas": str(replicas + 1),
                "deployment.kubernetes.io/revision": str(revision),
            },
            ownerReferences=[
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment_name,
                    "uid": f"uid-{namespace}-{deployment_name}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        ),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": deployment_name, "pod-template-hash": template_hash}},
            "template": {
                "metadata": template_meta,
                "spec": {"containers": [{"name": "manager", "image": image}]},
            },
        },
        "status": {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas},
    }


def _resource(obj: Obj) -> Resource:
    group, _, version = obj["apiVersion"].rpartition("/")
    return Resource(group, version, obj["kind"], obj["kind"].lower() + "s")


class Rig:
    """A LiveModel after its initial list and first evaluation (the baseline), on a test clock."""

    def __init__(self, objs: Sequence[Obj], *, limit: int = 2000) -> None:
        self.now = NOW
        self.telemetry = Telemetry(up=True, started=True)
        self.live = LiveModel(ModelConfig(), self.telemetry, clock=lambda: self.now, timeline_entries=limit)
        self.list(objs)
        self.live.evaluate()

    def list(self, objs: Sequence[Obj]) -> None:
        """A list of every kind in `objs`, as a reflector delivers one (initial or relist)."""
        kinds: dict[tuple[str, str], list[Obj]] = {}
        for obj in objs:
            kinds.setdefault((obj["apiVersion"], obj["kind"]), []).append(obj)
        for listed in kinds.values():
            resource = _resource(listed[0])
            for obj in listed:
                self.live.upsert(resource, project(obj))
            self.live.retain(resource, {(key_of(o).namespace, key_of(o).name) for o in listed})
            stats = self.telemetry.kind(resource.group, resource.kind)
            stats.synced = stats.live = True

    def change(self, *objs: Obj, packed: bool = False) -> None:
        self.now += MIN
        for obj in objs:
            projected = project(obj)
            if packed:
                projected = Packed(key_of(projected), pack(projected))
            self.live.upsert(_resource(obj), projected)
        self.live.evaluate()

    def entries(self) -> list[Entry]:
        return self.live.timeline.newest_first()


def tofu_down() -> list[Obj]:
    """kustomize-controller's new Pod in ImagePullBackOff, its Deployment without replicas."""
    return [
        deployment(KC, image=NEW_IMAGE, available=0),
        pod(f"{KC}-7d9f-x2x4z", app=KC, image=NEW_IMAGE, ready=False, waiting="ImagePullBackOff"),
    ]


def healthy() -> list[Obj]:
    return [
        *flux(leases=False),
        replicaset(KC, "6c8b", revision=1, image=OLD_IMAGE),
        kustomization("apps"),
        helm_release("podinfo"),
        terraform("vpc"),
    ]


@dataclass(frozen=True)
class Case:
    changes: Callable[[], list[Obj]]
    expected: list[tuple[Change, str, str, str]] = field(default_factory=list)
    """(type, subject KIND/NAMESPACE/NAME, before, after), newest first."""


def not_ready() -> Obj:
    return cond("Ready", "False", "ReconciliationFailed", "kustomize build failed: missing file", ago=0 * MIN)


CASES = [
    pytest.param(
        Case(
            lambda: [kustomization("apps", conditions=[not_ready()])],
            [(Change.READY_CHANGED, "Kustomization/flux-system/apps", "True", "False")],
        ),
        id="Ready flipped True to False is an entry",
    ),
    pytest.param(
        Case(lambda: [kustomization("apps", conditions=[ready(ago=0 * MIN)])]),
        id="Ready=True again with a new transition time is no entry",
    ),
    pytest.param(
        Case(
            lambda: [
                kustomization(
                    "apps",
                    conditions=[cond("Ready", "True", "ReconciliationSucceeded", "Applied revision: x")],
                )
            ]
        ),
        id="Ready=True with another message is no entry",
    ),
    pytest.param(
        Case(
            lambda: [kustomization("apps", applied=f"main@sha1:{SHA_N1}")],
            [
                (
                    Change.REVISION_APPLIED,
                    "Kustomization/flux-system/apps",
                    f"main@sha1:{SHA_N}",
                    f"main@sha1:{SHA_N1}",
                )
            ],
        ),
        id="a Kustomization applying another revision is an entry",
    ),
    pytest.param(
        Case(lambda: [kustomization("apps", applied=f"main/{SHA_N}")]),
        id="the same revision in Flux's legacy spelling is no entry",
    ),
    pytest.param(
        Case(
            lambda: [terraform("vpc", applied=f"main@sha1:{SHA_N1}")],
            [
                (
                    Change.REVISION_APPLIED,
                    "Terraform/flux-system/vpc",
                    f"main@sha1:{SHA_N}",
                    f"main@sha1:{SHA_N1}",
                )
            ],
        ),
        id="a Terraform applying another revision is an entry",
    ),
    pytest.param(
        Case(
            lambda: [helm_release("podinfo", chart_version="6.6.0")],
            [(Change.REVISION_APPLIED, "HelmRelease/flux-system/podinfo", "6.5.0", "6.6.0")],
        ),
        id="a HelmRelease deploying another chart version is an entry",
    ),
    pytest.param(
        Case(
            lambda: [replicaset(KC, "7d9f", revision=2, image=NEW_IMAGE)],
            [(Change.IMAGE_CHANGED, f"Deployment/flux-system/{KC}", OLD_IMAGE, NEW_IMAGE)],
        ),
        id="a new ReplicaSet with a new image is an image change of its Deployment",
    ),
    pytest.param(
        Case(
            lambda: [
                replicaset(KC, "6c8b", revision=1, image=OLD_IMAGE, replicas=3),
                deployment(KC, replicas=3),
            ]
        ),
        id="a Deployment scaled (its ReplicaSet too) is no image change",
    ),
    pytest.param(
        Case(
            lambda: [replicaset(KC, "8e1a", revision=2, image=OLD_IMAGE, restarted_at="2024-05-01T12:00:00Z")]
        ),
        id="kubectl rollout restart (a new ReplicaSet, the same images) is no image change",
    ),
    pytest.param(
        Case(
            lambda: [
                replicaset(KC, "7d9f", revision=2, image=NEW_IMAGE),
                replicaset(KC, "6c8b", revision=3, image=OLD_IMAGE),
            ],
            [
                (Change.IMAGE_CHANGED, f"Deployment/flux-system/{KC}", NEW_IMAGE, OLD_IMAGE),
                (Change.IMAGE_CHANGED, f"Deployment/flux-system/{KC}", OLD_IMAGE, NEW_IMAGE),
            ],
        ),
        id="kubectl rollout undo (the old ReplicaSet gets the next revision) is an image change back",
    ),
    pytest.param(
        Case(lambda: [replicaset("podinfo", "1a2b", revision=1, image="ghcr.io/stefanprodan/podinfo:6.5.0")]),
        id="a new Deployment's first ReplicaSet is no image change",
    ),
    pytest.param(
        Case(
            tofu_down,
            [
                (Change.FINDING_OPENED, f"Deployment/flux-system/{KC}", "none", "open"),
                (
                    Change.CONTROLLER_DOWN,
                    f"Deployment/flux-system/{KC}",
                    "up (Available)",
                    "down (ImagePullBackOff)",
                ),
            ],
        ),
        id="a controller going down is an entry, and so is the root cause opened",
    ),
    pytest.param(
        Case(lambda: [kustomization("new-app")]),
        id="an object seen for the first time is no entry",
    ),
    pytest.param(Case(healthy), id="a relist of the same objects is no entry"),
]


@pytest.mark.parametrize("case", CASES)
def test_each_transition_is_one_entry_and_nothing_else_is(case: Case) -> None:
    rig = Rig(healthy())
    rig.change(*case.changes())
    assert [(e.type, e.path, e.before, e.after) for e in rig.entries()] == case.expected
    assert all(e.at == rig.now for e in rig.entries())


def test_an_image_change_names_the_revision_and_the_undo_command() -> None:
    rig = Rig(healthy())
    rig.change(replicaset(KC, "7d9f", revision=2, image=NEW_IMAGE), packed=True)
    (entry,) = rig.entries()
    assert entry.controller == KC
    assert entry.details == {
        "replicaset": f"{KC}-7d9f",
        "revision": "2",
        "previous_replicaset": f"{KC}-6c8b",
        "previous_revision": "1",
        "undo": UNDO,
    }
    assert entry.message == (
        f"Deployment flux-system/{KC}: image {OLD_IMAGE} -> v1.4.0-rc.1 (ReplicaSet revision 2)"
    )


def test_a_controller_coming_back_resolves_its_root_cause() -> None:
    rig = Rig(healthy())
    rig.change(*tofu_down())
    rig.change(deployment(KC), pod(f"{KC}-7d9f-x2x4z", app=KC))
    assert [(e.type, e.after) for e in rig.entries()[:2]] == [
        (Change.FINDING_RESOLVED, "resolved"),
        (Change.CONTROLLER_UP, "up (Available)"),
    ]
    assert rig.entries()[0].details["finding"] == f"ControllerDown/Deployment/flux-system/{KC}"


def test_a_root_cause_whose_kind_cannot_be_seen_is_unknown_not_resolved() -> None:
    rig = Rig([*healthy(), kustomization("broken", conditions=[not_ready()])])
    rig.now += 60 * MIN
    rig.live.evaluate()  # ReconcileFailed once Ready=False outlasted its threshold
    assert [e.type for e in rig.entries()] == [Change.FINDING_OPENED]
    rig.telemetry.kind("kustomize.toolkit.fluxcd.io", "Kustomization").forbidden = True
    rig.change()
    newest = rig.entries()[0]
    assert (newest.type, newest.after, newest.path) == (
        Change.FINDING_RESOLVED,
        "unknown",
        "Kustomization/flux-system/broken",
    )
    assert "cannot see Kustomization" in newest.message


def test_the_initial_list_in_any_order_records_nothing() -> None:
    """ReplicaSets listed newest first, or oldest first: no rollout is a change until the list ends."""
    for order in (1, -1):
        sets = [replicaset(KC, h, revision=r, image=f"{OLD_IMAGE}-{r}") for r, h in ((1, "a1"), (2, "b2"))]
        rig = Rig([*flux(leases=False), *sets[::order]])
        assert rig.entries() == []


def test_nothing_is_recorded_before_every_kind_is_synced() -> None:
    rig = Rig(healthy())
    rig.telemetry.kind("", "Event").synced = False  # a kind still in its initial list
    rig.change(*tofu_down())
    assert [e.type for e in rig.entries()] == []  # the object changes go on; the verdicts wait
    assert rig.live.timeline.comparing_since is None
    rig.telemetry.kind("", "Event").synced = True
    rig.change()
    assert rig.entries() == []  # the first synced evaluation is the baseline, not a change
    assert rig.live.timeline.comparing_since == rig.now


def test_the_timeline_keeps_the_newest_and_counts_what_it_dropped() -> None:
    rig = Rig(healthy(), limit=3)
    for i in range(5):
        rig.change(kustomization("apps", applied=f"main@sha1:{i:040x}"))
    timeline = rig.live.timeline
    assert (len(timeline), timeline.dropped) == (3, 2)
    assert [e.after for e in rig.entries()] == [f"main@sha1:{i:040x}" for i in (4, 3, 2)]


def _entry(minutes: int, kind: str, name: str, change: Change, *, controller: str | None = None) -> Entry:
    subject = Subject(apiVersion="v1", kind=kind, namespace="flux-system", name=name)
    return Entry(NOW + minutes * MIN, change, subject, controller, "a", "b", f"{name} changed")


def test_a_root_is_preceded_by_the_changes_on_its_subject_and_its_controllers_workload() -> None:
    timeline = Timeline(limit=10)
    timeline.extend(
        [
            _entry(1, "Deployment", KC, Change.IMAGE_CHANGED, controller=KC),
            _entry(2, "Kustomization", "apps", Change.REVISION_APPLIED, controller=KC),
            _entry(3, "Kustomization", "infra", Change.READY_CHANGED, controller=KC),
            _entry(4, "Kustomization", "infra", Change.FINDING_OPENED, controller=KC),
            _entry(5, "Deployment", "helm-controller", Change.CONTROLLER_DOWN, controller="helm-controller"),
        ]
    )
    subject = Subject(apiVersion="v1", kind="Kustomization", namespace="flux-system", name="infra")
    found = preceding(timeline.newest_first(), subject=subject, controller=KC, limit=5)
    assert [(e.subject["name"], e.type) for e in found] == [
        ("infra", Change.READY_CHANGED),
        (KC, Change.IMAGE_CHANGED),
    ]
    assert preceding(timeline.newest_first(), subject=subject, controller=KC, limit=1) == found[:1]


def test_query_filters_by_time_and_subject_prefix_newest_first() -> None:
    timeline = Timeline(limit=10)
    timeline.extend(_entry(i, "Kustomization", f"app-{i}", Change.READY_CHANGED) for i in range(5))
    timeline.extend([_entry(5, "Deployment", KC, Change.IMAGE_CHANGED)])
    assert [e.subject["name"] for e in timeline.query(since=NOW + 3 * MIN, limit=10)] == [
        KC,
        "app-4",
        "app-3",
    ]
    assert [e.subject["name"] for e in timeline.query(subject="Kustomization/flux-system/app-", limit=2)] == [
        "app-4",
        "app-3",
    ]
    assert timeline.query(subject="Deployment/", limit=10)[0].subject["name"] == KC
    assert timeline.query(since=NOW + timedelta(hours=1), limit=10) == []


def test_a_relist_adds_nothing_but_what_changed_while_the_watch_was_down() -> None:
    """A 410 or a restarted watch lists every kind again: the same objects are no change; one that
    changed during the gap is, once."""
    rig = Rig(healthy())
    rig.list(healthy())
    rig.live.evaluate()
    assert rig.entries() == []
    rig.list(
        [*healthy()[:-1], replicaset(KC, "7d9f", revision=2, image=NEW_IMAGE), terraform("vpc", applied="v2")]
    )
    rig.live.evaluate()
    assert [(e.type, e.path) for e in rig.entries()] == [
        (Change.REVISION_APPLIED, "Terraform/flux-system/vpc"),
        (Change.IMAGE_CHANGED, f"Deployment/flux-system/{KC}"),
    ]
