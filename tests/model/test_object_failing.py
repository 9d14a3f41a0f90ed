"""ObjectFailing: every kind no other rule judges, read from its own conditions.

Condition types, reasons and messages are the ones each project documents and writes:
cert-manager's Certificate (`Ready` reasons `Expired`, `Issuing=False Failed`), external-secrets'
ExternalSecret (`Ready=False SecretSyncedError`), kapp-controller's App (`ReconcileFailed=True`),
Kubernetes' Job (`Failed=True BackoffLimitExceeded`), CustomResourceDefinition (`NamesAccepted`,
`Established`, `NonStructuralSchema`), ReplicaSet (`ReplicaFailure=True FailedCreate`) and
PersistentVolumeClaim (phase `Lost`); tests/realworld/README.md cites where.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest

from tests.model.builders import MIN, NOW, Obj, by_id, cond, flux, git_repository, kustomization, run, ts
from watcher.model.engine import HealthModel
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.packed import Packed
from watcher.model.rules.gitops_rules import kubectl_describe
from watcher.model.types import FindingType, rfc3339

HOUR = 60 * MIN
KS_LABELS = {
    "kustomize.toolkit.fluxcd.io/name": "apps",
    "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
}


def obj(
    api_version: str,
    kind: str,
    name: str,
    *conditions: Obj,
    namespace: str | None = "apps",
    labels: dict[str, str] | None = None,
    **status: Any,
) -> Obj:
    meta: Obj = {"name": name, "generation": 1, "creationTimestamp": "2026-11-01T00:00:00Z"}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta,
        "spec": {},
        "status": {"conditions": list(conditions), **status},
    }


def certificate(*conditions: Obj, labels: dict[str, str] | None = None) -> Obj:
    return obj("cert-manager.io/v1", "Certificate", "web-tls", *conditions, labels=labels)


EXPIRED = cond("Ready", "False", "Expired", "Certificate expired on Sun, 29 Nov 2026 09:12:06 UTC", ago=HOUR)
ISSUING_FAILED = cond(
    "Issuing",
    "False",
    "Failed",
    'The certificate request has failed to complete and will be retried: order is in "invalid" state',
    ago=20 * MIN,
)


READY_AVAILABLE = cond("Ready", "True", "Available", "", ago=HOUR)
UPDATE_REFUSED = cond(
    "Synced", "False", "ReconcileError", "update failed: refuse to update the external resource", ago=HOUR
)


def job(*conditions: Obj, **status: Any) -> Obj:
    return obj("batch/v1", "Job", "migrate", *conditions, **status)


def crd(*conditions: Obj) -> Obj:
    return obj(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "widgets.example.com",
        *conditions,
        namespace=None,
    )


CASES = [
    pytest.param([certificate(EXPIRED, ISSUING_FAILED)], True, id="certificate-expired-for-an-hour"),
    pytest.param(
        [
            certificate(
                cond(
                    "Ready",
                    "False",
                    "DoesNotExist",
                    "Issuing certificate as Secret does not exist",
                    ago=2 * MIN,
                )
            )
        ],
        False,
        id="certificate-being-issued-for-two-minutes-is-not-yet-failing",
    ),
    pytest.param(
        [certificate(cond("Ready", "True", "Ready", "Certificate is up to date", ago=HOUR))],
        False,
        id="certificate-ready",
    ),
    pytest.param(
        [
            obj(
                "external-secrets.io/v1beta1",
                "ExternalSecret",
                "db",
                cond(
                    "Ready", "False", "SecretSyncedError", "could not get secret data from provider", ago=HOUR
                ),
            )
        ],
        True,
        id="externalsecret-that-cannot-sync",
    ),
    pytest.param(
        [
            obj(
                "kappctrl.k14s.io/v1alpha1",
                "App",
                "platform",
                cond(
                    "ReconcileFailed",
                    "True",
                    "",
                    "Deploying: Error (see .status.usefulErrorMessage for details)",
                    ago=HOUR,
                ),
            )
        ],
        True,
        id="kapp-app-reconcile-failed",
    ),
    pytest.param(
        [
            obj(
                "flagger.app/v1beta1",
                "Canary",
                "web",
                cond("Stalled", "True", "Failed", "Canary analysis failed", ago=MIN),
            )
        ],
        True,
        id="anything-stalled-at-once",
    ),
    pytest.param(
        [
            job(
                cond(
                    "Failed",
                    "True",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    ago=MIN,
                ),
                failed=7,
            )
        ],
        True,
        id="job-failed-at-once",
    ),
    pytest.param(
        [job(cond("Complete", "True", "", "", ago=MIN), succeeded=1, startTime="2026-11-30T11:00:00Z")],
        False,
        id="job-complete",
    ),
    pytest.param([job(active=1, startTime="2026-11-30T11:00:00Z")], False, id="job-running"),
    pytest.param(
        [
            crd(
                cond(
                    "NamesAccepted", "False", "MultipleNamesNotAllowed", '"widget" is already in use', ago=MIN
                )
            )
        ],
        True,
        id="crd-whose-names-were-refused-at-once",
    ),
    pytest.param(
        [
            crd(
                cond("NamesAccepted", "True", "NoConflicts", "no conflicts found", ago=HOUR),
                cond(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    ago=HOUR,
                ),
            )
        ],
        False,
        id="crd-established",
    ),
    pytest.param(
        [
            crd(
                cond(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    ago=HOUR,
                ),
                cond(
                    "NonStructuralSchema",
                    "True",
                    "Violations",
                    "spec.versions[0].schema.openAPIV3Schema.type: Required value: "
                    "must not be empty at the root",
                    ago=HOUR,
                ),
            )
        ],
        True,
        id="crd-with-a-non-structural-schema",
    ),
    pytest.param(
        [
            obj(
                "apps/v1",
                "ReplicaSet",
                "web-7d9f",
                cond(
                    "ReplicaFailure",
                    "True",
                    "FailedCreate",
                    'pods "web-7d9f-" is forbidden: exceeded quota: compute',
                    ago=HOUR,
                ),
                replicas=0,
            )
        ],
        True,
        id="replicaset-whose-pods-cannot-be-created",
    ),
    pytest.param(
        [obj("v1", "PersistentVolumeClaim", "data", phase="Lost")], True, id="pvc-whose-volume-is-lost"
    ),
    pytest.param([obj("v1", "PersistentVolumeClaim", "data", phase="Bound")], False, id="pvc-bound"),
    pytest.param(
        [obj("flagger.app/v1beta1", "Canary", "web", phase="Failed")], True, id="canary-whose-analysis-failed"
    ),
    pytest.param(
        [obj("argoproj.io/v1alpha1", "Rollout", "web", phase="Degraded")], True, id="rollout-degraded"
    ),
    pytest.param(
        [obj("flagger.app/v1beta1", "Canary", "web", phase="Progressing")], False, id="canary-progressing"
    ),
    pytest.param(
        [obj("example.com/v1", "Widget", "plain")],
        False,
        id="custom-resource-without-conditions-is-not-failing",
    ),
    pytest.param(
        [obj("velero.io/v1", "Backup", "nightly", phase="PartiallyFailed")],
        True,
        id="backup-partially-failed",
    ),
    pytest.param(
        [obj("velero.io/v1", "Schedule", "nightly", phase="FailedValidation")],
        True,
        id="schedule-failed-validation",
    ),
    pytest.param([obj("velero.io/v1", "Backup", "nightly", phase="Completed")], False, id="backup-completed"),
    pytest.param(
        [
            obj(
                "s3.aws.upbound.io/v1beta1",
                "Bucket",
                "assets",
                READY_AVAILABLE,
                UPDATE_REFUSED,
                namespace=None,
            )
        ],
        True,
        id="managed-resource-ready-but-not-synced",
    ),
    pytest.param(
        [
            obj(
                "s3.aws.upbound.io/v1beta1",
                "Bucket",
                "assets",
                READY_AVAILABLE,
                cond("Synced", "False", "ReconcilePaused", "", ago=HOUR),
                namespace=None,
            )
        ],
        False,
        id="managed-resource-paused-on-purpose",
    ),
    pytest.param(
        [
            obj(
                "apiregistration.k8s.io/v1",
                "APIService",
                "v1beta1.metrics.k8s.io",
                cond("Available", "False", "FailedDiscoveryCheck", "failing or missing response", ago=HOUR),
                namespace=None,
            )
        ],
        True,
        id="apiservice-unavailable",
    ),
    pytest.param(
        [
            obj(
                "apiregistration.k8s.io/v1",
                "APIService",
                "v1beta1.metrics.k8s.io",
                cond(
                    "Available", "False", "MissingEndpoints", "endpoints for service/metrics-server", ago=MIN
                ),
                namespace=None,
            )
        ],
        False,
        id="apiservice-unavailable-for-a-minute",
    ),
    pytest.param(
        [
            obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "api",
                cond("ScalingActive", "False", "FailedGetResourceMetric", "", ago=HOUR),
            )
        ],
        True,
        id="hpa-cannot-compute-replicas",
    ),
    pytest.param(
        [
            obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "api",
                cond("AbleToScale", "False", "FailedGetScale", "", ago=HOUR),
            )
        ],
        True,
        id="hpa-cannot-read-its-target",
    ),
    pytest.param(
        [
            obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "api",
                cond("ScalingActive", "False", "ScalingDisabled", "", ago=HOUR),
            )
        ],
        False,
        id="hpa-whose-target-is-scaled-to-zero",
    ),
    pytest.param(
        [
            obj(
                "v1",
                "Namespace",
                "preview",
                cond("NamespaceDeletionContentFailure", "True", "ContentDeletionFailed", "", ago=HOUR),
                cond("NamespaceContentRemaining", "False", "ContentRemoved", "", ago=HOUR),
                namespace=None,
                phase="Terminating",
            )
        ],
        True,
        id="namespace-whose-deletion-cannot-finish",
    ),
    pytest.param(
        [obj("v1", "Namespace", "preview", namespace=None, phase="Active")], False, id="namespace-active"
    ),
    pytest.param(
        [certificate(cond("Ready", "Unknown", "Pending", "", ago=HOUR))],
        False,
        id="ready-unknown-is-not-failing",
    ),
]


@pytest.mark.parametrize(("objs", "failing"), CASES)
def test_an_object_of_any_kind_is_failing_when_its_own_status_says_so(objs: list[Obj], failing: bool) -> None:
    found = [f for f in run(flux(), objs).findings if f.type is FindingType.OBJECT_FAILING]
    assert bool(found) is failing, [f.message for f in found]


def applying_the_certificate() -> Obj:
    """Kustomization apps, Ready, its inventory listing the Certificate."""
    applier = kustomization(
        "apps", conditions=[cond("Ready", "True", "ReconciliationSucceeded", "Applied", ago=HOUR)]
    )
    applier["status"]["inventory"] = {
        "entries": [{"id": "apps_web-tls_cert-manager.io_Certificate", "v": "v1"}]
    }
    return applier


def test_a_failing_certificate_is_the_root_and_names_the_kustomization_that_cannot_see_it() -> None:
    applier = applying_the_certificate()
    findings = by_id(
        run(flux(), git_repository(), applier, certificate(EXPIRED, ISSUING_FAILED, labels=KS_LABELS))
    )

    failing = findings["ObjectFailing/Certificate/apps/web-tls"]
    assert failing.is_root
    assert failing.since == NOW - HOUR
    assert [s["name"] for s in failing.affected] == ["apps"]
    assert failing.evidence["applied_by"] == "Kustomization/flux-system/apps"
    assert failing.message == (
        "Certificate apps/web-tls says Ready=False (Expired: Certificate expired on Sun, 29 Nov 2026 "
        f"09:12:06 UTC) since {rfc3339(NOW - HOUR)}. Also: Issuing=False (Failed: The certificate "
        'request has failed to complete and will be retried: order is in "invalid" state). Its '
        "controller reports it: see `kubectl describe certificate.cert-manager.io web-tls -n apps` and "
        "that controller's logs. Kustomization flux-system/apps applied it and says Ready=True: it has "
        "no health checks, so Flux does not see this (`spec.wait: true` or `spec.healthChecks` would "
        "make it)."
    )


def test_a_kustomization_with_health_checks_is_told_they_do_not_cover_the_kind() -> None:
    applier = applying_the_certificate()
    applier["spec"]["wait"] = True
    findings = by_id(run(flux(), git_repository(), applier, certificate(EXPIRED, labels=KS_LABELS)))

    assert findings["ObjectFailing/Certificate/apps/web-tls"].message.endswith(
        "Kustomization flux-system/apps applied it and says Ready=True: "
        "its health checks do not look at this kind."
    )


def test_a_job_failure_is_dated_from_its_failed_condition() -> None:
    failed = job(
        cond(
            "Failed",
            "True",
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
            ago=timedelta(minutes=3),
        )
    )
    [finding] = run(flux(), failed).findings
    assert finding.since == NOW - timedelta(minutes=3)
    assert finding.message.startswith(
        "Job apps/migrate has failed: Failed=True "
        "(DeadlineExceeded: Job was active longer than specified deadline)."
    )


def replica_set(*conditions: Obj) -> Obj:
    rs = obj("apps/v1", "ReplicaSet", "batch-7f9c", *conditions, replicas=0)
    rs["metadata"]["resourceVersion"] = "7"
    rs["spec"] = {"replicas": 2, "selector": {"matchLabels": {"app": "batch"}}}
    return rs


@pytest.mark.parametrize(
    ("conditions", "packed"),
    [
        pytest.param((), True, id="a-replicaset-that-fails-nothing-comes-packed"),
        pytest.param(
            (cond("ReplicaFailure", "True", "FailedCreate", "exceeded quota: compute", ago=HOUR),),
            False,
            id="a-replicaset-whose-pods-are-refused-is-judged",
        ),
    ],
)
def test_the_live_decoder_packs_a_replicaset_only_when_it_fails_nothing(
    conditions: tuple[Obj, ...], packed: bool
) -> None:
    decoded = fast_path("apps/v1", "ReplicaSet").decode(
        orjson.dumps({"type": "ADDED", "object": replica_set(*conditions)})
    )
    assert isinstance(decoded.object, Packed) is packed
    model = HealthModel()
    assert decoded.object is not None
    model.upsert(decoded.object, now=NOW)
    found = [f.id for f in model.evaluate(NOW).findings]
    assert found == ([] if packed else ["ObjectFailing/ReplicaSet/apps/batch-7f9c"])


def test_pods_refused_by_a_policy_are_policy_denied_naming_it_not_object_failing() -> None:
    denied = (
        'pods "web-7d9f-x2k8p" is forbidden: admission webhook "validation.gatekeeper.sh" denied the '
        "request: [psp-privileged-container] Privileged container is not allowed: web"
    )
    found = by_id(run(flux(), replica_set(cond("ReplicaFailure", "True", "FailedCreate", denied, ago=HOUR))))

    assert list(found) == ["PolicyDenied/ReplicaSet/apps/batch-7f9c"]
    denial = found["PolicyDenied/ReplicaSet/apps/batch-7f9c"]
    assert denial.evidence["policies"] == ["psp-privileged-container"]
    assert denial.since == NOW - HOUR


def cron_job(**status: Any) -> Obj:
    found = obj("batch/v1", "CronJob", "nightly", **status)
    found["spec"] = {"schedule": "0 * * * *"}
    return found


@pytest.mark.parametrize(
    ("status", "failing"),
    [
        pytest.param(
            {"lastScheduleTime": ts(HOUR), "lastSuccessfulTime": ts(48 * HOUR)},
            True,
            id="cronjob-without-a-success-since-its-last-runs",
        ),
        pytest.param(
            {"lastScheduleTime": ts(HOUR), "lastSuccessfulTime": ts(HOUR - MIN)},
            False,
            id="cronjob-whose-last-run-succeeded",
        ),
        pytest.param(
            {
                "lastScheduleTime": ts(HOUR),
                "lastSuccessfulTime": ts(48 * HOUR),
                "active": [{"apiVersion": "batch/v1", "kind": "Job", "name": "nightly-1"}],
            },
            False,
            id="cronjob-whose-last-run-is-still-running",
        ),
        pytest.param({}, False, id="cronjob-never-scheduled-yet"),
    ],
)
def test_a_cronjob_fails_when_its_last_scheduled_run_did_not_succeed(status: Obj, failing: bool) -> None:
    found = [f for f in run(flux(), cron_job(**status)).findings if f.type is FindingType.OBJECT_FAILING]
    assert bool(found) is failing


@pytest.mark.parametrize(
    ("api_version", "kind", "said"),
    [
        pytest.param("v1", "Service", "`kubectl describe service web -n apps`", id="core"),
        pytest.param("batch/v1", "Job", "`kubectl describe job web -n apps`", id="built-in-group"),
        pytest.param(
            "apiregistration.k8s.io/v1",
            "APIService",
            "`kubectl describe apiservice web -n apps`",
            id="k8s-io",
        ),
        pytest.param(
            "kustomize.toolkit.fluxcd.io/v1",
            "Kustomization",
            "`kubectl describe kustomization web -n apps`",
            id="flux",
        ),
        pytest.param(
            "serving.knative.dev/v1",
            "Service",
            "`kubectl describe service.serving.knative.dev web -n apps`",
            id="a-third-partys-kind-named-like-a-built-in-one",
        ),
    ],
)
def test_the_describe_hint_names_a_third_partys_kind_with_its_group(
    api_version: str, kind: str, said: str
) -> None:
    subject = {"apiVersion": api_version, "kind": kind, "namespace": "apps", "name": "web"}
    assert kubectl_describe(subject) == said


def deleted(ago: Any) -> Obj:
    """A custom resource deleted `ago`, still there (a finalizer), Ready=True as last written."""
    widget = obj("lab.example.com/v1", "Widget", "cache", cond("Ready", "True", "Ready", "", ago=2 * HOUR))
    widget["metadata"]["deletionTimestamp"] = ts(ago)
    return widget


def test_an_object_still_there_past_object_deleting_is_failing_held_by_a_finalizer() -> None:
    found = by_id(run(deleted(31 * MIN)))["ObjectFailing/Widget/apps/cache"]
    assert found.since == NOW - 31 * MIN
    assert (
        f"was deleted at {rfc3339(NOW - 31 * MIN)} and is still there: a finalizer holds it" in found.message
    )


def test_an_object_deleted_minutes_ago_is_not_failing_yet_and_falls_due() -> None:
    model = HealthModel()
    model.upsert(deleted(5 * MIN), now=NOW)
    assert model.evaluate(NOW).findings == []
    later = model.evaluate(NOW + 25 * MIN)
    assert [f.id for f in later.findings] == ["ObjectFailing/Widget/apps/cache"]
