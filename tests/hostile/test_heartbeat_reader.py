"""Hostile answers on a controller's metrics port: whatever answers (or does not), the model gets
an Unreadable naming why, counted by result, never a partial read and never no read at all."""

from __future__ import annotations

import asyncio
import gzip
import socket
from dataclasses import dataclass

import pytest
from aiohttp import web

from tests.kube.test_heartbeat_reader import KC, Handler, body, read_once, results, serving, target
from watcher.model.ingest.controller_metrics import Unreadable

LIMIT = 4096
"""The reader's max_bytes in these cases."""
VALID = 'controller_runtime_reconcile_total{controller="kustomization",result="success"} 3\n'


async def slow(_: web.Request) -> web.StreamResponse:
    await asyncio.sleep(30)
    return web.Response(text=VALID)


def status(code: int) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(status=code, text="forbidden by RBAC proxy")

    return handler


async def endless(request: web.Request) -> web.StreamResponse:
    """Chunked, no Content-Length, never ending: only counting the bytes stops it."""
    response = web.StreamResponse()
    await response.prepare(request)
    while True:
        await response.write(b"# " + b"x" * 1000 + b"\n")


async def gzip_bomb(_: web.Request) -> web.StreamResponse:
    """A few hundred bytes that decompress to 10 MiB."""
    packed = gzip.compress(b"# " + b"x" * (10 * 2**20) + b"\n")
    return web.Response(body=packed, headers={"Content-Encoding": "gzip"})


async def redirect(_: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")


@dataclass
class Case:
    handler: Handler
    result: str
    reason: str
    """The Unreadable reason after "pod kc-0 (http://127.0.0.1:PORT/metrics): "."""


CASES = {
    "a_controller_that_does_not_answer_in_time_is_a_timeout": Case(slow, "timeout", "no answer within 0.5s"),
    "a_403_from_a_proxy_is_an_http_error": Case(status(403), "http_error", "HTTP 403"),
    "a_redirect_is_not_followed": Case(redirect, "http_error", "HTTP 302"),
    "a_body_past_the_limit_is_refused_whole": Case(
        body(VALID + "#" * LIMIT), "too_large", f"the answer is larger than {LIMIT} bytes"
    ),
    "an_endless_body_is_refused_at_the_limit": Case(
        endless, "too_large", f"the answer is larger than {LIMIT} bytes"
    ),
    "a_gzip_bomb_is_refused_at_the_limit_of_its_decompressed_bytes": Case(
        gzip_bomb, "too_large", f"the answer is larger than {LIMIT} bytes"
    ),
    "an_html_page_is_not_a_controllers_metrics": Case(
        body("<html>login</html>"),
        "unparsable",
        "no controller_runtime_reconcile_total series: not a controller-runtime metrics endpoint",
    ),
    "bytes_that_are_not_text_are_unparsable": Case(
        body(b"\xff\xfe" + VALID.encode()), "unparsable", "the exposition is not UTF-8 text (byte 0)"
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("name", CASES)
async def test_a_hostile_answer_is_unreadable_naming_why(name: str) -> None:
    case = CASES[name]
    async with serving(case.handler) as port:
        delivered, telemetry = await read_once([target(port)], read_timeout=0.5, max_bytes=LIMIT)
    assert delivered == [(KC, Unreadable(f"pod kc-0 (http://127.0.0.1:{port}/metrics): {case.reason}"))]
    assert results(telemetry) == {case.result: 1}


async def test_nothing_listening_is_unreachable_naming_the_connection_error() -> None:
    port = free_port()
    delivered, telemetry = await read_once([target(port)], read_timeout=0.5)
    (_, read) = delivered[0]
    assert isinstance(read, Unreadable)
    assert read.reason.startswith(f"pod kc-0 (http://127.0.0.1:{port}/metrics): unreachable: Cannot connect")
    assert results(telemetry) == {"unreachable": 1}
