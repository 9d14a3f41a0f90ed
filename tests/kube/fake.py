"""A tiny scripted API server for fast reflector tests (in addition to the real one, never instead).

It serves one collection path. Each list or watch request takes the next scripted answer;
with none left a list fails with 500 and a watch stays open and silent, so a test ends on
its own terms. Every request is recorded (kind, query, arrival time) for the assertions.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from tests.controlplane.harness import free_port

Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Seen:
    kind: str
    query: Mapping[str, str]
    at: float


def obj(name: str, rv: str, *, namespace: str = "default", status: Any = None) -> dict[str, Any]:
    """A Kustomization as the API server would send it."""
    found: dict[str, Any] = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {"interval": "10m"},
    }
    if status is not None:
        found["status"] = status
    return found


def page(items: Iterable[dict[str, Any]], rv: str, *, cont: str = "") -> Answer:
    async def answer(request: web.Request) -> web.StreamResponse:
        # Like the API server, list items carry no apiVersion/kind.
        bare = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
        meta = {"resourceVersion": rv, **({"continue": cont} if cont else {})}
        return web.json_response({"kind": "KustomizationList", "metadata": meta, "items": bare})

    return answer


def status(code: int, message: str = "", *, headers: Mapping[str, str] | None = None) -> Answer:
    async def answer(request: web.Request) -> web.StreamResponse:
        body = {"kind": "Status", "status": "Failure", "code": code, "message": message or f"code {code}"}
        return web.json_response(body, status=code, headers=dict(headers or {}))

    return answer


def reset() -> Answer:
    """Drop the connection without an answer, as a proxy resetting it would."""

    async def answer(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.abort()
        return web.Response()

    return answer


def event(kind: str, item: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": item}) + b"\n"


def gone_event(message: str = "too old resource version") -> bytes:
    return event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": message})


def bookmark(rv: str) -> bytes:
    return event(
        "BOOKMARK",
        {
            "kind": "Kustomization",
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "metadata": {"resourceVersion": rv},
        },
    )


def stream(
    *lines: bytes,
    hold: bool = False,
    split: bool = False,
    trickle: int = 0,
    paced: float = 0.0,
    written: asyncio.Event | None = None,
) -> Answer:
    """A watch response writing `lines`, then closing (or staying open and silent if `hold`).
    With `split`, every line is sent in two writes, as a proxy may cut it; with `trickle`, in
    writes of that many bytes, as a hostile or starved proxy may pass it on; with `paced`, the
    lines are that many seconds apart, as a controller's status writes come. `written` is set
    once the last line is written."""

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for line in lines:
            if split:
                await response.write(line[: len(line) // 2])
                await asyncio.sleep(0.01)
                await response.write(line[len(line) // 2 :])
            elif trickle:
                for start in range(0, len(line), trickle):
                    await response.write(line[start : start + trickle])
                    await asyncio.sleep(0.002)
            else:
                await response.write(line)
            if paced:
                await asyncio.sleep(paced)
        if written is not None:
            written.set()
        if hold:
            await asyncio.Event().wait()
        return response

    return answer


class FakeApiServer:
    """Serves PATH; script answers with `lists` and `watches`."""

    PATH = "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations"

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.lists: deque[Answer] = deque()
        self.watches: deque[Answer] = deque()
        self.seen: list[Seen] = []
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self, kind: str) -> list[Seen]:
        return [s for s in self.seen if s.kind == kind]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        kind = "watch" if request.query.get("watch") == "true" else "list"
        self.seen.append(Seen(kind, dict(request.query), time.monotonic()))
        queue = self.watches if kind == "watch" else self.lists
        if queue:
            return await queue.popleft()(request)
        if kind == "watch":
            return await stream(hold=True)(request)
        return await status(500, "nothing scripted")(request)

    async def _version(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"major": "1", "minor": "34"})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(self.PATH, self._handle)
        app.router.add_get("/version", self._version)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def client_for_url(url: str) -> ApiClient:
    configuration = Configuration(host=url)
    return ApiClient(configuration=configuration)
