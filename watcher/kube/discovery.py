"""API discovery: the fallback that finds custom kinds when CRDs themselves cannot be listed.

Normally the CRD watch tells stalewatch which custom kinds exist. An account without access
to CustomResourceDefinitions can still read discovery (every authenticated user may), so the
kinds its controllers reconcile are found there instead, at each group's preferred version.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import aiohttp
import orjson

from watcher.kube.client import get
from watcher.kube.resources import Resource, wanted
from watcher.model.ingest.kinds import POLICY_FAMILIES
from watcher.model.types import ControllerSpec
from watcher.telemetry import KindKey


class DiscoveryError(Exception):
    """Discovery answered, but not with what we asked for."""


async def discover(
    api: Any,
    controllers: Iterable[ControllerSpec],
    *,
    limits: aiohttp.ClientTimeout,
    extra: Collection[tuple[str, str]] = (),
) -> dict[KindKey, Resource]:
    """Every listable, watchable kind that a configured controller reconciles, a policy engine's,
    or one in `extra` (conflict_watch_kinds)."""
    specs = tuple(controllers)
    groups = {group for spec in specs for group in spec.groups} | POLICY_FAMILIES.keys()
    groups |= {group for group, _ in extra}
    found: dict[KindKey, Resource] = {}
    for entry in (await _get_json(api, "/apis", limits)).get("groups") or ():
        name = entry.get("name")
        preferred = (entry.get("preferredVersion") or {}).get("groupVersion")
        if name not in groups or not isinstance(preferred, str):
            continue
        version = preferred.rpartition("/")[2]
        for resource in (await _get_json(api, f"/apis/{preferred}", limits)).get("resources") or ():
            plural, kind = resource.get("name", ""), resource.get("kind", "")
            verbs = set(resource.get("verbs") or ())
            if "/" in plural or not {"list", "watch"} <= verbs or not wanted(specs, name, kind, extra):
                continue
            namespaced = bool(resource.get("namespaced", True))
            found[name, kind] = Resource(name, version, kind, plural, namespaced=namespaced)
    return found


async def _get_json(api: Any, path: str, limits: aiohttp.ClientTimeout) -> dict[str, Any]:
    response = await get(api, path, [], limits=limits)
    try:
        body = await response.read()
    finally:
        response.release()
    if response.status != 200:
        raise DiscoveryError(f"GET {path}: HTTP {response.status}")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise DiscoveryError(f"GET {path}: not JSON ({error})") from None
    if not isinstance(document, dict):
        raise DiscoveryError(f"GET {path}: not an object")
    return document
