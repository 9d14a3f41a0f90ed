"""Incidents enacted step by step in the real API server, read back from /api/v1/findings.

Each scenario creates a healthy starting point, then plays the controllers' part one status
patch at a time. After each step the promised finding (with the right root) must be served
within 2 s, and after the fix it must be gone within 2 s. Thresholds are set small, as an
incident would have long exceeded them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import (
    API,
    POD_HASH,
    ago,
    cond,
    deployment,
    deployment_status,
    flux,
    pod,
    ready,
    running,
    waiting,
)
from tests.kube.support import Service, poll, settings_for, until_no_problem
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

THRESHOLDS = {
    "stuck_reconciling_min": "500ms",
    "stuck_reconciling_interval_factor": 0.0001,
    "revision_skew": "500ms",
    "workload_unhealthy": "500ms",
    "controller_down": "0s",
    "reconcile_failed": "500ms",
    "reconcile_failed_interval_factor": 0.0001,
}

TOFU_IMAGE = "ghcr.io/flux-iac/tofu-controller:v0.16.0-rc.5"
REV_A = "main@sha1:" + "a" * 40
REV_B = "main@sha1:" + "b" * 40

Finding = dict[str, Any]
Act = Callable[[Kube, str], Awaitable[None]]


@dataclass(frozen=True)
class Expect:
    """`root` = (type, kind, name) must be a root; each symptom must name it as root_cause."""

    root: tuple[str, str, str]
    symptoms: Sequence[tuple[str, str, str]] = ()

    def problem(self, findings: list[Finding]) -> str:
        root = _find(findings, *self.root)
        if root is None or root["root_cause"] is not None:
            return f"no root {self.root} in {_brief(findings)}"
        for symptom in self.symptoms:
            found = _find(findings, *symptom)
            if found is None or found["root_cause"] != root["id"]:
                return f"{symptom} not a symptom of {root['id']} in {_brief(findings)}"
        return ""


@dataclass(frozen=True)
class Cleared:
    types: Sequence[str]

    def problem(self, findings: list[Finding]) -> str:
        left = [f for f in findings if f["type"] in self.types]
        return f"still there: {_brief(left)}" if left else ""


@dataclass(frozen=True)
class Step:
    what: str
    act: Act
    expect: Expect | Cleared


@dataclass(frozen=True)
class Scenario:
    """Built by a function when the test runs, so every timestamp is of the test's own time."""

    setup: Callable[[str], list[dict[str, Any]]]
    steps: Sequence[Step] = field(default_factory=list)


def _find(findings: list[Finding], kind: str, subject_kind: str, name: str) -> Finding | None:
    return next(
        (
            f
            for f in findings
            if f["type"] == kind and f["subject"]["kind"] == subject_kind and f["subject"]["name"] == name
        ),
        None,
    )


def _brief(findings: list[Finding]) -> list[str]:
    return [f"{f['id']} <- {f['root_cause']}" for f in findings]


def patch(kind: str, name: str, status: dict[str, Any]) -> Act:
    """Write `status` through /status, as the object's controller (or kubelet) would."""

    async def act(kube: Kube, namespace: str) -> None:
        api_version = {
            "Deployment": "apps/v1",
            "StatefulSet": "apps/v1",
            "DaemonSet": "apps/v1",
            "ReplicaSet": "apps/v1",
            "Pod": "v1",
            **API,
        }[kind]
        ref = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}}
        await kube.patch_status(ref, status)

    return act


def both(*acts: Act) -> Act:
    async def act(kube: Kube, namespace: str) -> None:
        for one in acts:
            await one(kube, namespace)

    return act


POD = f"-{POD_HASH}-x7k2p"


def tofu_setup(ns: str) -> list[dict[str, Any]]:
    source = {"kind": "GitRepository", "name": "infra"}
    return [
        deployment(ns, "tofu-controller", image=TOFU_IMAGE),
        pod(ns, "tofu-controller", image=TOFU_IMAGE),
        flux(
            "GitRepository",
            ns,
            "infra",
            spec={"url": "https://git.example/infra"},
            status=ready(artifact={"revision": REV_A, "lastUpdateTime": "2026-01-01T00:00:00Z"}),
        ),
        *(
            flux(
                "Terraform",
                ns,
                name,
                spec={"sourceRef": source, "path": f"./{name}"},
                status=ready(lastAppliedRevision=REV_A),
            )
            for name in ("vpc", "dns")
        ),
        flux(
            "Kustomization",
            ns,
            "apps",
            spec={"sourceRef": source, "dependsOn": [{"name": "vpc"}]},
            status=ready(lastAppliedRevision=REV_A),
        ),
    ]


def reconciling_and_ready() -> dict[str, Any]:
    return {
        "conditions": [
            cond("Ready", "True", "ReconciliationSucceeded", "Applied revision", since=ago(hours=1)),
            cond("Reconciling", "True", "Progressing", "Reconciliation in progress", since=ago(minutes=20)),
        ]
    }


def tofu_down() -> Scenario:
    return Scenario(
        setup=tofu_setup,
        steps=[
            Step(
                "the tofu-controller pod cannot pull its image",
                both(
                    patch(
                        "Pod",
                        "tofu-controller" + POD,
                        waiting(
                            "ImagePullBackOff", f'Back-off pulling image "{TOFU_IMAGE}"', image=TOFU_IMAGE
                        ),
                    ),
                    patch("Deployment", "tofu-controller", deployment_status(0)),
                ),
                Expect(
                    ("ControllerDown", "Deployment", "tofu-controller"),
                    [("StatusStale", "Terraform", "vpc"), ("StatusStale", "Terraform", "dns")],
                ),
            ),
            Step(
                "its Terraforms were left Ready=True and Reconciling=True",
                both(
                    patch("Terraform", "vpc", reconciling_and_ready()),
                    patch("Terraform", "dns", reconciling_and_ready()),
                ),
                Expect(
                    ("ControllerDown", "Deployment", "tofu-controller"),
                    [("StatusStale", "Terraform", "vpc"), ("StatusStale", "Terraform", "dns")],
                ),
            ),
            Step(
                "the Kustomization depending on them says DependencyNotReady",
                patch(
                    "Kustomization",
                    "apps",
                    {
                        "conditions": [
                            cond("Ready", "False", "DependencyNotReady", "dependency 'vpc' is not ready")
                        ]
                    },
                ),
                Expect(
                    ("ControllerDown", "Deployment", "tofu-controller"),
                    [("DependencyBlocked", "Kustomization", "apps"), ("StatusStale", "Terraform", "vpc")],
                ),
            ),
            Step(
                "the controller pod runs and is Ready again",
                both(
                    patch("Pod", "tofu-controller" + POD, running(TOFU_IMAGE)),
                    patch("Deployment", "tofu-controller", deployment_status(1)),
                ),
                Cleared(["StatusStale", "ControllerDown"]),
            ),
        ],
    )


def stuck_reconciling() -> Scenario:
    return Scenario(
        setup=lambda ns: [
            deployment(ns, "kustomize-controller"),
            pod(ns, "kustomize-controller"),
            flux(
                "Kustomization",
                ns,
                "apps",
                spec={"sourceRef": {"kind": "GitRepository", "name": "fleet"}},
                status=ready(lastAppliedRevision=REV_A),
            ),
        ],
        steps=[
            Step(
                "the live controller leaves Reconciling=True next to Ready=True",
                patch(
                    "Kustomization",
                    "apps",
                    {
                        "conditions": [
                            cond("Ready", "True", "ReconciliationSucceeded", "Applied revision"),
                            cond("Reconciling", "True", "Progressing", "Reconciliation in progress"),
                        ]
                    },
                ),
                Expect(("StuckReconciling", "Kustomization", "apps")),
            ),
            Step(
                "the controller rewrites the status without Reconciling",
                patch("Kustomization", "apps", ready()),
                Cleared(["StuckReconciling"]),
            ),
        ],
    )


def skew_setup(ns: str) -> list[dict[str, Any]]:
    source = {"kind": "GitRepository", "name": "fleet"}
    return [
        flux(
            "GitRepository",
            ns,
            "fleet",
            spec={"url": "https://git.example/fleet"},
            status=ready(artifact={"revision": REV_A, "lastUpdateTime": "2026-01-01T00:00:00Z"}),
        ),
        flux(
            "Kustomization", ns, "infra", spec={"sourceRef": source}, status=ready(lastAppliedRevision=REV_A)
        ),
        flux(
            "Kustomization", ns, "apps", spec={"sourceRef": source}, status=ready(lastAppliedRevision=REV_A)
        ),
    ]


def sibling_skew() -> Scenario:
    return Scenario(
        setup=skew_setup,
        steps=[
            Step(
                "the source moves on; one sibling applies it, the other fails to build",
                both(
                    patch(
                        "GitRepository",
                        "fleet",
                        ready(artifact={"revision": REV_B, "lastUpdateTime": "2026-01-02T00:00:00Z"}),
                    ),
                    patch("Kustomization", "infra", ready(lastAppliedRevision=REV_B)),
                    patch(
                        "Kustomization",
                        "apps",
                        {
                            "lastAppliedRevision": REV_A,
                            "lastAttemptedRevision": REV_B,
                            "conditions": [
                                cond(
                                    "Ready",
                                    "False",
                                    "BuildFailed",
                                    "kustomize build failed: accumulating resources",
                                )
                            ],
                        },
                    ),
                ),
                Expect(("RevisionSkew", "Kustomization", "apps")),
            ),
            Step(
                "the build is fixed and the lagging sibling applies the revision",
                patch("Kustomization", "apps", ready(lastAppliedRevision=REV_B, lastAttemptedRevision=REV_B)),
                Cleared(["RevisionSkew"]),
            ),
        ],
    )


CLONE_FAILED = (
    "failed to checkout and determine revision: unable to clone 'ssh://git@github.com/acme/tenants': "
    "ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], "
    "no supported methods remain"
)
TENANTS = ("tenants-shared", "tenants-team-a", "tenants-team-b")


def clone_setup(ns: str) -> list[dict[str, Any]]:
    source = {"kind": "GitRepository", "name": "tenants"}
    return [
        *(
            obj
            for name in ("source-controller", "kustomize-controller")
            for obj in (deployment(ns, name), pod(ns, name))
        ),
        flux(
            "GitRepository",
            ns,
            "tenants",
            spec={"url": "ssh://git@github.com/acme/tenants"},
            status=ready(artifact={"revision": REV_A, "lastUpdateTime": "2026-01-01T00:00:00Z"}),
        ),
        *(
            flux(
                "Kustomization", ns, name, spec={"sourceRef": source}, status=ready(lastAppliedRevision=REV_A)
            )
            for name in TENANTS
        ),
    ]


def gitrepository_clone_failing() -> Scenario:
    """The deploy key is revoked and source-controller loses its storage (a rescheduled Pod with
    an emptyDir): the GitRepository drops its artifact and cannot clone, so every Kustomization
    built from it says ArtifactFailed."""
    no_artifact = {
        "lastAppliedRevision": REV_A,
        "conditions": [
            cond("Ready", "False", "ArtifactFailed", "Source artifact not found, retrying in 30s")
        ],
    }
    return Scenario(
        setup=clone_setup,
        steps=[
            Step(
                "the GitRepository cannot clone and has no artifact; its Kustomizations cannot fetch one",
                both(
                    patch(
                        "GitRepository",
                        "tenants",
                        {
                            "artifact": None,
                            "conditions": [
                                cond(
                                    "Reconciling",
                                    "True",
                                    "ProgressingWithRetry",
                                    "processing object: new generation 0 -> 1",
                                ),
                                cond("Ready", "False", "GitOperationFailed", CLONE_FAILED),
                                cond("FetchFailed", "True", "GitOperationFailed", CLONE_FAILED),
                            ],
                        },
                    ),
                    *(patch("Kustomization", name, no_artifact) for name in TENANTS),
                ),
                Expect(
                    ("ReconcileFailed", "GitRepository", "tenants"),
                    [("ReconcileFailed", "Kustomization", name) for name in TENANTS],
                ),
            ),
            Step(
                "a new deploy key is added: the clone succeeds and the Kustomizations apply it",
                both(
                    patch(
                        "GitRepository",
                        "tenants",
                        ready(artifact={"revision": REV_B, "lastUpdateTime": "2026-01-02T00:00:00Z"}),
                    ),
                    *(patch("Kustomization", name, ready(lastAppliedRevision=REV_B)) for name in TENANTS),
                ),
                Cleared(["ReconcileFailed", "StuckReconciling"]),
            ),
        ],
    )


def release_setup(ns: str) -> list[dict[str, Any]]:
    owner = {"helm.toolkit.fluxcd.io/name": "podinfo", "helm.toolkit.fluxcd.io/namespace": ns}
    history = [
        {
            "name": "podinfo",
            "namespace": ns,
            "version": 1,
            "status": "deployed",
            "chartName": "podinfo",
            "chartVersion": "6.5.0",
            "appVersion": "6.5.0",
        }
    ]
    return [
        flux(
            "HelmRelease",
            ns,
            "podinfo",
            spec={"chart": {"spec": {"chart": "podinfo", "version": "6.5.0"}}},
            status=ready("Helm install succeeded", history=history),
        ),
        deployment(ns, "podinfo", labels=owner, image="ghcr.io/stefanprodan/podinfo:6.5.0"),
        pod(ns, "podinfo", image="ghcr.io/stefanprodan/podinfo:6.5.0"),
    ]


def release_ready_workload_failing() -> Scenario:
    return Scenario(
        setup=release_setup,
        steps=[
            Step(
                "the release's pod crash-loops while the HelmRelease still says Ready=True",
                both(
                    patch(
                        "Pod",
                        "podinfo" + POD,
                        waiting(
                            "CrashLoopBackOff",
                            "back-off 2m40s restarting failed container",
                            image="ghcr.io/stefanprodan/podinfo:6.5.0",
                            started=ago(minutes=15),
                            restarts=6,
                        ),
                    ),
                    patch("Deployment", "podinfo", deployment_status(0, since=ago(minutes=14))),
                ),
                Expect(
                    ("ReleaseReadyWorkloadFailing", "HelmRelease", "podinfo"),
                    [("WorkloadUnhealthy", "Pod", "podinfo" + POD)],
                ),
            ),
            Step(
                "the pod runs again",
                both(
                    patch("Pod", "podinfo" + POD, running()),
                    patch("Deployment", "podinfo", deployment_status(1)),
                ),
                Cleared(["ReleaseReadyWorkloadFailing", "WorkloadUnhealthy"]),
            ),
        ],
    )


def set_workload(
    ns: str, kind: str, name: str, pod_name: str, status: dict[str, Any]
) -> list[dict[str, Any]]:
    """A StatefulSet or DaemonSet and one Pod it controls directly (no ReplicaSet between them)."""
    selector = {"app": name}
    workload = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "manager", "image": "registry.example/app:1.0"}]},
            },
            **({"replicas": 1, "serviceName": name} if kind == "StatefulSet" else {}),
        },
        "status": status,
    }
    member = pod(ns, name)
    member["metadata"].update(
        name=pod_name,
        labels=selector,
        ownerReferences=[
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": name,
                "uid": "6b0c2a55-0000-4000-8000-000000000002",
                "controller": True,
            }
        ],
    )
    return [workload, member]


def _sts_status(ready_replicas: int) -> dict[str, Any]:
    return {"observedGeneration": 1, "replicas": 1, "readyReplicas": ready_replicas, "currentReplicas": 1}


def _ds_status(available: int) -> dict[str, Any]:
    return {
        "observedGeneration": 1,
        "desiredNumberScheduled": 1,
        "currentNumberScheduled": 1,
        "numberMisscheduled": 0,
        "numberReady": available,
        "numberAvailable": available,
        "numberUnavailable": 1 - available,
    }


def workload_pod_crash_loops(kind: str, pod_name: str, status: Callable[[int], dict[str, Any]]) -> Scenario:
    """A StatefulSet's or DaemonSet's only Pod crash-loops: the set, which writes no time of its own,
    is timed from its Pod. Its status is written first, as its controller may be quicker than
    kubelet's report (that a Pod's event re-judges its set, in whatever order events come, is held
    by tests/model/test_incremental_identity.py)."""
    crash = waiting(
        "CrashLoopBackOff", "back-off 2m40s restarting failed container", started=ago(minutes=15), restarts=6
    )
    return Scenario(
        setup=lambda ns: set_workload(ns, kind, "db", pod_name, status(1)),
        steps=[
            Step(
                f"the {kind}'s Pod crash-loops",
                both(patch(kind, "db", status(0)), patch("Pod", pod_name, crash)),
                Expect(("WorkloadUnhealthy", kind, "db"), [("WorkloadUnhealthy", "Pod", pod_name)]),
            ),
            Step(
                "the Pod runs again",
                both(patch("Pod", pod_name, running()), patch(kind, "db", status(1))),
                Cleared(["WorkloadUnhealthy"]),
            ),
        ],
    )


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(tofu_down, id="tofu-controller-image-pull-backoff"),
        pytest.param(
            lambda: workload_pod_crash_loops("StatefulSet", "db-0", _sts_status),
            id="statefulset-pod-crash-loops",
        ),
        pytest.param(
            lambda: workload_pod_crash_loops("DaemonSet", "db-x2k4p", _ds_status),
            id="daemonset-pod-crash-loops",
        ),
        pytest.param(stuck_reconciling, id="reconciling-left-true-on-a-live-controller"),
        pytest.param(sibling_skew, id="sibling-revision-skew"),
        pytest.param(release_ready_workload_failing, id="helmrelease-ready-while-its-pod-crash-loops"),
        pytest.param(gitrepository_clone_failing, id="gitrepository-clone-failing-under-its-kustomizations"),
    ],
)
async def test_each_step_of_an_incident_is_served_within_2s_with_the_right_root_and_clears_after_the_fix(
    control_plane: ControlPlane, kube: Kube, namespace: str, build: Callable[[], Scenario]
) -> None:
    scenario = build()
    for obj in scenario.setup(namespace):
        await kube.create(obj)
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace], thresholds=THRESHOLDS)
    async with stalewatch_running(settings) as service:
        await poll(lambda: _healthy(service), within=5, what="the healthy starting point")
        for step in scenario.steps:
            await step.act(kube, namespace)
            await until_no_problem(lambda step=step: _problem(service, step), within=2, what=step.what)


async def _healthy(service: Service) -> bool:
    document = await service.findings()
    return document["summary"]["objects"] > 0 and not document["findings"]


async def _problem(service: Service, step: Step) -> str:
    return step.expect.problem((await service.findings())["findings"])
