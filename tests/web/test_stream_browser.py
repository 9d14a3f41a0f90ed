"""live.js in a real headless Chromium, fed by the real stream hub behind the real hardened app:
a page of object rows (parts in `<tbody id="objects">`) that changes in place, never reloads,
says how fresh it is, and turns red when the data is stale or the stream is gone.

The page here is a skeleton made for the test (the indicator, one container, the script, the
policy the real page uses); the real page at `/` is tested end to end in test_pane_v2_browser.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page

from tests.web.conftest import Watched
from tests.web.incident import HOSTILE, incident
from tests.web.sse import Board
from tests.web.test_browser import assert_nothing_executed, live_telemetry, texts
from tests.web.test_stream import failing, namespace_of, rows, without
from watcher.telemetry import Telemetry
from watcher.web.freshness import CSS, NOSCRIPT_REFRESH, indicator, script_tag, with_script
from watcher.web.page import PageState as State
from watcher.web.page import security_headers
from watcher.web.server import hardened_app, watch_status
from watcher.web.stream import StreamHub, install

RED, GREEN = "rgb(197, 34, 31)", "rgb(230, 244, 234)"


@dataclasses.dataclass
class Served:
    url: str
    board: Board
    telemetry: Telemetry
    server: TestServer

    def later(self, change: Any = None) -> None:
        latest = self.board.latest
        assert latest is not None
        objects = change(list(latest.objects)) if change is not None else latest.objects
        self.board.publish(dataclasses.replace(latest, now=datetime.now(UTC), objects=objects))


@asynccontextmanager
async def serving() -> AsyncIterator[Served]:
    board, telemetry = Board(), live_telemetry()
    board.publish(dataclasses.replace(incident(), now=datetime.now(UTC) - timedelta(seconds=3)))

    def state() -> State:
        return State(board.latest, watch_status(telemetry, board.latest), objects=5, load_errors=0)

    async def page(request: web.Request) -> web.Response:
        now = state()
        body = "".join(p.html for p in rows(now, namespace_of(request)))
        html = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"{NOSCRIPT_REFRESH.format(seconds=10)}"
            f"<title>rows</title><style>{CSS}</style></head><body>"
            f"<header>{indicator(now.evaluation, now.status, now=datetime.now(UTC))}</header>"
            f'<table><tbody id="objects">{body}</tbody></table>{script_tag()}</body></html>'
        )
        headers = with_script(security_headers(CSS))
        return web.Response(text=html, content_type="text/html", headers=headers)

    hub = StreamHub(state=state, view=namespace_of, parts=rows, published=board.published, heartbeat=0.5)
    app = hardened_app()
    app.router.add_get("/", page)
    install(app, hub)
    async with TestServer(app) as server:
        yield Served(str(server.make_url("/")), board, telemetry, server)


async def cells(page: Page, column: int) -> list[str]:
    return await texts(page, f"#objects td:nth-child({column})")


async def freshness(page: Page) -> tuple[str, str, str]:
    shown = page.locator("#freshness")
    color = await shown.evaluate("e => getComputedStyle(e).backgroundColor")
    return await shown.inner_text(), str(await shown.get_attribute("data-state")), color


async def until(page: Page, script: str, arg: Any = None) -> None:
    """Wait (a deadline, not a measurement) for `script` to be true in the page."""
    await page.wait_for_function(script, arg=arg, timeout=5000)


async def opened(tab: Watched, url: str) -> Page:
    page = tab.page
    response = await page.goto(url)
    assert response is not None
    assert response.status == 200
    await until(page, "() => /updated \\d+ s ago/.test(document.getElementById('freshness').textContent)")
    await page.evaluate("() => { window.sameDocument = true }")
    return page


async def still_the_same_document(page: Page) -> bool:
    return bool(await page.evaluate("() => window.sameDocument === true"))


async def test_rows_change_in_place_without_a_reload(tab: Watched) -> None:
    async with serving() as served:
        page = await opened(tab, served.url)
        assert await cells(page, 2) == ["Ready", "Ready", "DependencyNotReady", "Ready", "Ready"]
        served.later(failing("frontend"))
        await until(page, "() => document.body.innerText.includes('ReconciliationFailed')")
        assert await cells(page, 1) == ["Current", "Current", "InProgress", "Failed", "Current"]
        served.later(without("dns"))
        await until(page, "() => document.querySelectorAll('#objects tr').length === 4")
        assert await cells(page, 1) == ["Current", "InProgress", "Failed", "Current"]
        assert await still_the_same_document(page)
        assert_nothing_executed(tab, served.url.removesuffix("/"))


async def test_hostile_text_from_the_stream_stays_text(tab: Watched) -> None:
    async with serving() as served:
        page = await opened(tab, served.url)
        served.later(failing("vpc", reason=HOSTILE))
        await until(page, "t => document.body.innerText.includes(t)", HOSTILE)
        assert (await cells(page, 2))[0] == HOSTILE
        assert await page.locator("img").count() == 0
        assert await page.locator("script").count() == 1, "only the page's own"
        assert await still_the_same_document(page)
        assert_nothing_executed(tab, served.url.removesuffix("/"))


async def test_the_indicator_ticks_green_then_turns_red_when_the_data_goes_stale(tab: Watched) -> None:
    async with serving() as served:
        page = await opened(tab, served.url)
        text, state, color = await freshness(page)
        assert (state, color) == ("live", GREEN)
        served.telemetry.up = False  # the API server is unreachable: the next heartbeat says so
        await until(page, "() => document.getElementById('freshness').dataset.state === 'stale'")
        text, state, color = await freshness(page)
        assert text.endswith("data stale")
        assert color == RED
        assert await still_the_same_document(page)


async def test_the_indicator_turns_red_when_the_stream_drops(tab: Watched) -> None:
    async with serving() as served:
        page = await opened(tab, served.url)
        await served.server.close()
        await until(page, "() => document.getElementById('freshness').dataset.state === 'lost'")
        text, _, color = await freshness(page)
        assert text.endswith("stream lost, not updating")
        assert color == RED


async def test_without_javascript_the_server_rendered_indicator_is_honest_and_the_page_refreshes(
    browser: Browser,
) -> None:
    context = await browser.new_context(java_script_enabled=False)
    try:
        page = await context.new_page()
        async with serving() as served:
            await page.goto(served.url)
            text, state, color = await freshness(page)
            assert re.fullmatch(r"updated \d+ s ago", text)
            assert (state, color) == ("live", GREEN)
            assert await page.locator("meta[http-equiv=refresh]").get_attribute("content") == "10"
            served.telemetry.up = False
            await page.reload()
            text, state, color = await freshness(page)
            assert re.fullmatch(r"updated \d+ s ago · data stale", text)
            assert (state, color) == ("stale", RED)
    finally:
        await context.close()
