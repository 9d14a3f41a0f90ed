"""Flux sharding (rules/shards.py): which workload of a controller serves an object.

The main kustomize-controller runs with `--watch-label-selector=!sharding.fluxcd.io/key`, shard1
with `sharding.fluxcd.io/key in (shard1)`. One named case per assignment rule, through the
engine (snapshot and heartbeat reads), and the projection keeping that one flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from tests.model.builders import (
    FLUX_NS,
    NOW,
    Obj,
    controller,
    controller_down,
    flux,
    kustomization,
    lease,
    run,
)
from tests.model.test_heartbeat_engine import metrics
from watcher.model.engine import HealthModel
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.projection import project
from watcher.model.rules.shards import SHARD_KEY, lease_name, watch_scope
from watcher.model.types import FindingType, HeartbeatState

KC = "kustomize-controller"
SHARD1 = f"{KC}-shard1"
MAIN_SELECTOR = f"!{SHARD_KEY}"
SHARD1_SELECTOR = f"{SHARD_KEY} in (shard1)"
S30 = timedelta(seconds=30)


def with_args(objs: list[Obj], *args: str) -> list[Obj]:
    """The controller's Deployment (the first object) started with these args."""
    objs[0]["spec"]["template"]["spec"]["containers"][0]["args"] = ["--log-level=info", *args]
    return objs


def main(selector: str | None = MAIN_SELECTOR) -> list[Obj]:
    objs = controller(KC, lease_renewed=None)
    return with_args(objs, f"--watch-label-selector={selector}") if selector is not None else objs


def shard(name: str = SHARD1, selector: str = SHARD1_SELECTOR, *, down: bool = False) -> list[Obj]:
    objs = (
        controller_down(name, "ghcr.io/fluxcd/kustomize-controller:v9")
        if down
        else controller(name, lease_renewed=None)
    )
    return with_args(objs, "--watch-label-selector", selector)


def others() -> list[Obj]:
    return [o for o in flux(leases=False) if KC not in o["metadata"]["name"]]


def keyed(name: str, key: str | None) -> Obj:
    return kustomization(name, labels={SHARD_KEY: key} if key is not None else None)


def ks(name: str) -> str:
    return f"Kustomization/{FLUX_NS}/{name}"


DOWN_SHARD1 = f"ControllerDown/Deployment/{FLUX_NS}/{SHARD1}"
DOWN_MAIN = f"ControllerDown/Deployment/{FLUX_NS}/{KC}"
NOT_SERVED_9 = f"ShardNotServed/Shard/{FLUX_NS}/{KC}-shard9"


@dataclass
class Case:
    controllers: list[Obj]
    objects: list[Obj]
    findings: dict[str, str | None] = field(default_factory=dict)
    """Expected findings: id -> the id of its root (None: a root)."""


CASES = {
    "one_workload_without_a_selector_serves_every_object_as_before": Case(
        main(None), [keyed("apps", None), keyed("tenants", "shard1")]
    ),
    "one_workload_without_a_selector_down_makes_every_object_stale_under_it_as_before": Case(
        controller_down(KC, "ghcr.io/fluxcd/kustomize-controller:v9"),
        [keyed("apps", None)],
        {DOWN_MAIN: None, f"StatusStale/{ks('apps')}": DOWN_MAIN},
    ),
    "a_shard_object_served_by_a_live_shard_has_no_finding": Case(
        main() + shard(), [keyed("apps", None), keyed("tenants", "shard1")]
    ),
    "a_shard_object_is_not_stale_when_the_main_controller_is_down": Case(
        with_args(
            controller_down(KC, "ghcr.io/fluxcd/kustomize-controller:v9"),
            f"--watch-label-selector={MAIN_SELECTOR}",
        )
        + shard(),
        [keyed("apps", None), keyed("tenants", "shard1")],
        {DOWN_MAIN: None, f"StatusStale/{ks('apps')}": DOWN_MAIN},
    ),
    "a_shard_object_whose_shard_is_down_is_stale_under_that_shard_not_the_main": Case(
        main() + shard(down=True),
        [keyed("apps", None), keyed("tenants", "shard1")],
        {DOWN_SHARD1: None, f"StatusStale/{ks('tenants')}": DOWN_SHARD1},
    ),
    "an_object_no_workload_selects_is_stale_under_a_shard_not_served_root": Case(
        main() + shard(),
        [keyed("apps", None), keyed("tenants", "shard9"), keyed("infra", "shard9")],
        {
            NOT_SERVED_9: None,
            f"StatusStale/{ks('tenants')}": NOT_SERVED_9,
            f"StatusStale/{ks('infra')}": NOT_SERVED_9,
        },
    ),
    "a_selector_that_cannot_be_read_leaves_what_it_may_select_neither_served_nor_unserved": Case(
        main() + shard(selector=f"{SHARD_KEY} in (shard1"), [keyed("apps", None), keyed("tenants", "shard1")]
    ),
    "a_suspended_object_no_workload_selects_waits_for_nothing": Case(
        main(), [kustomization("tenants", labels={SHARD_KEY: "shard9"}, suspend=True)]
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_an_object_is_served_by_the_workload_whose_selector_matches_it(name: str) -> None:
    case = CASES[name]
    evaluation = run(others(), case.controllers, case.objects)
    assert {f.id: f.root_cause for f in evaluation.findings} == case.findings


def test_shard_not_served_names_the_shard_the_selectors_and_how_many_objects_wait() -> None:
    case = CASES["an_object_no_workload_selects_is_stale_under_a_shard_not_served_root"]
    evaluation = run(others(), case.controllers, case.objects)
    root = next(f for f in evaluation.findings if f.type is FindingType.SHARD_NOT_SERVED)
    assert root.severity == "critical"
    assert root.message == (
        f"No {KC} workload selects the objects labelled {SHARD_KEY}=shard9: 2 objects wait, and nothing"
        f" reconciles them (its workloads: {KC}: --watch-label-selector={MAIN_SELECTOR};"
        f" {SHARD1}: --watch-label-selector={SHARD1_SELECTOR}). Start the shard that selects them, or"
        " change their label."
    )
    assert sorted(s["name"] for s in root.affected) == ["infra", "tenants"]
    assert root.evidence["shard"] == "shard9"
    health = {o.subject["name"]: o for o in evaluation.objects}
    assert health["tenants"].stale
    assert not health["apps"].stale


def test_a_selector_that_cannot_be_read_is_said_on_its_workload() -> None:
    case = CASES["a_selector_that_cannot_be_read_leaves_what_it_may_select_neither_served_nor_unserved"]
    evaluation = run(others(), case.controllers, case.objects)
    workload = next(c for c in evaluation.controllers if c.subject["name"] == SHARD1)
    assert workload.scope.startswith(f"its --watch-label-selector='{SHARD_KEY} in (shard1' cannot be read")


# -- The projection keeps the flag, and only it ---------------------------------------------------

FLAGS = {
    "equals_form": (["--watch-label-selector=a=1"], "a=1"),
    "space_form": (["--watch-label-selector", "a in (x, y)", "--log-level=info"], "a in (x, y)"),
    "the_last_one_written_wins": (["--watch-label-selector=a=1", "--watch-label-selector=b=2"], "b=2"),
    "no_flag_is_every_object": ([], None),
    "an_empty_value_is_every_object": (["--watch-label-selector="], None),
}


@pytest.mark.parametrize("name", FLAGS)
def test_the_projection_keeps_the_watch_label_selector_and_no_other_arg(name: str) -> None:
    args, selector = FLAGS[name]
    projected = project(with_args(controller(KC), *args)[0])
    kept = projected["spec"]["template"]["spec"]["containers"][0].get("args", [])
    assert all(arg.startswith("--watch-label-selector") for arg in kept)
    assert watch_scope(projected).text == selector


def test_a_selector_too_long_to_keep_is_unknown_never_every_object() -> None:
    projected = project(with_args(controller(KC), "--watch-label-selector=a in (" + "x," * 600 + "y)")[0])
    scope = watch_scope(projected)
    assert scope.problem
    assert scope.selects({}) is None


def test_a_shard_takes_the_lease_flux_names_after_its_selector() -> None:
    """fluxcd/pkg leaderelection.GenerateID: "<name>-leader-election-" + sha256(selector)[:8]."""
    assert lease_name(KC, watch_scope(project(main(None)[0]))) == f"{KC}-leader-election"
    assert lease_name(KC, watch_scope(project(main()[0]))) == f"{KC}-leader-election-42da7484"


def test_a_shard_whose_lease_runs_out_is_down_and_the_main_ones_lease_does_not_speak_for_it() -> None:
    stopped = shard()
    holder = f"{SHARD1}-7d9f-x2x4z_0c1f3a"
    name = lease_name(KC, watch_scope(project(stopped[0])))
    expired = lease(name, holder=holder, renewed=timedelta(minutes=10))
    fresh = lease(f"{KC}-leader-election", holder=f"{KC}-7d9f-x2x4z_0c1f3a")
    evaluation = run(others(), main(None), stopped, expired, fresh)
    up = {c.subject["name"]: (c.up, c.reason) for c in evaluation.controllers if c.name == KC}
    assert up == {KC: (True, "Available"), SHARD1: (False, "LeaseExpired")}


# -- Heartbeats per workload ----------------------------------------------------------------------------


def feed(
    reads: Mapping[str, Mapping[str, int] | None], objects: list[Obj], *, minutes: int = 23
) -> tuple[HealthModel, Evaluation]:
    """Reads every 30 s for each workload: the counters it reports (moving every 5 minutes);
    None: that workload is never read."""
    model = HealthModel()
    for obj in [*others(), *main(), *shard(), *objects]:
        model.upsert(project(obj), now=NOW)
    evaluation = model.evaluate(NOW)
    for i in range(minutes * 2 + 1):
        at = NOW + i * S30
        for workload, counts in reads.items():
            if counts is not None:
                model.heartbeat(workload, at=at, read=metrics({n: c + i // 10 for n, c in counts.items()}))
        evaluation = model.evaluate(at)
    return model, evaluation


OBJECTS = [keyed("apps", None), keyed("tenants", "shard1")]


def beats(evaluation: Evaluation) -> dict[str, HeartbeatState | None]:
    return {
        c.subject["name"]: c.heartbeat.state if c.heartbeat else None
        for c in evaluation.controllers
        if c.name == KC
    }


def test_a_shards_objects_are_judged_by_the_shards_own_read_not_the_mains() -> None:
    _, evaluation = feed({KC: {"apps": 1}, SHARD1: {"tenants": 1}}, OBJECTS)
    assert evaluation.findings == []
    assert beats(evaluation) == {KC: HeartbeatState.RECONCILING, SHARD1: HeartbeatState.RECONCILING}


def test_a_shard_never_read_has_its_heartbeat_unknown_and_its_objects_are_no_false_alarm() -> None:
    _, evaluation = feed({KC: {"apps": 1}, SHARD1: None}, OBJECTS)
    assert evaluation.findings == []
    assert beats(evaluation) == {KC: HeartbeatState.RECONCILING, SHARD1: HeartbeatState.UNKNOWN}


def test_an_unserved_objects_not_reconciling_folds_under_its_shard_root() -> None:
    _, evaluation = feed({KC: {"apps": 1}, SHARD1: {"tenants": 1}}, [*OBJECTS, keyed("infra", "shard9")])
    found = {f.id: f.root_cause for f in evaluation.findings}
    assert found == {
        NOT_SERVED_9: None,
        f"StatusStale/{ks('infra')}": NOT_SERVED_9,
        f"NotReconciling/{ks('infra')}": NOT_SERVED_9,
    }
    main_beat = next(c.heartbeat for c in evaluation.controllers if c.subject["name"] == KC)
    assert main_beat is not None
    assert main_beat.overdue == 0


def test_each_workload_of_a_controller_is_its_own_metrics_target() -> None:
    model = HealthModel()
    for obj in [*main(), *shard()]:
        model.upsert(project(obj), now=NOW)
    model.evaluate(NOW)
    targets = {t.controller: t.workload for t in model.metrics_targets()}
    assert targets == {KC: f"Deployment/{FLUX_NS}/{KC}", SHARD1: f"Deployment/{FLUX_NS}/{SHARD1}"}
