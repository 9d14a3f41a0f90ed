"""The store keeps judged Pods and ReplicaSets packed, and every read sees the same object."""

from __future__ import annotations

from typing import Any

import pytest

from tests.model.builders import NOW, kustomization, pod
from watcher.model.engine import HealthModel
from watcher.model.ingest.objects import key_of
from watcher.model.ingest.projection import project
from watcher.model.store.graph import Store


def replicaset() -> dict[str, Any]:
    return project(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "podinfo-7d9f", "namespace": "apps", "generation": 2},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "podinfo"}}},
            "status": {"replicas": 2, "readyReplicas": 2, "observedGeneration": 2},
        }
    )


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(project(pod("podinfo-7d9f-x1", "apps", app="podinfo")), id="pod"),
        pytest.param(
            project(pod("podinfo-7d9f-x2", "apps", app="podinfo", waiting="ImagePullBackOff")),
            id="failing-pod",
        ),
        pytest.param(replicaset(), id="replicaset"),
    ],
)
def test_a_packed_object_reads_back_equal_by_key_by_namespace_and_when_replaced(obj: dict[str, Any]) -> None:
    store = Store()
    key = key_of(obj)
    store.put(obj)
    store.pack(key)

    unpacked = store.get(key)
    assert unpacked == obj
    assert unpacked is not obj  # a fresh copy: what the store holds is the packed bytes
    assert store.raw(key) == obj
    assert list(store.in_namespace(key.group, key.kind, key.namespace)) == [obj]
    assert store.put(obj)[0] == obj
    assert store.remove(key)[0] == obj
    assert store.get(key) is None


def test_objects_of_other_kinds_are_never_packed() -> None:
    store = Store()
    obj = project(kustomization("apps"))
    store.put(obj)
    store.pack(key_of(obj))
    assert store.get(key_of(obj)) is obj


def test_a_failing_pod_packed_once_judged_still_makes_its_finding_when_correlation_reads_it_back() -> None:
    """Correlation runs after the Pods of an evaluation are judged and packed: it reads the copy."""
    model = HealthModel()
    model.upsert(project(pod("podinfo-7d9f-x1", "apps", app="podinfo", waiting="ImagePullBackOff")), now=NOW)
    found = model.evaluate(NOW).findings
    assert [(f.type, f.subject["name"], f.evidence.get("reason")) for f in found] == [
        ("WorkloadUnhealthy", "podinfo-7d9f-x1", "ImagePullBackOff")
    ]
