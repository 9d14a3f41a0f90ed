"""The live model's kept correlation answers exactly what a correlation pass from scratch does.

A differential property test: random churn and random incidents (controllers going down by an
expired Lease, a Lease written again while still expired, a crash-looping Pod, and coming
back), thousands of steps, and after EVERY step the live model's findings are compared with
`HealthModel.reference()`: one pass over the same candidates with nothing kept (no RetryLoop,
blast radius, owner or release answer kept, no pass skipped, no satellite merged in place).
Every so often the whole Evaluation is also compared with evaluate() from scratch, which judges
every object again (test_incremental_identity.py does that on more sequences). The sequences are
played by tests/model/churn.py, with this test's own moves (Leases written already expired,
crash-looping controller Pods) added to its mix.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

import pytest

from tests.model.builders import MIN, NOW, lease, pod
from tests.model.churn import (
    CONTROLLERS,
    Churn,
    Move,
    delete_an_object,
    fresh_lease,
    move_the_clock,
    play,
    relist_pods,
    renew_a_lease,
    upsert_a_variant,
    variants,
)
from tests.model.test_engine import snapshot
from watcher.model.engine import HealthModel
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


def write_an_expired_lease(churn: Churn) -> None:
    churn.upsert(late_lease(churn.rng.choice(CONTROLLERS), churn.now, ago=churn.rng.choice((2, 4, 9))))


def crash_loop_a_controller(churn: Churn) -> None:
    churn.upsert(crash_looping(churn.rng.choice(CONTROLLERS), churn.rng))


MIX: dict[Move, float] = {
    upsert_a_variant: 0.45,
    delete_an_object: 0.07,
    renew_a_lease: 0.10,
    write_an_expired_lease: 0.10,
    crash_loop_a_controller: 0.06,
    relist_pods: 0.04,
    move_the_clock: 0.18,
}


def rendered(findings: list[Any]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


@pytest.mark.parametrize("seed", range(SEEDS))
def test_kept_correlation_answers_equal_a_pass_from_scratch_after_every_step(seed: int) -> None:
    checked = []

    def equals_the_reference(churn: Churn) -> None:
        evaluation = churn.model.evaluate(churn.now)
        assert rendered(evaluation.findings) == rendered(churn.model.reference(churn.now)), churn.where
        checked.append(churn.step)
        if churn.step % SCRATCH_EVERY == 0 or churn.last:
            assert snapshot(evaluation) == snapshot(churn.from_scratch()), f"{churn.where} (from scratch)"

    play(seed, STEPS, MIX, equals_the_reference)
    assert checked == list(range(STEPS))


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
