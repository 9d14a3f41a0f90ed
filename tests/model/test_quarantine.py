"""One hostile object is set aside with its reason; everything beside it is judged as usual.

Each case puts one object with a value a controller never writes (but anyone who may write
the object can) into a snapshot with a Stalled Kustomization and healthy Flux controllers,
and runs it through project() and evaluate() as `stalewatch analyze` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pytest

from tests.model.builders import (
    FLUX_NS,
    MIN,
    Obj,
    cond,
    deployment,
    flux,
    helm_release,
    kustomization,
    lease,
    pod,
    run,
)
from watcher.export.report import render_json, render_text
from watcher.model.types import ModelConfig, RejectReason, Thresholds

FAR_FUTURE = "9999-12-31T23:59:59-01:00"
YEAR_ONE = "0001-01-01T00:00:00+01:00"


def stalled_bystander() -> Obj:
    return kustomization(
        "apps",
        conditions=[
            cond("Ready", "False", "BuildFailed", "kustomize build failed", ago=30 * MIN),
            cond("Stalled", "True", "BuildFailed", "kustomize build failed", ago=30 * MIN),
        ],
    )


def _set(obj: Obj, path: str, value: Any) -> Obj:
    target: Any = obj
    *steps, last = path.split(".")
    for step in steps:
        target = target[int(step)] if isinstance(target, list) else target[step]
    target[last] = value
    return obj


def reconciling(name: str, *, interval: str = "10m") -> Obj:
    return kustomization(
        name,
        interval=interval,
        conditions=[
            cond("Ready", "True", "ReconciliationSucceeded"),
            cond("Reconciling", "True", "Progressing"),
        ],
    )


@dataclass(frozen=True)
class Case:
    hostile: Callable[[], Obj]
    reason: RejectReason
    field: str
    value: str
    evaluated: bool = True
    config: ModelConfig = field(default_factory=ModelConfig)


CASES = [
    pytest.param(
        Case(
            lambda: _set(kustomization("infra"), "status.conditions.0.lastTransitionTime", FAR_FUTURE),
            RejectReason.TIME_OUT_OF_RANGE,
            "status.conditions[0].lastTransitionTime",
            FAR_FUTURE,
        ),
        id="far-future-offset-time",
    ),
    pytest.param(
        Case(
            lambda: _set(kustomization("infra"), "metadata.creationTimestamp", YEAR_ONE),
            RejectReason.TIME_OUT_OF_RANGE,
            "metadata.creationTimestamp",
            YEAR_ONE,
        ),
        id="year-one-offset-time",
    ),
    pytest.param(
        Case(
            lambda: _set(deployment("web", "apps"), "spec.replicas", 10**20),
            RejectReason.INTEGER_OUT_OF_RANGE,
            "spec.replicas",
            "100000000000000000000",
        ),
        id="integer-past-int64",
    ),
    pytest.param(
        Case(
            lambda: _set(kustomization("infra"), "status.conditions.0.observedGeneration", 1e41),
            RejectReason.INTEGER_OUT_OF_RANGE,
            "status.conditions[0].observedGeneration",
            "1e+41",
        ),
        id="float-where-an-integer-is-expected",
    ),
    pytest.param(
        Case(
            lambda: _set(helm_release("podinfo", "apps"), "status.history.0.version", 2.5),
            RejectReason.NOT_AN_INTEGER,
            "status.history[0].version",
            "2.5",
        ),
        id="fraction-where-a-count-is-expected",
    ),
    pytest.param(
        Case(
            lambda: _set(
                lease(
                    "kustomize-controller-leader-election", holder="kustomize-controller-7d9f-x2x4z_0c1f3a"
                ),
                "spec.leaseDurationSeconds",
                9_000_000_000_000_000,
            ),
            RejectReason.DURATION_OUT_OF_RANGE,
            "spec.leaseDurationSeconds",
            "9000000000000000",
        ),
        id="lease-duration-that-overflows-a-timedelta",
    ),
    pytest.param(
        Case(
            lambda: _set(kustomization("infra"), "status.inventory.entries", "web"),
            RejectReason.WRONG_TYPE,
            "status.inventory.entries",
            "web",
        ),
        id="inventory-entries-a-string",
    ),
    pytest.param(
        Case(
            lambda: _set(deployment("web", "apps"), "metadata.managedFields", {"manager": "kubectl"}),
            RejectReason.WRONG_TYPE,
            "metadata.managedFields",
            '{"manager": "kubectl"}',
        ),
        id="managed-fields-an-object",
    ),
    pytest.param(
        Case(
            lambda: _set(kustomization("infra"), "spec.suspend", "false"),
            RejectReason.WRONG_TYPE,
            "spec.suspend",
            "false",
        ),
        id="suspend-a-string",
    ),
    pytest.param(
        Case(
            lambda: _set(kustomization("infra"), "status.conditions.0.lastTransitionTime", "yesterday"),
            RejectReason.TIME_UNPARSEABLE,
            "status.conditions[0].lastTransitionTime",
            "yesterday",
        ),
        id="unparseable-condition-time",
    ),
    pytest.param(
        Case(
            lambda: reconciling("infra", interval="1h"),
            RejectReason.RULE_ERROR,
            "",
            "OverflowError: ",
            evaluated=False,
            config=ModelConfig(thresholds=replace(Thresholds(), stuck_reconciling_interval_factor=1e300)),
        ),
        id="a-rule-raising-on-an-object",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_the_hostile_object_is_rejected_with_its_reason_and_the_others_are_still_judged(case: Case) -> None:
    hostile = case.hostile()

    evaluation = run(*flux(), stalled_bystander(), hostile, config=case.config)

    [rejection] = evaluation.rejected
    name = hostile["metadata"]["name"]
    assert (rejection.subject["kind"], rejection.subject["name"]) == (hostile["kind"], name)
    assert (rejection.reason, rejection.field, rejection.evaluated) == (
        case.reason,
        case.field,
        case.evaluated,
    )
    assert rejection.value.startswith(case.value)
    assert f"{hostile['kind']} {hostile['metadata']['namespace']}/{name}" in rejection.message
    assert [(str(f.type), f.subject["name"]) for f in evaluation.findings] == [("Stalled", "apps")]


def test_a_field_left_out_still_lets_the_rest_of_the_object_be_judged() -> None:
    """The far-future time is dropped; the object's Stalled condition is still read."""
    hostile = stalled_bystander()
    hostile["status"]["conditions"][1]["lastTransitionTime"] = FAR_FUTURE

    evaluation = run(*flux(), hostile)

    [finding] = evaluation.findings
    assert (str(finding.type), finding.subject["name"], finding.since) == ("Stalled", "apps", None)
    assert [r.field for r in evaluation.rejected] == ["status.conditions[1].lastTransitionTime"]


def test_every_bad_field_of_one_object_is_listed() -> None:
    hostile = kustomization("infra")
    hostile["metadata"]["creationTimestamp"] = YEAR_ONE
    hostile["status"]["conditions"][0] |= {"lastTransitionTime": FAR_FUTURE, "observedGeneration": 2**64}

    evaluation = run(*flux(), hostile)

    assert [(r.field, str(r.reason)) for r in evaluation.rejected] == [
        ("metadata.creationTimestamp", "TimeOutOfRange"),
        ("status.conditions[0].lastTransitionTime", "TimeOutOfRange"),
        ("status.conditions[0].observedGeneration", "IntegerOutOfRange"),
    ]


def test_a_rejected_object_is_never_all_healthy_in_the_report() -> None:
    hostile = _set(kustomization("infra"), "status.conditions.0.lastTransitionTime", FAR_FUTURE)
    evaluation = run(*flux(), hostile)

    text = render_text(evaluation, objects=13)

    assert "all healthy" not in text
    assert text.splitlines()[-2:] == [
        "1 object set aside in whole or in part (rejected):",
        f"  Kustomization {FLUX_NS}/infra: status.conditions[0].lastTransitionTime {FAR_FUTURE} is out of"
        " range (TimeOutOfRange): left out, the rest of the object evaluated",
    ]


def test_the_json_report_lists_the_rejected_as_the_findings_api_does() -> None:
    hostile = reconciling("infra", interval="1h")
    config = ModelConfig(thresholds=replace(Thresholds(), stuck_reconciling_interval_factor=1e300))
    document = orjson.loads(render_json(run(*flux(), hostile, config=config), objects=13))

    assert document["summary"]["rejected"] == 1
    [entry] = document["rejected"]
    assert entry["subject"]["name"] == "infra"
    assert (entry["reason"], entry["field"], entry["evaluated"]) == ("RuleError", "", False)
    assert entry["message"].startswith(f"Kustomization {FLUX_NS}/infra: not evaluated, a rule failed on it (")


def test_a_wrong_typed_field_says_what_it_is_not_and_what_was_written() -> None:
    hostile = _set(kustomization("infra"), "status.inventory.entries", "web")

    [rejection] = run(*flux(), hostile).rejected

    assert rejection.message == (
        f"Kustomization {FLUX_NS}/infra: status.inventory.entries is not a list (WrongType, written: web):"
        " left out, the rest of the object evaluated"
    )


def test_an_object_whose_wrong_typed_fields_left_nothing_to_read_is_never_all_healthy() -> None:
    """The old silent drop: a whole status that was a list read as no status at all."""
    hostile = _set(kustomization("infra"), "status", ["Ready"])

    text = render_text(run(*flux(), hostile), objects=13)

    assert "all healthy" not in text.lower()
    assert "status is not an object (WrongType" in text


def test_a_pod_whose_container_status_parts_are_wrong_typed_is_judged_from_the_rest() -> None:
    """The workload rule reads a container's state and lastState as mappings: project() leaves
    out any that is not one, so a hostile part costs its own field, not the Pod's verdict."""
    hostile = pod("web-7d9f-abcde", "apps", app="web", ready=False, waiting="CrashLoopBackOff")
    hostile["status"]["containerStatuses"][0]["lastState"] = {"terminated": "oops"}
    hostile["status"]["containerStatuses"] += [
        {"name": "sidecar", "ready": False, "state": "garbage", "lastState": 5},
        {"name": "init", "ready": False, "state": {"waiting": "x"}},
    ]

    evaluation = run(*flux(), hostile)

    [finding] = evaluation.findings
    assert (str(finding.type), finding.evidence["detail"]) == ("WorkloadUnhealthy", "CrashLoopBackOff")
    assert [(r.field, str(r.reason), r.evaluated) for r in evaluation.rejected] == [
        ("status.containerStatuses[0].lastState.terminated", "WrongType", True),
        ("status.containerStatuses[1].state", "WrongType", True),
        ("status.containerStatuses[1].lastState", "WrongType", True),
        ("status.containerStatuses[2].state.waiting", "WrongType", True),
    ]
