"""The API-server connection: loading credentials, raw GET requests, and how failures are told apart.

kubernetes-asyncio provides config loading (kubeconfig with context, or in-cluster with token
refresh) and its aiohttp session; stalewatch asks it for the RAW response
(`_preload_content=False`) and decodes JSON itself, because its model objects are far too
slow for a watch stream and we keep only slim projections anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, TimeoutError)
"""Failing to get an HTTP answer: the connection could not be made, broke, or timed out."""

UNREACHABLE: tuple[type[BaseException], ...] = (aiohttp.ClientConnectorError, TimeoutError)
"""The subset that says the API server is unreachable: no connection could be made, or no
answer came in time. A reset of an established connection (a proxy, a server restarting one
connection) is not an outage: the next request simply opens a new one."""


class KubeConfigError(Exception):
    """No usable credentials; str() is one line naming the file or the environment."""


async def load_client(*, kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """An ApiClient from `kubeconfig` (else $KUBECONFIG or ~/.kube/config), or in-cluster config.

    The kubeconfig is only read, never written back (a refreshed token stays in memory).
    Every way it can be unusable is one KubeConfigError naming the file (and context).
    """
    configuration = Configuration()
    where = _kubeconfig_file(kubeconfig)
    try:
        if where is not None:
            await kube_config.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            raise KubeConfigError(
                "kubeconfig: none found (no --kubeconfig, $KUBECONFIG or ~/.kube/config) "
                "and not running inside a cluster"
            )
    except KubeConfigError:
        raise
    except Exception as error:  # the loader raises whatever the file's content trips (YAML, keys, exec)
        detail = " ".join(str(error).split())[:300] or type(error).__name__
        context_note = f" (context {context})" if context else ""
        raise KubeConfigError(f"kubeconfig {where or 'in-cluster'}{context_note}: {detail}") from None
    return ApiClient(configuration=configuration)


def _kubeconfig_file(kubeconfig: str | None) -> str | None:
    """The kubeconfig to read (for messages), or None for in-cluster config; a file named
    explicitly (flag or $KUBECONFIG) must exist."""
    named = kubeconfig or os.environ.get("KUBECONFIG", "")
    if named:
        paths = named.split(os.pathsep) if not kubeconfig else [named]
        if not any(Path(p).expanduser().is_file() for p in paths if p):
            raise KubeConfigError(f"kubeconfig {named}: no such file")
        return named
    default = Path("~/.kube/config").expanduser()
    return str(default) if default.exists() else None


def classify(status: int) -> str:
    """An HTTP status as the `result`/`reason` label value of the request counters."""
    if 200 <= status < 300:
        return "ok"
    if status == 403:
        return "forbidden"
    if status == 404:
        return "not_found"
    if status == 410:
        return "gone"
    if status == 429:
        return "throttled"
    if status >= 500:
        return "server_error"
    return "client_error"


def retry_after(value: str | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None if absent."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - now())


class Backoff:
    """Capped exponential backoff with jitter: each delay is uniform in [d/2, d], d doubling
    from `initial` up to `cap`, so a fleet of watchers does not retry in lockstep."""

    def __init__(self, *, initial: float, cap: float, rng: Callable[[], float] = random.random) -> None:
        self.initial, self.cap, self._rng = initial, cap, rng
        self.attempt = 0

    def next(self) -> float:
        ceiling = min(self.cap, self.initial * (2.0**self.attempt))
        if ceiling < self.cap:  # stop counting at the cap: hours of outage must not overflow
            self.attempt += 1
        return ceiling / 2 + self._rng() * ceiling / 2

    def reset(self) -> None:
        self.attempt = 0


async def get(
    api: ApiClient,
    path: str,
    query: Sequence[tuple[str, str]],
    *,
    limits: aiohttp.ClientTimeout,
) -> aiohttp.ClientResponse:
    """Open a GET; the caller reads (or streams) the body and must release the response."""
    response: Any = await api.call_api(
        path,
        "GET",
        query_params=list(query),
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=limits,
    )
    assert isinstance(response, aiohttp.ClientResponse)
    return response


async def sleep_or_wake(wake: asyncio.Event, delay: float) -> None:
    """Sleep `delay` seconds, or less if `wake` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), timeout=max(0.0, delay))


def describe_error(error: BaseException) -> str:
    """`Type: message` (or just the type) for one log field."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
