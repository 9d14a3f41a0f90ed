"""Shared fixtures: a real kube-apiserver + etcd for the session, a namespace per test."""

from __future__ import annotations

import gc
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration

from tests.controlplane.harness import CRDS, ControlPlane, running_control_plane
from tests.kubeclient import Kube


@pytest.fixture(autouse=True)
def unfrozen_heap() -> Iterator[None]:
    """A watcher started in a test freezes the heap it finds (SyncCollections), which in a test
    process is pytest's: give it back to the collector after each test."""
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """The real control plane, with our CRDs installed and Established."""
    with running_control_plane(CRDS) as plane:
        yield plane


async def client_for(kubeconfig: Path) -> ApiClient:
    """A kubernetes-asyncio client loaded from a kubeconfig file, the way users load it."""
    configuration = Configuration()
    await kube_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return ApiClient(configuration=configuration)


@pytest.fixture(scope="session")
async def api_client(control_plane: ControlPlane) -> AsyncIterator[ApiClient]:
    client = await client_for(control_plane.kubeconfig)
    async with client:
        yield client


@pytest.fixture(scope="session")
async def kube(api_client: ApiClient) -> Kube:
    return Kube(api_client)


@pytest.fixture
async def namespace(kube: Kube) -> AsyncIterator[str]:
    """A fresh namespace per test keeps tests apart on the shared API server."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await kube.create(ns)
    yield name
    await kube.delete(ns)
