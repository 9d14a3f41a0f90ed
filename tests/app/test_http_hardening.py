"""What anyone who reaches the port gets: the same protective headers on every response (errors
included), no versions given away, and malformed requests answered 400 and logged at debug as
one line, never as an ERROR with a traceback. Served for real by `server.start` on a local port."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.registry import CollectorRegistry

from tests.controlplane.harness import free_port
from watcher.telemetry import Telemetry
from watcher.web import server


@pytest.fixture
async def url() -> AsyncIterator[str]:
    app = server.create_app(telemetry=Telemetry(), source=lambda: None, registry=CollectorRegistry())
    listen = f"127.0.0.1:{free_port()}"
    runner = await server.start(app, listen)
    yield f"http://{listen}"
    await runner.cleanup()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        pytest.param("GET", "/", 200, id="page"),
        pytest.param("GET", "/metrics", 200, id="metrics"),
        pytest.param("GET", "/api/v1/findings", 200, id="findings"),
        pytest.param("GET", "/api/v1/timeline", 503, id="timeline-not-kept"),
        pytest.param("GET", "/healthz", 200, id="healthz"),
        pytest.param("GET", "/readyz", 503, id="readyz"),
        pytest.param("GET", "/nothing-here", 404, id="not-found"),
        pytest.param("POST", "/api/v1/findings", 405, id="method-not-allowed"),
    ],
)
async def test_every_response_carries_csp_nosniff_no_store_and_a_server_header_without_versions(
    url: str, method: str, path: str, status: int
) -> None:
    async with aiohttp.ClientSession() as http, http.request(method, url + path) as response:
        assert response.status == status
        headers = response.headers
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    assert headers["Server"] == "stalewatch"


async def test_the_page_keeps_its_own_csp_that_allows_its_stylesheet(url: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(url + "/") as response:
        assert "style-src 'sha256-" in response.headers["Content-Security-Policy"]


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", id="url-over-8kb"),
        pytest.param(b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n", id="bad-method"),
        pytest.param(
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", id="tls-on-the-http-port"
        ),
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", id="bad-header"),
    ],
)
async def test_a_malformed_request_is_answered_400_and_logged_at_debug_in_one_line(
    url: str, request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = url.removeprefix("http://").split(":")
    with caplog.at_level(logging.DEBUG, logger="aiohttp"):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(request_bytes)
        await writer.drain()
        answer = await reader.read(4096)
        writer.close()
        await asyncio.sleep(0.05)
    assert answer.startswith(b"HTTP/1.0 400") or answer.startswith(b"HTTP/1.1 400"), answer[:80]
    assert b"\r\nServer: stalewatch\r\n" in answer
    logged = [r for r in caplog.records if r.name.startswith("aiohttp")]
    assert [r.levelname for r in logged] == ["DEBUG"]
    assert "malformed request" in logged[0].getMessage()
    assert logged[0].exc_info is None
    assert "\n" not in logged[0].getMessage()
    assert "Traceback" not in caplog.text
