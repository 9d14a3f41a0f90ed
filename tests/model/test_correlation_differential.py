"""The live model's kept correlation answers exactly what a correlation pass from scratch does.

A differential property test: random churn and random incidents (controllers going down by an
expired Lease, a Lease written again while still expired, a crash-looping Pod, and coming
back), thousands of steps, and after EVERY step the live model's findings are compared with
`HealthModel.reference()`: one pass over the same candidates with nothing kept (no RetryLoop,
blast radius, owner or release answer kept, no pass skipped, no satellite merged in place).
Every so often the whole Evaluation is also compared with evaluate() from scratch, which judges
every object again (test_incremental_identity.py does that on more sequences).
"""

from __future__ import annotations

import copy
import random
from datetime import datetime
from typing import Any

import pytest

from tests.model.builders import MIN, NOW, SEC, lease, pod
from tests.model.test_engine import snapshot
from tests.model.test_incremental_identity import CONTROLLERS, as_decoded, fresh_lease, variants
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.objects import Key, key_of
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig

SEEDS, STEPS = 8, 500
"""4,000 steps in all, each checked: a fixed count, so CI's time is bounded (about a minute)."""
SCRATCH_EVERY = 25
"""Steps between comparisons of the whole Evaluation with evaluate() from scratch."""


def late_lease(name: str, now: datetime, *, ago: int) -> dict[str, Any]:
    """The controller's leader Lease written again `ago` minutes before `now`, so already expired
    when it is seen (its leader lived a little longer, then stopped again): the controller stays
    down, its verdict moves in time, and each of its objects' StatusStale with it."""
    renewed = NOW - now + ago * MIN
    return project(lease(f"{name}-leader-election", holder=f"{name}-7d9f-x2x4z_0c1f3a", renewed=renewed))


def crash_looping(name: str, rng: random.Random) -> dict[str, Any]:
    """The controller's Pod crash-looping (down by its Pod, not its Lease), restarted a random
    number of times: each restart changes its verdict's evidence."""
    return project(
        pod(
            f"{name}-7d9f-x2x4z",
            app=name,
            image=f"ghcr.io/fluxcd/{name}:v1.3.0",
            ready=False,
            waiting="CrashLoopBackOff",
            waiting_message="back-off 5m0s restarting failed container",
            restarts=rng.randint(3, 40),
            last_terminated="Error",
            not_ready_since=rng.choice((12, 30)) * MIN,
        )
    )


def rendered(findings: list[Any]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


def play(seed: int, steps: int) -> int:
    """Plays `steps` random events; returns how many steps were checked against the reference."""
    rng = random.Random(seed)
    pool = variants()
    keys = sorted(pool)
    model = HealthModel(ModelConfig())
    live: dict[Key, dict[str, Any]] = {}
    now = NOW - 60 * MIN

    def upsert(obj: dict[str, Any]) -> None:
        live[key_of(obj)] = obj
        model.upsert(as_decoded(obj) if rng.random() < 0.5 else copy.deepcopy(obj), now=now)

    for obj in (pool[key][0] for key in keys):
        upsert(obj)
    checked = 0
    for step in range(steps):
        roll = rng.random()
        if roll < 0.45:
            upsert(rng.choice(pool[rng.choice(keys)]))
        elif roll < 0.52:
            key = rng.choice(keys)
            if key in live and key.kind not in ("CustomResourceDefinition", "Kustomization"):
                model.delete(live.pop(key), now=now)
        elif roll < 0.62:
            upsert(fresh_lease(rng.choice(CONTROLLERS), now))
        elif roll < 0.72:
            upsert(late_lease(rng.choice(CONTROLLERS), now, ago=rng.choice((2, 4, 9))))
        elif roll < 0.78:
            upsert(crash_looping(rng.choice(CONTROLLERS), rng))
        elif roll < 0.82:
            pods = [o for k, o in live.items() if k.kind == "Pod" and rng.random() < 0.8]
            model.replace("v1", "Pod", pods, now=now)
            live = {k: o for k, o in live.items() if k.kind != "Pod"} | {key_of(p): p for p in pods}
        else:
            now += rng.choice((SEC, 20 * SEC, MIN, 6 * MIN, 11 * MIN))
        evaluation = model.evaluate(now)
        assert rendered(evaluation.findings) == rendered(model.reference(now)), f"seed {seed}, step {step}"
        checked += 1
        if step % SCRATCH_EVERY == 0 or step == steps - 1:
            scratch = evaluate(copy.deepcopy(list(live.values())), now=now, config=ModelConfig())
            assert snapshot(evaluation) == snapshot(scratch), f"seed {seed}, step {step} (from scratch)"
    return checked


@pytest.mark.parametrize("seed", range(SEEDS))
def test_kept_correlation_answers_equal_a_pass_from_scratch_after_every_step(seed: int) -> None:
    assert play(seed, STEPS) == STEPS


def test_an_incident_moved_in_time_and_ended_equals_the_reference_at_each_stage() -> None:
    """The moves make incidents: every controller's Lease written already expired (all down,
    every StatusStale explained by a ControllerDown), written again later still expired (the
    StatusStale findings move with the verdict), then renewed (none down, none stale)."""
    model = HealthModel(ModelConfig())
    pool = variants()
    for key in sorted(pool):
        model.upsert(pool[key][0], now=NOW)
    stages = []
    for ago in (9, 4, None):
        for name in CONTROLLERS:
            model.upsert(late_lease(name, NOW, ago=ago) if ago else fresh_lease(name, NOW), now=NOW)
        evaluation = model.evaluate(NOW)
        assert rendered(evaluation.findings) == rendered(model.reference(NOW))
        stages.append(evaluation)
    down, moved, back = stages
    assert {c.name for c in down.controllers if not c.up} >= set(CONTROLLERS)
    stale = [f for f in down.findings if f.type == "StatusStale"]
    assert stale
    assert all(f.root_cause and f.root_cause.startswith("ControllerDown/") for f in stale)
    assert {c.name for c in moved.controllers if not c.up} >= set(CONTROLLERS)
    assert [f.since for f in moved.findings if f.type == "StatusStale"] != [f.since for f in stale]
    assert not {c.name for c in back.controllers if not c.up} & set(CONTROLLERS)
    assert not [f for f in back.findings if f.type == "StatusStale"]
