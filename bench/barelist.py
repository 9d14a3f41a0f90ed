"""The baseline for initial sync: a bare paginated list of the kinds stalewatch watches.

Same client (watcher.kube.client.load_client), same paths, field selectors and page size,
every kind at once as stalewatch's reflectors do; each page is decoded with orjson and
dropped. Run as its own process so its time includes start-up, like stalewatch's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import orjson
from kubernetes_asyncio.client import ApiClient

from bench.pipeline import NO_TIMEOUT, watched
from watcher.kube.client import get
from watcher.kube.resources import Resource

PAGE_SIZE = 500


async def list_kind(api: ApiClient, resource: Resource) -> int:
    items, token = 0, ""
    while True:
        query = [("limit", str(PAGE_SIZE))] + ([("continue", token)] if token else [])
        if resource.field_selector:
            query.append(("fieldSelector", resource.field_selector))
        response = await get(api, resource.path, query, limits=NO_TIMEOUT)
        async with response:
            page = orjson.loads(await response.read())
        items += len(page.get("items") or ())
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def main(kubeconfig: str) -> int:
    from watcher.kube.client import load_client

    async with await load_client(kubeconfig=kubeconfig) as api:
        started = time.monotonic()
        counts = await asyncio.gather(*(list_kind(api, r) for r in watched()))
        elapsed = time.monotonic() - started
    sys.stdout.write(orjson.dumps({"objects": sum(counts), "list_seconds": elapsed}).decode() + "\n")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    sys.exit(asyncio.run(main(parser.parse_args().kubeconfig)))
