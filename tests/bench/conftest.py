"""One API server for the benchmark's tests: a tiny cluster, and a watch stream recorded from it.

The benchmark's cluster has its own flux-system controllers, so it gets its own API server
instead of the session one other tests share.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import pipeline, run
from bench.generate import Churn, client_for, populate
from bench.workload import Cluster
from tests.controlplane.harness import ControlPlane
from tests.kubeclient import Kube

SIZE = 60


@pytest.fixture(scope="package")
def plane() -> Iterator[ControlPlane]:
    started = run.start_plane()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="package")
async def kube(plane: ControlPlane) -> AsyncIterator[Kube]:
    async with await client_for(plane.kubeconfig) as api:
        yield Kube(api)


@pytest.fixture(scope="package")
async def cluster(kube: Kube) -> Cluster:
    built = Cluster(SIZE, datetime.now(UTC))
    await populate(kube, built)
    return built


@pytest.fixture(scope="package")
async def recording(kube: Kube, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A watch stream recorded from the API server: the cluster ADDED, then a second of churn."""
    stream, stop = tmp_path_factory.mktemp("recording") / "stream.jsonl", asyncio.Event()
    recorder = asyncio.create_task(pipeline.record(kube.api, stream, stop=stop))
    await asyncio.sleep(2)
    await Churn(kube, cluster).run(rate=30, seconds=1)
    await asyncio.sleep(1)
    stop.set()
    await recorder
    return stream
