"""The wait's verdict as a pure function: objects, the model's evaluation and `now` in, one
outcome out; one named case per outcome and per rule that decides one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kube.objects import cond, deployment, flux, ready, running, waiting
from tests.wait.stack import (
    REV_A,
    REV_B,
    app_pod,
    applied,
    dry_run_forbidden,
    entry,
    kustomization,
    pod_name,
    reconciling,
    rolled_out,
    source,
    workload,
)
from watcher.model.engine import HealthModel
from watcher.model.ingest.controller_metrics import ControllerMetrics, parse_controller_metrics
from watcher.model.ingest.projection import project
from watcher.model.store.graph import Store
from watcher.model.views.convergence import CONFIRM_WITHIN, Blind, Outcome, Verdict, judge
from watcher.model.views.subtree import State
from watcher.model.views.targets import Target, TargetError, check_revision, parse_target

Obj = dict[str, Any]
NS = "flux-system"
NOW = datetime.now(UTC)
KS = "kustomize.toolkit.fluxcd.io"
ROOT = parse_target(f"ks/{NS}/apps", revision=REV_B)
INVENTORY = (entry(NS, "infra", "Kustomization", KS), entry(NS, "web", "Deployment", "apps"))


def verdict(
    objects: Sequence[Obj],
    *,
    targets: Sequence[Target] = (ROOT,),
    now: datetime = NOW,
    timeout: timedelta = timedelta(minutes=5),
    grace: timedelta = timedelta(minutes=1),
    blind: Blind | None = None,
    served: set[tuple[str, str]] | None = None,
    forbidden: set[tuple[str, str]] | None = None,
    heard: datetime | None = NOW,
) -> Verdict:
    """judge() over the model fed `objects`, as the wait's loop calls it; by default the API
    server answered at `now`."""
    model, store = HealthModel(), Store()
    for obj in objects:
        projected = project(obj)
        model.upsert(projected, now=now)
        store.put(projected)
    evaluation = model.evaluate(now)
    return judge(
        targets,
        view=store,
        evaluation=evaluation,
        now=now,
        deadline=now + timeout,
        grace=grace,
        blind=blind,
        served=served,
        forbidden=forbidden or (),
        heard=heard,
    )


def controller(name: str, *, available: int = 1) -> list[Obj]:
    down = {
        "status": {**rolled_out(0), "replicas": 0},
        "spec": {**deployment(NS, name)["spec"], "replicas": 0},
    }
    return [{**deployment(NS, name), **(down if not available else {})}, app_pod(NS, name)]


def stack(root: Obj, *, infra: Obj | None = None, web_pod: Obj | None = None, web: int = 1) -> list[Obj]:
    return [
        *controller("source-controller"),
        *controller("kustomize-controller"),
        source(NS, REV_B),
        kustomization(NS, "apps", root),
        kustomization(NS, "infra", infra or applied(REV_B)),
        workload(NS, "web", available=web),
        app_pod(NS, "web", status=web_pod or running()),
    ]


def depends_on_db() -> Obj:
    """Kustomization apps, held back by its dependency db (kustomize-controller's message)."""
    waits = cond("Ready", "False", "DependencyNotReady", f"dependency '{NS}/db' is not ready")
    apps = kustomization(NS, "apps", {"lastAppliedRevision": REV_A, "conditions": [waits]})
    apps["spec"]["dependsOn"] = [{"name": "db"}]
    return apps


CRASHING_FOR = {
    "long": waiting("CrashLoopBackOff", "back-off", started=NOW - timedelta(minutes=3), restarts=4),
    "briefly": waiting("CrashLoopBackOff", "back-off", started=NOW - timedelta(seconds=10), restarts=1),
}


@pytest.mark.parametrize(
    ("objects", "kw", "outcome", "message"),
    [
        pytest.param(
            stack(applied(REV_B, *INVENTORY)),
            {},
            Outcome.CONVERGED,
            "4/4 current",
            id="converged-at-the-revision",
        ),
        pytest.param(
            stack(applied(REV_B, *INVENTORY), infra=dry_run_forbidden(REV_A, REV_B)),
            {},
            Outcome.FAILED,
            f"Kustomization {NS}/infra: failed at main@bbbbbbbbbbbb: ReconciliationFailed: "
            "ConfigMap/platform/feature-flags dry-run failed (Forbidden)",
            id="child-failed-at-the-revision",
        ),
        pytest.param(
            [
                *stack(applied(REV_A, *INVENTORY))[:5],
                depends_on_db(),
                kustomization(NS, "db", dry_run_forbidden(REV_A, REV_B)),
            ],
            {},
            Outcome.FAILED,
            f"Kustomization {NS}/db: holds up Kustomization {NS}/apps, which depends on it: failed at "
            "main@bbbbbbbbbbbb: ReconciliationFailed",
            id="dependency-failed-at-its-revision",
        ),
        pytest.param(
            stack(applied(REV_B, *INVENTORY), web_pod=CRASHING_FOR["long"]),
            {},
            Outcome.FAILED,
            f"Pod {NS}/{pod_name('web')}: is in CrashLoopBackOff (container manager",
            id="pod-crash-looping-for-longer-than-grace",
        ),
        pytest.param(
            stack(applied(REV_B, *INVENTORY), web_pod=CRASHING_FOR["briefly"]),
            {},
            Outcome.WAITING,
            "3/4 current",
            id="pod-crash-looping-within-grace",
        ),
        pytest.param(
            [
                *stack(applied(REV_B, *INVENTORY))[:2],
                *controller("kustomize-controller", available=0),
                *stack(reconciling(REV_A, REV_B))[4:],
            ],
            {},
            Outcome.STALE,
            f"ControllerDown Deployment {NS}/kustomize-controller (ScaledToZero)",
            id="controller-down",
        ),
        pytest.param(
            stack(applied(REV_B, *INVENTORY)),
            {"targets": [parse_target(f"hr/{NS}/podinfo")]},
            Outcome.CANNOT_WAIT,
            f"not found: HelmRelease {NS}/podinfo",
            id="target-not-found",
        ),
        pytest.param(
            stack(applied(REV_B, *INVENTORY)),
            {"blind": Blind("the Kubernetes API server is unreachable", NOW - timedelta(minutes=1))},
            Outcome.CANNOT_WAIT,
            "cannot see the cluster since",
            id="blind-for-longer-than-the-window",
        ),
        pytest.param(
            stack(applied(REV_B, *INVENTORY)),
            {"blind": Blind("403 Forbidden: may not list and watch Pod", NOW - timedelta(seconds=5))},
            Outcome.WAITING,
            "cannot see the cluster: 403 Forbidden",
            id="blind-within-the-window-never-converged",
        ),
        pytest.param(stack(reconciling(REV_A, REV_B)), {}, Outcome.WAITING, "0/1 current", id="in-progress"),
        pytest.param(
            stack(reconciling(REV_A, REV_B)),
            {"timeout": timedelta(0)},
            Outcome.TIMED_OUT,
            "0/1 current",
            id="in-progress-at-the-deadline",
        ),
    ],
)
def test_the_verdict(objects: list[Obj], kw: dict[str, Any], outcome: Outcome, message: str) -> None:
    found = verdict(objects, **kw)
    assert (found.outcome, found.message[: len(message)]) == (outcome, message), found


def waits_on(name: str, dependency: str) -> Obj:
    """Kustomization `name`, held back for an hour by its dependency (kustomize-controller's message)."""
    waits = cond(
        "Ready",
        "False",
        "DependencyNotReady",
        f"dependency '{NS}/{dependency}' is not ready",
        since=NOW - timedelta(hours=1),
    )
    obj = kustomization(NS, name, {"lastAppliedRevision": REV_A, "conditions": [waits]})
    obj["spec"]["dependsOn"] = [{"name": dependency}]
    return obj


def test_a_dependson_cycle_fails_the_wait_naming_the_cycle() -> None:
    cycle = [waits_on("apps", "db"), waits_on("db", "infra"), waits_on("infra", "apps")]
    found = verdict([*stack(applied(REV_A, *INVENTORY))[:5], *cycle])
    [root] = [f for f in found.findings if f.is_root]
    named = " -> ".join(f"Kustomization {NS}/{name}" for name in ("infra", "apps", "db", "infra"))
    assert (found.outcome, found.message) == (Outcome.FAILED, f"DependencyBlocked Kustomization {NS}/infra")
    assert root.message.endswith(f" It waits on itself: dependsOn cycle: {named}."), root.message
    assert "Nothing it waits on shows a problem" not in root.message


@pytest.mark.parametrize(
    ("past", "silent_since", "outcome", "message"),
    [
        pytest.param(timedelta(0), None, Outcome.TIMED_OUT, "0/1 current", id="answered-at-the-deadline"),
        pytest.param(
            timedelta(seconds=1),
            timedelta(seconds=3),
            Outcome.WAITING,
            "0/1 current; at the deadline, asking the API server",
            id="hung-just-before-the-deadline-still-asking",
        ),
        pytest.param(
            CONFIRM_WITHIN,
            timedelta(seconds=3),
            Outcome.CANNOT_WAIT,
            "cannot see the cluster at the deadline: the Kubernetes API server did not answer within 5s "
            "(0/1 current when last seen)",
            id="hung-just-before-the-deadline-no-answer",
        ),
    ],
)
def test_an_api_server_that_hangs_in_the_last_seconds_is_cannot_see_never_timed_out(
    past: timedelta, silent_since: timedelta | None, outcome: Outcome, message: str
) -> None:
    """The watcher's telemetry still says reachable (a hung server says nothing, its probe gives
    up after 10 s): "timed out" only once the API server answered at or after the deadline."""
    deadline = NOW - past
    heard = deadline if silent_since is None else deadline - silent_since
    found = verdict(stack(reconciling(REV_A, REV_B)), timeout=-past, heard=heard)
    assert (found.outcome, found.message) == (outcome, message)


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param(None, "generation None not observed yet (observed None)", id="never-reconciled"),
        pytest.param(
            {"conditions": [cond("Ready", "True", "ReconciliationSucceeded")]},
            "at no revision, waiting for main@bbbbbbbbbbbb",
            id="ready-without-a-revision",
        ),
        pytest.param(
            applied(REV_A), "at main@aaaaaaaaaaaa, waiting for main@bbbbbbbbbbbb", id="old-revision"
        ),
        pytest.param(
            {**applied(REV_B), "conditions": [cond("Reconciling", "True", "Progressing", "Applying")]},
            "InProgress: Progressing: Applying",
            id="reconciling",
        ),
        pytest.param(
            {"conditions": [cond("Ready", "False", "DependencyNotReady", "dependency 'infra' is not ready")]},
            "InProgress: DependencyNotReady: dependency 'infra' is not ready",
            id="waiting-for-a-dependency",
        ),
    ],
)
def test_a_target_is_not_current_until_reconciled_at_the_revision(status: Obj | None, reason: str) -> None:
    root = flux("Kustomization", NS, "apps", spec={"sourceRef": {"kind": "GitRepository", "name": "fleet"}})
    if status is not None:
        root["status"] = {"observedGeneration": 1, **status}
    found = verdict([source(NS, REV_B), root])
    assert (found.outcome, found.objects[0].reason) == (Outcome.WAITING, reason)


def test_a_child_of_a_kind_not_served_is_unknown_and_never_converged() -> None:
    vpc = entry(NS, "vpc", "Terraform", "infra.contrib.fluxcd.io")
    served = {(KS, "Kustomization"), ("source.toolkit.fluxcd.io", "GitRepository")}
    found = verdict([source(NS, REV_B), kustomization(NS, "apps", applied(REV_B, vpc))], served=served)
    assert (found.outcome, found.objects[1].state) == (Outcome.WAITING, State.UNKNOWN)
    assert found.objects[1].reason == (
        "not judged: Terraform.infra.contrib.fluxcd.io is not served by this API server "
        "(is its CRD installed?)"
    )


def test_a_child_of_a_kind_stalewatch_may_not_list_is_unknown_never_not_created_yet() -> None:
    """A Certificate the Kustomization applied, in a cluster where stalewatch's account gets 403
    on Certificates: the wait cannot say it is missing, only that it cannot look."""
    cert = entry(NS, "web-tls", "Certificate", "cert-manager.io")
    kinds = {
        (KS, "Kustomization"),
        ("source.toolkit.fluxcd.io", "GitRepository"),
        ("cert-manager.io", "Certificate"),
    }
    forbidden = {("cert-manager.io", "Certificate")}
    stack_ = [source(NS, REV_B), kustomization(NS, "apps", applied(REV_B, cert))]
    found = verdict(stack_, served=kinds, forbidden=forbidden)
    assert (found.outcome, found.objects[1].state) == (Outcome.WAITING, State.UNKNOWN)
    assert (
        found.objects[1].reason
        == "not judged: stalewatch may not list Certificate.cert-manager.io here (403 Forbidden)"
    )


def test_a_suspended_target_fails_at_once() -> None:
    root = kustomization(NS, "apps", applied(REV_A))
    root["spec"]["suspend"] = True
    found = verdict([source(NS, REV_B), root])
    assert found.outcome is Outcome.FAILED
    assert found.message.endswith(
        "apps: suspended (spec.suspend: true): nothing reconciles it until it is resumed"
    )


def test_a_helmrelease_is_at_the_revision_by_its_last_attempt_and_its_newest_history() -> None:
    release = flux(
        "HelmRelease",
        NS,
        "podinfo",
        status=ready(
            lastAttemptedRevision="6.5.0", history=[{"chartVersion": "6.4.0", "status": "deployed"}]
        ),
    )
    target = parse_target(f"hr/{NS}/podinfo", revision="v6.5.0")
    assert verdict([release], targets=[target]).objects[0].reason == "at 6.4.0, waiting for v6.5.0"
    release["status"]["history"][0]["chartVersion"] = "6.5.0"
    assert verdict([release], targets=[target]).outcome is Outcome.CONVERGED


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("deploy/flux-system/apps", "unknown kind 'deploy'", id="unknown-kind"),
        pytest.param("ks/apps", "expected KIND/NAMESPACE/NAME", id="two-parts"),
        pytest.param(
            "ks/Flux_System/apps", "namespace 'Flux_System' is not a Kubernetes object name", id="bad-name"
        ),
    ],
)
def test_a_bad_target_is_named(text: str, problem: str) -> None:
    with pytest.raises(TargetError, match=problem.replace("(", r"\(")):
        parse_target(text)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        pytest.param("ks/a/b", "Kustomization", id="ks"),
        pytest.param("HelmReleases/a/b", "HelmRelease", id="plural-any-case"),
        pytest.param("tf/a/b", "Terraform", id="tf"),
        pytest.param("ocirepository/a/b", "OCIRepository", id="source-kind"),
    ],
)
def test_kinds_are_named_singular_plural_or_short(text: str, kind: str) -> None:
    assert parse_target(text).key.kind == kind


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(REV_B, id="git-revision"),
        pytest.param("b" * 40, id="bare-sha"),
        pytest.param("latest@sha256:" + "c" * 64, id="oci-digest"),
        pytest.param("6.5.0", id="chart-version"),
        pytest.param("20240101", id="digits-are-a-version"),
    ],
)
def test_revisions_that_name_one_revision_are_taken(text: str) -> None:
    assert check_revision(text) == text


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("5e0f1a2", "looks like an abbreviated digest", id="short-sha"),
        pytest.param("main@sha1:5e0f1a2", "looks like an abbreviated digest", id="short-sha-with-ref"),
        pytest.param("sha256:xyz", "the sha256 digest is not hexadecimal", id="not-hex"),
        pytest.param("main @sha1:x", "without spaces", id="spaced"),
        pytest.param("", "without spaces", id="empty"),
    ],
)
def test_a_malformed_revision_is_refused(text: str, problem: str) -> None:
    with pytest.raises(TargetError, match=problem):
        check_revision(text)


def certificate(ready_cond: Obj, *others: Obj) -> Obj:
    """A cert-manager Certificate the target applied (the conditions cert-manager writes)."""
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "web-tls", "namespace": NS, "generation": 1},
        "spec": {"secretName": "web-tls"},
        "status": {"conditions": [ready_cond, *others]},
    }


ISSUED = certificate(cond("Ready", "True", "Ready", "Certificate is up to date and has not expired"))
ISSUING = certificate(
    cond("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist", since=NOW),
    cond("Issuing", "True", "DoesNotExist", "Issuing certificate as Secret does not exist", since=NOW),
)
EXPIRED = certificate(
    cond("Ready", "False", "Expired", "Certificate expired", since=NOW - timedelta(hours=3)),
    cond("Issuing", "False", "Failed", "The certificate request has failed", since=NOW - timedelta(hours=3)),
)
WITH_CERT = (
    *INVENTORY,
    entry(NS, "web-tls", "Certificate", "cert-manager.io"),
    entry(NS, "web", "ConfigMap", ""),
)


@pytest.mark.parametrize(
    ("cert", "outcome", "says"),
    [
        pytest.param(ISSUED, Outcome.CONVERGED, "5/5 current", id="issued-current"),
        pytest.param(ISSUING, Outcome.WAITING, "4/5 current", id="issuing-waited-for"),
        pytest.param(
            EXPIRED, Outcome.FAILED, "ObjectFailing Certificate flux-system/web-tls", id="failing-fails"
        ),
        pytest.param(None, Outcome.WAITING, "4/5 current", id="not-there-yet-waited-for"),
    ],
)
def test_a_kind_the_target_applied_without_health_checks_is_waited_for_and_fails_the_wait(
    cert: Obj | None, outcome: Outcome, says: str
) -> None:
    """Flux says Ready for a Kustomization without health checks whatever its Certificate does;
    the wait judges the Certificate itself (kstatus), and a ConfigMap (no state) not at all."""
    objects = stack(applied(REV_B, *WITH_CERT))
    found = verdict([*objects, cert] if cert is not None else objects)
    assert (found.outcome, found.message) == (outcome, says)
    assert [o.key.kind for o in found.objects].count("ConfigMap") == 0


def test_a_failed_job_the_target_applied_fails_the_wait_at_once() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "migrate", "namespace": NS, "generation": 1},
        "spec": {"backoffLimit": 3},
        "status": {
            "failed": 4,
            "conditions": [
                cond(
                    "FailureTarget",
                    "True",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                ),
                cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
            ],
        },
    }
    objects = stack(applied(REV_B, *INVENTORY, entry(NS, "migrate", "Job", "batch")))
    found = verdict([*objects, job])
    assert found.outcome is Outcome.FAILED
    assert "Job flux-system/migrate" in found.message


def test_a_stack_whose_controller_is_stuck_fails_fast_before_any_object_is_overdue() -> None:
    """kustomize-controller is up but its queue has not drained for 6 minutes (a heartbeat read
    every 30 s): the wait ends STALE (exit 4) naming it, though no Kustomization is overdue yet."""
    body = (
        'controller_runtime_reconcile_total{controller="kustomization",result="success"} 7\n'
        'workqueue_depth{controller="kustomization",name="kustomization",priority="0"} 2\n'
        'workqueue_longest_running_processor_seconds{controller="kustomization",name="kustomization"} 0\n'
        'gotk_reconcile_duration_seconds_count{kind="Kustomization",name="apps",namespace="flux-system"} 7\n'
    )
    read = parse_controller_metrics(body)
    assert isinstance(read, ControllerMetrics)
    start = NOW - timedelta(minutes=6)
    model, store = HealthModel(), Store()
    for obj in stack(reconciling(REV_A, REV_B)):
        projected = project(obj)
        model.upsert(projected, now=start)
        store.put(projected)
    for step in range(13):
        model.heartbeat("kustomize-controller", at=start + step * timedelta(seconds=30), read=read)
    evaluation = model.evaluate(NOW)
    found = judge(
        (ROOT,),
        view=store,
        evaluation=evaluation,
        now=NOW,
        deadline=NOW + timedelta(minutes=5),
        grace=timedelta(0),
    )
    assert found.outcome is Outcome.STALE
    assert found.message == f"ControllerStuck Deployment {NS}/kustomize-controller (QueueNotDraining)"
    assert [f.type for f in found.findings] == ["ControllerStuck"]
