"""Pod and workload classification: one named case per failure state, plus the healthy near-misses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.model.builders import MIN, NOW, cond, deployment, pod, ts
from watcher.model.ingest.projection import project
from watcher.model.rules.workloads import pod_state, workload_state
from watcher.model.types import HealthReason

Obj = dict[str, Any]


def web(**kwargs: Any) -> Obj:
    return pod("web-7d9f-abcde", "apps", app="web", image="ghcr.io/acme/web:1.4.2", **kwargs)


POD_CASES = [
    pytest.param(web(), None, True, None, id="running-and-ready-is-fine"),
    pytest.param(
        web(ready=False, waiting="ImagePullBackOff", not_ready_since=12 * MIN),
        HealthReason.IMAGE_PULL_BACK_OFF,
        False,
        NOW - 12 * MIN,
        id="image-pull-backoff-since-not-ready",
    ),
    pytest.param(
        web(ready=False, waiting="ErrImagePull"),
        HealthReason.ERR_IMAGE_PULL,
        False,
        NOW - 60 * MIN,
        id="err-image-pull",
    ),
    pytest.param(
        web(ready=False, waiting="InvalidImageName"),
        HealthReason.ERR_IMAGE_PULL,
        False,
        NOW - 60 * MIN,
        id="invalid-image-name-folds-into-err-image-pull",
    ),
    pytest.param(
        web(ready=False, waiting="CrashLoopBackOff", restarts=5, created=40 * MIN, not_ready_since=MIN),
        HealthReason.CRASH_LOOP_BACK_OFF,
        False,
        NOW - 40 * MIN,
        id="crash-loop-counts-from-pod-start",
    ),
    pytest.param(
        web(ready=False, waiting="CrashLoopBackOff", restarts=5, last_terminated="OOMKilled"),
        HealthReason.OOM_KILLED,
        False,
        NOW - 60 * MIN,
        id="crash-loop-after-oom-kill-is-oom-killed",
    ),
    pytest.param(
        web(ready=False, restarts=1, last_terminated="OOMKilled"),
        HealthReason.OOM_KILLED,
        False,
        NOW - 60 * MIN,
        id="running-not-ready-after-oom-kill-is-oom-killed",
    ),
    pytest.param(
        web(restarts=1, last_terminated="OOMKilled"),
        None,
        True,
        None,
        id="ready-again-after-an-old-oom-kill-is-fine",
    ),
    pytest.param(
        web(ready=False, waiting="CreateContainerConfigError", waiting_message='secret "db" not found'),
        HealthReason.CREATE_CONTAINER_CONFIG_ERROR,
        False,
        NOW - 60 * MIN,
        id="create-container-config-error",
    ),
    pytest.param(
        web(ready=False, unschedulable=True, created=9 * MIN),
        HealthReason.UNSCHEDULABLE,
        False,
        NOW - 9 * MIN,
        id="unschedulable-since-pod-scheduled-false",
    ),
    pytest.param(
        web(ready=False, not_ready_since=3 * MIN),
        HealthReason.NOT_READY,
        False,
        NOW - 3 * MIN,
        id="running-not-ready",
    ),
    pytest.param(web(phase="Succeeded", ready=False), None, False, None, id="completed-pod-is-not-failing"),
]


@pytest.mark.parametrize(("raw", "failing", "ready", "since"), POD_CASES)
def test_pod_state_classifies_failures(
    raw: Obj, failing: HealthReason | None, ready: bool, since: datetime | None
) -> None:
    state = pod_state(project(raw))

    assert (state.failing, state.ready, state.since) == (failing, ready, since)


def test_pod_state_names_container_image_and_kubelet_reason() -> None:
    state = pod_state(project(web(ready=False, waiting="InvalidImageName", waiting_message="bad ref")))

    assert (state.container, state.image, state.detail, state.message) == (
        "manager",
        "ghcr.io/acme/web:1.4.2",
        "InvalidImageName",
        "bad ref",
    )


def test_terminating_pod_is_neither_ready_nor_failing() -> None:
    raw = web(ready=False, waiting="CrashLoopBackOff")
    raw["metadata"]["deletionTimestamp"] = ts(MIN)

    state = pod_state(project(raw))

    assert (state.ready, state.failing) == (False, None)


WORKLOAD_CASES = [
    pytest.param(deployment("web", "apps"), None, None, id="all-replicas-available-is-fine"),
    pytest.param(
        deployment("web", "apps", replicas=0, available=0), None, None, id="scaled-to-zero-is-intent"
    ),
    pytest.param(
        deployment(
            "web",
            "apps",
            conditions=[cond("Progressing", "False", "ProgressDeadlineExceeded", "slow", ago=7 * MIN)],
        ),
        HealthReason.PROGRESS_DEADLINE_EXCEEDED,
        NOW - 7 * MIN,
        id="progress-deadline-exceeded",
    ),
    pytest.param(
        deployment("web", "apps", available=0),
        HealthReason.NO_AVAILABLE_REPLICAS,
        NOW - 60 * MIN,
        id="no-available-replica-since-available-false",
    ),
    pytest.param(
        deployment(
            "web",
            "apps",
            replicas=3,
            available=2,
            conditions=[
                cond("Available", "True", "MinimumReplicasAvailable"),
                cond("Progressing", "True", "ReplicaSetUpdated", "") | {"lastUpdateTime": ts(8 * MIN)},
            ],
        ),
        HealthReason.UNAVAILABLE,
        NOW - 8 * MIN,
        id="too-few-available-since-last-progress",
    ),
]


@pytest.mark.parametrize(("raw", "failing", "since"), WORKLOAD_CASES)
def test_workload_state_classifies_deployments(
    raw: Obj, failing: HealthReason | None, since: datetime | None
) -> None:
    state = workload_state(project(raw))

    assert (state.failing, state.since) == (failing, since)


def test_deployment_generation_lag_counts_from_the_last_spec_write() -> None:
    raw = deployment("web", "apps", generation=4, observed_generation=3)
    raw["metadata"]["managedFields"] = [
        {"manager": "kustomize-controller", "operation": "Apply", "time": ts(20 * MIN)},
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "subresource": "status",
            "time": ts(MIN),
        },
    ]

    state = workload_state(project(raw))

    assert (state.failing, state.since) == (HealthReason.GENERATION_NOT_OBSERVED, NOW - 20 * MIN)


def test_statefulset_keeps_no_failure_time() -> None:
    raw = deployment("db", "data", replicas=3, available=1)
    raw["kind"] = "StatefulSet"

    state = workload_state(project(raw))

    assert (state.failing, state.since, state.ready) == (HealthReason.UNAVAILABLE, None, True)
