"""`stalewatch wait` against the real API server: one scripted rollout per outcome, the real CLI
run as a subprocess, its exit code and report checked.

Each test builds a stack (Flux controllers running, a GitRepository, Kustomizations,
workloads and Pods) in its own namespace, starts the wait, and only once the wait has judged
the stack plays the controllers' part, status patch by status patch.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import ago, cond, flux, read_access, ready, running
from tests.kube.objects import waiting as container_waiting
from tests.kubeclient import Kube
from tests.wait.stack import (
    FORBIDDEN,
    READ,
    REV_A,
    REV_B,
    REV_C,
    Obj,
    app_pod,
    applied,
    controllers,
    dry_run_forbidden,
    entry,
    kustomization,
    pod_name,
    reconciling,
    rolled_out,
    source,
    waiting,
    workload,
)

pytestmark = pytest.mark.cluster

KS = "kustomize.toolkit.fluxcd.io"


async def create(kube: Kube, *objects: Obj) -> None:
    for obj in objects:
        await kube.create(obj)


async def patch(kube: Kube, obj: Obj, status: Obj) -> None:
    await kube.patch_status(obj, status)


def stack(ns: str, *, root: Obj, ready_web: bool = False) -> list[Obj]:
    """Controllers, the source at REV_B (the push was fetched), root Kustomization `apps`
    applying child Kustomization `infra` and Deployment `web` (with its Pod): all at REV_A and
    starting up, or (`ready_web`) all at REV_B and running."""
    return [
        *controllers(ns),
        source(ns, REV_B),
        kustomization(ns, "apps", root),
        kustomization(ns, "infra", applied(REV_B if ready_web else REV_A)),
        workload(ns, "web", available=1 if ready_web else 0),
        app_pod(ns, "web", status=running() if ready_web else container_waiting("ContainerCreating", "")),
    ]


def inventory(ns: str) -> tuple[dict[str, str], ...]:
    return (entry(ns, "infra", "Kustomization", KS), entry(ns, "web", "Deployment", "apps"))


async def test_converges_when_children_and_workloads_become_ready_at_the_revision(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    ns = namespace
    objects = stack(ns, root={**reconciling(REV_A, REV_B), "inventory": {"entries": list(inventory(ns))}})
    await create(kube, *objects)
    apps, infra, web, web_pod = objects[-4:]
    async with waiting(control_plane.kubeconfig, ns, f"ks/{ns}/apps", "--revision", REV_B) as run:
        assert "waiting: 0/4 current" in await run.watching()
        await patch(kube, infra, applied(REV_B))
        await patch(kube, web_pod, running())
        await patch(kube, web, rolled_out(1))
        await run.said(lambda line: line.startswith("waiting: 3/4 current"))
        await patch(kube, apps, applied(REV_B, *inventory(ns)))
        code, out = await run.result()
    assert code == 0, out
    assert out == f"converged: 4/4 current\n  Kustomization {ns}/apps and everything under it: 4 objects\n"


@pytest.mark.parametrize(
    "what",
    [
        pytest.param("scaled to 0", id="controller-scaled-to-zero"),
        pytest.param("ImagePullBackOff", id="image-pull"),
    ],
)
async def test_a_controller_that_goes_down_mid_wait_is_stale_naming_it(
    control_plane: ControlPlane, kube: Kube, namespace: str, what: str
) -> None:
    ns = namespace
    objects = stack(ns, root=reconciling(REV_A, REV_B))
    await create(kube, *objects)
    controller = next(
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "kustomize-controller"
    )
    controller_pod = next(
        o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == pod_name("kustomize-controller")
    )
    async with waiting(control_plane.kubeconfig, ns, f"kustomization/{ns}/apps", "--revision", REV_B) as run:
        await run.watching()
        if what == "scaled to 0":
            await kube.patch(controller, {"spec": {"replicas": 0}})
            await patch(
                kube,
                controller,
                {**rolled_out(0), "replicas": 0, "updatedReplicas": 0, "observedGeneration": 2},
            )
        else:
            image = "ghcr.io/fluxcd/kustomize-controller:v9.9.9"
            await patch(
                kube,
                controller_pod,
                container_waiting("ImagePullBackOff", f'Back-off pulling image "{image}"', image=image),
            )
            await patch(kube, controller, rolled_out(0))
        code, out = await run.result(within=30)
    assert code == 4, out
    reason = "ScaledToZero" if what == "scaled to 0" else "ImagePullBackOff"
    assert out.splitlines()[0] == f"stale: ControllerDown Deployment {ns}/kustomize-controller ({reason})", (
        out
    )
    assert f"CRITICAL ControllerDown: Deployment {ns}/kustomize-controller\n" in out, "with its blast radius"


async def test_a_helmrelease_ready_whose_new_pod_crash_loops_fails(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    ns = namespace
    labels = {"helm.toolkit.fluxcd.io/name": "podinfo", "helm.toolkit.fluxcd.io/namespace": ns}
    release = flux(
        "HelmRelease",
        ns,
        "podinfo",
        spec={
            "chart": {
                "spec": {"chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}
            }
        },
        status=ready(
            "Helm upgrade succeeded for release podinfo/podinfo.v2 with chart podinfo@6.5.0",
            lastAttemptedRevision="6.5.0",
            history=[
                {
                    "name": "podinfo",
                    "namespace": ns,
                    "version": 2,
                    "status": "deployed",
                    "chartName": "podinfo",
                    "chartVersion": "6.5.0",
                }
            ],
        ),
    )
    app, app_pod_ = (
        workload(ns, "podinfo", available=0, labels=labels),
        app_pod(ns, "podinfo", status=container_waiting("ContainerCreating", "")),
    )
    await create(kube, *controllers(ns), release, app, app_pod_)
    async with waiting(
        control_plane.kubeconfig, ns, f"hr/{ns}/podinfo", "--revision", "6.5.0", "--grace", "1m"
    ) as run:
        await run.watching()
        crashing = container_waiting(
            "CrashLoopBackOff", "back-off 40s restarting failed container", started=ago(minutes=3), restarts=4
        )
        await patch(kube, app_pod_, crashing)
        code, out = await run.result(within=30)
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"failed: Pod {ns}/{pod_name('podinfo')}: is in CrashLoopBackOff (container manager, image "
        "registry.example/app:1.0, restarted 4 times, last exited with Error (exit code 1))"
    ), out


async def test_a_sibling_failing_its_dry_run_with_forbidden_fails_while_the_root_is_on_the_old_revision(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    ns = namespace
    siblings = (
        entry(ns, "deploy-apps", "Kustomization", KS),
        entry(ns, "deploy-config", "Kustomization", KS),
    )
    root = kustomization(ns, "deploy-root", applied(REV_A, *siblings))
    apps, config = (
        kustomization(ns, "deploy-apps", applied(REV_A)),
        kustomization(ns, "deploy-config", applied(REV_A)),
    )
    await create(kube, *controllers(ns), source(ns, REV_B), root, apps, config)
    async with waiting(control_plane.kubeconfig, ns, f"ks/{ns}/deploy-root", "--revision", REV_B) as run:
        await run.watching()
        await patch(kube, apps, applied(REV_B))
        await patch(kube, config, dry_run_forbidden(REV_A, REV_B))
        code, out = await run.result(within=30)
    assert code == 1, out
    failure = (
        f"Kustomization {ns}/deploy-config: failed at main@bbbbbbbbbbbb: ReconciliationFailed: {FORBIDDEN}"
    )
    assert out.splitlines()[0] == f"failed: {failure}", out


async def test_a_dependency_failing_at_the_revision_fails_the_kustomization_waiting_for_it(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    ns = namespace
    db, apps = kustomization(ns, "db", applied(REV_A)), kustomization(ns, "apps", reconciling(REV_A, REV_B))
    apps["spec"]["dependsOn"] = [{"name": "db"}]
    await create(kube, *controllers(ns), source(ns, REV_B), db, apps)
    async with waiting(control_plane.kubeconfig, ns, f"ks/{ns}/apps", "--revision", REV_B) as run:
        await run.watching()
        blocked = cond("Ready", "False", "DependencyNotReady", f"dependency '{ns}/db' is not ready")
        await patch(kube, apps, {"conditions": [blocked]})
        await patch(kube, db, dry_run_forbidden(REV_A, REV_B))
        code, out = await run.result(within=30)
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"failed: Kustomization {ns}/db: holds up Kustomization {ns}/apps, which depends on it: "
        f"failed at main@bbbbbbbbbbbb: ReconciliationFailed: {FORBIDDEN}"
    ), out


async def test_nothing_happening_times_out_with_what_is_in_progress(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    ns = namespace
    await create(
        kube, *stack(ns, root={**reconciling(REV_A, REV_B), "inventory": {"entries": list(inventory(ns))}})
    )
    async with waiting(control_plane.kubeconfig, ns, f"ks/{ns}/apps", "--timeout", "3s", "-o", "json") as run:
        code, out = await run.result()
    document = json.loads(out)
    assert (code, document["outcome"], document["exit_code"]) == (3, "timed_out", 3), out
    assert run.progress == [], "-o json is quiet"
    assert document["targets"] == [
        {"group": KS, "kind": "Kustomization", "namespace": ns, "name": "apps", "revision": REV_B}
    ], "without --revision: the source's revision read at start"
    reasons = {(o["kind"], o["name"]): (o["state"], o["reason"]) for o in document["objects"]}
    assert reasons == {
        ("Kustomization", "apps"): (
            "in_progress",
            f"InProgress: Progressing: Building manifests for revision {REV_B}",
        ),
        ("Kustomization", "infra"): ("in_progress", "at main@aaaaaaaaaaaa, waiting for main@bbbbbbbbbbbb"),
        ("Deployment", "web"): ("in_progress", "LessAvailable: Available: 0/1"),
        ("Pod", pod_name("web")): (
            "in_progress",
            "is in Pending (container manager, image registry.example/app:1.0)",
        ),
    }
    assert document["summary"] == {
        "objects": 4,
        "current": 0,
        "in_progress": 4,
        "failed": 0,
        "stale": 0,
        "missing": 0,
        "unknown": 0,
    }


async def test_a_revision_that_is_not_the_one_applied_keeps_waiting_then_times_out(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    ns = namespace
    apps = kustomization(ns, "apps", reconciling(REV_A, REV_B))
    await create(kube, *controllers(ns), source(ns, REV_B), apps)
    async with waiting(
        control_plane.kubeconfig, ns, f"ks/{ns}/apps", "--revision", REV_C, "--timeout", "4s"
    ) as run:
        await run.watching()
        await patch(kube, apps, applied(REV_B))
        await run.said(lambda line: "at main@bbbbbbbbbbbb, waiting for main@cccccccccccc" in line)
        code, out = await run.result()
    assert code == 3, out
    assert out.startswith("timed out: 0/1 current\n"), out
    pending = out.split("still in progress (1 of 1):\n")[1]
    assert pending.startswith(
        f"  Kustomization {ns}/apps: at main@bbbbbbbbbbbb, waiting for main@cccccccccccc"
    )


async def test_a_target_that_does_not_exist_cannot_be_waited_for(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    async with waiting(control_plane.kubeconfig, namespace, f"ks/{namespace}/nope", "--timeout", "1m") as run:
        code, out = await run.result()
    assert code == 2, out
    assert out == f"cannot wait: not found: Kustomization {namespace}/nope\n"


async def test_the_api_server_stopping_mid_wait_is_never_converged(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    ns = namespace
    await create(kube, *stack(ns, root=reconciling(REV_A, REV_B)))
    with control_plane.second_apiserver() as other:
        async with waiting(
            other.kubeconfig, ns, f"ks/{ns}/apps", "--blind-timeout", "2s", "--timeout", "2m"
        ) as run:
            await run.watching()
            await asyncio.to_thread(other.stop_apiserver)
            code, out = await run.result()
    assert code == 2, out
    assert out.startswith("cannot wait: cannot see the cluster since "), out
    assert "unreachable" in out


@pytest.mark.parametrize(
    ("read", "code", "first"),
    [
        pytest.param(READ, 0, "converged: 4/4 current", id="read-access-is-enough"),
        pytest.param(
            {g: [r for r in rs if r != "pods"] for g, rs in READ.items()},
            2,
            "cannot wait: cannot see the cluster since ",
            id="pods-forbidden",
        ),
    ],
)
async def test_a_ci_account_with_read_access_can_wait_and_one_without_is_told_why(
    control_plane: ControlPlane,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    read: dict[str, list[str]],
    code: int,
    first: str,
) -> None:
    ns = namespace
    account = f"ci-{uuid.uuid4().hex[:8]}"
    await create(kube, *read_access(ns, account, read))
    token = control_plane.service_account_token(ns, account)
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "ci", user={"token": token})
    await create(kube, *stack(ns, root=applied(REV_B, *inventory(ns)), ready_web=True))
    async with waiting(kubeconfig, ns, f"ks/{ns}/apps", "--blind-timeout", "2s") as run:
        exit_code, out = await run.result()
    assert (exit_code, out.splitlines()[0][: len(first)]) == (code, first), out
    if code == 2:
        assert out.splitlines()[0].endswith("403 Forbidden: may not list and watch Pod"), out
