"""WorkloadUnhealthy on the Pod and workload states real clusters produce: one named case per rule
(failed Pods nobody replaces, back-offs with no time to age, StatefulSets, DaemonSets), each
with its near-miss, and messages and evidence that say what the container really did."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.model.builders import MIN, NOW, Obj, by_id, cond, deployment, event, flux, meta, pod, run, ts

HOUR = 60 * MIN
NS = "apps"


def owned_by(raw: Obj, *owners: tuple[str, str, str]) -> Obj:
    """The Pod with these (apiVersion, kind, name) controllers instead of its ReplicaSet."""
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}
        for api, kind, name in owners
    ]
    if not owners:
        del raw["metadata"]["ownerReferences"]
    return raw


def finished(
    name: str,
    *,
    phase: str = "Failed",
    exit_code: int = 1,
    reason: str = "Error",
    pod_reason: str = "",
    pod_message: str = "",
    ended: timedelta = 20 * MIN,
) -> Obj:
    """A Pod that ran to its end (restartPolicy Never): its container terminated, Ready False."""
    raw = pod(name, NS, app=name, image="ghcr.io/acme/migrate:3.1.0", ready=False, created=HOUR)
    [container] = raw["status"]["containerStatuses"]
    container["state"] = {
        "terminated": {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": ts(HOUR),
            "finishedAt": ts(ended),
        }
    }
    raw["status"]["phase"] = phase
    for c in raw["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(status="False", reason="PodCompleted" if phase == "Succeeded" else "PodFailed")
            c["lastTransitionTime"] = ts(ended)
    if pod_reason:
        raw["status"].update(reason=pod_reason, message=pod_message)
    return owned_by(raw)


def timeless(raw: Obj) -> Obj:
    """The object as a hand-trimmed snapshot has it: no time anywhere."""
    raw["metadata"].pop("creationTimestamp", None)
    raw["status"].pop("startTime", None)
    for c in raw["status"].get("conditions", ()):
        c.pop("lastTransitionTime", None)
    return raw


def backing_off(waiting: str, **kwargs: Any) -> Obj:
    return pod(
        "web-7d9f-abcde",
        NS,
        app="web",
        image="ghcr.io/acme/web:2.0.0",
        ready=False,
        waiting=waiting,
        **kwargs,
    )


def statefulset(name: str, *, replicas: int = 3, ready: int = 3) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(name, NS),
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        },
        "status": {
            "observedGeneration": 1,
            "replicas": replicas,
            "readyReplicas": ready,
            "currentReplicas": replicas,
            "updatedReplicas": replicas,
            "availableReplicas": ready,
            "currentRevision": f"{name}-6d4b8c",
            "updateRevision": f"{name}-6d4b8c",
            "collisionCount": 0,
        },
    }


def daemonset(name: str, *, nodes: int = 3, available: int = 3) -> Obj:
    status: Obj = {
        "observedGeneration": 1,
        "desiredNumberScheduled": nodes,
        "currentNumberScheduled": nodes,
        "updatedNumberScheduled": nodes,
        "numberMisscheduled": 0,
        "numberReady": available,
    }
    if available:
        status["numberAvailable"] = available
    if nodes - available:
        status["numberUnavailable"] = nodes - available
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta(name, NS),
        "spec": {"selector": {"matchLabels": {"app": name}}, "updateStrategy": {"type": "RollingUpdate"}},
        "status": status,
    }


def member(workload: Obj, name: str, **kwargs: Any) -> Obj:
    """A Pod the workload controls directly (StatefulSets and DaemonSets have no ReplicaSet)."""
    app = workload["metadata"]["name"]
    raw = pod(name, NS, app=app, image=f"ghcr.io/acme/{app}:1.0.0", **kwargs)
    return owned_by(raw, ("apps/v1", workload["kind"], app))


DB = statefulset("db", ready=2)
AGENT = daemonset("agent", available=2)

CASES = [
    # A failed Pod that nothing replaces
    pytest.param([finished("migrate")], {"WorkloadUnhealthy/Pod/apps/migrate"}, id="bare-pod-that-failed"),
    pytest.param(
        [finished("migrate", pod_reason="Evicted", pod_message="The node was low on resource: memory. ")],
        {"WorkloadUnhealthy/Pod/apps/migrate"},
        id="bare-pod-evicted",
    ),
    pytest.param(
        [owned_by(finished("wf-step"), ("argoproj.io/v1alpha1", "Workflow", "nightly"))],
        {"WorkloadUnhealthy/Pod/apps/wf-step"},
        id="failed-pod-of-a-kind-stalewatch-does-not-track",
    ),
    pytest.param(
        [owned_by(finished("migrate-x7k2p"), ("batch/v1", "Job", "migrate"))],
        set(),
        id="failed-pod-of-a-job-is-left-to-its-job",
    ),
    pytest.param(
        [
            deployment("web", NS),
            owned_by(
                finished(
                    "web-7d9f-old01",
                    pod_reason="Evicted",
                    pod_message="The node had condition: [DiskPressure].",
                ),
                ("apps/v1", "ReplicaSet", "web-7d9f"),
            ),
        ],
        set(),
        id="evicted-pod-of-a-replicaset-is-left-to-its-deployment",
    ),
    pytest.param(
        [finished("migrate", phase="Succeeded", exit_code=0, reason="Completed")],
        set(),
        id="bare-pod-that-succeeded",
    ),
    # Back-offs are repeated failure: reported even with no time to age them
    pytest.param(
        [timeless(backing_off("CrashLoopBackOff", restarts=6, last_terminated="Error"))],
        {"WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"},
        id="crash-loop-with-no-timestamp",
    ),
    pytest.param(
        [timeless(backing_off("ImagePullBackOff"))],
        {"WorkloadUnhealthy/Pod/apps/web-7d9f-abcde"},
        id="image-pull-back-off-with-no-timestamp",
    ),
    pytest.param(
        [timeless(backing_off("ErrImagePull"))], set(), id="first-image-pull-error-with-no-timestamp-waits"
    ),
    pytest.param(
        [backing_off("CrashLoopBackOff", restarts=2, created=2 * MIN)],
        set(),
        id="crash-loop-two-minutes-old-waits-its-threshold",
    ),
    # StatefulSets
    pytest.param(
        [
            DB,
            member(DB, "db-0"),
            member(DB, "db-1", ready=False, not_ready_since=20 * MIN),
            member(DB, "db-2"),
        ],
        {"WorkloadUnhealthy/StatefulSet/apps/db", "WorkloadUnhealthy/Pod/apps/db-1"},
        id="statefulset-short-of-ready-replicas-since-its-pod-went-unready",
    ),
    pytest.param(
        [
            DB,
            member(DB, "db-0"),
            member(DB, "db-1", ready=False, not_ready_since=2 * MIN),
            member(DB, "db-2"),
        ],
        set(),
        id="statefulset-pod-unready-for-two-minutes",
    ),
    pytest.param(
        [
            DB,
            member(DB, "db-0"),
            member(DB, "db-1"),
            event(
                "db.181a2b3c4d5e6f70",
                NS,
                kind="StatefulSet",
                involved="db",
                reason="FailedCreate",
                message='create Pod db-2 in StatefulSet db failed error: pods "db-2" is forbidden: '
                "exceeded quota: compute, requested: limits.memory=2Gi, used: limits.memory=7Gi, "
                "limited: limits.memory=8Gi",
                count=25,
                first=40 * MIN,
                last=MIN,
            ),
        ],
        {"RetryLoop/StatefulSet/apps/db/FailedCreate"},
        id="statefulset-whose-missing-pod-cannot-be-created-is-told-by-its-events",
    ),
    pytest.param(
        [statefulset("db"), *(member(statefulset("db"), f"db-{n}") for n in range(3))],
        set(),
        id="statefulset-with-every-replica-ready",
    ),
    # DaemonSets
    pytest.param(
        [
            AGENT,
            member(AGENT, "agent-x2k4p"),
            member(AGENT, "agent-q8w1z"),
            member(
                AGENT, "agent-7hc3m", ready=False, waiting="CrashLoopBackOff", restarts=9, created=30 * MIN
            ),
        ],
        {"WorkloadUnhealthy/DaemonSet/apps/agent", "WorkloadUnhealthy/Pod/apps/agent-7hc3m"},
        id="daemonset-unavailable-on-a-node-since-its-pod-crash-loops",
    ),
    pytest.param(
        [
            AGENT,
            member(AGENT, "agent-x2k4p"),
            member(AGENT, "agent-q8w1z"),
            member(AGENT, "agent-7hc3m", ready=False, not_ready_since=MIN),
        ],
        set(),
        id="daemonset-rolling-a-pod-for-a-minute",
    ),
    pytest.param([daemonset("agent", nodes=0, available=0)], set(), id="daemonset-selecting-no-node"),
]


@pytest.mark.parametrize(("objs", "expected"), CASES)
def test_workload_unhealthy_fires_only_where_something_will_not_recover(
    objs: list[Obj], expected: set[str]
) -> None:
    assert set(by_id(run(flux(), objs))) == expected


@pytest.mark.parametrize(
    ("objs", "root"),
    [
        pytest.param(
            [DB, member(DB, "db-1", ready=False, not_ready_since=20 * MIN)],
            "WorkloadUnhealthy/StatefulSet/apps/db",
            id="statefulset",
        ),
        pytest.param(
            [AGENT, member(AGENT, "agent-7hc3m", ready=False, not_ready_since=20 * MIN)],
            "WorkloadUnhealthy/DaemonSet/apps/agent",
            id="daemonset",
        ),
    ],
)
def test_a_workload_short_of_replicas_is_the_root_of_its_failing_pod(objs: list[Obj], root: str) -> None:
    findings = by_id(run(flux(), objs))

    [pod_finding] = [f for f in findings.values() if f.subject["kind"] == "Pod"]
    assert findings[root].is_root
    assert pod_finding.root_cause == root
    assert findings[root].since == NOW - 20 * MIN


def test_a_container_that_exited_with_error_and_restarted_is_not_called_a_readiness_problem() -> None:
    raw = pod(
        "web-7d9f-abcde",
        NS,
        app="web",
        ready=False,
        restarts=3,
        last_terminated="Error",
        not_ready_since=10 * MIN,
    )

    [finding] = run(flux(), raw).findings

    assert "readiness probe" not in finding.message
    assert "is in Running" not in finding.message
    assert "restarted 3 times, last exited with Error (exit code 1)" in finding.message
    assert {k: finding.evidence[k] for k in ("reason", "restarts", "last_termination", "exit_code")} == {
        "reason": "NotReady",
        "restarts": 3,
        "last_termination": "Error",
        "exit_code": 1,
    }


@pytest.mark.parametrize(
    ("raw", "evidence"),
    [
        pytest.param(
            backing_off("CrashLoopBackOff", restarts=6, last_terminated="Error", created=HOUR),
            {"restarts": 6, "last_termination": "Error", "exit_code": 1},
            id="crash-loop",
        ),
        pytest.param(
            backing_off("CrashLoopBackOff", restarts=4, last_terminated="OOMKilled", created=HOUR),
            {"restarts": 4, "last_termination": "OOMKilled", "exit_code": 137},
            id="oom-killed",
        ),
        pytest.param(
            finished("migrate", exit_code=2),
            {"restarts": 0, "last_termination": "Error", "exit_code": 2},
            id="failed",
        ),
    ],
)
def test_evidence_carries_the_restart_count_and_the_last_exit(raw: Obj, evidence: dict[str, Any]) -> None:
    [finding] = run(flux(), raw).findings

    assert {k: finding.evidence.get(k) for k in evidence} == evidence


def test_a_pod_not_ready_is_told_by_the_container_that_keeps_it_so_not_a_finished_init_container() -> None:
    raw = pod("web-7d9f-abcde", NS, app="web", ready=False, not_ready_since=10 * MIN)
    init = {"name": "migrate", "image": "ghcr.io/acme/migrate:3.1.0", "ready": False, "restartCount": 0}
    init["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    raw["status"]["initContainerStatuses"] = [init]

    [finding] = run(flux(), raw).findings

    assert (finding.evidence["container"], finding.evidence.get("last_termination")) == ("manager", None)


def test_a_failed_pod_says_why_and_when_it_ended() -> None:
    raw = finished("migrate", pod_reason="Evicted", pod_message="The node was low on resource: memory. ")

    [finding] = run(flux(), raw).findings

    assert finding.message.startswith("Pod apps/migrate has failed: Evicted (container manager, image ")
    assert (
        f"since {ts(20 * MIN)}: The node was low on resource: memory. Nothing restarts it" in finding.message
    )
    assert finding.since == NOW - 20 * MIN


def test_a_back_off_with_no_timestamp_says_no_time() -> None:
    [finding] = run(flux(), timeless(backing_off("ImagePullBackOff"))).findings

    assert finding.since is None
    assert " since " not in finding.message


@pytest.mark.parametrize(
    "objs",
    [
        pytest.param(
            [
                deployment(
                    "web",
                    NS,
                    replicas=2,
                    available=1,
                    conditions=[
                        cond(
                            "Progressing",
                            "False",
                            "ProgressDeadlineExceeded",
                            'ReplicaSet "web-7d9f" has timed out progressing.',
                            ago=HOUR,
                        )
                    ],
                )
            ],
            id="progress-deadline-message-ending-in-a-full-stop",
        ),
        pytest.param(
            [
                finished(
                    "migrate", pod_reason="Evicted", pod_message="The node had condition: [DiskPressure]."
                )
            ],
            id="eviction-message-ending-in-a-full-stop",
        ),
    ],
)
def test_no_message_doubles_a_full_stop(objs: list[Obj]) -> None:
    [finding] = run(flux(), objs).findings

    assert ".." not in finding.message


def workload_world() -> list[Obj]:
    """Every state above of one StatefulSet, one DaemonSet, their Pods and a bare Pod, as variants
    for the live model's identity test (a Pod's change must re-time its workload)."""
    db, agent = statefulset("db"), daemonset("agent")
    return [
        *(statefulset("db", ready=n) for n in (3, 2, 0)),
        *(daemonset("agent", available=n) for n in (3, 2)),
        *(member(db, f"db-{n}") for n in range(3)),
        *(
            member(db, f"db-{n}", ready=False, not_ready_since=ago)
            for n in range(3)
            for ago in (2 * MIN, HOUR)
        ),
        *(member(agent, name) for name in ("agent-x2k4p", "agent-7hc3m")),
        member(agent, "agent-7hc3m", ready=False, waiting="CrashLoopBackOff", restarts=9, created=30 * MIN),
        member(agent, "agent-x2k4p", ready=False, not_ready_since=3 * MIN),
        finished("migrate"),
        finished("migrate", phase="Succeeded", exit_code=0, reason="Completed"),
    ]


def lagging_web(*, written: timedelta | None) -> Obj:
    """Deployment apps/web at generation 3, its controller at 2; created a day ago, its last spec
    write `written` ago (managedFields), or undated (kubectl get omits managedFields)."""
    web = deployment("web", "apps", generation=3, observed_generation=2)
    if written is not None:
        web["metadata"]["managedFields"] = [
            {"manager": "kubectl", "operation": "Update", "time": ts(written), "fieldsV1": {}}
        ]
    return web


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        pytest.param(20 * MIN, True, id="a-lag-dated-by-its-spec-write-is-reported-past-the-threshold"),
        pytest.param(MIN, False, id="a-lag-dated-a-minute-ago-is-a-rollout-starting"),
        pytest.param(None, False, id="an-undated-lag-is-not-behind-since-its-creation"),
    ],
)
def test_a_workload_generation_lag_is_dated_only_by_its_spec_write(
    written: timedelta | None, expected: bool
) -> None:
    found = by_id(run(flux(), lagging_web(written=written)))
    lag = found.get("WorkloadUnhealthy/Deployment/apps/web")
    assert (lag is not None) is expected
    if lag is not None:
        assert lag.evidence["reason"] == "GenerationNotObserved"
        assert lag.since == NOW - 20 * MIN


def test_progress_deadline_exceeded_is_the_controllers_own_verdict_even_without_a_time() -> None:
    stalled = deployment("web", "apps", available=0)
    stalled["status"]["conditions"] = [
        {
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": 'ReplicaSet "web-7d9f" has timed out progressing.',
        }
    ]
    found = by_id(run(flux(), stalled))
    assert found["WorkloadUnhealthy/Deployment/apps/web"].evidence["detail"] == "ProgressDeadlineExceeded"
