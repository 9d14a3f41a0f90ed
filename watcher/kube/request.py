"""One list or watch request, and what its answer tells the reflector's loop to do.

A request either yields a 200 response or raises what to do next: Gone (the history we need is
compacted away: relist), Forbidden (RBAC: degrade this kind alone), Retry (back off, honouring
Retry-After on 429), Interrupted (the watcher closed the stream on purpose). The same meanings
come from a watch's ERROR events (watch_error), so both paths share one set of outcomes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from watcher.kube.client import CONNECTION_ERRORS, UNREACHABLE, classify, describe_error, get, retry_after
from watcher.kube.link import Link
from watcher.kube.resources import Resource


class Gone(Exception):
    pass


class Forbidden(Exception):
    pass


class Retry(Exception):
    def __init__(self, reason: str, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.reason, self.delay = reason, delay


class Interrupted(Exception):
    """The watcher closed the stream on purpose (connectivity lost, stopping)."""


async def open_request(
    api: Any,
    resource: Resource,
    pairs: list[tuple[str, str]],
    *,
    link: Link,
    counter: dict[str, int],
    limits: aiohttp.ClientTimeout,
    answer_within: float,
) -> aiohttp.ClientResponse:
    """A 200 response to GET `resource` with these query `pairs` (and its field selector), or
    the exception saying what to do about the failure; `counter` counts results by kind. No
    answer within `answer_within` seconds counts as not reaching the server."""
    query = pairs + ([("fieldSelector", resource.field_selector)] if resource.field_selector else [])
    try:
        async with asyncio.timeout(answer_within):
            response = await get(api, resource.path, query, limits=limits)
    except CONNECTION_ERRORS as error:
        counter["connection_error"] = counter.get("connection_error", 0) + 1
        if isinstance(error, UNREACHABLE):
            link.lost(error)
        raise Retry("connection_error", describe_error(error)) from None
    link.reached()
    result = classify(response.status)
    counter[result] = counter.get(result, 0) + 1
    if result == "ok":
        link.accepted()
        return response
    try:
        body = await response.read()
    except CONNECTION_ERRORS:
        body = b""
    finally:
        response.release()
    message = status_message(body) or f"HTTP {response.status}"
    if result == "gone":
        raise Gone(message)
    if result == "forbidden":
        raise Forbidden(message)
    if response.status == 401:
        link.rejected(message)
        raise Retry("unauthorized", f"HTTP 401: {message}")
    delay = retry_after(response.headers.get("Retry-After")) if result == "throttled" else None
    raise Retry(result, f"HTTP {response.status}: {message}", delay=delay)


def watch_error(status: Mapping[str, Any]) -> Gone | Forbidden | Retry:
    """What a watch's ERROR event (a Status object) means, as the exception to raise."""
    code = status.get("code")
    message = str(status.get("message") or status.get("reason") or "watch error")
    result = classify(code) if isinstance(code, int) else "client_error"
    if result == "gone":
        return Gone(message)
    if result == "forbidden":
        return Forbidden(message)
    return Retry(result, f"watch ERROR event {code}: {message}")


def status_message(body: bytes) -> str:
    """The `message` of a Kubernetes Status body, else the first line of the body."""
    try:
        status = orjson.loads(body)
        if isinstance(status, dict) and isinstance(status.get("message"), str):
            return str(status["message"])
    except orjson.JSONDecodeError:
        pass
    text = body.decode(errors="replace").strip()
    return text.splitlines()[0][:300] if text else ""
