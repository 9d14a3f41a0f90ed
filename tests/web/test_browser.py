"""The page in a real headless Chromium, served by the real aiohttp app: what on-call sees,
that hostile text stays text (no element, no dialog, no request), and that the browser enforces
the policy without blocking the page's own stylesheet.

Once from a hand-made incident, once end to end: the tofu-controller outage enacted in the real
API server, watched by the real `stalewatch run`, read in the browser. And, for each state of the
watch, the banner saying whether to trust the page, seen before anything else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from playwright.async_api import Page, Response

from tests.app.test_incidents import POD, THRESHOLDS, TOFU_IMAGE, Expect, both, patch, tofu_setup
from tests.controlplane.harness import ControlPlane
from tests.kube.objects import cond, deployment_status, waiting
from tests.kube.support import running, settings_for, until_no_problem
from tests.kubeclient import Kube
from tests.model.builders import NOW
from tests.web.cluster import HOSTILE as HOSTILE_IMG
from tests.web.cluster import cluster
from tests.web.cluster import incident as stack_incident
from tests.web.conftest import Watched
from tests.web.incident import HOSTILE, incident
from watcher.export.metrics import build_registry
from watcher.model.evaluation import Evaluation
from watcher.telemetry import Telemetry
from watcher.web.freshness import SCRIPT
from watcher.web.page import SECURITY_HEADERS
from watcher.web.server import create_app

CRITICAL_RED = "rgb(197, 34, 31)"
LIVE_GREEN, STALE_PINK, PENDING_YELLOW = "rgb(230, 244, 234)", "rgb(252, 232, 230)", "rgb(254, 247, 224)"


def live_telemetry(
    *, up: bool = True, synced: bool = True, live: bool = True, forbidden: bool = False
) -> Telemetry:
    telemetry = Telemetry(up=up, started=True)
    stats = telemetry.kind("kustomize.toolkit.fluxcd.io", "Kustomization")
    stats.synced, stats.live = synced, live
    stats.objects = 4
    if forbidden:
        telemetry.kind("infra.contrib.fluxcd.io", "Terraform").forbidden = True
    return telemetry


@asynccontextmanager
async def serving(telemetry: Telemetry) -> AsyncIterator[str]:
    """The hand-made incident behind the real app, as `telemetry` tells it; yields the page's URL."""
    evaluation: Evaluation = incident()
    registry = build_registry(lambda: evaluation)
    app = create_app(telemetry=telemetry, source=lambda: evaluation, registry=registry)
    async with TestServer(app) as server:
        yield str(server.make_url("/"))


@pytest.fixture
async def served() -> AsyncIterator[str]:
    async with serving(live_telemetry()) as url:
        yield url


async def open_page(tab: Watched, url: str) -> Response:
    response = await tab.page.goto(url)
    assert response is not None
    assert response.status == 200
    return response


async def texts(page: Page, selector: str) -> list[str]:
    return [text.strip() for text in await page.locator(selector).all_inner_texts()]


async def evidence(page: Page, root: str) -> dict[str, str]:
    """Opens the root's collapsed evidence (it must start closed) and reads it."""
    details = page.locator(f"{root} details")
    assert await details.get_attribute("open") is None
    assert not await details.locator("dl").is_visible()
    await details.locator("summary").click()
    keys = await texts(page, f"{root} dl.evidence dt")
    return dict(zip(keys, await texts(page, f"{root} dl.evidence dd"), strict=True))


def assert_nothing_executed(tab: Watched, url: str) -> None:
    """No alert() ran, no CSP violation or other error was logged, and nothing but the page
    itself was fetched (an injected <img src=x> would have been)."""
    assert tab.dialogs == []
    assert tab.errors == []
    assert [r for r in tab.requests if not r.startswith(url)] == []


async def assert_no_injected_elements(page: Page) -> None:
    """No element the cluster's text could have made: the one script is the page's own."""
    assert await page.locator("script").all_inner_texts() == [SCRIPT]
    assert await page.locator("img").count() == 0


async def test_in_chromium_the_incident_reads_root_first_and_hostile_text_stays_text(
    tab: Watched, served: str, tmp_path: Path
) -> None:
    response = await open_page(tab, served)
    headers = response.headers
    assert headers["content-security-policy"] == SECURITY_HEADERS["Content-Security-Policy"]
    assert (headers["x-content-type-options"], headers["referrer-policy"]) == ("nosniff", "no-referrer")
    page = tab.page
    assert await texts(page, "article h3") == [
        "CRITICAL ControllerDown: Deployment flux-system/tofu-controller",
        "WARNING RevisionSkew: Kustomization web/frontend",
    ]
    assert await texts(page, "article.critical dl.blast li") == [
        "flux-system/apps DependencyBlocked, StuckReconciling",
        "flux-system/dns StatusStale",
        "flux-system/vpc StatusStale",
    ]
    assert await page.locator("article.warning p.message").inner_text() == HOSTILE
    assert (await evidence(page, "article.critical"))["message"] == HOSTILE
    await assert_no_injected_elements(page)
    style = await page.locator("article.critical").evaluate("e => getComputedStyle(e).borderLeftColor")
    assert style == CRITICAL_RED, "the CSP blocked the page's own stylesheet"
    await page.screenshot(path=tmp_path / "incident.png", full_page=True)

    await page.get_by_role("link", name="web", exact=True).click()
    assert page.url.endswith("/?namespace=web#objects")
    assert await texts(page, "#objects td:nth-child(3)") == ["frontend", "fleet"]
    assert_nothing_executed(tab, served.removesuffix("/"))


BANNERS = [
    pytest.param(
        live_telemetry(up=False),
        ["STALE: the Kubernetes API server is unreachable; this is the last known state."],
        STALE_PINK,
        id="api_server_unreachable",
    ),
    pytest.param(
        live_telemetry(synced=False),
        ["Not yet synced: initial list not finished for Kustomization.kustomize.toolkit.fluxcd.io."],
        PENDING_YELLOW,
        id="initial_list_unfinished",
    ),
    pytest.param(
        live_telemetry(live=False),
        ["STALE: a watch is broken; what follows may lag the cluster."],
        STALE_PINK,
        id="watch_broken",
    ),
    pytest.param(
        live_telemetry(forbidden=True),
        [
            "Live: every watch is synced and the API server answers.",
            "Cannot see (403 Forbidden, not judged): Terraform.infra.contrib.fluxcd.io",
        ],
        LIVE_GREEN,
        id="live_with_a_forbidden_kind_named",
    ),
]


@pytest.mark.parametrize(("telemetry", "banners", "color"), BANNERS)
async def test_in_chromium_whether_to_trust_the_page_is_the_first_thing_it_says(
    tab: Watched, telemetry: Telemetry, banners: list[str], color: str
) -> None:
    async with serving(telemetry) as url:
        await open_page(tab, url)
        page = tab.page
        assert await texts(page, "header p.banner") == banners
        first = page.locator("header p").first
        assert await first.inner_text() == banners[0]
        assert await first.evaluate("e => getComputedStyle(e).backgroundColor") == color
        above, roots = await first.bounding_box(), await page.locator("#roots").bounding_box()
        assert above is not None
        assert roots is not None
        assert above["y"] + above["height"] <= roots["y"], "the banner must be read before the root causes"
        assert_nothing_executed(tab, url.removesuffix("/"))


@pytest.mark.cluster
async def test_the_real_stalewatch_run_shows_a_tofu_outage_in_chromium(
    control_plane: ControlPlane, kube: Kube, namespace: str, tab: Watched, tmp_path: Path
) -> None:
    """The pod's waiting message is written by whoever can write Pod status: here, an attacker."""
    for obj in tofu_setup(namespace):
        await kube.create(obj)
    settings = settings_for(control_plane.kubeconfig, include_namespaces=[namespace], thresholds=THRESHOLDS)
    outage = both(
        patch("Pod", "tofu-controller" + POD, waiting("ImagePullBackOff", HOSTILE, image=TOFU_IMAGE)),
        patch("Deployment", "tofu-controller", deployment_status(0)),
        patch(
            "Kustomization",
            "apps",
            {"conditions": [cond("Ready", "False", "DependencyNotReady", "dependency 'vpc' is not ready")]},
        ),
    )
    expect = Expect(
        ("ControllerDown", "Deployment", "tofu-controller"),
        [
            ("StatusStale", "Terraform", "vpc"),
            ("StatusStale", "Terraform", "dns"),
            ("DependencyBlocked", "Kustomization", "apps"),
        ],
    )
    async with running(settings) as service:
        await outage(kube, namespace)

        async def problem() -> str:
            return expect.problem((await service.findings())["findings"])

        await until_no_problem(problem, within=5, what="the outage served as one root")
        response = await open_page(tab, service.url + "/")
        assert "content-security-policy" in response.headers
        page = tab.page
        assert await texts(page, ".banner") == ["Live: every watch is synced and the API server answers."]
        assert await texts(page, "article h3") == [
            f"CRITICAL ControllerDown: Deployment {namespace}/tofu-controller"
        ]
        assert await texts(page, "article dl.blast dt") == ["Kustomization (1)", "Terraform (2)"]
        assert await texts(page, "article dl.blast li") == [
            f"{namespace}/apps DependencyBlocked",
            f"{namespace}/dns StatusStale",
            f"{namespace}/vpc StatusStale",
        ]
        shown = await evidence(page, "article.critical")
        assert (shown["reason"], shown["message"]) == ("ImagePullBackOff", HOSTILE)
        await assert_no_injected_elements(page)
        await page.screenshot(path=tmp_path / "tofu-outage.png", full_page=True)

        await open_page(tab, f"{service.url}/?namespace={namespace}")
        names = await texts(page, "#objects td:nth-child(3)")
        assert names == ["apps", "dns", "vpc", "infra"], "the objects with findings come first"
        assert_nothing_executed(tab, service.url)


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@asynccontextmanager
async def serving_stacks() -> AsyncIterator[str]:
    """The hand-built tofu stack (tests/web/cluster.py) behind the real app, with the live
    model's objects, so the stacks, stack and object pages are the ones `stalewatch run` serves."""
    tofu = cluster(stack_incident(message=HOSTILE_IMG))
    evaluation = tofu.model.evaluate(NOW)
    app = create_app(
        telemetry=live_telemetry(),
        source=lambda: evaluation,
        registry=build_registry(lambda: evaluation),
        model=tofu.model,
    )
    async with TestServer(app) as server:
        yield str(server.make_url("/"))


async def test_in_chromium_a_stack_opens_the_search_finds_a_revision_prefix_and_text_stays_text(
    tab: Watched,
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with serving_stacks() as url:
        await open_page(tab, url)
        page = tab.page
        assert await texts(page, "#stacks-rows tr.stackhead td:first-child") == [
            "▸ Kustomization flux-system/flux-system"
        ]
        assert await page.locator("#stacks-rows tr:not(.stackhead)").count() == 0, "collapsed by default"
        await page.locator("#stacks-rows a.toggle").click()
        assert "open=flux-system%2Fflux-system" in page.url
        rows = await texts(page, "#stacks-rows tr:not(.stackhead) td:nth-child(2)")
        assert rows[-2:] == ["stale (cached: InProgress)"] * 2
        await page.screenshot(path=ARTIFACTS / "stacks-open.png", full_page=True)

        await page.locator("#search input[name=q]").fill("aaaaaaaa")
        await page.locator("#search input[value=stale]").check()
        await page.locator("#search button").click()
        await page.wait_for_url("**/?q=aaaaaaaa&status=stale")
        found = await texts(page, "#stacks-rows tr:not(.stackhead) td:first-child")
        assert found == [
            "Kustomization flux-system/flux-system",
            "Kustomization flux-system/infra",
            "Terraform flux-system/dns",
            "Terraform flux-system/vpc",
        ]
        await page.screenshot(path=ARTIFACTS / "stacks-search.png", full_page=True)

        await page.get_by_role("link", name="Terraform flux-system/vpc").click()
        assert page.url.endswith("/objects/Terraform/flux-system/vpc")
        messages = await texts(page, "#object-conditions td.message")
        assert messages[0] == f"{HOSTILE_IMG}: main@sha1:{'a' * 40}"
        assert await page.locator("script").count() == 0, "the object page runs no script at all"
        assert await page.locator("img").count() == 0
        await page.screenshot(path=ARTIFACTS / "object-page.png", full_page=True)
        assert_nothing_executed(tab, url.removesuffix("/"))
