"""Every finding type: a case that must fire and a near-miss that must not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    SEC,
    SHA_N,
    SHA_N1,
    Obj,
    by_id,
    cond,
    controller,
    deployment,
    flux,
    git_repository,
    helm_chart,
    helm_release,
    kustomization,
    names,
    pod,
    run,
    terraform,
    ts,
    waiting_on,
    warning_about,
)
from watcher.model.types import FindingType, rfc3339

HOUR = 60 * MIN
KS = "Kustomization/flux-system"


def reconciling(ago: timedelta, *, ready: str = "True", interval: str = "10m") -> Obj:
    return kustomization(
        "apps",
        interval=interval,
        conditions=[
            cond(
                "Ready",
                ready,
                "ReconciliationSucceeded" if ready == "True" else "ReconciliationFailed",
                "msg",
                ago=ago,
            ),
            cond("Reconciling", "True", "Progressing", "Reconciliation in progress", ago=ago),
        ],
    )


def generation_lag(spec_written: timedelta) -> Obj:
    obj = kustomization("apps", generation=3, observed_generation=2)
    obj["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Update", "time": ts(spec_written)},
        {"manager": "kustomize-controller", "operation": "Update", "subresource": "status", "time": ts(HOUR)},
    ]
    return obj


def failing_at_new_generation() -> Obj:
    obj = generation_lag(20 * MIN)
    obj["status"]["conditions"] = [
        cond("Ready", "False", "BuildFailed", "kustomize build failed", generation=3)
    ]
    return obj


def requested(at: str, *, handled: str = "2024-05-01T10:00:00Z", written: timedelta = 20 * MIN) -> Obj:
    obj = kustomization("apps", requested_at=at, handled_at=handled)
    obj["metadata"]["managedFields"] = [{"manager": "flux", "operation": "Update", "time": ts(written)}]
    return obj


def lagging(*, since: timedelta) -> list[Obj]:
    return [
        git_repository(revision=f"main@sha1:{SHA_N}", updated=since),
        kustomization("apps", applied=f"main@sha1:{SHA_N1}"),
    ]


def stalled(name: str = "apps", **kwargs: object) -> Obj:
    return kustomization(
        name,
        conditions=[
            cond("Ready", "False", "InvalidPath", "path './clusters/prod/apps' not found", ago=HOUR),
            cond("Stalled", "True", "InvalidPath", "path './clusters/prod/apps' not found", ago=HOUR),
        ],
        **kwargs,
    )  # type: ignore[arg-type]


def blocked(*, ago: timedelta, on: str = "infra") -> Obj:
    return waiting_on("apps", on, ago=ago)


def crash_looping(created: timedelta, *, labels: dict[str, str] | None = None) -> list[Obj]:
    return [
        deployment("web", "apps", image="ghcr.io/acme/web:2.0.0", labels=labels),
        pod(
            "web-7d9f-abcde",
            "apps",
            app="web",
            image="ghcr.io/acme/web:2.0.0",
            ready=False,
            waiting="CrashLoopBackOff",
            restarts=6,
            created=created,
        ),
    ]


def warning(*, count: int, first: timedelta, last: timedelta, type_: str = "Warning") -> Obj:
    return warning_about(
        "apps",
        reason="ReconciliationFailed",
        message="kustomization path not found",
        count=count,
        first=first,
        last=last,
        type_=type_,
    )


RELEASE_LABELS = {"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "apps"}

CASES = [
    # StuckReconciling
    pytest.param(
        [reconciling(35 * MIN)], {f"StuckReconciling/{KS}/apps"}, id="stuck-reconciling-past-3x-interval"
    ),
    pytest.param([reconciling(30 * SEC)], set(), id="reconciling-for-30s-is-not-stuck"),
    pytest.param([reconciling(25 * MIN)], set(), id="reconciling-below-3x-interval-is-not-stuck"),
    pytest.param([reconciling(2 * HOUR, interval="1h")], set(), id="long-interval-raises-the-threshold"),
    # GenerationNotObserved
    pytest.param(
        [generation_lag(20 * MIN)], {f"GenerationNotObserved/{KS}/apps"}, id="generation-not-observed"
    ),
    pytest.param([generation_lag(2 * MIN)], set(), id="fresh-spec-edit-is-not-yet-unobserved"),
    pytest.param(
        [failing_at_new_generation()],
        {f"ReconcileFailed/{KS}/apps"},
        id="conditions-written-for-the-new-generation-were-seen-and-fail",
    ),
    # ReconcileRequestIgnored
    pytest.param([requested(ts(20 * MIN))], {f"ReconcileRequestIgnored/{KS}/apps"}, id="request-ignored"),
    pytest.param([requested(ts(MIN))], set(), id="request-made-a-minute-ago-is-pending"),
    pytest.param([requested(ts(20 * MIN), handled=ts(20 * MIN))], set(), id="request-handled"),
    pytest.param([requested(ts(20 * MIN), handled=ts(5 * MIN))], set(), id="newer-request-handled"),
    pytest.param(
        [requested("please")], {f"ReconcileRequestIgnored/{KS}/apps"}, id="opaque-request-counts-from-write"
    ),
    pytest.param([requested("please", written=MIN)], set(), id="opaque-request-written-a-minute-ago"),
    # RevisionSkew
    pytest.param(lagging(since=30 * MIN), {f"RevisionSkew/{KS}/apps"}, id="kustomization-behind-its-source"),
    pytest.param(lagging(since=2 * MIN), set(), id="source-updated-two-minutes-ago-is-a-normal-rollout"),
    pytest.param(
        [
            helm_release(
                "web",
                "apps",
                chart_version="1.2.0",
                attempted="1.3.0",
                conditions=[cond("Ready", "False", "UpgradeFailed", "template error", ago=HOUR)],
            )
        ],
        {"RevisionSkew/HelmRelease/apps/web", "ReconcileFailed/HelmRelease/apps/web"},
        id="helm-release-attempted-chart-not-in-history",
    ),
    pytest.param(
        [
            helm_chart("apps-web", "apps", version="1.3.0", updated=HOUR),
            helm_release("web", "apps", chart_version="1.2.0"),
        ],
        {"RevisionSkew/HelmRelease/apps/web"},
        id="helm-release-behind-its-helm-chart",
    ),
    pytest.param(
        [helm_chart("apps-web", "apps", version="1.2.0"), helm_release("web", "apps", chart_version="1.2.0")],
        set(),
        id="helm-release-on-its-chart-version",
    ),
    pytest.param(
        [git_repository("infra", updated=HOUR), terraform("vpc", applied=f"main@sha1:{SHA_N1}")],
        {"RevisionSkew/Terraform/flux-system/vpc"},
        id="terraform-behind-its-source",
    ),
    pytest.param(
        [git_repository("infra", updated=HOUR), terraform("vpc", applied=f"main/{SHA_N}")],
        set(),
        id="terraform-legacy-revision-equals-source-digest",
    ),
    pytest.param(
        [
            git_repository("infra", updated=HOUR),
            terraform("vpc", applied=f"main@sha1:{SHA_N1}", approve_plan=""),
        ],
        {"RevisionSkew/Terraform/flux-system/vpc"},
        id="terraform-empty-approve-plan-is-auto",
    ),
    pytest.param(
        [
            git_repository("infra", updated=HOUR),
            terraform("vpc", applied=f"main@sha1:{SHA_N1}", approve_plan="plan-main"),
        ],
        set(),
        id="terraform-waiting-for-manual-approval-lags-on-purpose",
    ),
    # DependencyBlocked
    pytest.param(
        [stalled("infra"), blocked(ago=2 * MIN)],
        {f"Stalled/{KS}/infra", f"DependencyBlocked/{KS}/apps"},
        id="blocked-by-a-stalled-dependency",
    ),
    pytest.param(
        [kustomization("infra"), blocked(ago=30 * MIN)],
        {f"DependencyBlocked/{KS}/apps"},
        id="blocked-past-threshold-with-nothing-to-blame",
    ),
    pytest.param(
        [kustomization("infra"), blocked(ago=2 * MIN)], set(), id="briefly-blocked-by-a-healthy-dependency"
    ),
    pytest.param(
        [blocked(ago=30 * MIN, on="typo")],
        {f"DependencyBlocked/{KS}/apps"},
        id="blocked-by-a-missing-dependency",
    ),
    # Stalled
    pytest.param([stalled()], {f"Stalled/{KS}/apps"}, id="stalled"),
    pytest.param(
        [kustomization("apps", conditions=[cond("Ready", "True"), cond("Stalled", "False")])],
        set(),
        id="stalled-false-is-fine",
    ),
    pytest.param([stalled(suspend=True)], set(), id="suspended-object-is-left-alone"),
    # RetryLoop
    pytest.param(
        [warning(count=20, first=40 * MIN, last=MIN)],
        {f"RetryLoop/{KS}/apps/ReconciliationFailed"},
        id="warning-recurring-for-40m",
    ),
    pytest.param(
        [warning(count=20, first=5 * MIN, last=MIN)], set(), id="warning-recurring-for-4m-is-not-a-loop-yet"
    ),
    pytest.param([warning(count=1, first=40 * MIN, last=40 * MIN)], set(), id="single-warning-is-not-a-loop"),
    pytest.param(
        [warning(count=20, first=3 * HOUR, last=2 * HOUR)], set(), id="loop-that-stopped-is-history"
    ),
    pytest.param(
        [warning(count=20, first=40 * MIN, last=MIN, type_="Normal")],
        set(),
        id="normal-events-are-not-failures",
    ),
    # WorkloadUnhealthy
    pytest.param(
        crash_looping(20 * MIN), {"WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"}, id="crash-looping-pod"
    ),
    pytest.param(crash_looping(2 * MIN), set(), id="pod-crashing-for-two-minutes-is-not-yet-unhealthy"),
    # ReleaseReadyWorkloadFailing
    pytest.param(
        [helm_release("web", "apps"), *crash_looping(20 * MIN, labels=RELEASE_LABELS)],
        {"ReleaseReadyWorkloadFailing/HelmRelease/apps/web", "WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"},
        id="release-ready-while-its-workload-fails",
    ),
    pytest.param(
        [
            helm_release("web", "apps", conditions=[cond("Ready", "False", "UpgradeFailed", "timed out")]),
            *crash_looping(20 * MIN, labels=RELEASE_LABELS),
        ],
        {"ReconcileFailed/HelmRelease/apps/web", "WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"},
        id="release-that-admits-failure-is-not-lying",
    ),
]


@pytest.mark.parametrize(("objs", "expected"), CASES)
def test_finding_fires_only_past_its_threshold(objs: list[Obj], expected: set[str]) -> None:
    evaluation = run(flux(), git_repository(), objs)

    assert set(by_id(evaluation)) == expected


def test_status_stale_points_at_the_controller_down_and_skips_suspended_objects() -> None:
    down = [deployment("kustomize-controller", available=0)]
    evaluation = run(down, git_repository(), kustomization("apps"), kustomization("paused", suspend=True))

    findings = by_id(evaluation)
    assert (
        findings[f"StatusStale/{KS}/apps"].root_cause
        == "ControllerDown/Deployment/flux-system/kustomize-controller"
    )
    assert f"StatusStale/{KS}/paused" not in findings
    assert {
        o.subject["name"]: o.stale for o in evaluation.objects if o.subject["kind"] == "Kustomization"
    } == {"apps": True, "paused": True}


def test_dependency_blocked_root_cause_is_the_deepest_failing_dependency() -> None:
    chain = [stalled("base"), waiting_on("infra", "base", ago=MIN), waiting_on("apps", "infra", ago=MIN)]

    findings = by_id(run(flux(), git_repository(), chain))

    assert findings[f"DependencyBlocked/{KS}/apps"].root_cause == f"Stalled/{KS}/base"
    assert findings[f"DependencyBlocked/{KS}/infra"].root_cause == f"Stalled/{KS}/base"
    assert {s["name"] for s in findings[f"Stalled/{KS}/base"].affected} == {"infra", "apps"}


def test_a_dependency_chain_thousands_long_has_its_deepest_failure_as_its_one_root() -> None:
    """As long as a cluster makes it: followed by recursion, a few hundred blocked objects raised
    RecursionError and failed the whole evaluation. Named so that sorted names ask the far end first."""
    chain = [stalled("k0")] + [waiting_on(f"k{i}", f"k{i - 1}", ago=MIN) for i in range(1, 3000)]

    evaluation = run(flux(), git_repository(), chain)

    [root] = evaluation.roots
    assert root.id == f"Stalled/{KS}/k0"
    assert len(root.affected) == 2999
    assert all(f.root_cause == root.id for f in evaluation.findings if f is not root)


def test_dependency_cycle_is_reported_once_past_threshold_without_looping() -> None:
    cycle = [waiting_on("a", "b", ago=HOUR), waiting_on("b", "a", ago=HOUR)]

    evaluation = run(flux(), git_repository(), cycle)

    assert {f.id for f in evaluation.findings} == {f"DependencyBlocked/{KS}/a", f"DependencyBlocked/{KS}/b"}
    assert len(evaluation.roots) == 1


def test_findings_on_one_object_have_one_root() -> None:
    failing = kustomization(
        "apps",
        applied=f"main@sha1:{SHA_N1}",
        conditions=[
            cond("Ready", "False", "ReconciliationFailed", "kustomize build failed", ago=2 * HOUR),
            cond("Reconciling", "True", "Progressing", "reconciling", ago=2 * HOUR),
        ],
    )

    evaluation = run(
        flux(), git_repository(updated=2 * HOUR), failing, warning(count=30, first=2 * HOUR, last=MIN)
    )

    [root] = evaluation.roots
    assert root.id == f"RevisionSkew/{KS}/apps"
    assert {f.type for f in evaluation.findings} == {
        FindingType.REVISION_SKEW,
        FindingType.RECONCILE_FAILED,
        FindingType.STUCK_RECONCILING,
        FindingType.RETRY_LOOP,
    }
    assert root.affected == []


def test_roots_come_first_then_critical_then_by_subject() -> None:
    evaluation = run(
        flux(),
        git_repository(),
        stalled("zeta"),
        stalled("alpha"),
        reconciling(HOUR),
        deployment("kustomize-controller", "other-ns", available=0),
        controller("kustomize-controller", "flux-system"),
    )

    rank = {"critical": 0, "warning": 1, "info": 2}
    order = [(not f.is_root, rank[f.severity]) for f in evaluation.findings]
    assert order == sorted(order)
    roots = [f.subject["name"] for f in evaluation.roots if f.type is FindingType.STALLED]
    assert roots == ["alpha", "zeta"]


def test_finding_to_dict_is_the_json_contract() -> None:
    [finding] = run(flux(), git_repository(), stalled()).findings

    assert finding.to_dict() == {
        "id": f"Stalled/{KS}/apps",
        "type": "Stalled",
        "severity": "warning",
        "subject": {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "namespace": "flux-system",
            "name": "apps",
        },
        "message": "Kustomization flux-system/apps is stalled: InvalidPath: "
        "path './clusters/prod/apps' not found. Its controller has stopped retrying; fix the cause, "
        "then trigger a reconcile (change the spec or set the reconcile.fluxcd.io/requestedAt annotation).",
        "since": ts(HOUR),
        "evidence": finding.evidence,
        "root_cause": None,
        "affected": [],
    }
    assert finding.since == NOW - HOUR


def test_input_order_does_not_change_the_result() -> None:
    objs = [*flux(), git_repository(), stalled("infra"), blocked(ago=HOUR), *crash_looping(HOUR)]

    forward, backward = run(objs), run(list(reversed(objs)))

    assert [f.to_dict() for f in forward.findings] == [f.to_dict() for f in backward.findings]


def web_failing(
    *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> list[Obj]:
    return [
        deployment(
            "web", "apps", available=0, labels=labels, annotations=annotations, image="ghcr.io/acme/web:2.0.0"
        ),
        pod(
            "web-7d9f-abcde",
            "apps",
            app="web",
            image="ghcr.io/acme/web:2.0.0",
            ready=False,
            waiting="ImagePullBackOff",
            created=HOUR,
        ),
    ]


def test_release_found_by_helm_annotations_with_a_target_namespace() -> None:
    release = helm_release("web", "flux-system", target_namespace="apps")
    helm = {"meta.helm.sh/release-name": "apps-web", "meta.helm.sh/release-namespace": "apps"}

    findings = by_id(run(flux(), release, web_failing(annotations=helm)))

    root = findings["ReleaseReadyWorkloadFailing/HelmRelease/flux-system/web"]
    assert root.is_root
    assert {s["name"] for s in root.affected} == {"web", "web-7d9f-abcde"}
    assert findings["WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"].root_cause == root.id


def test_kustomization_ready_while_a_deployment_it_applied_fails_by_label_and_by_inventory() -> None:
    kustomize = {
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    }
    by_label = run(flux(), git_repository(), kustomization("apps"), web_failing(labels=kustomize))
    by_inventory = run(
        flux(),
        git_repository(),
        kustomization("apps", inventory=["apps_web_apps_Deployment"]),
        web_failing(labels={"app": "web"}),
    )

    for evaluation in (by_label, by_inventory):
        [root] = evaluation.roots
        assert root.id == f"ReleaseReadyWorkloadFailing/{KS}/apps"


def test_failing_pod_is_explained_by_its_failing_deployment() -> None:
    findings = by_id(run(flux(), web_failing(labels={"app": "web"})))

    deployment_finding = findings["WorkloadUnhealthy/Deployment/apps/web"]
    assert deployment_finding.is_root
    assert findings["WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"].root_cause == deployment_finding.id
    assert "0/1 available" in deployment_finding.message


def test_a_release_whose_install_timed_out_and_its_failing_workload_are_one_root() -> None:
    """What the lab's helm-controller writes when Helm waits for a Deployment whose Pods never
    become ready: InstallFailed, then Stalled=True RetriesExceeded (remediation retries 0)."""
    timed_out = (
        "Helm install failed for release apps/web with chart web@1.0.0: "
        "timeout waiting for: [Deployment/apps/web status: 'InProgress']"
    )
    release = helm_release(
        "web",
        "apps",
        conditions=[
            cond("Stalled", "True", "RetriesExceeded", "Failed to install after 1 attempt(s)", ago=15 * MIN),
            cond("Ready", "False", "InstallFailed", timed_out, ago=15 * MIN),
            cond("Released", "False", "InstallFailed", timed_out, ago=15 * MIN),
        ],
    )

    findings = by_id(run(flux(), git_repository(), release, crash_looping(20 * MIN, labels=RELEASE_LABELS)))

    root = findings["Stalled/HelmRelease/apps/web"]
    assert [f.id for f in findings.values() if f.is_root] == [root.id]
    assert findings["WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"].root_cause == root.id
    assert "What it installed fails: Pod apps/web-7d9f-abcde " in root.message


def test_warning_events_with_one_reason_about_one_object_are_one_loop() -> None:
    objs = [warning_about("apps", name=f"apps.{n}", count=5, first=HOUR, last=MIN) for n in (1, 2)]

    [loop] = run(flux(), git_repository(), kustomization("apps"), objs).findings

    assert (loop.evidence["count"], loop.evidence["events"]) == (10, 2)


def test_custom_controller_objects_are_gitops_objects_and_go_stale_with_it() -> None:
    from watcher.model.types import ControllerSpec, ModelConfig

    spec = ControllerSpec(name="db-operator", groups=("db.example.com",))
    database = {
        "apiVersion": "db.example.com/v1",
        "kind": "Database",
        "metadata": {"name": "orders", "namespace": "data"},
        "status": {"conditions": [cond("Ready", "True")]},
    }

    evaluation = run(
        deployment("db-operator", "data", available=0), database, config=ModelConfig(controllers=(spec,))
    )

    [health] = [o for o in evaluation.objects if o.subject["kind"] == "Database"]
    assert (health.controller, health.stale) == ("db-operator", True)
    [root] = evaluation.roots
    assert names(root.affected) == {"Database/data/orders"}


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(datetime(2026, 12, 1, 20, 5, 9, tzinfo=UTC), id="utc"),
        pytest.param(datetime(2026, 12, 1, 20, 5, 9, 123456, tzinfo=UTC), id="microseconds-dropped"),
        pytest.param(
            datetime(2026, 12, 1, 23, 5, 9, tzinfo=timezone(timedelta(hours=3))), id="offset-to-utc"
        ),
        pytest.param(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), id="end-of-calendar"),
        pytest.param(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), id="three-digit-year"),
    ],
)
def test_messages_spell_a_moment_as_kubernetes_does(moment: datetime) -> None:
    assert rfc3339(moment) == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
