"""A pass over only the subjects a change reaches gives what a pass over every subject does.

With every controller up, correlation runs over the components a change reaches
(store/components.py) and keeps every other finding. Random churn of the incident scenarios'
and the examples' objects (Pods failing and recovering under releases, dependencies and sources
failing, Events, deletions, relists, the clock moving past thresholds), every controller's Lease
renewed at the start and whenever the clock moves, so that they stay up: after every step the
live model's findings are compared with `HealthModel.reference()`, a pass from scratch over every
subject, and every so often the whole Evaluation with evaluate() from scratch.
"""

from __future__ import annotations

import pytest

from tests.model.churn import (
    CONTROLLERS,
    Churn,
    Move,
    delete_an_object,
    fresh_lease,
    move_the_clock,
    play,
    relist_pods,
    upsert_a_variant,
)
from tests.model.test_engine import snapshot
from watcher.model.ingest.objects import Key

SEEDS, STEPS = 6, 400
SCRATCH_EVERY = 50


def not_the_controllers_own(key: Key) -> bool:
    """The controllers' own workloads, Pods and Leases stay out of the pool: they stay up."""
    return not (key.namespace == "flux-system" and key.kind in ("Deployment", "ReplicaSet", "Pod", "Lease"))


def renew_every_lease(churn: Churn) -> None:
    for name in CONTROLLERS:
        churn.upsert(fresh_lease(name, churn.now))


def move_the_clock_with_leases_renewed(churn: Churn) -> None:
    move_the_clock(churn)
    renew_every_lease(churn)


MIX: dict[Move, float] = {
    upsert_a_variant: 0.70,
    delete_an_object: 0.10,
    relist_pods: 0.05,
    move_the_clock_with_leases_renewed: 0.15,
}


@pytest.mark.parametrize("seed", range(SEEDS))
def test_correlating_only_what_a_change_reaches_equals_a_pass_over_everything(seed: int) -> None:
    def equals_the_reference(churn: Churn) -> None:
        evaluation = churn.model.evaluate(churn.now)
        rendered = [f.to_dict() for f in evaluation.findings]
        assert rendered == [f.to_dict() for f in churn.model.reference(churn.now)], churn.where
        if churn.step % SCRATCH_EVERY == 0 or churn.last:
            assert snapshot(evaluation) == snapshot(churn.from_scratch()), f"{churn.where} (from scratch)"

    play(seed, STEPS, MIX, equals_the_reference, pool=not_the_controllers_own, setup=renew_every_lease)
