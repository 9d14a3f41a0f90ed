"""kstatus conformance: every case of upstream's own test tables, by its upstream name.

Upstream is sigs.k8s.io/cli-utils pkg/kstatus/status on master:
  * status_compute_test.go at f999cd1722bcdc5c0430bbecdafc28a5621b6290: TestPodStatus,
    TestPVCStatus, TestStsStatus, TestDaemonsetStatus, TestDeploymentStatus,
    TestReplicasetStatus, TestPDBStatus, TestCRDGenericStatus, TestJobStatus,
    TestCronJobStatus, TestServiceStatus, TestCRDStatus;
  * core_test.go at ea54afbefbdf07df59730d27343b8f60a5f0e50e (PR #668, "kstatus update for
    suspended jobs", as merged): the three suspended-Job tests, with spec.suspend.
The rules they test: status.go's Compute() and checkReadyCondition, generic.go, core.go.

Left out, on purpose: status_compute_test.go at 216f623008582458e6d3e4900cb828f5d341cc38 adds
TestHPAStatus (hpaNoStatus, hpaCurrentStatus, hpaScalingLimitedStatus) with an hpaConditions
rule, but that commit is PR #634 ("Properly discover HPA status"), closed unmerged: master has
no HorizontalPodAutoscaler rule, so an HPA is a kind without one (Ready check, else Current).
core_test.go at 410b07e1ae8d1334dc8dbee798e12ccc88bc582f is PR #668 before review (Suspended
counted without spec.suspend); ea54afb replaced its test.

Each object is written here as data (facts carried over: kinds, fields, values) and goes the
two ways objects reach compute_status in production: `stalewatch analyze`'s (a YAML file read
by load_snapshot, which projects it) and the live watcher's (a JSON watch line through
decode(): the fast decoder when it is sure, else orjson + project()).

Upstream asserts the status and the reason of the Reconciling or Stalled condition kstatus
adds (none for Current); where it asserts only the status, so does this (reason None).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.model.builders import NOW, ts
from watcher.model.ingest.fastpath import fast_path
from watcher.model.rules.kstatus import compute_status
from watcher.model.types import Status, StatusResult
from watcher.snapshot import load_snapshot

Obj = dict[str, Any]

CURRENT, IN_PROGRESS, FAILED = Status.CURRENT, Status.IN_PROGRESS, Status.FAILED


def k(
    api_version: str,
    kind: str,
    *,
    namespace: str | None = "qual",
    generation: int = 1,
    spec: Obj | None = None,
    status: Obj | None = None,
    **meta: Any,
) -> Obj:
    """An object as upstream's YAML spells it: name test, generation 1 unless said otherwise."""
    metadata: Obj = {"name": "test", "generation": generation, **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    out: Obj = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        out["spec"] = spec
    if status is not None:
        out["status"] = status
    return out


def c(kind: str, status: str, reason: str | None = None, message: str | None = None) -> Obj:
    out = {"type": kind, "status": status}
    out |= {"reason": reason} if reason is not None else {}
    return out | ({"message": message} if message is not None else {})


def pod(status: Obj | None = None, **meta: Any) -> Obj:
    return k("v1", "Pod", status=status, **meta)


def sts(status: Obj, replicas: int = 4) -> Obj:
    return k(
        "apps/v1", "StatefulSet", spec={"replicas": replicas}, status={"observedGeneration": 1, **status}
    )


def ds(status: Obj | None = None, generation: int = 1) -> Obj:
    return k("apps/v1", "DaemonSet", generation=generation, status=status)


def scheduled(desired: int = 4, **override: int) -> Obj:
    """A DaemonSet status with every count at `desired`, then the overrides."""
    names = ("currentNumberScheduled", "updatedNumberScheduled", "numberAvailable", "numberReady")
    return {"desiredNumberScheduled": desired, **dict.fromkeys(names, desired), **override}


def dep(*conditions: Obj, spec: Obj | None = None) -> Obj:
    counts = dict.fromkeys(("updatedReplicas", "readyReplicas", "availableReplicas", "replicas"), 1)
    status = {"observedGeneration": 1, **counts, "conditions": list(conditions)}
    return k("apps/v1", "Deployment", spec=spec, status=status)


def rs(*conditions: Obj, replicas: int = 4, **override: int) -> Obj:
    """A ReplicaSet of `replicas` with every status count at that, then the overrides."""
    names = ("replicas", "readyReplicas", "availableReplicas", "fullyLabeledReplicas")
    status: Obj = {"observedGeneration": 1, **dict.fromkeys(names, replicas), **override}
    if conditions:
        status["conditions"] = list(conditions)
    return k("apps/v1", "ReplicaSet", spec={"replicas": replicas}, status=status)


def my_cr(status: Obj | None = None, generation: int = 1) -> Obj:
    return k("something/v1", "MyCR", generation=generation, status=status)


def job(*, spec: Obj | None = None, status: Obj | None = None) -> Obj:
    return k("batch/v1", "Job", spec=spec, status=status)


def svc(spec: Obj | None = None) -> Obj:
    return k("v1", "Service", spec=spec)


def crd(*conditions: Obj) -> Obj:
    status = {"conditions": list(conditions)} if conditions else None
    return k("apiextensions.k8s.io/v1", "CustomResourceDefinition", namespace=None, status=status)


def suspended_job(suspend: bool, condition: str) -> Obj:
    """core_test.go's Job: spec.suspend and one Suspended condition."""
    return job(spec={"suspend": suspend}, status={"conditions": [c("Suspended", condition)]})


NAMES_ACCEPTED = c("NamesAccepted", "True", "NoConflicts")

CASES = [
    # status_compute_test.go: TestPodStatus
    ("TestPodStatus/podNoStatus", pod(namespace=None), IN_PROGRESS, "PodNotObserved"),
    (
        "TestPodStatus/podReady",
        pod({"conditions": [c("Ready", "True")], "phase": "Running"}),
        CURRENT,
        "",
    ),
    (
        "TestPodStatus/podCompletedSuccessfully",
        pod({"phase": "Succeeded", "conditions": [c("Ready", "False", "PodCompleted")]}),
        CURRENT,
        "",
    ),
    (
        "TestPodStatus/podCompletedFailed",
        pod({"phase": "Failed", "conditions": [c("Ready", "False", "PodCompleted")]}),
        CURRENT,
        "",
    ),
    (
        # Upstream creates it at time.Now(); here at NOW, the clock compute_status is given.
        "TestPodStatus/podBeingScheduled",
        pod(
            {"phase": "Pending", "conditions": [c("PodScheduled", "False", "Unschedulable")]},
            creationTimestamp=ts(),
        ),
        IN_PROGRESS,
        "PodNotScheduled",
    ),
    (
        "TestPodStatus/podUnschedulable",
        pod({"phase": "Pending", "conditions": [c("PodScheduled", "False", "Unschedulable")]}),
        FAILED,
        "PodUnschedulable",
    ),
    (
        "TestPodStatus/podCrashLooping",
        pod(
            {
                "phase": "Running",
                "conditions": [c("PodScheduled", "False", "Unschedulable")],
                "containerStatuses": [
                    {"name": "nginx", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ],
            }
        ),
        FAILED,
        "ContainerCrashLooping",
    ),
    # TestPVCStatus
    (
        "TestPVCStatus/pvcNoStatus",
        k("v1", "PersistentVolumeClaim", namespace=None),
        IN_PROGRESS,
        "NotBound",
    ),
    (
        "TestPVCStatus/pvcBound",
        k("v1", "PersistentVolumeClaim", status={"phase": "Bound"}),
        CURRENT,
        "",
    ),
    # TestStsStatus
    (
        "TestStsStatus/stsNoStatus",
        k("apps/v1", "StatefulSet", namespace=None),
        IN_PROGRESS,
        "LessReplicas",
    ),
    (
        "TestStsStatus/stsBadStatus",
        k("apps/v1", "StatefulSet", status={"observedGeneration": 1, "currentReplicas": 1}),
        IN_PROGRESS,
        "LessReplicas",
    ),
    (
        "TestStsStatus/stsOK",
        sts({"currentReplicas": 4, "readyReplicas": 4, "replicas": 4}),
        CURRENT,
        "",
    ),
    (
        "TestStsStatus/stsLessReady",
        sts({"currentReplicas": 4, "readyReplicas": 2, "replicas": 4}),
        IN_PROGRESS,
        "LessReady",
    ),
    (
        "TestStsStatus/stsLessCurrent",
        sts({"currentReplicas": 2, "readyReplicas": 4, "replicas": 4}),
        IN_PROGRESS,
        "LessCurrent",
    ),
    (
        "TestStsStatus/stsExtraPods",
        sts({"currentReplicas": 4, "readyReplicas": 4, "replicas": 8}),
        IN_PROGRESS,
        "ExtraPods",
    ),
    # TestDaemonsetStatus
    ("TestDaemonsetStatus/dsNoStatus", ds(), IN_PROGRESS, "NoObservedGeneration"),
    (
        "TestDaemonsetStatus/dsBadStatus",
        ds({"observedGeneration": 1, "currentReplicas": 1}),
        IN_PROGRESS,
        "NoDesiredNumber",
    ),
    ("TestDaemonsetStatus/dsOK", ds({**scheduled(), "observedGeneration": 1}), CURRENT, ""),
    (
        "TestDaemonsetStatus/dsLessReady",
        ds({"observedGeneration": 1, **scheduled(numberReady=2)}),
        IN_PROGRESS,
        "LessReady",
    ),
    (
        "TestDaemonsetStatus/dsDifferentGeneration",
        ds({**scheduled(), "observedGeneration": 1}, generation=2),
        IN_PROGRESS,
        "LatestGenerationNotObserved",
    ),
    (
        "TestDaemonsetStatus/dsLessAvailable",
        ds({"observedGeneration": 1, **scheduled(numberAvailable=2)}),
        IN_PROGRESS,
        "LessAvailable",
    ),
    # TestDeploymentStatus
    (
        "TestDeploymentStatus/depNoStatus",
        k("apps/v1", "Deployment", namespace=None),
        IN_PROGRESS,
        "LessReplicas",
    ),
    (
        "TestDeploymentStatus/depOK",
        dep(c("Progressing", "True", "NewReplicaSetAvailable"), c("Available", "True")),
        CURRENT,
        "",
    ),
    (
        "TestDeploymentStatus/depNotProgressing",
        dep(
            c("Progressing", "False", "Some reason"),
            c("Available", "True"),
            spec={"progressDeadlineSeconds": 45},
        ),
        IN_PROGRESS,
        "ReplicaSetNotAvailable",
    ),
    (
        "TestDeploymentStatus/depNoProgressDeadlineSeconds",
        dep(c("Available", "True")),
        CURRENT,
        "",
    ),
    (
        "TestDeploymentStatus/depNotAvailable",
        dep(c("Progressing", "True", "NewReplicaSetAvailable"), c("Available", "False")),
        IN_PROGRESS,
        "DeploymentNotAvailable",
    ),
    # TestReplicasetStatus
    (
        "TestReplicasetStatus/rsNoStatus",
        k("apps/v1", "ReplicaSet", namespace=None),
        IN_PROGRESS,
        "LessLabelled",
    ),
    (
        "TestReplicasetStatus/rsOK1",
        rs(c("ReplicaFailure", "False"), replicas=2),
        CURRENT,
        "",
    ),
    ("TestReplicasetStatus/rsOK2", rs(replicas=2), CURRENT, ""),
    ("TestReplicasetStatus/rsLessAvailable", rs(availableReplicas=2), IN_PROGRESS, "LessAvailable"),
    ("TestReplicasetStatus/rsLessReady", rs(readyReplicas=2), IN_PROGRESS, "LessReady"),
    (
        "TestReplicasetStatus/rsReplicaFailure",
        rs(c("ReplicaFailure", "True")),
        IN_PROGRESS,
        "ReplicaFailure",
    ),
    # TestPDBStatus
    (
        "TestPDBStatus/pdbNotObserved",
        k("policy/v1beta1", "PodDisruptionBudget", generation=2, status={"observedGeneration": 1}),
        IN_PROGRESS,
        "LatestGenerationNotObserved",
    ),
    (
        "TestPDBStatus/pdbObserved",
        k("policy/v1beta1", "PodDisruptionBudget", status={"observedGeneration": 1}),
        CURRENT,
        "",
    ),
    # TestCRDGenericStatus: a custom resource, which has no rule of its own
    ("TestCRDGenericStatus/crdNoStatus", my_cr(), CURRENT, ""),
    (
        "TestCRDGenericStatus/crdReady",
        my_cr({"conditions": [c("Ready", "True", "AllOk", "All looks ok")]}),
        CURRENT,
        "",
    ),
    (
        "TestCRDGenericStatus/crdNotReady",
        my_cr({"observedGeneration": 1, "conditions": [c("Ready", "False", "NotReadyYet")]}),
        IN_PROGRESS,
        "NotReadyYet",
    ),
    (
        "TestCRDGenericStatus/crdNoCondition",
        my_cr({"conditions": [c("SomeCondition", "False")]}),
        CURRENT,
        "",
    ),
    (
        "TestCRDGenericStatus/crdMismatchStatusGeneration",
        my_cr({"observedGeneration": 1}, generation=2),
        IN_PROGRESS,
        "LatestGenerationNotObserved",
    ),
    # TestJobStatus
    ("TestJobStatus/jobNoStatus", job(), IN_PROGRESS, "JobNotStarted"),
    (
        "TestJobStatus/jobComplete",
        job(status={"succeeded": 1, "active": 0, "conditions": [c("Complete", "True")]}),
        CURRENT,
        "",
    ),
    (
        "TestJobStatus/jobFailed",
        job(
            spec={"completions": 4},
            status={"succeeded": 3, "failed": 1, "conditions": [c("Failed", "True", "JobFailed")]},
        ),
        FAILED,
        "JobFailed",
    ),
    (
        "TestJobStatus/jobInProgress",
        job(
            spec={"completions": 10, "parallelism": 2},
            status={
                "startTime": "2019-06-04T01:17:13Z",
                "succeeded": 3,
                "failed": 1,
                "active": 2,
                "conditions": [c("Failed", "False"), c("Complete", "False")],
            },
        ),
        CURRENT,
        "",
    ),
    # TestCronJobStatus
    ("TestCronJobStatus/cronjobNoStatus", k("batch/v1", "CronJob"), CURRENT, ""),
    ("TestCronJobStatus/cronjobWithStatus", k("batch/v1", "CronJob") | {"status": None}, CURRENT, ""),
    # TestServiceStatus
    ("TestServiceStatus/serviceDefault", svc(), CURRENT, ""),
    ("TestServiceStatus/serviceNodePort", svc({"type": "NodePort"}), CURRENT, ""),
    ("TestServiceStatus/serviceLBnok", svc({"type": "LoadBalancer"}), IN_PROGRESS, "NoIPAssigned"),
    (
        "TestServiceStatus/serviceLBok",
        svc({"type": "LoadBalancer", "clusterIP": "1.2.3.4"}),
        CURRENT,
        "",
    ),
    # TestCRDStatus: the CustomResourceDefinition rule
    ("TestCRDStatus/crdNoConditions", crd(), IN_PROGRESS, "Installing"),
    (
        "TestCRDStatus/crdInstalling",
        crd(NAMES_ACCEPTED, c("Established", "False", "Installing")),
        IN_PROGRESS,
        "Installing",
    ),
    (
        "TestCRDStatus/crdNamesNotAccepted",
        crd(c("NamesAccepted", "False", "SomeReason")),
        FAILED,
        "SomeReason",
    ),
    (
        "TestCRDStatus/crdEstablished",
        crd(NAMES_ACCEPTED, c("Established", "True", "InitialNamesAccepted")),
        CURRENT,
        "",
    ),
    # core_test.go: upstream asserts the status only
    ("TestSuspendedJobConditions", suspended_job(True, "True"), CURRENT, None),
    ("TestPreviouslySuspendedJobConditions", suspended_job(False, "False"), IN_PROGRESS, None),
    (
        "TestSuspendedJobTransitionConditions/toSuspendedState",
        suspended_job(True, "False"),
        IN_PROGRESS,
        None,
    ),
    (
        "TestSuspendedJobTransitionConditions/fromSuspendedState",
        suspended_job(False, "True"),
        IN_PROGRESS,
        None,
    ),
]


def through_analyze(raw: Obj, tmp_path: Path) -> StatusResult:
    """A snapshot file, as `stalewatch analyze` reads it."""
    file = tmp_path / "snapshot.yaml"
    file.write_text(yaml.safe_dump(raw))
    snapshot = load_snapshot([str(file)])
    assert snapshot.errors == []
    (obj,) = snapshot.objects
    return compute_status(obj, now=NOW)


def through_watch(raw: Obj, tmp_path: Path) -> StatusResult:
    """A watch line of the object's kind, as the live watcher decodes it."""
    line = orjson.dumps({"type": "ADDED", "object": raw})
    obj = fast_path(raw["apiVersion"], raw["kind"]).decode(line).object
    assert obj is not None
    return compute_status(obj, now=NOW)


@pytest.mark.parametrize("path", [through_analyze, through_watch], ids=["analyze", "watch"])
@pytest.mark.parametrize(("raw", "status", "reason"), [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_kstatus_says_what_upstream_says(
    raw: Obj, status: Status, reason: str | None, path: Any, tmp_path: Path
) -> None:
    result = path(raw, tmp_path)

    assert result.status is status
    if reason is not None:
        assert result.reason == reason


def test_every_upstream_case_is_here_once() -> None:
    names = [case[0] for case in CASES]

    assert len(names) == len(set(names)) == 57
