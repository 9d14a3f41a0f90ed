"""A healthy Pod (and any ReplicaSet) is decoded straight into the Store's packed form and not judged again.

The decoder's `healthy()` must only ever say yes where the Pod's rule has nothing to say and
nothing to wait for; the packed bytes must be the Store's own packing of project()'s dict; and a
model fed the packed form must answer exactly as one fed the dicts.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import orjson
import pytest

from tests.model.builders import MIN, NOW, ts
from tests.model.builders import pod as pod_object
from tests.model.test_engine import snapshot
from tests.model.test_fastpath import benchmark_objects
from tests.model.test_incidents import release_with_crash_looping_pod
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.objects import key_of
from watcher.model.ingest.packed import Packed, pack
from watcher.model.ingest.projection import project
from watcher.model.rules.context import Ctx
from watcher.model.rules.dispatch import RULES, local_findings
from watcher.model.rules.workloads import WorkloadState, pod_state
from watcher.model.types import FindingType, ModelConfig, Thresholds

Obj = dict[str, Any]
AT_ONCE = ModelConfig(thresholds=Thresholds(workload_unhealthy=timedelta(0)))
"""Any failing state is a finding at once, so 'no finding' cannot hide behind a threshold."""


def decoded(obj: Obj) -> Any:
    line = orjson.dumps({"type": "MODIFIED", "object": obj})
    return fast_path(obj["apiVersion"], obj["kind"]).decode(line).object


def with_status(obj: Obj, **fields: Any) -> Obj:
    changed = copy.deepcopy(obj)
    changed["status"].update(fields)
    return changed


def web(**options: Any) -> Obj:
    return pod_object("web-7d9f-abcde", "apps", app="web", **options)


def fed(objects: list[Obj]) -> HealthModel:
    """A model given these objects as a list would give them (dicts: the general path)."""
    model = HealthModel(AT_ONCE)
    for obj in objects:
        model.upsert(obj, now=NOW)
    return model


def deleting(obj: Obj) -> Obj:
    changed = copy.deepcopy(obj)
    changed["metadata"]["deletionTimestamp"] = ts(MIN)
    return changed


def init_waiting(obj: Obj) -> Obj:
    waiting = {"name": "init", "ready": False, "state": {"waiting": {"reason": "PodInitializing"}}}
    return with_status(obj, initContainerStatuses=[waiting])


CASES = [
    pytest.param(web(), True, id="running_and_ready_is_packed"),
    pytest.param(web(ready=False), False, id="not_ready_is_judged"),
    pytest.param(web(ready=False, waiting="ImagePullBackOff"), False, id="waiting_container_is_judged"),
    pytest.param(web(waiting="ContainerCreating"), False, id="any_waiting_container_is_judged"),
    pytest.param(web(last_terminated="OOMKilled"), False, id="last_killed_for_memory_is_judged"),
    pytest.param(web(last_terminated="Error"), True, id="last_terminated_otherwise_is_packed"),
    pytest.param(deleting(web()), False, id="being_deleted_is_judged"),
    pytest.param(web(phase="Succeeded"), False, id="finished_is_judged"),
    pytest.param(with_status(web(), conditions=[]), False, id="without_ready_condition_is_judged"),
    pytest.param(init_waiting(web()), False, id="init_container_waiting_is_judged"),
]


@pytest.mark.parametrize(("obj", "packed"), CASES)
def test_only_a_pod_ready_with_nothing_failing_is_packed_by_the_decoder(obj: Obj, packed: bool) -> None:
    assert (type(decoded(obj)) is Packed) == packed


def packed_pods() -> list[Obj]:
    pods = [o for o in benchmark_objects() if o["kind"] == "Pod"]
    pods += [o for o, _ in (case.values for case in CASES)]
    pods += [o for o in release_with_crash_looping_pod() if o["kind"] == "Pod"]
    return [o for o in pods if type(decoded(o)) is Packed]


def test_a_packed_pod_is_ready_with_no_finding_and_nothing_to_wait_for() -> None:
    pods = packed_pods()
    assert len(pods) > 10
    for obj in pods:
        projected = project(obj)
        ctx = Ctx(NOW, AT_ONCE, lambda key: None)
        assert pod_state(projected) == WorkloadState(ready=True)
        assert (local_findings(projected, ctx, gitops=False), ctx.pending) == ([], [])


def test_a_packed_pod_unpacks_to_its_projection_as_the_store_keeps_it() -> None:
    for obj in packed_pods():
        packed = decoded(obj)
        assert (packed.key, packed.unpacked()) == (key_of(project(obj)), project(obj))
        assert len(packed.data) == len(pack(project(obj)))  # the same fields; their order may differ


def test_every_replica_set_comes_packed_as_its_projection() -> None:
    """No rule judges a ReplicaSet: the decoder packs each one, whatever its state."""
    assert ("apps", "ReplicaSet") not in RULES, "a ReplicaSet with a rule must not skip judging"
    replica_sets = [o for o in benchmark_objects() if o["kind"] == "ReplicaSet"]
    assert replica_sets
    for obj in replica_sets:
        packed = decoded(obj)
        assert type(packed) is Packed
        assert (packed.key, packed.unpacked()) == (key_of(project(obj)), project(obj))
        assert len(packed.data) == len(pack(project(obj)))  # the same fields; their order may differ


def test_a_failing_pod_that_recovers_in_packed_form_loses_its_finding_as_evaluate_says() -> None:
    objects = [project(o) for o in release_with_crash_looping_pod()]
    model = fed(objects)
    assert any(f.type is FindingType.WORKLOAD_UNHEALTHY for f in model.evaluate(NOW).findings)
    recovered = pod_object("podinfo-7d9f-new01", "apps", app="podinfo", created=20 * MIN)
    assert type(decoded(recovered)) is Packed
    model.upsert(decoded(recovered), now=NOW)
    after = [project(recovered) if o["metadata"]["name"] == "podinfo-7d9f-new01" else o for o in objects]
    live = model.evaluate(NOW)
    assert snapshot(live) == snapshot(evaluate(after, now=NOW, config=AT_ONCE))
    assert not any(f.type is FindingType.WORKLOAD_UNHEALTHY for f in live.findings)


def podinfo_replica_set(*, owned: bool) -> Obj:
    """The crash-looping Pod's ReplicaSet, owned by its Deployment or left orphaned by it
    (`kubectl delete deployment --cascade=orphan`)."""
    owners = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "podinfo", "controller": True, "uid": "d1"}
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "podinfo-7d9f",
            "namespace": "apps",
            "uid": "rs1",
            "resourceVersion": "2" if owned else "3",
            "ownerReferences": owners if owned else [],
        },
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "readyReplicas": 0},
    }


def test_a_healthy_pod_nothing_found_read_changes_nothing_and_the_evaluation_stays_the_last() -> None:
    objects = [
        *(project(o) for o in release_with_crash_looping_pod()),
        project(podinfo_replica_set(owned=True)),
    ]
    model = fed(objects)
    before, generation = model.evaluate(NOW), model.generation
    old = pod_object("podinfo-5c6d-old01", "apps", app="podinfo", template_hash="5c6d", created=300 * MIN)
    restarted = with_status(old, podIP="10.244.1.9")
    assert type(decoded(restarted)) is Packed
    model.upsert(decoded(restarted), now=NOW)
    after = model.evaluate(NOW)
    assert model.generation == generation
    assert after.findings is before.findings
    fresh = [project(restarted) if o["metadata"]["name"] == "podinfo-5c6d-old01" else o for o in objects]
    assert snapshot(after) == snapshot(evaluate(fresh, now=NOW, config=AT_ONCE))


def test_a_replica_set_a_failing_pods_owners_were_read_from_is_correlated_again_when_it_changes() -> None:
    objects = [
        *(project(o) for o in release_with_crash_looping_pod()),
        project(podinfo_replica_set(owned=True)),
    ]
    model = fed(objects)
    before = snapshot(model.evaluate(NOW))
    orphaned = podinfo_replica_set(owned=False)
    assert type(decoded(orphaned)) is Packed
    model.upsert(decoded(orphaned), now=NOW)
    after = snapshot(model.evaluate(NOW))
    fresh = [*objects[:-1], project(orphaned)]
    assert after == snapshot(evaluate(fresh, now=NOW, config=AT_ONCE))
    assert after != before, "the Pod's workload is now its ReplicaSet, which no release installed"
