"""Issue 17's "done when", in a real headless Chromium against the real `stalewatch run` watching
a real kube-apiserver: the tofu-controller outage, enacted the way it happened (a rollout to a
release-candidate image whose pod cannot pull it), read on the single pane as on-call reads it.

In order, on one open page (`/?open=NS/infra`): one root card naming tofu-controller, with the
image change that preceded it (ReplicaSet revision 7, the undo command); the stack tree with its
Terraform objects stale; a condition message `<img src=x onerror=alert(1)>` as text (the
object's page, in a second tab, and the recent changes); a status written in the API server
shown within 2 s, no navigation; the search box finding a stack by a revision prefix; then the
API server killed, the freshness indicator and the trust banner red, no navigation.

stalewatch watches through an API server of its own on the session's etcd (the test writes
through the session's), so the last step can kill it without harming the other tests. Every
step saves a screenshot under test-artifacts/ (pane-v2-*.png; git ignores it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from playwright.async_api import Dialog, Page

from tests.app.test_incidents import THRESHOLDS, TOFU_IMAGE, Expect
from tests.controlplane.harness import ControlPlane
from tests.kube.objects import API, cond, deployment, deployment_status, flux, ready, running, waiting
from tests.kube.support import poll, settings_for, until_no_problem
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube
from tests.web.conftest import Watched
from tests.web.test_browser import assert_nothing_executed

pytestmark = pytest.mark.cluster

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
OLD_IMAGE = "ghcr.io/flux-iac/tofu-controller:v0.15.1"
OLD_HASH, NEW_HASH = "7c6d5b4a3", "5d4f8b7c9"
HOSTILE = "<img src=x onerror=alert(1)>"
REVISION = "main@sha1:3f9c2e1d" + "0" * 32
WEB_REVISION = "main@sha1:9e8d7c6b" + "1" * 32
RED = "rgb(197, 34, 31)"


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def replicaset(ns: str, *, template_hash: str, revision: int, image: str, replicas: int, owner: str) -> Any:
    """What the deployment controller makes for each rollout (no controller runs here)."""
    labels = {"app": "tofu-controller", "pod-template-hash": template_hash}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"tofu-controller-{template_hash}",
            "namespace": ns,
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": str(revision)},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "tofu-controller", "uid": owner,
                 "controller": True, "blockOwnerDeletion": True},
            ],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": image}]},
            },
        },
    }  # fmt: skip


def controller_pod(ns: str, *, template_hash: str, image: str, status: Any) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"tofu-controller-{template_hash}-x7k2p",
            "namespace": ns,
            "labels": {"app": "tofu-controller", "pod-template-hash": template_hash},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"tofu-controller-{template_hash}",
                 "uid": "6b0c2a55-0000-4000-8000-00000000000" + template_hash[0], "controller": True},
            ],
        },
        "spec": {"containers": [{"name": "manager", "image": image}]},
        "status": status,
    }  # fmt: skip


def applied_by(ns: str, stack: str) -> dict[str, str]:
    """The labels kustomize-controller puts on what a Kustomization applies."""
    return {"kustomize.toolkit.fluxcd.io/name": stack, "kustomize.toolkit.fluxcd.io/namespace": ns}


def gitops(ns: str) -> list[Any]:
    """A root Kustomization `infra` that applies two Terraforms and the `apps` Kustomization
    (which waits for them), all at REVISION; and a healthy `web` stack beside it at
    WEB_REVISION, from a source of its own."""
    source = {"kind": "GitRepository", "name": "infra"}
    at = {"lastAppliedRevision": REVISION}
    terraforms = [
        flux("Terraform", ns, name, spec={"sourceRef": source, "path": f"./{name}"}, status=ready(**at))
        for name in ("vpc", "dns")
    ]
    apps = flux(
        "Kustomization",
        ns,
        "apps",
        spec={"sourceRef": source, "dependsOn": [{"name": "vpc"}]},
        status=ready(**at),
    )
    for obj in (*terraforms, apps):
        obj["metadata"]["labels"] = applied_by(ns, "infra")
    inventory = {
        "entries": [
            {"id": f"{ns}_{o['metadata']['name']}_{o['apiVersion'].split('/')[0]}_{o['kind']}", "v": "v1"}
            for o in (*terraforms, apps)
        ]
    }
    return [
        flux(
            "GitRepository",
            ns,
            "infra",
            spec={"url": "https://git.example/infra"},
            status=ready(artifact={"revision": REVISION, "lastUpdateTime": "2026-12-01T00:00:00Z"}),
        ),
        flux(
            "Kustomization", ns, "infra", spec={"sourceRef": source}, status=ready(inventory=inventory, **at)
        ),
        *terraforms,
        apps,
        flux(
            "GitRepository",
            ns,
            "web",
            spec={"url": "https://git.example/web"},
            status=ready(artifact={"revision": WEB_REVISION, "lastUpdateTime": "2026-12-01T00:00:00Z"}),
        ),
        flux(
            "Kustomization",
            ns,
            "web",
            spec={"sourceRef": {"kind": "GitRepository", "name": "web"}},
            status=ready(lastAppliedRevision=WEB_REVISION),
        ),
    ]


async def roll_out_the_release_candidate(kube: Kube, ns: str, owner: str) -> None:
    """`kubectl set image` to v0.16.0-rc.5, as the deployment controller carries it out: a new
    ReplicaSet (revision 7) scaled up, the old one (6) down, its pod replaced."""
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "tofu-controller", "namespace": ns},
    }
    await kube.patch(
        deploy, {"spec": {"template": {"spec": {"containers": [{"name": "manager", "image": TOFU_IMAGE}]}}}}
    )
    await kube.create(
        replicaset(ns, template_hash=NEW_HASH, revision=7, image=TOFU_IMAGE, replicas=1, owner=owner)
    )
    old = replicaset(ns, template_hash=OLD_HASH, revision=6, image=OLD_IMAGE, replicas=0, owner=owner)
    await kube.patch(old, {"spec": {"replicas": 0}})
    await kube.delete(controller_pod(ns, template_hash=OLD_HASH, image=OLD_IMAGE, status={}))


async def the_pod_cannot_pull_it(kube: Kube, ns: str) -> None:
    """The new pod sits in ImagePullBackOff (its message written by whoever can write Pod status:
    here, an attacker); the Deployment has no available replica; `apps` waits on `vpc`."""
    stuck = waiting("ImagePullBackOff", HOSTILE, image=TOFU_IMAGE)
    await kube.create(controller_pod(ns, template_hash=NEW_HASH, image=TOFU_IMAGE, status=stuck))
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "tofu-controller", "namespace": ns},
    }
    await kube.patch_status(deploy, deployment_status(0))
    apps = {
        "apiVersion": API["Kustomization"],
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": ns},
    }
    blocked = cond("Ready", "False", "DependencyNotReady", f"dependency '{ns}/vpc' is not ready: {HOSTILE}")
    await kube.patch_status(apps, {"conditions": [blocked]})


async def contents(page: Page, selector: str) -> list[str]:
    """The text of every match, read in one go: the stream replaces parts in place (a root card
    each evaluation: its ages change), so elements found one call earlier may be gone. The text
    as written (textContent: CSS's uppercase not applied)."""
    found: list[str] = await page.eval_on_selector_all(selector, "es => es.map(e => e.textContent.trim())")
    return found


async def stack_rows(page: Page) -> dict[str, str]:
    """The stacks' rows, read in one go: first cell (the object) -> second (its verdict)."""
    found: dict[str, str] = await page.eval_on_selector_all(
        "#stacks-rows tr",
        "trs => Object.fromEntries(trs.filter(tr => tr.cells.length > 1)"
        ".map(tr => [tr.cells[0].textContent.trim(), tr.cells[1].textContent.trim()]))",
    )
    return found


def dismissed(tab: Watched) -> Callable[[Dialog], Awaitable[None]]:
    """A dialog handler for one more page of the tab's context: recorded as the tab's own."""

    async def on_dialog(dialog: Dialog) -> None:
        tab.dialogs.append(dialog.message)
        await dialog.dismiss()

    return on_dialog


async def screenshot(page: Page, artifacts: Path, name: str) -> None:
    await page.screenshot(path=artifacts / f"pane-v2-{name}.png", full_page=True)


async def test_the_single_pane_v2_in_chromium(
    control_plane: ControlPlane, kube: Kube, namespace: str, tab: Watched, artifacts: Path
) -> None:
    ns = namespace
    created = await kube.create(deployment(ns, "tofu-controller", image=OLD_IMAGE))
    owner = created["metadata"]["uid"]
    await kube.create(
        replicaset(ns, template_hash=OLD_HASH, revision=6, image=OLD_IMAGE, replicas=1, owner=owner)
    )
    await kube.create(controller_pod(ns, template_hash=OLD_HASH, image=OLD_IMAGE, status=running(OLD_IMAGE)))
    for obj in gitops(ns):
        await kube.create(obj)
    expect = Expect(
        ("ControllerDown", "Deployment", "tofu-controller"),
        [
            ("StatusStale", "Terraform", "vpc"),
            ("StatusStale", "Terraform", "dns"),
            ("DependencyBlocked", "Kustomization", "apps"),
        ],
    )
    with control_plane.second_apiserver() as own:
        settings = settings_for(own.kubeconfig, include_namespaces=[ns], thresholds=THRESHOLDS)
        async with stalewatch_running(settings) as service:

            async def comparing() -> bool:
                status, body = await service.get("/api/v1/timeline")
                return status == 200 and orjson.loads(body)["summary"]["comparing_since"] is not None

            await poll(comparing, within=10, what="the timeline compares evaluations")
            await roll_out_the_release_candidate(kube, ns, owner)
            await the_pod_cannot_pull_it(kube, ns)

            async def problem() -> str:
                return expect.problem((await service.findings())["findings"])

            await until_no_problem(problem, within=10, what="the outage served as one root")
            page = tab.page
            navigations: list[str] = []
            response = await page.goto(f"{service.url}/?open={ns}/infra")
            assert response is not None
            assert response.status == 200
            page.on("framenavigated", lambda frame: navigations.append(frame.url))

            # one root card, naming tofu-controller; the hostile message stays text
            assert await contents(page, "article h3") == [
                f"critical ControllerDown: Deployment {ns}/tofu-controller"
            ]
            await page.locator("article.critical details summary").click()
            keys, values = (
                await contents(page, "article.critical dt"),
                await contents(page, "article.critical dd"),
            )
            shown = dict(zip(keys, values, strict=True))
            assert (shown["reason"], shown["message"]) == ("ImagePullBackOff", HOSTILE)
            assert await page.locator("img").count() == 0
            # the image change that preceded it, with its ReplicaSet revision and the undo
            kinds = await page.eval_on_selector_all(
                "article.critical li.change", "lis => lis.map(li => li.classList[1])"
            )
            assert kinds == ["controller_down", "image_changed"], "newest first: the rollout came before"
            (change,) = await contents(page, "article.critical li.change.image_changed")
            assert change.split(") ", 1)[1] == (
                f"Deployment {ns}/tofu-controller: image {OLD_IMAGE} -> v0.16.0-rc.5 (ReplicaSet revision 7);"
                f" kubectl rollout undo deployment/tofu-controller -n {ns}"
            ), "its time and age, then the change and how to undo it"
            # the condition message the cluster wrote (on `apps`' Ready) shown as text, among the changes
            assert any(HOSTILE in line for line in await contents(page, "#changes li")), "not shown"
            await screenshot(page, artifacts, "incident")

            # the condition message the cluster wrote (`apps`' Ready) as text on the object's page
            other = await page.context.new_page()
            other.on("dialog", dismissed(tab))
            shown_object = await other.goto(f"{service.url}/objects/Kustomization/{ns}/apps")
            assert shown_object is not None
            assert shown_object.status == 200
            messages = await contents(other, "#object-conditions td.message")
            assert messages == [f"dependency '{ns}/vpc' is not ready: {HOSTILE}"]
            assert await other.locator("img").count() == 0
            assert tab.dialogs == []
            await screenshot(other, artifacts, "condition-message")
            await other.close()

            # the stack tree: its Terraform objects stale, never their cached Ready
            tree = await stack_rows(page)
            assert tree[f"Terraform {ns}/vpc"].startswith("stale"), tree
            assert tree[f"Terraform {ns}/dns"].startswith("stale"), tree
            await screenshot(page, artifacts, "stack-tree")

            # a status changed in the API server appears on the open page, without a reload
            web = {
                "apiVersion": API["Kustomization"],
                "kind": "Kustomization",
                "metadata": {"name": "web", "namespace": ns},
            }
            failed = cond("Ready", "False", "HealthCheckFailed", "health check failed after 30s: timeout")
            await page.evaluate("() => { window.sameDocument = true }")
            await kube.patch_status(web, {"conditions": [failed]})
            await page.wait_for_function(
                "() => document.getElementById('objects').innerText.includes('HealthCheckFailed')",
                timeout=2000,
            )
            assert navigations == []
            assert await page.evaluate("() => window.sameDocument === true")
            await screenshot(page, artifacts, "live-change")

            # the search box finds an object by a revision prefix (a GET form: a navigation)
            await page.locator("input[name=q]").fill(WEB_REVISION.removeprefix("main@sha1:")[:7])
            async with page.expect_navigation():
                await page.get_by_role("button", name="Search").click()
            found = await stack_rows(page)
            assert f"Kustomization {ns}/web" in found, found
            assert f"Terraform {ns}/vpc" not in found, found
            await screenshot(page, artifacts, "search")
            navigations.clear()

            assert tab.dialogs == []
            assert_nothing_executed(tab, service.url)

            # the API server gone: the freshness indicator turns red, still without a reload
            freshness = page.locator("#freshness")
            assert await freshness.get_attribute("data-state") == "live"
            own.stop_apiserver()
            await page.wait_for_function(
                "() => document.getElementById('freshness').dataset.state === 'stale'", timeout=15000
            )
            color = await freshness.evaluate("e => getComputedStyle(e).backgroundColor")
            assert (await freshness.inner_text()).endswith("data stale")
            assert color == RED
            # first the watches break, then the probe finds the API server gone: both say STALE
            assert (await contents(page, "header p.banner"))[0].startswith("STALE: ")
            unreachable = "STALE: the Kubernetes API server is unreachable; this is the last known state."
            await page.wait_for_function(
                "t => document.querySelector('header p.banner').innerText === t",
                arg=unreachable,
                timeout=15000,
            )
            assert await freshness.get_attribute("data-state") == "stale"
            assert navigations == []
            await screenshot(page, artifacts, "api-server-gone")
