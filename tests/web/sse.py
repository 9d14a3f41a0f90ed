"""Reading a server-sent-events stream the way a browser's EventSource does (fields, blank line
ends an event), and publishing hand-made evaluations the way the live model does."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from watcher.generations import Generations
from watcher.model.evaluation import Evaluation


@dataclass
class Event:
    name: str
    id: str | None
    data: dict[str, Any]
    raw: bytes


async def next_event(response: aiohttp.ClientResponse, *, within: float = 5.0) -> Event | None:
    """The next event with data (a `retry:`-only block is skipped); None at the end of the stream.
    `within` is a deadline for a promised event, not a measurement."""
    name, ident, data, raw = "message", None, [], b""
    async with asyncio.timeout(within):
        while True:
            line = await response.content.readline()
            if not line:
                return None
            raw += line
            text = line.decode().rstrip("\n")
            if text == "":
                if data:
                    return Event(name, ident, orjson.loads("\n".join(data)), raw)
                name, ident, raw = "message", None, b""
                continue
            key, _, value = text.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                name = value
            elif key == "id":
                ident = value
            elif key == "data":
                data.append(value)


async def next_named(response: aiohttp.ClientResponse, name: str, *, within: float = 5.0) -> Event:
    """The next event called `name`, skipping others (heartbeats between evaluations)."""
    async with asyncio.timeout(within):
        while True:
            event = await next_event(response, within=within)
            assert event is not None, f"the stream ended before an {name} event"
            if event.name == name:
                return event


@dataclass
class Board:
    """Where a test publishes evaluations: `latest` and the generation counter the hub waits on."""

    latest: Evaluation | None = None
    published: Generations = field(default_factory=Generations)

    def publish(self, evaluation: Evaluation) -> None:
        self.latest = evaluation
        self.published.bump()
