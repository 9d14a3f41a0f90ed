"""A real headless Chromium (Debian's, not a downloaded one) driven by Playwright, and a page
that records everything a hostile string could make the browser do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from playwright.async_api import Browser, ConsoleMessage, Dialog, Page, Request, async_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class Watched:
    """A browser tab plus what it did besides rendering: dialogs (alert() ran), console
    errors (e.g. a CSP violation) and every request (an injected <img> would fetch)."""

    page: Page
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@pytest.fixture
async def tab(browser: Browser) -> AsyncIterator[Watched]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    watched = Watched(page)

    async def on_dialog(dialog: Dialog) -> None:
        watched.dialogs.append(dialog.message)
        await dialog.dismiss()

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.errors.append(message.text)

    def on_request(request: Request) -> None:
        watched.requests.append(request.url)

    page.on("dialog", on_dialog)
    page.on("console", on_console)
    page.on("request", on_request)
    try:
        yield watched
    finally:
        await context.close()
