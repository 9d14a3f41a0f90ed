"""The live HealthModel, fed random event sequences, answers exactly what evaluate() from scratch does.

Every object of the incident scenarios and the examples is a variant of its key; a sequence
upserts variants (half of the time in the form the reflector's decoder gives them: healthy Pods
packed) and deletes them, relists Pods, renews or abandons controller Leases (controllers go down
and come back) and moves the clock (thresholds fall due), evaluating as it goes. Each Evaluation
is compared whole with evaluate() of the same objects at the same moment.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.model.builders import MIN, NOW, SEC, Obj, controller, crd, flux, lease, warning_about
from tests.model.test_engine import snapshot, tofu_world
from tests.model.test_incidents import (
    child_on_old_revision,
    forgotten_reconciling,
    release_with_crash_looping_pod,
    tofu_incident,
)
from tests.model.test_workload_findings import workload_world
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.objects import Key, key_of
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller", "tofu-controller")


def example_objects() -> list[Obj]:
    """The examples' objects (kubectl writes some files as one List), each object's newest
    generation only: a series of one object (examples/conflicting-writers) is history the live
    model remembers (ConflictingWriters), which a snapshot of the same objects cannot have."""
    docs = [doc for path in sorted(EXAMPLES.glob("*/*.yaml")) for doc in yaml.safe_load_all(path.read_text())]
    newest: dict[tuple[str, str, str, str], Obj] = {}
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        for obj in doc.get("items", []) if doc.get("kind") == "List" else [doc]:
            meta = obj["metadata"]
            key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
            if key not in newest or meta.get("generation", 0) >= newest[key]["metadata"].get("generation", 0):
                newest[key] = obj
    return list(newest.values())


def unclaimed_variants(objs: list[Obj]) -> list[Obj]:
    """The CRDs and Deployments of the crd-ownership-risk example as their installers could leave
    them: without labels (claimed by Helm annotations or inventories alone), a Deployment without
    its Helm annotations too (deployed by nobody known), and each CRD kept
    (helm.sh/resource-policy: keep), so a risk comes and goes with a change the CRD, its
    installers or its controller's workload make (CRDRisks judges again only on what it read)."""
    found = []
    for obj in objs:
        meta = obj["metadata"]
        if obj["kind"] in ("CustomResourceDefinition", "Deployment") and "image" in meta["name"]:
            found.append({**obj, "metadata": {k: v for k, v in meta.items() if k != "labels"}})
        if obj["kind"] == "Deployment" and "image" in meta["name"]:
            unknown = {k: v for k, v in meta.items() if k not in ("labels", "annotations")}
            found.append({**obj, "metadata": unknown})
        if obj["kind"] == "CustomResourceDefinition":
            notes = {**meta.get("annotations", {}), "helm.sh/resource-policy": "keep"}
            found.append({**obj, "metadata": {**meta, "annotations": notes}})
    return found


def variants() -> dict[Key, list[dict[str, Any]]]:
    """Projected objects by key: every state some scenario gives that object.

    No CRD is ever deleted: CRDRemoved is the live model's memory (it lists the objects of
    the kind when the CRD went), which a snapshot cannot have.
    """
    found: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    pool = [
        *tofu_incident(),
        *forgotten_reconciling(),
        *child_on_old_revision(),
        *release_with_crash_looping_pod(),
        *tofu_world(),
        *workload_world(),
        *example_objects(),
        *unclaimed_variants(example_objects()),
        *[o for name in CONTROLLERS for o in controller(name, lease_renewed=None)],
        warning_about("apps", count=9, first=60 * MIN, last=MIN),
        warning_about("flux-system", count=3, first=90 * MIN, last=40 * MIN),
        crd("terraforms", "infra.contrib.fluxcd.io", "Terraform"),
    ]
    for obj in pool:
        projected = project(obj)
        if projected not in found[key_of(projected)]:
            found[key_of(projected)].append(projected)
    return found


def fresh_lease(name: str, now: datetime) -> dict[str, Any]:
    """The controller's leader Lease, renewed just before `now` (it is up until ~35 s later)."""
    return project(lease(f"{name}-leader-election", holder=f"{name}-7d9f-x2x4z_0c1f3a", renewed=NOW - now))


def as_decoded(obj: dict[str, Any]) -> Mapping[str, Any]:
    """The object as the reflector's decoder hands it over (a healthy Pod comes packed)."""
    line = orjson.dumps({"type": "MODIFIED", "object": obj})
    decoded = fast_path(obj["apiVersion"], obj["kind"]).decode(line).object
    assert decoded == obj
    return decoded


def play(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    pool = variants()
    keys = sorted(pool)
    model = HealthModel(ModelConfig())
    live: dict[Key, dict[str, Any]] = {}
    now = NOW - 60 * MIN

    def upsert(obj: dict[str, Any]) -> None:
        """The model owns what it is given (it replaces field sets by their hashes): a copy."""
        live[key_of(obj)] = obj
        model.upsert(as_decoded(obj) if rng.random() < 0.5 else copy.deepcopy(obj), now=now)

    for obj in (pool[key][0] for key in keys):
        upsert(obj)
    for step in range(steps):
        roll = rng.random()
        if roll < 0.5:
            key = rng.choice(keys)
            upsert(rng.choice(pool[key]))
        elif roll < 0.6:
            key = rng.choice(keys)
            # the live model remembers deleted CRDs (CRDRemoved) and Kustomizations (PruneOrphan)
            if key in live and key.kind not in ("CustomResourceDefinition", "Kustomization"):
                model.delete(live.pop(key), now=now)
        elif roll < 0.75:
            upsert(fresh_lease(rng.choice(CONTROLLERS), now))
        elif roll < 0.8:
            pods = [o for k, o in live.items() if k.kind == "Pod" and rng.random() < 0.8]
            model.replace("v1", "Pod", pods, now=now)
            live = {k: o for k, o in live.items() if k.kind != "Pod"} | {key_of(p): p for p in pods}
        else:
            now += rng.choice((SEC, 20 * SEC, MIN, 6 * MIN, 11 * MIN))
        if rng.random() < 0.4 or step == steps - 1:
            incremental = model.evaluate(now)
            scratch = evaluate(copy.deepcopy(list(live.values())), now=now, config=ModelConfig())
            assert snapshot(incremental) == snapshot(scratch), f"seed {seed}, step {step}"


@pytest.mark.parametrize("seed", range(12))
def test_random_event_sequences_evaluate_like_a_snapshot_of_the_same_objects(seed: int) -> None:
    play(seed, steps=150)


def test_an_incident_with_every_controller_down_stays_identical_while_objects_churn() -> None:
    """All Leases expire (every GitOps object is StatusStale), then objects change one by one."""
    pool = variants()
    model = HealthModel(ModelConfig())
    live = {key: versions[0] for key, versions in pool.items()}
    for obj in live.values():
        model.upsert(obj, now=NOW)
    later = NOW + 10 * MIN
    assert snapshot(model.evaluate(later)) == snapshot(
        evaluate(live.values(), now=later, config=ModelConfig())
    )
    for key in sorted(pool):
        for obj in pool[key][1:]:
            live[key] = obj
            model.upsert(obj, now=later)
            assert snapshot(model.evaluate(later)) == snapshot(
                evaluate(live.values(), now=later, config=ModelConfig())
            ), key


def test_an_evaluation_without_changes_hands_out_the_same_findings_list() -> None:
    model = HealthModel(ModelConfig())
    for obj in [*flux(leases=False), *tofu_incident()]:
        model.upsert(project(obj), now=NOW)
    first = model.evaluate(NOW)

    assert model.evaluate(NOW + SEC).findings is first.findings
    assert first.findings


def test_one_stale_object_changing_during_an_incident_gives_a_new_list_with_only_it_changed() -> None:
    model = HealthModel(ModelConfig())
    objs = [project(o) for o in tofu_incident()]
    for obj in objs:
        model.upsert(obj, now=NOW)
    later = NOW + 10 * MIN
    before = model.evaluate(later).findings
    terraform = next(o for o in objs if o["kind"] == "Terraform")
    changed = {**terraform, "status": {**terraform["status"], "conditions": []}}

    model.upsert(changed, now=later)
    after = model.evaluate(later).findings

    assert after is not before
    assert [f.id for f in after] == [f.id for f in before]
    differing = [a.id for a, b in zip(after, before, strict=True) if a.to_dict() != b.to_dict()]
    assert differing == [
        f"StatusStale/Terraform/{terraform['metadata']['namespace']}/{terraform['metadata']['name']}"
    ]
