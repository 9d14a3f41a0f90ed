"""Bad input: every mutation of a realistic object either projects to something the model
evaluates without error, or is refused with one MalformedObject line. Never a traceback."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from tests.model.builders import MIN, NOW, Obj, event, flux, git_repository, helm_release, lease, terraform
from tests.model.test_incidents import tofu_incident
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.objects import key_of
from watcher.model.ingest.projection import MalformedObject, project
from watcher.model.types import ModelConfig

ODD_VALUES: list[Any] = [
    None,
    "",
    "x",
    -1,
    0,
    2**40,
    1.5,
    True,
    [],
    {},
    ["x"],
    [{}],
    {"a": 1},
    [None],
    "2024-13-45",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "1e400h",
    "99999999999999999999h",
]


def paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside nested dicts and lists."""
    found = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            found += paths(value, (*prefix, index))
    return found


def mutated(obj: Obj, rng: random.Random) -> Obj:
    out = copy.deepcopy(obj)
    path = rng.choice(paths(out))
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = rng.choice(ODD_VALUES)
    return out


def world() -> list[Obj]:
    return [
        *tofu_incident(),
        git_repository(),
        helm_release("web", "apps"),
        terraform("s3"),
        lease("x", holder="y", renewed=MIN),
        event(
            "e", kind="Pod", involved="p", reason="BackOff", message="m", count=3, first=20 * MIN, last=MIN
        ),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_mutated_objects_are_refused_in_one_line_or_evaluated(seed: int) -> None:
    rng = random.Random(seed)
    originals = world()
    projected, refusals = [], []
    for _ in range(60):
        raw = mutated(rng.choice(originals), rng)
        try:
            projected.append(project(raw))
        except MalformedObject as error:
            refusals.append(str(error))
    assert all(line and "\n" not in line for line in refusals)
    projected += [project(o) for o in originals]
    rng.shuffle(projected)
    projected = list({key_of(o): o for o in projected}.values())  # one version per object

    batch = evaluate(projected, now=NOW, config=ModelConfig())
    model = HealthModel(ModelConfig())
    for obj in projected:
        model.upsert(obj, now=NOW)
    for obj in projected[::3]:
        model.delete(obj, now=NOW)
        model.upsert(obj, now=NOW)

    assert [f.to_dict() for f in model.evaluate(NOW).findings] == [f.to_dict() for f in batch.findings]


def test_flux_objects_with_every_status_field_removed_still_evaluate() -> None:
    bare = []
    for obj in [*flux(), *tofu_incident()]:
        stripped = {k: v for k, v in obj.items() if k != "status"}
        bare.append(project(stripped))

    evaluation = evaluate(bare, now=NOW, config=ModelConfig())

    assert len(evaluation.objects) == len(
        [o for o in bare if o["kind"] in ("Kustomization", "Terraform", "GitRepository")]
    )


def test_timestamps_at_the_end_of_the_calendar_and_absurd_durations_evaluate() -> None:
    def at_the_end(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: at_the_end(v) for k, v in value.items()}
        if isinstance(value, list):
            return [at_the_end(v) for v in value]
        if isinstance(value, str) and value.startswith("2024-"):
            return "9999-12-31T23:59:59Z"
        return value

    objs = [at_the_end(o) for o in world()]
    for obj in objs:
        if "interval" in obj.get("spec", {}):
            obj["spec"]["interval"] = "99999999999999999999h"
        if obj["kind"] == "Lease":
            obj["spec"]["leaseDurationSeconds"] = 2**40

    evaluation = evaluate([project(o) for o in objs], now=NOW, config=ModelConfig())

    assert all(f.type != "StuckReconciling" for f in evaluation.findings)
