"""Random churn played on a live HealthModel: the one player of the tests that compare the live
model with an answer from scratch (test_incremental_identity.py, test_correlation_differential.py).

Every object of the incident scenarios and the examples is a variant of its key. A sequence
upserts every key's first variant, then at each step draws one move from the test's mix (a table
of moves and their weights: the moves below, and any a test adds for itself) and hands the
sequence to the test's check, which compares what that test promises. The moves keep `live`, the
objects the model holds, so a check can evaluate the same objects from scratch; a move or a check
draws only from the sequence's own `rng`, so a seed replays the same sequence.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.model.builders import (
    MIN,
    NOW,
    SEC,
    Obj,
    controller,
    crd,
    deployment,
    kustomization,
    lease,
    warning_about,
)
from tests.model.test_engine import tofu_world
from tests.model.test_incidents import (
    child_on_old_revision,
    forgotten_reconciling,
    release_with_crash_looping_pod,
    tofu_incident,
)
from tests.model.test_workload_findings import workload_world
from watcher.model.engine import HealthModel, evaluate
from watcher.model.evaluation import Evaluation
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


def listed_or_not() -> list[Obj]:
    """A failing Deployment no label claims, only a Kustomization's inventory, and that
    Kustomization with and without it listed: the Deployment's owner answer read nothing but the
    reverse edge, so it holds only if the live model forgets it when that edge changes."""
    return [
        deployment("unlabelled", "apps", available=0, image="example.com/unlabelled:1"),
        kustomization("lists-it", inventory=["apps_unlabelled_apps_Deployment"]),
        kustomization("lists-it"),
    ]


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
        *listed_or_not(),
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


@dataclass
class Churn:
    """One random sequence being played: the live model, the objects it holds, the clock."""

    seed: int
    steps: int
    rng: random.Random
    pool: dict[Key, list[dict[str, Any]]]
    keys: list[Key] = field(init=False)
    model: HealthModel = field(default_factory=lambda: HealthModel(ModelConfig()))
    live: dict[Key, dict[str, Any]] = field(default_factory=dict)
    now: datetime = NOW - 60 * MIN
    step: int = -1
    move: str = "the set-up"

    def __post_init__(self) -> None:
        self.keys = sorted(self.pool)

    @property
    def last(self) -> bool:
        return self.step == self.steps - 1

    @property
    def where(self) -> str:
        """Names the failing step in an assertion's message, so the seed replays it."""
        return f"seed {self.seed}, step {self.step}, after {self.move}"

    def upsert(self, obj: dict[str, Any]) -> None:
        """The model owns what it is given (it replaces field sets by their hashes): a copy, half
        of the time in the form the reflector's decoder gives it (healthy Pods packed)."""
        self.live[key_of(obj)] = obj
        self.model.upsert(as_decoded(obj) if self.rng.random() < 0.5 else copy.deepcopy(obj), now=self.now)

    def from_scratch(self) -> Evaluation:
        """evaluate() of the objects the model holds, at the same moment."""
        return evaluate(copy.deepcopy(list(self.live.values())), now=self.now, config=ModelConfig())


Move = Callable[[Churn], None]


def upsert_a_variant(churn: Churn) -> None:
    churn.upsert(churn.rng.choice(churn.pool[churn.rng.choice(churn.keys)]))


def delete_an_object(churn: Churn) -> None:
    """Any key but a CRD's or a Kustomization's: the live model remembers those deleted
    (CRDRemoved, PruneOrphan), which a snapshot of the same objects cannot."""
    key = churn.rng.choice(churn.keys)
    if key in churn.live and key.kind not in ("CustomResourceDefinition", "Kustomization"):
        churn.model.delete(churn.live.pop(key), now=churn.now)


def renew_a_lease(churn: Churn) -> None:
    """A controller comes back (or stays up) for about 35 s more."""
    churn.upsert(fresh_lease(churn.rng.choice(CONTROLLERS), churn.now))


def relist_pods(churn: Churn) -> None:
    """A relist of Pods that no longer finds about one in five."""
    pods = [o for k, o in churn.live.items() if k.kind == "Pod" and churn.rng.random() < 0.8]
    churn.model.replace("v1", "Pod", pods, now=churn.now)
    churn.live = {k: o for k, o in churn.live.items() if k.kind != "Pod"} | {key_of(p): p for p in pods}


def move_the_clock(churn: Churn) -> None:
    """Thresholds fall due and Leases not renewed expire: controllers go down."""
    churn.now += churn.rng.choice((SEC, 20 * SEC, MIN, 6 * MIN, 11 * MIN))


def play(
    seed: int,
    steps: int,
    mix: Mapping[Move, float],
    check: Callable[[Churn], None],
    *,
    pool: Callable[[Key], bool] | None = None,
    setup: Move | None = None,
) -> None:
    """Plays `steps` moves drawn from `mix` (each move's share of the steps), calling `check`
    after each one. `pool`: which keys of variants() the sequence plays with (all by default);
    `setup`: a move made once, after the first variant of each key is upserted."""
    assert abs(sum(mix.values()) - 1) < 1e-9, "the shares of a mix add up to one"
    played = {key: objs for key, objs in variants().items() if pool is None or pool(key)}
    churn = Churn(seed, steps, random.Random(seed), played)
    for key in churn.keys:
        churn.upsert(churn.pool[key][0])
    if setup is not None:
        setup(churn)
    for step in range(steps):
        move = draw(churn.rng, mix)
        churn.step, churn.move = step, move.__name__
        move(churn)
        check(churn)


def draw(rng: random.Random, mix: Mapping[Move, float]) -> Move:
    """One move, each with its share of the chance (the last one takes what rounding leaves)."""
    roll, bound = rng.random(), 0.0
    for move, share in mix.items():
        bound += share
        if roll < bound:
            return move
    return move
