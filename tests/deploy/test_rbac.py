"""deploy/'s RBAC on the real API server: with nothing but its ServiceAccount's token,
stalewatch reads every kind it watches, and can change nothing and read no Secret."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import client_for
from tests.controlplane.harness import ControlPlane
from tests.deploy.conftest import Running, granted
from tests.kubeclient import Kube, KubeError
from watcher.kube.resources import ON_DEMAND

pytestmark = pytest.mark.cluster

NS = "stalewatch"
KUSTOMIZATION = f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{NS}/kustomizations/apps"
MERGE_PATCH = "application/merge-patch+json"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "intruder"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}


def served(plane: ControlPlane, group: str) -> dict[str, tuple[str, str]]:
    """Resource name -> (collection path, kind) for an API group, from the discovery an admin
    sees; a resource served at several versions is taken at the preferred one."""
    if not group:
        versions = ["v1"]
    else:
        api = json.loads(plane.kubectl("get", "--raw", f"/apis/{group}"))
        preferred = api["preferredVersion"]["groupVersion"]
        versions = [v["groupVersion"] for v in api["versions"] if v["groupVersion"] != preferred] + [
            preferred
        ]
    resources: dict[str, tuple[str, str]] = {}
    for version in versions:
        base = "/api/v1" if not group else f"/apis/{version}"
        for resource in json.loads(plane.kubectl("get", "--raw", base))["resources"]:
            if "/" not in resource["name"]:
                resources[resource["name"]] = (f"{base}/{resource['name']}", resource["kind"])
    return resources


@pytest.fixture(scope="module")
def targets(plane: ControlPlane, rbac: list[dict[str, Any]]) -> None:
    """Objects the write attempts aim at, created by an admin, so a refusal is RBAC's and
    not a 404."""
    objects = [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": NS}},
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": NS},
            "spec": {
                "interval": "10m",
                "path": "./",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": "x"},
            },
        },
    ]
    plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))


@pytest.fixture(scope="module")
async def as_stalewatch(token_kubeconfig: Path) -> AsyncIterator[Kube]:
    """Raw REST with nothing but the ServiceAccount's token."""
    async with await client_for(token_kubeconfig) as api:
        yield Kube(api)


async def test_the_token_lists_and_watches_every_kind_the_cluster_role_grants(
    plane: ControlPlane, rbac: list[dict[str, Any]], as_stalewatch: Kube
) -> None:
    paths = []
    for group, resource in sorted(granted(rbac)):
        resources = served(plane, group)
        assert resource in resources, f"{resource}.{group} is not served"
        paths.append(resources[resource][0])

    async def refusal(path: str, query: dict[str, str]) -> str | None:
        try:
            await as_stalewatch.request("GET", path, query=query)
        except KubeError as error:
            return f"{path} {query}: {error}"
        return None

    attempts = [(p, q) for p in paths for q in ({"limit": "1"}, {"watch": "true", "timeoutSeconds": "1"})]
    refused = await asyncio.gather(*(refusal(path, query) for path, query in attempts))
    assert [r for r in refused if r] == []


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type"),
    [
        pytest.param("POST", f"/api/v1/namespaces/{NS}/pods", POD, "application/json", id="create-pod"),
        pytest.param(
            "PATCH",
            f"{KUSTOMIZATION}/status",
            {"status": {"conditions": []}},
            MERGE_PATCH,
            id="patch-kustomization-status",
        ),
        pytest.param(
            "PATCH", KUSTOMIZATION, {"spec": {"suspend": True}}, MERGE_PATCH, id="suspend-kustomization"
        ),
        pytest.param("DELETE", KUSTOMIZATION, None, "application/json", id="delete-kustomization"),
        pytest.param("GET", f"/api/v1/namespaces/{NS}/secrets/db", None, "application/json", id="get-secret"),
        pytest.param("GET", "/api/v1/secrets", None, "application/json", id="list-secrets"),
        pytest.param("GET", "/api/v1/configmaps", None, "application/json", id="list-configmaps"),
        pytest.param(
            "POST",
            f"/api/v1/namespaces/{NS}/serviceaccounts/stalewatch/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
            "application/json",
            id="mint-a-token",
        ),
        pytest.param(
            "PATCH",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/stalewatch",
            {"rules": []},
            MERGE_PATCH,
            id="edit-its-cluster-role",
        ),
    ],
)
async def test_the_token_is_refused_every_write_and_every_secret(
    targets: None, as_stalewatch: Kube, method: str, path: str, body: Any, content_type: str
) -> None:
    with pytest.raises(KubeError) as refused:
        await as_stalewatch.request(method, path, body=body, content_type=content_type)
    assert refused.value.status == 403, refused.value.body


def test_stalewatch_with_only_the_token_gets_ready_watching_exactly_what_the_cluster_role_grants(
    plane: ControlPlane, rbac: list[dict[str, Any]], running: Running
) -> None:
    status, body = running.wait_for("/readyz")
    assert status == 200, f"/readyz answered {status}: {body}\n{running.logs()}"
    samples = {
        family.name: {(s.labels["group"], s.labels["kind"]): s.value for s in family.samples}
        for family in text_string_to_metric_families(running.get("/metrics")[1])
        if family.name in ("stalewatch_kind_forbidden", "stalewatch_kind_synced")
    }
    assert [kind for kind, value in samples["stalewatch_kind_forbidden"].items() if value] == []
    assert [kind for kind, value in samples["stalewatch_kind_synced"].items() if value != 1] == []
    watched = set()
    for group, kind in samples["stalewatch_kind_synced"]:
        by_kind = {k: name for name, (_, k) in served(plane, group).items()}
        watched.add((group, by_kind[kind]))
    while_listed = {(r.group, r.plural) for r in ON_DEMAND}
    # the install's own Prometheus Operator objects: custom kinds, watched while an inventory lists them
    while_listed |= {(g, r) for g, r in granted(rbac) if g == "monitoring.coreos.com"}
    assert watched == granted(rbac) - while_listed
