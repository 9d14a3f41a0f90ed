"""The incremental HealthModel: same answers as evaluate(), time without events, memory of CRDs."""

from __future__ import annotations

import gc
from datetime import datetime
from typing import Any

from tests.model.builders import (
    FLUX_NS,
    MIN,
    NOW,
    SEC,
    Obj,
    by_id,
    cond,
    controller,
    crd,
    deployment,
    flux,
    git_repository,
    helm_release,
    kustomization,
    lease,
    pod,
    run,
    terraform,
    waiting_on,
    warning_about,
)
from tests.model.test_incidents import tofu_incident
from watcher.model.engine import HealthModel, evaluate
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.projection import project
from watcher.model.store.orphans import ORPHAN_WINDOW
from watcher.model.types import FindingType, ModelConfig

HOUR = 60 * MIN
TERRAFORM_CRD = crd("terraforms", "infra.contrib.fluxcd.io", "Terraform")


def fed(*objs: Obj, now: datetime = NOW) -> HealthModel:
    model = HealthModel(ModelConfig())
    for obj in objs:
        model.upsert(project(obj), now=now)
    return model


def snapshot(evaluation: Evaluation) -> dict[str, Any]:
    """Everything an Evaluation renders, as plain data (now excluded)."""
    return {
        "findings": [f.to_dict() for f in evaluation.findings],
        "objects": evaluation.objects,
        "controllers": evaluation.controllers,
        "revisions": evaluation.revisions,
    }


def test_incremental_model_fed_events_matches_evaluate_of_the_final_state() -> None:
    final = [project(o) for o in tofu_incident()]
    early = NOW - 50 * MIN
    model = HealthModel(ModelConfig())
    healthy_tofu = [project(o) for o in controller("tofu-controller", lease_renewed=None)]
    for obj in [*healthy_tofu, project(kustomization("obsolete"))]:
        model.upsert(obj, now=early)
    model.evaluate(early)
    for index, obj in enumerate(reversed(final)):
        model.upsert(obj, now=early + index * SEC)
        if index % 7 == 0:
            model.evaluate(early + index * SEC)
    model.delete(project(kustomization("obsolete")), now=NOW - MIN)
    model.replace("v1", "Pod", [o for o in final if o["kind"] == "Pod"], now=NOW - MIN)
    model.evaluate(NOW - 30 * MIN)

    assert snapshot(model.evaluate(NOW)) == snapshot(evaluate(final, now=NOW, config=ModelConfig()))


def test_an_evaluation_frees_its_working_state_without_the_garbage_collector() -> None:
    """A pass's working copies are garbage once it ends; a reference cycle among them (a
    recursive closure did that) left every one for the collector, a third of a pass's cost."""
    model = fed(*tofu_incident())
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        evaluation = model.evaluate(NOW)
        gc.collect()
        ours = [type(o).__name__ for o in gc.garbage if _from_watcher(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert ours == []
    blocked = [f for f in evaluation.findings if f.type is FindingType.DEPENDENCY_BLOCKED]
    assert blocked
    assert all(f.root_cause is not None for f in blocked)  # the chains were followed


def _from_watcher(garbage: object) -> bool:
    """Made by stalewatch's code (another thread's garbage, e.g. pytest's, is not this test's)."""
    module = getattr(garbage, "__module__", None) or type(garbage).__module__
    return isinstance(module, str) and module.startswith("watcher.")


def test_threshold_is_rechecked_when_time_passes_without_an_event() -> None:
    model = fed(
        *flux(leases=False),
        git_repository(),
        kustomization(
            "apps",
            conditions=[
                cond("Ready", "True", "ReconciliationSucceeded", "ok", ago=25 * MIN),
                cond("Reconciling", "True", "Progressing", "in progress", ago=25 * MIN),
            ],
        ),
    )

    assert model.evaluate(NOW).findings == []
    assert [f.type for f in model.evaluate(NOW + 6 * MIN).findings] == [FindingType.STUCK_RECONCILING]


def test_hung_leader_is_down_once_its_lease_runs_out() -> None:
    model = fed(*controller("kustomize-controller", lease_renewed=10 * SEC))

    assert [c.up for c in model.evaluate(NOW).controllers] == [True]
    [health] = model.evaluate(NOW + 30 * SEC).controllers
    assert (health.up, health.reason) == (False, "LeaseExpired")


def test_retry_loop_ends_when_its_event_stops_recurring() -> None:
    looping = warning_about("apps", count=9, first=HOUR, last=MIN)
    model = fed(*flux(leases=False), git_repository(), kustomization("apps"), looping)

    assert [f.type for f in model.evaluate(NOW).findings] == [FindingType.RETRY_LOOP]
    assert model.evaluate(NOW + 30 * MIN).findings == []


def test_unchanged_model_answers_again_with_the_new_time() -> None:
    model = fed(*flux(), git_repository(), kustomization("apps"))
    first = model.evaluate(NOW)

    again = model.evaluate(NOW + SEC)

    assert again.now == NOW + SEC
    assert snapshot(again) == snapshot(first)


def tofu_world() -> list[Obj]:
    return [
        *controller("tofu-controller", lease_renewed=None),
        git_repository("infra"),
        TERRAFORM_CRD,
        terraform("vpc"),
        terraform("eks"),
    ]


def test_deleted_crd_is_one_root_listing_the_objects_it_orphaned() -> None:
    model = fed(*tofu_world())
    model.evaluate(NOW)

    model.delete(project(TERRAFORM_CRD), now=NOW + MIN)
    evaluation = model.evaluate(NOW + MIN)

    [root] = evaluation.roots
    assert root.id == "CRDRemoved/CustomResourceDefinition/terraforms.infra.contrib.fluxcd.io"
    assert {s["name"] for s in root.affected} == {"vpc", "eks"}
    assert "tofu-controller reconciles infra.contrib.fluxcd.io" in root.message


def test_objects_deleted_moments_before_their_crd_was_seen_going_are_still_its_orphans() -> None:
    """The CRD and its objects come on separate watches: the objects' deletions may come first."""
    model = fed(*tofu_world())
    model.evaluate(NOW)
    for name in ("vpc", "eks"):
        model.delete(project(terraform(name)), now=NOW + SEC)

    model.delete(project(TERRAFORM_CRD), now=NOW + 2 * SEC)

    [root] = model.evaluate(NOW + 2 * SEC).roots
    assert root.type is FindingType.CRD_REMOVED
    assert {s["name"] for s in root.affected} == {"vpc", "eks"}
    assert "while 2 Terraform objects existed" in root.message


def test_an_object_deleted_well_before_its_crd_is_not_counted_as_orphaned() -> None:
    model = fed(*tofu_world())
    model.delete(project(terraform("vpc")), now=NOW)

    model.delete(project(TERRAFORM_CRD), now=NOW + ORPHAN_WINDOW + SEC)

    [root] = model.evaluate(NOW + ORPHAN_WINDOW + SEC).roots
    assert {s["name"] for s in root.affected} == {"eks"}


def test_controller_crashing_after_its_crd_went_away_is_explained_by_the_removal() -> None:
    model = fed(*tofu_world())
    model.delete(project(TERRAFORM_CRD), now=NOW)
    crashing = pod(
        "tofu-controller-7d9f-x2x4z",
        app="tofu-controller",
        ready=False,
        waiting="CrashLoopBackOff",
        restarts=3,
        created=2 * HOUR,
    )
    for obj in (
        deployment("tofu-controller", available=0),
        crashing,
        lease("tofu-controller-leader-election", holder="tofu-controller-7d9f-x2x4z_1", renewed=-MIN),
    ):
        model.upsert(project(obj), now=NOW + 2 * MIN)

    findings = by_id(model.evaluate(NOW + 2 * MIN))

    removal = "CRDRemoved/CustomResourceDefinition/terraforms.infra.contrib.fluxcd.io"
    assert findings["ControllerDown/Deployment/flux-system/tofu-controller"].root_cause == removal


def test_terminating_crd_is_already_removed_and_a_returning_crd_clears_it() -> None:
    model = fed(*tofu_world())
    model.upsert(project(crd("terraforms", "infra.contrib.fluxcd.io", "Terraform", deleting=True)), now=NOW)
    assert [f.type for f in model.evaluate(NOW).roots] == [FindingType.CRD_REMOVED]

    model.upsert(project(TERRAFORM_CRD), now=NOW + MIN)

    assert model.evaluate(NOW + MIN).findings == []


def test_crd_removal_is_kept_for_its_retention_then_forgotten() -> None:
    model = fed(*tofu_world())
    model.delete(project(TERRAFORM_CRD), now=NOW)
    retention = ModelConfig().thresholds.crd_removed_retention

    assert len(model.evaluate(NOW + retention - SEC).roots) == 1
    assert model.evaluate(NOW + retention).findings == []


def test_removing_an_unused_crd_nobody_reconciles_is_not_a_finding() -> None:
    widgets = crd("widgets", "example.com", "Widget")
    model = fed(widgets)

    model.delete(project(widgets), now=NOW)

    assert model.evaluate(NOW).findings == []


def test_relist_replaces_every_object_of_the_kind_and_ends_blindness() -> None:
    model = fed(*flux(), git_repository(), kustomization("apps"), kustomization("gone"))
    model.set_blind({"Kustomization"})
    assert not any(o.subject["kind"] == "Kustomization" for o in model.evaluate(NOW).objects)

    model.replace(
        "kustomize.toolkit.fluxcd.io/v1", "Kustomization", [project(kustomization("apps"))], now=NOW
    )

    assert [
        o.subject["name"] for o in model.evaluate(NOW).objects if o.subject["kind"] == "Kustomization"
    ] == ["apps"]


def test_a_relist_delivered_page_by_page_keeps_only_what_it_listed_and_ends_blindness() -> None:
    model = fed(*flux(), git_repository(), kustomization("apps"), kustomization("gone"))
    model.set_blind({"Kustomization"})

    model.upsert(project(kustomization("apps")), now=NOW)
    model.retain("kustomize.toolkit.fluxcd.io/v1", "Kustomization", {(FLUX_NS, "apps")}, now=NOW)

    assert [
        o.subject["name"] for o in model.evaluate(NOW).objects if o.subject["kind"] == "Kustomization"
    ] == ["apps"]


def test_deleting_a_source_re_evaluates_what_uses_it() -> None:
    source = git_repository(updated=HOUR)
    model = fed(*flux(), source, kustomization("apps", applied="main@sha1:" + "b" * 40))
    assert [f.type for f in model.evaluate(NOW).findings] == [FindingType.REVISION_SKEW]

    model.delete(project(source), now=NOW)

    assert model.evaluate(NOW).findings == []
    assert [r.revision for r in model.evaluate(NOW).revisions] == [""]


def test_an_event_re_evaluates_only_its_object_and_neighbours() -> None:
    many = [kustomization(f"app-{i}") for i in range(300)]
    model = fed(*flux(), git_repository(), *many)
    model.evaluate(NOW)

    model.upsert(project(kustomization("app-7", applied="main@sha1:" + "b" * 40)), now=NOW)

    assert model._dirty == {next(iter(model._dirty))}  # white-box: the design under test
    assert model._controllers._dirty == set()


def test_evaluate_function_keeps_the_last_of_duplicate_objects() -> None:
    older, newer = kustomization("apps", suspend=False), kustomization("apps", suspend=True)
    older["status"]["conditions"] = [cond("Stalled", "True", "InvalidPath", "bad", ago=HOUR)]

    assert run(flux(), git_repository(), older, newer).findings == []


def test_an_event_on_an_object_correlation_read_redoes_correlation() -> None:
    labels = {"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "apps"}
    crashing = pod(
        "web-7d9f-abcde", "apps", app="web", ready=False, waiting="CrashLoopBackOff", restarts=4, created=HOUR
    )
    model = fed(
        *flux(leases=False), helm_release("web", "apps"), deployment("web", "apps", labels=labels), crashing
    )
    assert [f.type for f in model.evaluate(NOW).roots] == [FindingType.RELEASE_READY_WORKLOAD_FAILING]

    admits = helm_release(
        "web", "apps", conditions=[cond("Ready", "False", "UpgradeFailed", "timed out", ago=MIN)]
    )
    model.upsert(project(admits), now=NOW)

    assert [f.id for f in model.evaluate(NOW).roots] == ["WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"]


def test_a_missing_dependency_that_appears_is_no_longer_reported_missing() -> None:
    blocked = waiting_on("apps", "infra", ago=HOUR)
    model = fed(*flux(leases=False), git_repository(), blocked)
    [root] = model.evaluate(NOW).roots
    assert "Missing: Kustomization flux-system/infra" in root.message

    model.upsert(project(kustomization("infra")), now=NOW)

    [root] = model.evaluate(NOW).roots
    assert "Missing" not in root.message


def test_repeated_correlation_never_changes_cached_findings() -> None:
    events = [warning_about("apps", name=f"apps.{n}", count=4, first=HOUR, last=MIN) for n in (1, 2)]
    model = fed(*flux(leases=False), git_repository(), kustomization("apps"), *events)
    first = snapshot(model.evaluate(NOW))

    for step in range(1, 4):  # a finding that comes and goes makes correlation run again
        stalled = kustomization(f"other-{step}", conditions=[cond("Stalled", "True", "InvalidPath", "x")])
        model.upsert(project(stalled), now=NOW)
        assert len(model.evaluate(NOW).roots) == 2
        model.delete(project(stalled), now=NOW)

    assert snapshot(model.evaluate(NOW)) == first
    assert first["findings"][0]["evidence"]["count"] == 8


def test_stale_objects_follow_a_down_controller_whose_reason_changes() -> None:
    image = "ghcr.io/fluxcd/kustomize-controller:v9.9.9"
    model = fed(
        deployment("kustomize-controller", available=0, image=image),
        pod(
            "kustomize-controller-7d9f-x2x4z",
            app="kustomize-controller",
            image=image,
            ready=False,
            waiting="ImagePullBackOff",
            created=HOUR,
        ),
        git_repository(),
        kustomization("apps"),
    )
    assert (
        "(ImagePullBackOff)"
        in by_id(model.evaluate(NOW))["StatusStale/Kustomization/flux-system/apps"].message
    )

    crashing = pod(
        "kustomize-controller-7d9f-x2x4z",
        app="kustomize-controller",
        image=image,
        ready=False,
        waiting="CrashLoopBackOff",
        restarts=3,
        created=HOUR,
    )
    model.upsert(project(crashing), now=NOW)

    stale = by_id(model.evaluate(NOW))["StatusStale/Kustomization/flux-system/apps"]
    assert "(CrashLoopBackOff)" in stale.message
