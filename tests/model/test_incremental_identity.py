"""The live HealthModel, fed random event sequences, answers exactly what evaluate() from scratch does.

Every object of the incident scenarios and the examples is a variant of its key; a sequence
(tests/model/churn.py) upserts variants (half of the time in the form the reflector's decoder
gives them: healthy Pods packed) and deletes them, relists Pods, renews or abandons controller
Leases (controllers go down and come back) and moves the clock (thresholds fall due), evaluating
as it goes. Each Evaluation is compared whole with evaluate() of the same objects at the same
moment.
"""

from __future__ import annotations

import pytest

from tests.model.builders import MIN, NOW, SEC, flux
from tests.model.churn import (
    Churn,
    Move,
    delete_an_object,
    move_the_clock,
    play,
    relist_pods,
    renew_a_lease,
    upsert_a_variant,
    variants,
)
from tests.model.test_engine import snapshot
from tests.model.test_incidents import tofu_incident
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig

MIX: dict[Move, float] = {
    upsert_a_variant: 0.5,
    delete_an_object: 0.1,
    renew_a_lease: 0.15,
    relist_pods: 0.05,
    move_the_clock: 0.2,
}


def evaluates_like_a_snapshot(churn: Churn) -> None:
    """Compared after about two steps in five (evaluations in between are skipped, so changes
    pile up between two passes) and after the last."""
    if churn.rng.random() < 0.4 or churn.last:
        assert snapshot(churn.model.evaluate(churn.now)) == snapshot(churn.from_scratch()), churn.where


@pytest.mark.parametrize("seed", range(12))
def test_random_event_sequences_evaluate_like_a_snapshot_of_the_same_objects(seed: int) -> None:
    play(seed, 150, MIX, evaluates_like_a_snapshot)


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
