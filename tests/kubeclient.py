"""A thin raw-REST helper over kubernetes-asyncio for tests: create objects, write /status.

No kubelet or controller runs against the test API server, so tests play the
controllers' part: they create objects and then write the status a controller
would have written, through the same /status subresource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from kubernetes_asyncio.client import ApiClient


class KubeError(Exception):
    def __init__(self, status: int, body: Mapping[str, Any], what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body.get('message', body)}")
        self.status = status
        self.body = body


class Kube:
    """Raw REST calls through a kubernetes-asyncio ApiClient, resolving kinds by discovery."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        resp = await self.api.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        async with resp:
            data = await resp.read()
            status = resp.status
        try:
            parsed = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:  # e.g. a plain-text "404 page not found"
            parsed = {"message": data.decode(errors="replace")}
        if not 200 <= status < 300:
            raise KubeError(status, parsed, f"{method} {path}")
        return parsed

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) for a kind, from the API server's own discovery."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for res in (await self.request("GET", base))["resources"]:
                if "/" not in res["name"]:
                    self._resources[(api_version, res["kind"])] = (res["name"], res["namespaced"])
        if key not in self._resources:
            raise LookupError(f"{kind} is not served at {api_version}")
        return self._resources[key]

    async def path(self, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        plural, namespaced = await self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        ns = f"/namespaces/{namespace}" if namespaced and namespace else ""
        return f"{base}{ns}/{plural}" + (f"/{name}" if name else "")

    async def object_path(self, obj: Mapping[str, Any]) -> str:
        meta = obj["metadata"]
        return await self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Creates the object, then writes its `status` (if given) as its controller would."""
        meta = obj["metadata"]
        path = await self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
        created: dict[str, Any] = await self.request("POST", path, body=dict(obj))
        if "status" in obj:
            created = await self.patch_status(created, obj["status"])
        return created

    async def patch(self, obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "PATCH",
            await self.object_path(obj),
            body=dict(patch),
            content_type="application/merge-patch+json",
        )
        return result

    async def patch_status(self, obj: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        """Merge-patches /status; lists (conditions) are replaced whole, as controllers do."""
        result: dict[str, Any] = await self.request(
            "PATCH",
            await self.object_path(obj) + "/status",
            body={"status": dict(status)},
            content_type="application/merge-patch+json",
        )
        return result

    async def get(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", await self.object_path(obj))
        return result

    async def delete(self, obj: Mapping[str, Any]) -> None:
        await self.request("DELETE", await self.object_path(obj))

    async def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object of a kind, each with apiVersion/kind filled in as `kubectl get -o json` does."""
        items: list[dict[str, Any]] = []
        query: dict[str, Any] = {"limit": 500}
        while True:
            page = await self.request("GET", await self.path(api_version, kind, namespace), query=query)
            for item in page["items"]:
                items.append({"apiVersion": api_version, "kind": kind, **item})
            cont = page["metadata"].get("continue")
            if not cont:
                return items
            query["continue"] = cont
