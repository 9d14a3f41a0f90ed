"""A pass over only the subjects a change reaches gives what a pass over every subject does.

With every controller up, correlation runs over the components a change reaches
(store/components.py) and keeps every other finding. Random churn of the incident scenarios'
and the examples' objects (Pods failing and recovering under releases, dependencies and sources
failing, Events, deletions, relists, the clock moving past thresholds), the controllers' Leases
renewed at every step: after every step the live model's findings are compared with
`HealthModel.reference()`, a pass from scratch over every subject.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from tests.model.builders import MIN, NOW, SEC
from tests.model.churn import CONTROLLERS, as_decoded, fresh_lease, variants
from tests.model.test_engine import snapshot
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.objects import Key, key_of
from watcher.model.types import ModelConfig

SEEDS, STEPS = 6, 400
SCRATCH_EVERY = 50


def controllers_own(key: Key) -> bool:
    """The controllers' own workloads, Pods and Leases: left as they are, so they stay up."""
    return key.namespace == "flux-system" and key.kind in ("Deployment", "ReplicaSet", "Pod", "Lease")


def play(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    pool = {k: v for k, v in variants().items() if not controllers_own(k)}
    keys = sorted(pool)
    model = HealthModel(ModelConfig())
    live: dict[Key, dict[str, Any]] = {}
    now = NOW - 60 * MIN

    def upsert(obj: dict[str, Any]) -> None:
        live[key_of(obj)] = obj
        model.upsert(as_decoded(obj) if rng.random() < 0.5 else copy.deepcopy(obj), now=now)

    def renew() -> None:
        for name in CONTROLLERS:
            upsert(fresh_lease(name, now))

    for obj in (pool[key][0] for key in keys):
        upsert(obj)
    renew()
    for step in range(steps):
        roll = rng.random()
        if roll < 0.7:
            upsert(rng.choice(pool[rng.choice(keys)]))
        elif roll < 0.8:
            key = rng.choice(keys)
            if key in live and key.kind not in ("CustomResourceDefinition", "Kustomization"):
                model.delete(live.pop(key), now=now)
        elif roll < 0.85:
            kept = [(k, o) for k, o in live.items() if k.kind == "Pod"]
            pods = [o for k, o in kept if controllers_own(k) or rng.random() < 0.8]
            model.replace("v1", "Pod", pods, now=now)
            live = {k: o for k, o in live.items() if k.kind != "Pod"} | {key_of(p): p for p in pods}
        else:
            now += rng.choice((SEC, 20 * SEC, MIN, 6 * MIN, 11 * MIN))
            renew()
        evaluation = model.evaluate(now)
        rendered = [f.to_dict() for f in evaluation.findings]
        assert rendered == [f.to_dict() for f in model.reference(now)], f"seed {seed}, step {step}"
        if step % SCRATCH_EVERY == 0 or step == steps - 1:
            scratch = evaluate(copy.deepcopy(list(live.values())), now=now, config=ModelConfig())
            assert snapshot(evaluation) == snapshot(scratch), f"seed {seed}, step {step} (from scratch)"


@pytest.mark.parametrize("seed", range(SEEDS))
def test_correlating_only_what_a_change_reaches_equals_a_pass_over_everything(seed: int) -> None:
    play(seed, STEPS)
