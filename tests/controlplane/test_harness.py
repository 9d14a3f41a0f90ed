"""The test control plane is the real thing: versioned, serving CRDs, watching, enforcing RBAC."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import client_for
from tests.controlplane.harness import ControlPlane
from tests.kubeclient import Kube, KubeError

pytestmark = pytest.mark.cluster

K8S_VERSION = re.search(
    r"^require k8s.io/kubernetes (v\S+)$",
    (Path(__file__).parent / "k8s" / "go.mod").read_text(),
    re.MULTILINE,
)


def kustomization(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "interval": "10m",
            "path": "./apps",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        },
    }


async def test_version_endpoint_reports_the_version_we_built(kube: Kube) -> None:
    assert K8S_VERSION is not None
    version = await kube.request("GET", "/version")
    assert version["gitVersion"] == K8S_VERSION.group(1)
    assert version["major"] == "1"
    assert version["minor"] == K8S_VERSION.group(1).split(".")[1]


async def test_flux_and_tofu_crds_are_discoverable(kube: Kube) -> None:
    expected = {
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"): "kustomizations",
        ("helm.toolkit.fluxcd.io/v2", "HelmRelease"): "helmreleases",
        ("source.toolkit.fluxcd.io/v1", "GitRepository"): "gitrepositories",
        ("source.toolkit.fluxcd.io/v1", "OCIRepository"): "ocirepositories",
        ("source.toolkit.fluxcd.io/v1beta2", "OCIRepository"): "ocirepositories",
        ("source.toolkit.fluxcd.io/v1", "HelmRepository"): "helmrepositories",
        ("source.toolkit.fluxcd.io/v1", "HelmChart"): "helmcharts",
        ("source.toolkit.fluxcd.io/v1", "Bucket"): "buckets",
        ("infra.contrib.fluxcd.io/v1alpha2", "Terraform"): "terraforms",
    }
    for (api_version, kind), plural in sorted(expected.items()):
        assert await kube.resource(api_version, kind) == (plural, True)


async def test_a_crd_created_during_the_run_becomes_discoverable(kube: Kube) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "ratelimitconfigs.ratelimit.example.io"},
        "spec": {
            "group": "ratelimit.example.io",
            "scope": "Namespaced",
            "names": {"kind": "RateLimitConfig", "plural": "ratelimitconfigs", "singular": "ratelimitconfig"},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    await kube.create(crd)
    try:
        for _ in range(100):
            try:
                found = await kube.resource("ratelimit.example.io/v1alpha1", "RateLimitConfig")
                break
            except (KubeError, LookupError):
                await asyncio.sleep(0.1)
        assert found == ("ratelimitconfigs", True)
    finally:
        await kube.delete(crd)


async def test_watch_with_bookmarks_sees_added_modified_deleted_for_a_patched_kustomization(
    kube: Kube, namespace: str
) -> None:
    path = await kube.path("kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace)
    listed = await kube.request("GET", path)
    events: list[tuple[str, str]] = []

    async def watch() -> None:
        resp = await kube.api.call_api(
            path,
            "GET",
            query_params=[
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", "30"),
                ("resourceVersion", listed["metadata"]["resourceVersion"]),
            ],
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        async with resp:
            async for line in resp.content:
                event = orjson.loads(line)
                if event["type"] == "BOOKMARK":
                    continue
                ready = [c["status"] for c in event["object"].get("status", {}).get("conditions", [])]
                events.append((event["type"], ",".join(ready)))
                if event["type"] == "DELETED":
                    return

    watcher = asyncio.create_task(watch())
    obj = await kube.create(kustomization(namespace, "apps"))
    await kube.patch_status(
        obj,
        {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "ReconciliationSucceeded",
                    "message": "Applied revision",
                    "lastTransitionTime": "2026-11-30T12:00:00Z",
                    "observedGeneration": 1,
                }
            ]
        },
    )
    await kube.delete(obj)
    await asyncio.wait_for(watcher, timeout=30)
    assert events == [("ADDED", ""), ("MODIFIED", "True"), ("DELETED", "True")]


async def test_rbac_is_enforced_for_a_service_account_without_rights(
    control_plane: ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "nobody", "namespace": namespace},
    }
    await kube.create(sa)
    token = control_plane.service_account_token(namespace, "nobody")
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "nobody", user={"token": token})
    async with await client_for(kubeconfig) as api:
        nobody = Kube(api)
        whoami = await nobody.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:nobody"
        with pytest.raises(KubeError) as denied:
            await nobody.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        assert denied.value.status == 403


def test_kubectl_built_beside_the_server_talks_to_it(control_plane: ControlPlane) -> None:
    out = control_plane.kubectl(
        "get", "crd", "terraforms.infra.contrib.fluxcd.io", "-o", "jsonpath={.spec.group}"
    )
    assert out == "infra.contrib.fluxcd.io"


def test_a_watch_from_before_a_compaction_and_restart_is_gone(control_plane: ControlPlane) -> None:
    """The 410 path the watcher must survive is reachable: an API server restarted after a
    compaction no longer has the history an old resourceVersion points into."""
    listed = orjson.loads(control_plane.kubectl("get", "--raw", "/api/v1/namespaces"))
    control_plane.kubectl("create", "namespace", "compaction-witness")
    assert control_plane.etcd_compact() > int(listed["metadata"]["resourceVersion"])
    control_plane.stop_apiserver()
    control_plane.start_apiserver()
    since = listed["metadata"]["resourceVersion"]
    out = control_plane.kubectl("get", "--raw", f"/api/v1/namespaces?watch=1&resourceVersion={since}")
    event = orjson.loads(out.splitlines()[0])
    assert (event["type"], event["object"]["code"]) == ("ERROR", 410)
