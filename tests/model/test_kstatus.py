"""kstatus port: one named case per rule of cli-utils' status.go, generic.go and core.go (upstream's
own test tables are in test_kstatus_upstream.py)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.model.builders import NOW, SEC, cond, ts
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.projection import project
from watcher.model.rules.kstatus import compute_status
from watcher.model.types import Status

Obj = dict[str, Any]


def obj(
    api_version: str, kind: str, *, spec: Obj | None = None, status: Obj | None = None, **meta: Any
) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", **meta},
        "spec": spec or {},
        "status": status or {},
    }


def crd_like(*conditions: Obj, generation: int | None = None, observed: int | None = None) -> Obj:
    status: Obj = {"conditions": list(conditions)}
    if observed is not None:
        status["observedGeneration"] = observed
    meta = {"generation": generation} if generation is not None else {}
    return obj("kustomize.toolkit.fluxcd.io/v1", "Kustomization", status=status, **meta)


def deploy(
    spec_replicas: int = 1, *, conditions: list[Obj] | None = None, deadline: int | None = 600, **status: int
) -> Obj:
    full = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, **status}
    spec: Obj = {"replicas": spec_replicas}
    if deadline is not None:
        spec["progressDeadlineSeconds"] = deadline
    default = [
        cond("Progressing", "True", "NewReplicaSetAvailable"),
        cond("Available", "True", "MinimumReplicasAvailable"),
    ]
    return obj(
        "apps/v1",
        "Deployment",
        spec=spec,
        status={**full, "conditions": default if conditions is None else conditions},
    )


def sts(spec: Obj | None = None, **status: Any) -> Obj:
    full = {
        "replicas": 3,
        "readyReplicas": 3,
        "currentReplicas": 3,
        "updatedReplicas": 3,
        "currentRevision": "r1",
        "updateRevision": "r1",
    }
    return obj("apps/v1", "StatefulSet", spec={"replicas": 3, **(spec or {})}, status={**full, **status})


def daemonset(generation: int | None = 1, observed: int | None = 1, **status: int) -> Obj:
    full = {
        "desiredNumberScheduled": 2,
        "currentNumberScheduled": 2,
        "updatedNumberScheduled": 2,
        "numberAvailable": 2,
        "numberReady": 2,
    }
    out = obj("apps/v1", "DaemonSet", status={**full, **status})
    if generation is not None:
        out["metadata"]["generation"] = generation
    if observed is not None:
        out["status"]["observedGeneration"] = observed
    return out


def replicaset(*conditions: Obj, **status: int) -> Obj:
    full = {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "fullyLabeledReplicas": 2}
    return obj(
        "apps/v1",
        "ReplicaSet",
        spec={"replicas": 2},
        status={**full, **status, "conditions": list(conditions)},
    )


def pod(phase: str, *conditions: Obj, waiting: str | None = None, created_ago: int = 60) -> Obj:
    statuses = [{"name": "app", "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}}}]
    return obj(
        "v1",
        "Pod",
        status={"phase": phase, "conditions": list(conditions), "containerStatuses": statuses},
        creationTimestamp=ts(created_ago * SEC),
    )


def job(*conditions: Obj, started: bool = True, suspend: bool | None = None) -> Obj:
    status: Obj = {"succeeded": 1, "active": 0, "failed": 2, "conditions": list(conditions)}
    if started:
        status["startTime"] = ts()
    spec: Obj = {"completions": 3, "parallelism": 1}
    if suspend is not None:
        spec["suspend"] = suspend
    return obj("batch/v1", "Job", spec=spec, status=status)


def crd(*conditions: Obj) -> Obj:
    return obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", status={"conditions": list(conditions)})


CASES = [
    # generic.go
    pytest.param(
        crd_like(cond("Ready", "True")) | {"metadata": {"name": "x", "deletionTimestamp": ts()}},
        Status.TERMINATING,
        "",
        "Resource scheduled for deletion",
        id="deletion-timestamp-is-terminating",
    ),
    pytest.param(
        crd_like(generation=3, observed=2),
        Status.IN_PROGRESS,
        "LatestGenerationNotObserved",
        "Kustomization generation is 3, but latest observed generation is 2",
        id="generation-not-observed",
    ),
    pytest.param(
        crd_like(
            cond("Ready", "False", "ArtifactFailed", "Source artifact not found, retrying in 30s")
            | {"observedGeneration": 1},
            generation=1,
            observed=-1,
        ),
        Status.IN_PROGRESS,
        "ArtifactFailed",
        "Source artifact not found, retrying in 30s",
        id="flux-minus-one-with-its-conditions-at-the-generation-reads-the-conditions",
    ),
    pytest.param(
        crd_like(
            cond("Ready", "False", "ArtifactFailed", "x") | {"observedGeneration": 1},
            generation=2,
            observed=-1,
        ),
        Status.IN_PROGRESS,
        "LatestGenerationNotObserved",
        "Kustomization generation is 2, but latest observed generation is -1",
        id="flux-minus-one-with-conditions-of-an-older-generation-is-not-observed",
    ),
    pytest.param(
        crd_like(cond("Reconciling", "True", "Progressing", "working")),
        Status.IN_PROGRESS,
        "Progressing",
        "working",
        id="reconciling-true-is-in-progress",
    ),
    pytest.param(
        crd_like(cond("Stalled", "True", "InvalidPath", "no such path")),
        Status.FAILED,
        "InvalidPath",
        "no such path",
        id="stalled-true-is-failed",
    ),
    pytest.param(
        crd_like(cond("Stalled", "True", "A", "a"), cond("Reconciling", "True", "B", "b")),
        Status.FAILED,
        "A",
        "a",
        id="first-of-stalled-and-reconciling-wins-stalled",
    ),
    pytest.param(
        crd_like(cond("Reconciling", "True", "B", "b"), cond("Stalled", "True", "A", "a")),
        Status.IN_PROGRESS,
        "B",
        "b",
        id="first-of-stalled-and-reconciling-wins-reconciling",
    ),
    # status.go checkReadyCondition, for kinds without a rule of their own
    pytest.param(
        crd_like(cond("Ready", "True", "ReconciliationSucceeded", "Applied revision: main@sha1:abc")),
        Status.CURRENT,
        "",
        "Resource is Ready",
        id="ready-true-is-current",
    ),
    pytest.param(
        crd_like(cond("Ready", "False", "ArtifactFailed", "GitRepository 'flux-system/app' not found")),
        Status.IN_PROGRESS,
        "ArtifactFailed",
        "GitRepository 'flux-system/app' not found",
        id="ready-false-is-in-progress-with-its-reason",
    ),
    pytest.param(
        crd_like(cond("Ready", "Unknown", "Progressing", "reconciliation in progress")),
        Status.IN_PROGRESS,
        "Progressing",
        "reconciliation in progress",
        id="ready-unknown-is-in-progress-with-its-reason",
    ),
    pytest.param(
        crd_like(cond("Ready", "Maybe", "Odd"), cond("Ready", "False", "Second", "the second")),
        Status.IN_PROGRESS,
        "Second",
        "the second",
        id="ready-with-another-status-is-passed-over",
    ),
    pytest.param(
        crd_like(cond("Healthy", "False", "Broken", "no")),
        Status.CURRENT,
        "",
        "Resource is current",
        id="no-ready-condition-is-current",
    ),
    pytest.param(
        obj("apps/v1", "StatefulSet", spec={"replicas": 0}, status={"conditions": [cond("Ready", "False")]}),
        Status.CURRENT,
        "",
        "All replicas scheduled as expected. Replicas: 0",
        id="a-kind-with-a-rule-never-reads-ready",
    ),
    pytest.param(
        crd_like(cond("Reconciling", "False")),
        Status.CURRENT,
        "",
        "Resource is current",
        id="reconciling-false-is-current",
    ),
    pytest.param(
        crd_like(generation=2),
        Status.CURRENT,
        "",
        "Resource is current",
        id="generation-without-observed-generation-is-not-checked",
    ),
    # core.go: Deployment
    pytest.param(
        deploy(conditions=[cond("Progressing", "False", "ProgressDeadlineExceeded", "slow")]),
        Status.FAILED,
        "ProgressDeadlineExceeded",
        "Progress deadline exceeded",
        id="deployment-progress-deadline",
    ),
    pytest.param(
        deploy(3, replicas=2),
        Status.IN_PROGRESS,
        "LessReplicas",
        "Replicas: 2/3",
        id="deployment-less-replicas",
    ),
    pytest.param(
        deploy(1, updatedReplicas=0),
        Status.IN_PROGRESS,
        "LessUpdated",
        "Updated: 0/1",
        id="deployment-less-updated",
    ),
    pytest.param(
        deploy(1, replicas=2),
        Status.IN_PROGRESS,
        "ExtraPods",
        "Pending termination: 1",
        id="deployment-extra-pods",
    ),
    pytest.param(
        deploy(1, availableReplicas=0),
        Status.IN_PROGRESS,
        "LessAvailable",
        "Available: 0/1",
        id="deployment-less-available",
    ),
    pytest.param(
        deploy(1, readyReplicas=0), Status.IN_PROGRESS, "LessReady", "Ready: 0/1", id="deployment-less-ready"
    ),
    pytest.param(
        deploy(conditions=[cond("Available", "True")]),
        Status.IN_PROGRESS,
        "ReplicaSetNotAvailable",
        "ReplicaSet not Available",
        id="deployment-not-progressing",
    ),
    pytest.param(
        deploy(conditions=[], deadline=None),
        Status.IN_PROGRESS,
        "DeploymentNotAvailable",
        "Deployment not Available",
        id="deployment-without-deadline-not-available",
    ),
    pytest.param(
        deploy(), Status.CURRENT, "", "Deployment is available. Replicas: 1", id="deployment-current"
    ),
    # StatefulSet
    pytest.param(
        sts({"updateStrategy": {"type": "OnDelete"}}, readyReplicas=0),
        Status.CURRENT,
        "",
        "StatefulSet is using the ondelete update strategy",
        id="statefulset-ondelete",
    ),
    pytest.param(
        sts(replicas=2), Status.IN_PROGRESS, "LessReplicas", "Replicas: 2/3", id="statefulset-less-replicas"
    ),
    pytest.param(
        sts(readyReplicas=1), Status.IN_PROGRESS, "LessReady", "Ready: 1/3", id="statefulset-less-ready"
    ),
    pytest.param(
        sts(replicas=4, readyReplicas=4),
        Status.IN_PROGRESS,
        "ExtraPods",
        "Pending termination: 1",
        id="statefulset-extra-pods",
    ),
    pytest.param(
        sts({"updateStrategy": {"rollingUpdate": {"partition": 1}}}, updatedReplicas=1),
        Status.IN_PROGRESS,
        "PartitionRollout",
        "updated: 1/2",
        id="statefulset-partition-rollout",
    ),
    pytest.param(
        sts({"updateStrategy": {"rollingUpdate": {"partition": 1}}}, updatedReplicas=2),
        Status.CURRENT,
        "",
        "Partition rollout complete. updated: 2",
        id="statefulset-partition-complete",
    ),
    pytest.param(
        sts(currentReplicas=2),
        Status.IN_PROGRESS,
        "LessCurrent",
        "current: 2/3",
        id="statefulset-less-current",
    ),
    pytest.param(
        sts(updateRevision="r2"),
        Status.IN_PROGRESS,
        "RevisionMismatch",
        "Waiting for updated revision to match current",
        id="statefulset-revision-mismatch",
    ),
    pytest.param(
        sts(), Status.CURRENT, "", "All replicas scheduled as expected. Replicas: 3", id="statefulset-current"
    ),
    # DaemonSet
    pytest.param(
        daemonset(generation=None),
        Status.IN_PROGRESS,
        "NoGeneration",
        "DaemonSet metadata.generation not found",
        id="daemonset-no-generation",
    ),
    pytest.param(
        daemonset(observed=None),
        Status.IN_PROGRESS,
        "NoObservedGeneration",
        "DaemonSet status.observedGeneration not found",
        id="daemonset-no-observed-generation",
    ),
    pytest.param(
        obj("apps/v1", "DaemonSet", status={"observedGeneration": 1}, generation=1),
        Status.IN_PROGRESS,
        "NoDesiredNumber",
        "Missing .status.desiredNumberScheduled",
        id="daemonset-no-desired-number",
    ),
    pytest.param(
        daemonset(currentNumberScheduled=1),
        Status.IN_PROGRESS,
        "LessCurrent",
        "Current: 1/2",
        id="daemonset-less-current",
    ),
    pytest.param(
        daemonset(updatedNumberScheduled=1),
        Status.IN_PROGRESS,
        "LessUpdated",
        "Updated: 1/2",
        id="daemonset-less-updated",
    ),
    pytest.param(
        daemonset(numberAvailable=1),
        Status.IN_PROGRESS,
        "LessAvailable",
        "Available: 1/2",
        id="daemonset-less-available",
    ),
    pytest.param(
        daemonset(numberReady=1), Status.IN_PROGRESS, "LessReady", "Ready: 1/2", id="daemonset-less-ready"
    ),
    pytest.param(
        daemonset(),
        Status.CURRENT,
        "",
        "All replicas scheduled as expected. Replicas: 2",
        id="daemonset-current",
    ),
    # ReplicaSet
    pytest.param(
        replicaset(cond("ReplicaFailure", "True")),
        Status.IN_PROGRESS,
        "ReplicaFailure",
        "Replica Failure condition. Check Pods",
        id="replicaset-replica-failure",
    ),
    pytest.param(
        replicaset(fullyLabeledReplicas=1),
        Status.IN_PROGRESS,
        "LessLabelled",
        "Labelled: 1/2",
        id="replicaset-less-labelled",
    ),
    pytest.param(
        replicaset(availableReplicas=1),
        Status.IN_PROGRESS,
        "LessAvailable",
        "Available: 1/2",
        id="replicaset-less-available",
    ),
    pytest.param(
        replicaset(readyReplicas=1), Status.IN_PROGRESS, "LessReady", "Ready: 1/2", id="replicaset-less-ready"
    ),
    pytest.param(
        replicaset(replicas=3),
        Status.IN_PROGRESS,
        "ExtraPods",
        "Pending termination: 1",
        id="replicaset-extra-pods",
    ),
    pytest.param(
        replicaset(), Status.CURRENT, "", "ReplicaSet is available. Replicas: 2", id="replicaset-current"
    ),
    # Pod
    pytest.param(pod("Succeeded"), Status.CURRENT, "", "Pod has completed successfully", id="pod-succeeded"),
    pytest.param(
        pod("Failed"), Status.CURRENT, "", "Pod has completed, but not successfully", id="pod-failed"
    ),
    pytest.param(
        pod("Running", cond("Ready", "True")), Status.CURRENT, "", "Pod is Ready", id="pod-running-ready"
    ),
    pytest.param(
        pod("Running", cond("Ready", "False"), waiting="CrashLoopBackOff"),
        Status.FAILED,
        "ContainerCrashLooping",
        "Containers in CrashLoop state: app",
        id="pod-crash-looping",
    ),
    pytest.param(
        pod("Running", cond("Ready", "False")),
        Status.IN_PROGRESS,
        "PodRunningNotReady",
        "Pod is running but is not Ready",
        id="pod-running-not-ready",
    ),
    pytest.param(
        pod("Pending", cond("PodScheduled", "False", "Unschedulable"), created_ago=5),
        Status.IN_PROGRESS,
        "PodNotScheduled",
        "Pod has not been scheduled",
        id="pod-unschedulable-within-window",
    ),
    pytest.param(
        pod("Pending", cond("PodScheduled", "False", "Unschedulable"), created_ago=60),
        Status.FAILED,
        "PodUnschedulable",
        "Pod could not be scheduled",
        id="pod-unschedulable-after-window",
    ),
    pytest.param(
        pod("Pending"), Status.IN_PROGRESS, "PodPending", "Pod is in the Pending phase", id="pod-pending"
    ),
    pytest.param(pod(""), Status.IN_PROGRESS, "PodNotObserved", "Pod phase not available", id="pod-no-phase"),
    pytest.param(pod("Weird"), Status.UNKNOWN, "", "unknown phase Weird", id="pod-unknown-phase"),
    # Job
    pytest.param(
        job(cond("Complete", "True")), Status.CURRENT, "", "Job Completed. succeeded: 1/3", id="job-complete"
    ),
    pytest.param(
        job(cond("Failed", "True")), Status.FAILED, "JobFailed", "Job Failed. failed: 2/3", id="job-failed"
    ),
    pytest.param(
        job(cond("Suspended", "True"), suspend=True, started=False),
        Status.CURRENT,
        "",
        "Job is suspended",
        id="job-suspended",
    ),
    pytest.param(
        job(cond("Suspended", "True"), suspend=False, started=False),
        Status.IN_PROGRESS,
        "JobNotStarted",
        "Job not started",
        id="job-suspended-condition-without-spec-suspend-does-not-count",
    ),
    pytest.param(
        job(started=False), Status.IN_PROGRESS, "JobNotStarted", "Job not started", id="job-not-started"
    ),
    pytest.param(
        job(), Status.CURRENT, "", "Job in progress. success:1, active: 0, failed: 2", id="job-running"
    ),
    # PersistentVolumeClaim, Service, CRD, always-ready kinds
    pytest.param(
        obj("v1", "PersistentVolumeClaim", status={"phase": "Pending"}),
        Status.IN_PROGRESS,
        "NotBound",
        "PVC is not Bound. phase: Pending",
        id="pvc-not-bound",
    ),
    pytest.param(
        obj("v1", "PersistentVolumeClaim", status={"phase": "Bound"}),
        Status.CURRENT,
        "",
        "PVC is Bound",
        id="pvc-bound",
    ),
    pytest.param(
        obj("v1", "Service", spec={"type": "LoadBalancer"}),
        Status.IN_PROGRESS,
        "NoIPAssigned",
        "ClusterIP not set. Service type: LoadBalancer",
        id="service-load-balancer-without-ip",
    ),
    pytest.param(
        obj("v1", "Service", spec={"clusterIP": "10.0.0.1"}),
        Status.CURRENT,
        "",
        "Service is ready",
        id="service-ready",
    ),
    pytest.param(
        crd(cond("NamesAccepted", "False", "NameConflict", "taken")),
        Status.FAILED,
        "NameConflict",
        "taken",
        id="crd-names-not-accepted",
    ),
    pytest.param(
        crd(cond("Established", "False", "Broken", "no")),
        Status.FAILED,
        "Broken",
        "no",
        id="crd-not-established",
    ),
    pytest.param(
        crd(cond("Established", "True")), Status.CURRENT, "", "CRD is established", id="crd-established"
    ),
    pytest.param(
        crd(cond("Established", "False", "Installing")),
        Status.IN_PROGRESS,
        "Installing",
        "Install in progress",
        id="crd-installing",
    ),
    pytest.param(
        obj("v1", "Secret"), Status.CURRENT, "", "Resource is always ready", id="secret-always-ready"
    ),
    pytest.param(
        obj("v1", "ConfigMap"), Status.CURRENT, "", "Resource is always ready", id="configmap-always-ready"
    ),
    pytest.param(
        obj("batch/v1", "CronJob"), Status.CURRENT, "", "Resource is always ready", id="cronjob-always-ready"
    ),
    pytest.param(
        obj("policy/v1", "PodDisruptionBudget"),
        Status.CURRENT,
        "",
        "AllowedDisruptions has been computed.",
        id="pdb-current",
    ),
    pytest.param(
        obj("example.com/v1", "Widget"), Status.CURRENT, "", "Resource is current", id="unknown-kind-current"
    ),
]


@pytest.mark.parametrize(("raw", "status", "reason", "message"), CASES)
def test_compute_status_follows_kstatus(raw: Obj, status: Status, reason: str, message: str) -> None:
    result = compute_status(project(raw), now=NOW)

    assert (result.status, result.reason, result.message) == (status, reason, message)


def test_unschedulable_pod_without_a_clock_is_past_the_window() -> None:
    pending = pod("Pending", cond("PodScheduled", "False", "Unschedulable"), created_ago=1)

    assert compute_status(project(pending)).status is Status.FAILED


def raw_pod(*conditions: Obj, generation: int = 1, observed: int = 1) -> Obj:
    """A running, ready Pod (the kind the live watcher packs) with extra conditions."""
    status = {
        "observedGeneration": observed,
        "phase": "Running",
        "conditions": [cond("Ready", "True"), *conditions],
        "containerStatuses": [{"name": "app", "ready": True, "state": {"running": {}}}],
    }
    return obj("v1", "Pod", status=status, generation=generation, creationTimestamp=ts())


def lagging(api_version: str, kind: str, **status: int) -> Obj:
    return obj(
        api_version, kind, spec={"replicas": 3}, status={"observedGeneration": 1, **status}, generation=1
    )


KEPT = [
    pytest.param(
        raw_pod(generation=2, observed=1),
        Status.IN_PROGRESS,
        "LatestGenerationNotObserved",
        id="pod-observed-generation",
    ),
    pytest.param(raw_pod(cond("Stalled", "True", "Evicted")), Status.FAILED, "Evicted", id="pod-stalled"),
    pytest.param(
        raw_pod(cond("Reconciling", "True", "Resizing")), Status.IN_PROGRESS, "Resizing", id="pod-reconciling"
    ),
    pytest.param(
        lagging("extensions/v1beta1", "Deployment", replicas=1),
        Status.IN_PROGRESS,
        "LessReplicas",
        id="extensions-deployment-replicas",
    ),
    pytest.param(
        lagging("extensions/v1beta1", "ReplicaSet", fullyLabeledReplicas=3, availableReplicas=1),
        Status.IN_PROGRESS,
        "LessAvailable",
        id="extensions-replicaset-replicas",
    ),
    pytest.param(
        lagging("extensions/v1beta1", "DaemonSet", desiredNumberScheduled=2, currentNumberScheduled=1),
        Status.IN_PROGRESS,
        "LessCurrent",
        id="extensions-daemonset-counts",
    ),
    pytest.param(
        sts(
            {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}},
            updatedReplicas=0,
        ),
        Status.IN_PROGRESS,
        "PartitionRollout",
        id="statefulset-update-strategy",
    ),
    pytest.param(
        job(cond("Suspended", "True"), suspend=True, started=False),
        Status.CURRENT,
        "",
        id="job-spec-suspend",
    ),
    pytest.param(
        obj(
            "v1",
            "Service",
            spec={"type": "LoadBalancer"},
            status={"conditions": [cond("Stalled", "True", "X")]},
        ),
        Status.FAILED,
        "X",
        id="service-conditions",
    ),
    pytest.param(
        obj("v1", "PersistentVolumeClaim", status={"phase": "Bound", "observedGeneration": 1}, generation=2),
        Status.IN_PROGRESS,
        "LatestGenerationNotObserved",
        id="pvc-observed-generation",
    ),
    pytest.param(
        crd(cond("Reconciling", "True", "Migrating"), cond("Established", "True")),
        Status.IN_PROGRESS,
        "Migrating",
        id="crd-generic-conditions",
    ),
]


@pytest.mark.parametrize(("raw", "status", "reason"), KEPT)
def test_what_kstatus_reads_survives_projection_and_the_fast_path(
    raw: Obj, status: Status, reason: str
) -> None:
    line = orjson.dumps({"type": "ADDED", "object": raw})
    fast = fast_path(raw["apiVersion"], raw["kind"]).decode(line).object
    assert fast is not None

    for projected in (project(raw), fast):
        result = compute_status(projected, now=NOW)
        assert (result.status, result.reason) == (status, reason)
