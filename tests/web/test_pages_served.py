"""The stacks, stack and object pages over HTTP: from the real aiohttp app on a hand-built
cluster, and from the real `stalewatch run` watching the real API server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tests.app.test_incidents import POD, THRESHOLDS, TOFU_IMAGE, both, patch, tofu_setup
from tests.controlplane.harness import ControlPlane
from tests.kube.objects import cond, deployment_status, flux, ready, waiting
from tests.kube.support import poll, running, settings_for
from tests.kubeclient import Kube
from tests.web.cluster import HOSTILE, cluster, incident
from tests.web.dom import parse
from watcher.export.metrics import build_registry
from watcher.telemetry import Telemetry
from watcher.web.freshness import SCRIPT
from watcher.web.server import create_app

REV_A = "main@sha1:" + "a" * 40


@pytest.fixture
async def served() -> AsyncIterator[str]:
    async with TestServer(cluster(incident(message=HOSTILE)).app()) as server:
        yield str(server.make_url("")).rstrip("/")


async def get(url: str) -> tuple[int, str, dict[str, str]]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.text(), dict(response.headers)


@pytest.mark.parametrize(
    ("path", "status", "heading"),
    [
        pytest.param("/", 200, "Stacks", id="index"),
        pytest.param("/?status=bogus&page=x&q=kind:", 200, "Stacks", id="bad-query-values-are-no-500"),
        pytest.param(
            "/stacks/flux-system/flux-system", 200, "Stack Kustomization flux-system/flux-system", id="stack"
        ),
        pytest.param("/stacks/flux-system/infra", 404, "Stacks", id="not-a-root-is-a-404"),
        pytest.param("/stacks/nowhere/none", 404, "Stacks", id="unknown-stack-404"),
        pytest.param(
            f"/stacks/x/{quote(HOSTILE, safe='')}?q={quote(HOSTILE)}", 404, "Stacks", id="hostile-stack"
        ),
        pytest.param("/objects/Terraform/flux-system/vpc", 200, "Terraform flux-system/vpc", id="object"),
        pytest.param("/objects/Terraform/flux-system/gone", 404, "Not found", id="unknown-object-404"),
        pytest.param("/objects/Bogus/flux-system/x", 404, "Not found", id="unknown-kind-404"),
        pytest.param(
            f"/objects/Terraform/flux-system/{quote(HOSTILE, safe='')}", 404, "Not found", id="hostile-name"
        ),
        pytest.param(
            "/objects/CustomResourceDefinition/none.example.com", 404, "Not found", id="cluster-scoped"
        ),
    ],
)
async def test_each_page_answers_with_its_status_escaped_and_under_the_policy(
    served: str, path: str, status: int, heading: str
) -> None:
    code, body, headers = await get(served + path)
    assert code == status
    assert headers["Content-Type"].startswith("text/html")
    policy = headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "form-action 'self'" in policy
    doc = parse(body)
    assert heading in [h.text for h in doc.all("h2")]
    assert not doc.all("img")
    live = path.startswith("/?") or path == "/"
    assert [s.text for s in doc.all("script")] == ([SCRIPT] if live else []), "only the page's own live.js"
    assert ("script-src" in policy) is live


@pytest.mark.cluster
async def test_the_real_stalewatch_run_serves_the_stack_and_object_pages(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    """tofu-controller goes down under a root Kustomization that applied its Terraforms: the
    stack shows them stale, the search finds them by revision prefix, the object page has the
    condition message (written by an attacker) as text."""
    entries = [
        {"id": f"{namespace}_{n}_infra.contrib.fluxcd.io_Terraform", "v": "v1alpha2"} for n in ("vpc", "dns")
    ]
    root = flux(
        "Kustomization",
        namespace,
        "infra",
        spec={"sourceRef": {"kind": "GitRepository", "name": "infra"}, "path": "./infra", "prune": True},
        status=ready(lastAppliedRevision=REV_A, inventory={"entries": entries}),
    )
    for obj in [*tofu_setup(namespace), root]:
        await kube.create(obj)
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace], thresholds=THRESHOLDS)
    outage = both(
        patch("Pod", "tofu-controller" + POD, waiting("ImagePullBackOff", HOSTILE, image=TOFU_IMAGE)),
        patch("Deployment", "tofu-controller", deployment_status(0)),
        patch(
            "Terraform", "vpc", {"conditions": [cond("Ready", "True", "TerraformAppliedSucceed", HOSTILE)]}
        ),
    )
    async with running(settings) as service:
        await outage(kube, namespace)

        async def stale_rows() -> list[str]:
            code, body = await service.get(f"/?q={REV_A[10:22]}")
            assert code == 200
            rows = parse(body).by_id("stacks-rows").all("tr")
            return [tr.all("td")[1].text for tr in rows if "Terraform" in tr.all("td")[0].text]

        async def both_stale() -> bool:
            return (await stale_rows())[:2] == ["stale (cached: Current)"] * 2

        await poll(both_stale, within=10, what="the Terraforms served as stale in the stack")
        code, body = await service.get(f"/stacks/{namespace}/infra")
        assert code == 200
        rows = [tr.all("td")[0].text for tr in parse(body).by_id("stacks-rows").all("tr")]
        assert rows == [
            f"Kustomization {namespace}/infra",
            f"Kustomization {namespace}/infra",
            f"Terraform {namespace}/dns",
            f"Terraform {namespace}/vpc",
        ]
        code, body = await service.get(f"/objects/Terraform/{namespace}/vpc")
        assert code == 200
        page = parse(body)
        assert [td.text for td in page.by_id("object-conditions").all("td", "message")] == [HOSTILE]
        assert not page.all("img")
        assert (
            "kubectl describe terraform.infra.contrib.fluxcd.io vpc -n " + namespace
            in page.by_id("object-commands").text
        )
        code, _ = await service.get(f"/objects/Terraform/{namespace}/missing")
        assert code == 404


async def test_before_the_first_evaluation_an_object_page_says_it_cannot_tell_not_that_it_is_gone() -> None:
    tofu = cluster(incident())
    app = create_app(
        telemetry=Telemetry(), source=lambda: None, registry=build_registry(lambda: None), model=tofu.model
    )
    async with TestServer(app) as server:
        code, body, _ = await get(str(server.make_url("/objects/Terraform/flux-system/vpc")))
    assert code == 503
    assert parse(body).by_id("object-head").one("h2").text == "Not judged"
