"""Shared by the watcher tests: a store sink, polling with a deadline, and a running stalewatch."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from tests.controlplane.harness import free_port
from watcher.app import Runtime
from watcher.config import Settings
from watcher.kube.client import load_client
from watcher.kube.reflector import WatchOptions
from watcher.kube.resources import Resource

T = TypeVar("T")

FAST = WatchOptions(
    watch_timeout=30,
    inactivity_grace=5,
    settle=0.2,
    backoff_initial=0.05,
    backoff_cap=0.5,
    forbidden_retry=0.5,
    request_timeout=10,
    probe_interval=0.3,
    probe_timeout=5,
)
"""Production logic with test-sized waits."""


async def poll(check: Callable[[], Awaitable[T] | T], *, within: float = 2.0, what: str = "") -> T:
    """The first truthy result of `check` (plain or async) within `within` seconds, else fail
    with the last one. A deadline to wait for a promise, not a measurement of how long it took."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        value: T = await found if inspect.isawaitable(found) else found  # type: ignore[assignment]
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g}s: {what}; last: {value!r}")
        await asyncio.sleep(0.05)


async def until_no_problem(
    problem: Callable[[], Awaitable[str]], *, within: float = 2.0, what: str = ""
) -> None:
    """Wait for `problem()` to return "" (satisfied); fail with its last complaint after `within` s."""
    deadline = time.monotonic() + within
    while True:
        complaint = await problem()
        if not complaint:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g}s: {what}: {complaint}")
        await asyncio.sleep(0.05)


@dataclass
class MemorySink:
    """The smallest Sink: a dict of projections per (kind, namespace, name), and what happened."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    retained: int = 0

    def upsert(self, resource: Resource, obj: dict[str, Any]) -> None:
        self.objects[_key(obj)] = obj

    def delete(self, resource: Resource, obj: dict[str, Any]) -> None:
        self.deleted.append(obj["metadata"]["name"])
        self.objects.pop(_key(obj), None)

    def retain(self, resource: Resource, keys: set[tuple[str, str]]) -> None:
        self.retained += 1
        for key in [k for k in self.objects if k[0] == resource.kind and (k[1], k[2]) not in keys]:
            self.deleted.append(key[2])
            del self.objects[key]

    def notify(self) -> None:
        pass

    def names(self, kind: str, namespace: str | None = None) -> set[str]:
        return {n for k, ns, n in self.objects if k == kind and (namespace is None or ns == namespace)}


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_metrics(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


def metric(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@dataclass
class Service:
    """A stalewatch Runtime serving on a local port, and an HTTP client for it."""

    runtime: Runtime
    url: str
    http: aiohttp.ClientSession

    async def get(self, path: str) -> tuple[int, str]:
        async with self.http.get(self.url + path) as response:
            return response.status, await response.text()

    async def findings(self) -> dict[str, Any]:
        status, body = await self.get("/api/v1/findings")
        assert status == 200, body
        document: dict[str, Any] = orjson.loads(body)
        return document

    async def metrics(self) -> Samples:
        status, body = await self.get("/metrics")
        assert status == 200, body
        return parse_metrics(body)

    async def ready(self) -> bool:
        status, _ = await self.get("/readyz")
        return status == 200


def settings_for(kubeconfig: Path, **values: Any) -> Settings:
    return Settings(kubeconfig=str(kubeconfig), listen=f"127.0.0.1:{free_port()}", **values)


@asynccontextmanager
async def running(
    settings: Settings, *, options: WatchOptions = FAST, wait_ready: bool = True
) -> AsyncIterator[Service]:
    """stalewatch run, in-process, with test-sized timings; stopped on exit."""
    api = await load_client(kubeconfig=settings.kubeconfig)
    async with api, aiohttp.ClientSession() as http:
        runtime = Runtime(settings, api, options=options, debounce=0.05, tick=0.2)
        await runtime.start()
        service = Service(runtime, f"http://{settings.listen}", http)
        try:
            if wait_ready:
                await poll(service.ready, within=30, what="stalewatch ready")
            yield service
        finally:
            await runtime.stop()
