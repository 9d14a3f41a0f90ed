"""At the deadline the wait asks the API server whether it still answers (GET /version): one that
hangs is not heard, so the verdict becomes "cannot wait" (convergence.judge), never "timed out"."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from tests.controlplane.harness import free_port
from tests.kube.fake import client_for_url
from watcher import waiting

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def _answers(request: web.Request) -> web.StreamResponse:
    return web.json_response({"major": "1", "minor": "34"})


async def _hangs(request: web.Request) -> web.StreamResponse:
    await asyncio.Event().wait()  # accepted, never answered: what a hung API server does
    raise AssertionError("unreachable")


async def _fails(request: web.Request) -> web.StreamResponse:
    return web.json_response({"kind": "Status", "code": 503}, status=503)


@pytest.fixture(autouse=True)
def _short_patience(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "CONFIRM_WITHIN", timedelta(milliseconds=300))


@contextlib.asynccontextmanager
async def serving(handler: web.Handler) -> AsyncIterator[str]:
    """An API server whose GET /version is `handler`, at the URL yielded."""
    app = web.Application()
    app.router.add_get("/version", handler)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("handler", "heard"),
    [
        pytest.param(_answers, AT, id="answers"),
        pytest.param(_hangs, None, id="hangs"),
        pytest.param(_fails, None, id="answers-503"),
    ],
)
async def test_the_api_server_is_heard_at_the_deadline_only_if_it_answers(
    handler: web.Handler, heard: datetime | None
) -> None:
    async with serving(handler) as url, client_for_url(url) as api:
        assert await waiting.answered_at(api, lambda: AT) == heard
