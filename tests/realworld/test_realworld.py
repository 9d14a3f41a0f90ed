"""States real controllers write, through `stalewatch analyze` itself: one named case per file.

Each case in cases/ is a snapshot written for these tests from what Flux's controllers, kubelet and
kube-controller-manager put in status (reasons, messages, condition sets); README.md names where
each fact comes from. The shared cases/_flux-system.yaml adds the running Flux controllers, as a
real `kubectl get` of the cluster would. Healthy cases must give no warning or critical finding;
failing ones exactly the findings listed, each root where it belongs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from watcher.cli import main

CASES = Path(__file__).parent / "cases"
CONTROLLERS = CASES / "_flux-system.yaml"
NOW = "2026-11-30T12:00:00Z"


@dataclass(frozen=True)
class Expect:
    """The findings of a case by id: `roots` explain themselves, `symptoms` name their root."""

    roots: frozenset[str] = frozenset()
    symptoms: Mapping[str, str] = field(default_factory=dict)
    exit_code: int = 0


def roots(*ids: str, symptoms: Mapping[str, str] | None = None, exit_code: int = 0) -> Expect:
    return Expect(frozenset(ids), symptoms or {}, exit_code)


HEALTHY = roots()
RF = "ReconcileFailed"
STUCK = "StuckReconciling"
WU = "WorkloadUnhealthy"


def retried(kind: str, name: str) -> Expect:
    """A Flux-style failure: Ready=False beside Reconciling=True (ProgressingWithRetry), held for
    hours: ReconcileFailed alone. ProgressingWithRetry is Flux retrying a failed object, not a
    stuck reconcile (the lab's real controllers rewrite it on every attempt)."""
    return roots(f"{RF}/{kind}/{name}")


OF = "ObjectFailing"

CASE_TABLE = [
    # Healthy, and states that are only in progress
    pytest.param(
        "gitrepository-and-kustomization-applied", HEALTHY, id="gitrepository-and-kustomization-applied"
    ),
    pytest.param("helmrelease-installed-from-helmrepository", HEALTHY, id="helmrelease-installed"),
    pytest.param("helmrelease-upgrade-in-progress", HEALTHY, id="helmrelease-upgrade-in-progress"),
    pytest.param("kustomization-reconcile-in-progress", HEALTHY, id="kustomization-reconcile-in-progress"),
    pytest.param("ocirepository-artifact-stored", HEALTHY, id="ocirepository-artifact-stored"),
    pytest.param("image-automation-scanning-and-updating", HEALTHY, id="image-automation-healthy"),
    pytest.param("legacy-v1beta1-objects", HEALTHY, id="legacy-v1beta1-objects-and-revisions"),
    pytest.param("suspended-kustomization-left-failing", HEALTHY, id="suspended-kustomization"),
    pytest.param("receiver-initialized", HEALTHY, id="receiver-initialized"),
    pytest.param("gitrepository-fetch-failing-for-a-minute", HEALTHY, id="fetch-failing-for-a-minute"),
    pytest.param("statefulset-all-replicas-ready", HEALTHY, id="statefulset-all-replicas-ready"),
    pytest.param("daemonset-on-every-node", HEALTHY, id="daemonset-on-every-node"),
    pytest.param("job-completed", HEALTHY, id="job-and-its-pod-completed"),
    pytest.param("pod-restarted-once-and-ready-again", HEALTHY, id="pod-restarted-once-ready-again"),
    pytest.param("evicted-pod-replaced-by-its-deployment", HEALTHY, id="evicted-pod-replaced-by-deployment"),
    # Flux objects that fail
    pytest.param(
        "gitrepository-clone-auth-failed-under-two-kustomizations",
        roots(
            f"{RF}/GitRepository/flux-system/fleet",
            symptoms={
                f"{RF}/Kustomization/flux-system/infra": f"{RF}/GitRepository/flux-system/fleet",
                f"{RF}/Kustomization/flux-system/apps": f"{RF}/GitRepository/flux-system/fleet",
            },
        ),
        id="gitrepository-cannot-clone-under-two-kustomizations",
    ),
    pytest.param(
        "gitrepository-auth-failed-keeps-serving-last-artifact",
        retried("GitRepository", "default/podinfo"),
        id="gitrepository-auth-failed-keeps-last-artifact",
    ),
    pytest.param(
        "kustomization-source-not-found",
        roots(f"{RF}/Kustomization/default/podinfo"),
        id="kustomization-source-not-found",
    ),
    pytest.param(
        "kustomization-build-failed-first-apply",
        roots(f"{RF}/Kustomization/flux-system/monitoring"),
        id="kustomization-build-failed",
    ),
    pytest.param(
        "kustomization-build-failed-on-new-revision",
        roots(
            "RevisionSkew/Kustomization/flux-system/apps",
            symptoms={f"{RF}/Kustomization/flux-system/apps": "RevisionSkew/Kustomization/flux-system/apps"},
        ),
        id="kustomization-build-failed-on-new-revision",
    ),
    pytest.param(
        "kustomization-path-not-found",
        roots(f"{RF}/Kustomization/flux-system/staging"),
        id="kustomization-path-not-found",
    ),
    pytest.param(
        "kustomization-apply-denied-by-admission-webhook",
        roots(
            "PolicyDenied/Kustomization/flux-system/apps",
            symptoms={f"{RF}/Kustomization/flux-system/apps": "PolicyDenied/Kustomization/flux-system/apps"},
        ),
        id="kustomization-dry-run-denied",
    ),
    pytest.param(
        "kustomization-health-check-failed-on-crash-looping-deployment",
        roots(
            f"{WU}/Deployment/apps/web",
            symptoms={
                f"{WU}/Pod/apps/web-7c5d9f8b6-h4k8m": f"{WU}/Deployment/apps/web",
                "DependencyBlocked/Kustomization/flux-system/apps": f"{WU}/Deployment/apps/web",
                "RevisionSkew/Kustomization/flux-system/apps": f"{WU}/Deployment/apps/web",
            },
        ),
        id="kustomization-health-check-failed-on-crash-loop",
    ),
    pytest.param(
        "kustomization-waits-on-failing-dependency",
        roots(
            f"{RF}/Kustomization/flux-system/infra",
            symptoms={
                "DependencyBlocked/Kustomization/flux-system/apps": f"{RF}/Kustomization/flux-system/infra"
            },
        ),
        id="kustomization-waits-on-failing-dependency",
    ),
    pytest.param(
        "helmrelease-upgrade-failed-and-rolled-back",
        retried("HelmRelease", "default/podinfo"),
        id="helmrelease-upgrade-failed-rolled-back",
    ),
    pytest.param(
        "helmrelease-install-retries-exhausted",
        roots("Stalled/HelmRelease/apps/web"),
        id="helmrelease-install-retries-exhausted",
    ),
    pytest.param(
        "helmrelease-chart-source-unavailable",
        roots(
            f"{RF}/HelmChart/default/default-podinfo",
            symptoms={
                f"{RF}/HelmRelease/default/podinfo": f"{RF}/HelmChart/default/default-podinfo",
            },
        ),
        id="helmrelease-on-unavailable-chart",
    ),
    pytest.param(
        "helmrepository-index-not-found",
        retried("HelmRepository", "default/podinfo"),
        id="helmrepository-404",
    ),
    pytest.param(
        "ocirepository-pull-denied",
        roots(  # Reconciling reason Progressing (an attempt's first): not Flux's retrying state
            f"{RF}/OCIRepository/default/podinfo",
            symptoms={f"{STUCK}/OCIRepository/default/podinfo": f"{RF}/OCIRepository/default/podinfo"},
        ),
        id="ocirepository-pull-denied",
    ),
    pytest.param(
        "bucket-operation-failed", retried("Bucket", "default/minio-bucket"), id="bucket-operation-failed"
    ),
    pytest.param(
        "imagerepository-scan-unauthorized",
        retried("ImageRepository", "default/podinfo"),
        id="imagerepository-scan-unauthorized",
    ),
    pytest.param(
        "imagepolicy-repository-missing",
        retried("ImagePolicy", "flux-system/podinfo"),
        id="imagepolicy-repository-missing",
    ),
    pytest.param(
        "imageupdateautomation-update-path-missing",
        roots(f"{RF}/ImageUpdateAutomation/default/podinfo-update"),
        id="imageupdateautomation-failed",
    ),
    pytest.param(
        "receiver-token-secret-missing",
        retried("Receiver", "flux-system/github-receiver"),
        id="receiver-token-secret-missing",
    ),
    pytest.param(
        "source-controller-image-pull-backoff",
        roots(
            "ControllerDown/Deployment/flux-system/source-controller",
            symptoms={
                "StatusStale/GitRepository/flux-system/flux-system": (
                    "ControllerDown/Deployment/flux-system/source-controller"
                )
            },
            exit_code=1,
        ),
        id="source-controller-image-pull-backoff",
    ),
    # Pods and workloads that fail
    pytest.param("bare-pod-failed-with-error", roots(f"{WU}/Pod/apps/debug-migrate"), id="bare-pod-failed"),
    pytest.param("bare-pod-evicted", roots(f"{WU}/Pod/apps/scratch"), id="bare-pod-evicted"),
    pytest.param(
        "workflow-pod-failed",
        roots(f"{WU}/Pod/batch/nightly-report-3872914012"),
        id="pod-of-untracked-owner-failed",
    ),
    pytest.param(
        "pod-crash-loop-in-a-trimmed-snapshot",
        roots(f"{WU}/Pod/apps/api-5d8c7b9f6-t7r2n"),
        id="crash-loop-without-timestamps",
    ),
    pytest.param(
        "statefulset-pod-crash-looping",
        roots(
            f"{WU}/StatefulSet/data/postgres",
            symptoms={f"{WU}/Pod/data/postgres-2": f"{WU}/StatefulSet/data/postgres"},
        ),
        id="statefulset-pod-crash-looping",
    ),
    pytest.param(
        "daemonset-pod-image-pull-backoff",
        roots(
            f"{WU}/DaemonSet/monitoring/log-agent",
            symptoms={f"{WU}/Pod/monitoring/log-agent-7hc3m": f"{WU}/DaemonSet/monitoring/log-agent"},
        ),
        id="daemonset-pod-image-pull-backoff",
    ),
    pytest.param(
        "deployment-progress-deadline-exceeded",
        roots(
            f"{WU}/Deployment/shop/checkout",
            symptoms={f"{WU}/Pod/shop/checkout-5d8c7b9f6-p9z3k": f"{WU}/Deployment/shop/checkout"},
        ),
        id="deployment-progress-deadline-exceeded",
    ),
    pytest.param(
        "deployment-pod-oom-killed",
        roots(
            f"{WU}/Deployment/apps/search",
            symptoms={f"{WU}/Pod/apps/search-8d9e0f1a2-w5x6y": f"{WU}/Deployment/apps/search"},
        ),
        id="deployment-pod-oom-killed",
    ),
    pytest.param(
        "pod-missing-secret",
        roots(
            f"{WU}/Deployment/apps/billing",
            symptoms={f"{WU}/Pod/apps/billing-6f7a8b9c0-m3n4p": f"{WU}/Deployment/apps/billing"},
        ),
        id="pod-missing-secret",
    ),
    pytest.param(
        "pod-unschedulable",
        roots(
            f"{WU}/Deployment/apps/worker",
            symptoms={f"{WU}/Pod/apps/worker-0a1b2c3d4-z8y7x": f"{WU}/Deployment/apps/worker"},
        ),
        id="pod-unschedulable",
    ),
    # Every other kind a stack applies: judged from its own status (ObjectFailing)
    pytest.param(
        "certificate-expired-renewal-failing",
        roots(f"{OF}/Certificate/apps/web-tls"),
        id="certificate-expired-renewal-failing",
    ),
    pytest.param(
        "certificate-config-error", roots(f"{OF}/Certificate/apps/api-tls"), id="certificate-config-error"
    ),
    pytest.param("certificate-issued", HEALTHY, id="certificate-issued"),
    pytest.param("certificate-issuing-for-the-first-time", HEALTHY, id="certificate-issuing-for-two-minutes"),
    pytest.param(
        "externalsecret-cannot-sync",
        roots(f"{OF}/ExternalSecret/apps/db-credentials"),
        id="externalsecret-cannot-sync",
    ),
    pytest.param("externalsecret-synced", HEALTHY, id="externalsecret-synced"),
    pytest.param(
        "secretstore-validation-failed",
        roots(f"{OF}/SecretStore/apps/vault"),
        id="secretstore-cannot-authenticate",
    ),
    pytest.param(
        "job-backoff-limit-exceeded", roots(f"{OF}/Job/apps/db-migrate"), id="job-backoff-limit-exceeded"
    ),
    pytest.param("job-deadline-exceeded", roots(f"{OF}/Job/apps/nightly-report"), id="job-deadline-exceeded"),
    pytest.param("job-running", HEALTHY, id="job-running"),
    pytest.param(
        "cronjob-last-runs-failed",
        roots(
            f"{OF}/CronJob/apps/nightly-report",
            symptoms={f"{OF}/Job/apps/nightly-report-29409780": f"{OF}/CronJob/apps/nightly-report"},
        ),
        id="cronjob-last-runs-failed",
    ),
    pytest.param("cronjob-last-run-succeeded", HEALTHY, id="cronjob-last-run-succeeded"),
    pytest.param("cronjob-running", HEALTHY, id="cronjob-running"),
    pytest.param(
        "crd-names-not-accepted",
        roots(f"{OF}/CustomResourceDefinition/widgets.acme.example"),
        id="crd-names-not-accepted",
    ),
    pytest.param(
        "crd-non-structural-schema",
        roots(f"{OF}/CustomResourceDefinition/gadgets.acme.example"),
        id="crd-non-structural-schema",
    ),
    pytest.param("crd-established", HEALTHY, id="crd-established"),
    pytest.param(
        "replicaset-pods-refused-by-quota",
        roots(f"{OF}/ReplicaSet/apps/batch-7f9c"),
        id="replicaset-pods-refused-by-quota",
    ),
    pytest.param("replicaset-scaled-down", HEALTHY, id="replicaset-scaled-down"),
    pytest.param(
        "kapp-app-reconcile-failed", roots(f"{OF}/App/apps/platform"), id="kapp-app-reconcile-failed"
    ),
    pytest.param(
        "pvc-volume-lost", roots(f"{OF}/PersistentVolumeClaim/apps/data-db-0"), id="pvc-volume-lost"
    ),
    pytest.param("pvc-bound", HEALTHY, id="pvc-bound"),
    pytest.param("canary-analysis-failed", roots(f"{OF}/Canary/apps/web"), id="canary-analysis-failed"),
    pytest.param("canary-progressing", HEALTHY, id="canary-progressing"),
    pytest.param("pvc-pending-for-its-first-consumer", HEALTHY, id="pvc-pending-for-its-first-consumer"),
    pytest.param(
        "deployment-progress-deadline-exceeded-without-a-time",
        roots(f"{WU}/Deployment/apps/web"),
        id="deployment-progress-deadline-exceeded-without-a-time",
    ),
    pytest.param(
        "deployment-one-generation-behind-undated", HEALTHY, id="deployment-one-generation-behind-undated"
    ),
    pytest.param(
        "rollout-degraded-progress-deadline-exceeded",
        roots(f"{OF}/Rollout/shop/checkout"),
        id="rollout-degraded-progress-deadline-exceeded",
    ),
    pytest.param("rollout-healthy", HEALTHY, id="rollout-healthy"),
    pytest.param("rollout-paused-at-a-canary-step", HEALTHY, id="rollout-paused-at-a-canary-step"),
    pytest.param("kapp-app-reconcile-succeeded", HEALTHY, id="kapp-app-reconcile-succeeded"),
    pytest.param(
        "clusterissuer-acme-account-registration-failed",
        roots(f"{OF}/ClusterIssuer/letsencrypt"),
        id="clusterissuer-acme-account-registration-failed",
    ),
    pytest.param(
        "clusterissuer-acme-account-registered", HEALTHY, id="clusterissuer-acme-account-registered"
    ),
    pytest.param("clustersecretstore-valid", HEALTHY, id="clustersecretstore-valid"),
    pytest.param(
        "crossplane-managed-resource-update-refused",
        roots(f"{OF}/ResourceGroup/shop-prod"),
        id="crossplane-managed-resource-update-refused",
    ),
    pytest.param(
        "crossplane-managed-resource-available", HEALTHY, id="crossplane-managed-resource-available"
    ),
    pytest.param(
        "keda-scaledobject-check-failed",
        roots(f"{OF}/ScaledObject/apps/queue-worker"),
        id="keda-scaledobject-check-failed",
    ),
    pytest.param("keda-scaledobject-ready", HEALTHY, id="keda-scaledobject-ready"),
    pytest.param(
        "keda-scaledobject-falling-back",
        roots(f"{OF}/ScaledObject/apps/checkout-api"),
        id="keda-scaledobject-falling-back",
    ),
    pytest.param(
        "knative-service-revision-failed",
        roots(f"{OF}/Service/apps/thumbnailer"),
        id="knative-service-revision-failed",
    ),
    pytest.param("knative-service-ready", HEALTHY, id="knative-service-ready"),
    pytest.param(
        "velero-backup-partially-failed",
        roots(f"{OF}/Backup/velero/nightly-20261130010000"),
        id="velero-backup-partially-failed",
    ),
    pytest.param("velero-backup-completed", HEALTHY, id="velero-backup-completed"),
    pytest.param(
        "apiservice-failed-discovery-check",
        roots(f"{OF}/APIService/v1beta1.metrics.k8s.io"),
        id="apiservice-failed-discovery-check",
    ),
    pytest.param("apiservice-available", HEALTHY, id="apiservice-available"),
    pytest.param(
        "hpa-cannot-read-cpu-metrics",
        roots(f"{OF}/HorizontalPodAutoscaler/apps/api"),
        id="hpa-cannot-read-cpu-metrics",
    ),
    pytest.param("hpa-target-scaled-to-zero", HEALTHY, id="hpa-target-scaled-to-zero"),
    pytest.param(
        "namespace-stuck-on-a-finalizer",
        roots(f"{OF}/Namespace/preview-pr-502"),
        id="namespace-stuck-on-a-finalizer",
    ),
    pytest.param("namespace-deleting-for-three-minutes", HEALTHY, id="namespace-deleting-for-three-minutes"),
    pytest.param(
        "namespace-stuck-terminating",
        roots(f"{OF}/Namespace/preview-pr-481"),
        id="namespace-stuck-terminating",
    ),
    pytest.param("pdb-allows-disruptions", HEALTHY, id="pdb-allows-disruptions"),
    pytest.param(
        "helm-installed-externalsecret-cannot-sync",
        roots(f"{OF}/ExternalSecret/apps/podinfo-redis"),
        id="helm-installed-externalsecret-cannot-sync",
    ),
]


def analyze(capsys: pytest.CaptureFixture[str], case: str) -> tuple[int, list[dict[str, Any]]]:
    """`stalewatch analyze --output json` on the controllers and the case, as a user runs it."""
    code = main(["analyze", "--now", NOW, "--output", "json", str(CONTROLLERS), str(CASES / f"{case}.yaml")])
    out = capsys.readouterr()
    assert out.err == ""
    findings: list[dict[str, Any]] = orjson.loads(out.out)["findings"]
    return code, findings


@pytest.mark.parametrize(("case", "expect"), CASE_TABLE)
def test_real_world_state_gives_its_findings_and_roots(
    capsys: pytest.CaptureFixture[str], case: str, expect: Expect
) -> None:
    code, findings = analyze(capsys, case)

    assert {f["id"] for f in findings} == expect.roots | expect.symptoms.keys()
    assert {f["id"] for f in findings if f["root_cause"] is None} == expect.roots
    assert {f["id"]: f["root_cause"] for f in findings if f["root_cause"]} == dict(expect.symptoms)
    assert code == expect.exit_code


@pytest.mark.parametrize(("case", "expect"), [p for p in CASE_TABLE if p.values[1] == HEALTHY])
def test_a_healthy_state_raises_no_warning_or_critical(
    capsys: pytest.CaptureFixture[str], case: str, expect: Expect
) -> None:
    code, findings = analyze(capsys, case)

    assert [f["id"] for f in findings if f["severity"] in ("warning", "critical")] == []
    assert code == 0


@pytest.mark.parametrize(("case", "expect"), CASE_TABLE)
def test_messages_quoting_controllers_never_double_a_full_stop(
    capsys: pytest.CaptureFixture[str], case: str, expect: Expect
) -> None:
    _, findings = analyze(capsys, case)

    assert [f["message"] for f in findings if ".." in f["message"].replace("...", "")] == []


def test_every_case_file_is_in_the_table() -> None:
    listed = {p.values[0] for p in CASE_TABLE}

    assert {p.stem for p in CASES.glob("[!_]*.yaml")} == listed


@pytest.mark.parametrize(
    ("case", "finding_id"),
    [
        ("gitrepository-auth-failed-keeps-serving-last-artifact", f"{RF}/GitRepository/default/podinfo"),
        ("gitrepository-clone-auth-failed-under-two-kustomizations", f"{RF}/GitRepository/flux-system/fleet"),
        ("helmrepository-index-not-found", f"{RF}/HelmRepository/default/podinfo"),
        ("bucket-operation-failed", f"{RF}/Bucket/default/minio-bucket"),
    ],
)
def test_a_source_failing_for_hours_is_dated_from_its_fetch_failed_not_its_last_retry(
    capsys: pytest.CaptureFixture[str], case: str, finding_id: str
) -> None:
    """As tests/lab's real source-controller writes them: each retry rewrites Ready's and
    Reconciling's lastTransitionTime (here 11:58:30), FetchFailed keeps the first failure's."""
    _, findings = analyze(capsys, case)

    [failed] = [f for f in findings if f["id"] == finding_id]
    fetch_failed = failed["evidence"]["FetchFailed"]["lastTransitionTime"]
    assert failed["since"] == fetch_failed < failed["evidence"]["Ready"]["lastTransitionTime"]


def test_an_object_a_helm_chart_installed_names_its_helmrelease(capsys: pytest.CaptureFixture[str]) -> None:
    """helm-controller's labels (and Helm's release annotations) tie the failing object to the
    HelmRelease that installed it, which says Ready=True: Helm's wait does not read this kind."""
    _, findings = analyze(capsys, "helm-installed-externalsecret-cannot-sync")

    [failing] = findings
    assert failing["evidence"]["applied_by"] == "HelmRelease/apps/podinfo"
    assert failing["message"].endswith(
        "HelmRelease apps/podinfo applied it and says Ready=True: its health checks do not look at this kind."
    )
