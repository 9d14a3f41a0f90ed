"""The model collector: what each series says, and the exact exposition text (golden files)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import Counter, Gauge, Histogram, generate_latest
from prometheus_client.registry import CollectorRegistry

from watcher.export.metrics import (
    DOWN_REASONS,
    FAMILIES,
    STATUSES,
    ModelCollector,
    build_registry,
    render,
    text_format,
)
from watcher.model.evaluation import Evaluation
from watcher.model.types import ControllerHealth, FindingType

from . import evaluations as ev

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("STALEWATCH_UPDATE_GOLDEN") == "1"


def registry_for(evaluation: Evaluation | None) -> CollectorRegistry:
    return build_registry(lambda: evaluation)


def value(evaluation: Evaluation, metric: str, /, **labels: str) -> float | None:
    return registry_for(evaluation).get_sample_value(metric, labels)


@pytest.mark.parametrize(
    "scene",
    [
        pytest.param(ev.empty, id="empty"),
        pytest.param(ev.controller_down, id="controller_down"),
        pytest.param(ev.controller_stuck, id="controller_stuck"),
        pytest.param(ev.odd_names, id="odd_names"),
        pytest.param(ev.policy_denied, id="policy_denied"),
        pytest.param(ev.crd_ownership_risk, id="crd_ownership_risk"),
        pytest.param(ev.prune_orphan, id="prune_orphan"),
        pytest.param(ev.policy_compliance, id="policy_compliance"),
        pytest.param(ev.conflicting_writers, id="conflicting_writers"),
    ],
)
def test_exposition_matches_golden_text_and_passes_promtool(scene: Callable[[], Evaluation]) -> None:
    body, _ = render(registry_for(scene()))
    text = body.decode()
    golden = GOLDEN / f"{scene.__name__}.prom"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text()
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_registering_describes_every_family_without_evaluating() -> None:
    def source() -> Evaluation:
        raise AssertionError("registering must not evaluate")

    build_registry(source)
    described = {m.name: m.documentation for m in ModelCollector(source).describe()}
    assert list(described) == list(FAMILIES)
    assert all(name.startswith("stalewatch_") and doc for name, doc in described.items())


def test_nothing_is_rendered_before_the_first_evaluation() -> None:
    assert generate_latest(registry_for(None)) == b""


def test_a_root_finding_names_itself_in_its_root_labels() -> None:
    labels = {
        "type": "ControllerDown",
        "severity": "critical",
        "kind": "Deployment",
        "namespace": "flux-system",
        "name": "kustomize-controller",
        "root": "true",
        "root_type": "ControllerDown",
        "root_kind": "Deployment",
        "root_namespace": "flux-system",
        "root_name": "kustomize-controller",
    }
    assert value(ev.controller_down(), "stalewatch_finding", **labels) == 1


def test_a_symptom_names_its_root_cause_in_its_root_labels() -> None:
    labels = {
        "type": "StatusStale",
        "severity": "info",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": "apps",
        "root": "false",
        "root_type": "ControllerDown",
        "root_kind": "Deployment",
        "root_namespace": "flux-system",
        "root_name": "kustomize-controller",
    }
    assert value(ev.controller_down(), "stalewatch_finding", **labels) == 1


def chained() -> Evaluation:
    """A symptom of a symptom, a symptom of a missing finding, and two findings pointing at each other."""
    base = ev.controller_down()
    kc = base.findings[0]
    return Evaluation(
        now=ev.NOW,
        findings=[
            kc,
            ev.finding("a", FindingType.STATUS_STALE, ev.ks("x", "a"), root_cause=kc.id),
            ev.finding("b", FindingType.DEPENDENCY_BLOCKED, ev.ks("x", "b"), root_cause="a"),
            ev.finding("c", FindingType.DEPENDENCY_BLOCKED, ev.ks("x", "c"), root_cause="gone"),
            ev.finding("d", FindingType.DEPENDENCY_BLOCKED, ev.ks("x", "d"), root_cause="e"),
            ev.finding("e", FindingType.DEPENDENCY_BLOCKED, ev.ks("x", "e"), root_cause="d"),
        ],
        objects=[],
        controllers=[],
        revisions=[],
    )


@pytest.mark.parametrize(
    ("name", "root"),
    [
        pytest.param(
            "b",
            ("ControllerDown", "Deployment", "flux-system", "kustomize-controller"),
            id="symptom_of_a_symptom_names_the_final_root",
        ),
        pytest.param("c", ("", "", "", ""), id="symptom_of_a_missing_finding_has_empty_root_labels"),
        pytest.param("d", ("", "", "", ""), id="symptoms_pointing_at_each_other_have_empty_root_labels"),
    ],
)
def test_root_labels_follow_the_chain_to_the_root(name: str, root: tuple[str, str, str, str]) -> None:
    families = {m.name: m for m in ModelCollector(chained).collect()}
    [sample] = [s for s in families["stalewatch_finding"].samples if s.labels["name"] == name]
    got = tuple(sample.labels[k] for k in ("root_type", "root_kind", "root_namespace", "root_name"))
    assert got == root
    assert sample.labels["root"] == "false"


def test_object_status_is_a_stateset_with_one_current_state() -> None:
    evaluation = ev.controller_down()
    where = {"kind": "HelmRelease", "namespace": "podinfo", "name": "podinfo"}
    states = {s: value(evaluation, "stalewatch_object_status", **where, status=s) for s in STATUSES}
    assert states == {s: (1.0 if s == "InProgress" else 0.0) for s in STATUSES}


@pytest.mark.parametrize(
    ("controller", "expected"),
    [
        pytest.param(
            ControllerHealth(ev.deployment("a"), up=True, reason="", groups=(), since=None),
            {},
            id="up_has_every_reason_zero",
        ),
        pytest.param(
            ControllerHealth(ev.deployment("a"), up=False, reason="LeaseExpired", groups=(), since=None),
            {"LeaseExpired": 1.0},
            id="down_has_its_reason_one",
        ),
        pytest.param(
            ControllerHealth(ev.deployment("a"), up=False, reason="SomethingNew", groups=(), since=None),
            {},
            id="down_for_a_reason_outside_the_set_has_every_reason_zero",
        ),
    ],
)
def test_controller_down_reason_is_a_stateset_over_the_fixed_reasons(
    controller: ControllerHealth, expected: dict[str, float]
) -> None:
    evaluation = Evaluation(now=ev.NOW, findings=[], objects=[], controllers=[controller], revisions=[])
    got = {
        r: value(evaluation, "stalewatch_controller_down_reason", namespace="flux-system", name="a", reason=r)
        for r in DOWN_REASONS
    }
    assert got == {r: expected.get(r, 0.0) for r in DOWN_REASONS}


def test_a_controller_heartbeat_is_a_stateset_and_unknown_has_no_overdue_count() -> None:
    evaluation = ev.controller_stuck()
    beat = "stalewatch_controller_heartbeat"
    where = {"namespace": "flux-system"}
    assert value(evaluation, beat, **where, name="kustomize-controller", state="Stuck") == 1.0
    assert value(evaluation, beat, **where, name="kustomize-controller", state="Reconciling") == 0.0
    assert value(evaluation, beat, **where, name="source-controller", state="Unknown") == 1.0
    overdue = "stalewatch_controller_overdue_objects"
    assert value(evaluation, overdue, **where, name="kustomize-controller") == 2.0
    assert value(evaluation, overdue, **where, name="helm-controller") == 0.0
    assert value(evaluation, overdue, **where, name="source-controller") is None
    assert value(evaluation, beat, **where, name="notification-controller", state="Unknown") is None


def test_the_same_object_twice_is_rendered_once() -> None:
    base = ev.controller_down()
    twice = Evaluation(
        now=base.now,
        findings=base.findings + base.findings,
        objects=base.objects + base.objects,
        controllers=base.controllers + base.controllers,
        revisions=base.revisions + base.revisions,
    )
    assert generate_latest(registry_for(twice)) == generate_latest(registry_for(base))


def test_a_deleted_object_disappears_from_the_next_scrape() -> None:
    current = [ev.controller_down()]
    registry = build_registry(lambda: current[0])
    where = {"kind": "Kustomization", "namespace": "flux-system", "name": "apps"}
    assert registry.get_sample_value("stalewatch_object_stale", where) == 1
    current[0] = ev.empty()
    assert registry.get_sample_value("stalewatch_object_stale", where) is None


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        pytest.param(None, "text/plain; version=0.0.4; charset=utf-8", id="prometheus_text_by_default"),
        pytest.param(
            "application/openmetrics-text; version=1.0.0",
            "application/openmetrics-text",
            id="openmetrics_when_asked",
        ),
    ],
)
def test_render_negotiates_the_format_from_accept(accept: str | None, content_type: str) -> None:
    body, got = render(registry_for(ev.controller_down()), accept=accept)
    assert got.startswith(content_type)
    assert b"stalewatch_controller_up" in body


def test_fast_text_format_is_byte_identical_to_prometheus_client_for_every_metric_type() -> None:
    registry = registry_for(ev.odd_names())
    Counter("stalewatch_test_events", "Events.\nTwo lines \\ here.", ["kind"], registry=registry).labels(
        kind='a"b'
    ).inc()
    Histogram("stalewatch_test_duration_seconds", "Durations.", registry=registry).observe(0.3)
    Gauge("stalewatch_test_up", "Up.", registry=registry).set(1)
    assert text_format(registry) == generate_latest(registry)


def test_a_scrape_rebuilds_only_the_families_whose_model_list_changed() -> None:
    """The model keeps a list object until something in it changes; so does the collector."""
    before = ev.controller_down()
    current = [before]
    collector = ModelCollector(lambda: current[0])
    first = {m.name: m for m in collector.collect()}
    again = {m.name: m for m in collector.collect()}
    stamp = "stalewatch_evaluation_timestamp_seconds"
    assert all(again[name] is first[name] for name in first if name != stamp)

    current[0] = Evaluation(
        now=before.now,
        findings=before.findings,
        objects=before.objects,
        controllers=[*before.controllers],
        revisions=before.revisions,
    )
    changed = {m.name: m for m in collector.collect()}
    rebuilt = {name for name in first if changed[name] is not first[name]}
    assert rebuilt == {
        "stalewatch_controller_up",
        "stalewatch_controller_down_reason",
        "stalewatch_controller_info",
        "stalewatch_controller_heartbeat",
        "stalewatch_controller_last_reconcile_timestamp_seconds",
        "stalewatch_controller_overdue_objects",
        stamp,
    }


def test_text_reused_from_the_last_scrape_is_the_same_text() -> None:
    registry = registry_for(ev.controller_down())
    first = text_format(registry)
    assert text_format(registry) == first == generate_latest(registry)


def test_a_scrape_after_one_object_changed_renders_only_that_object() -> None:
    """The model keeps unchanged ObjectHealth entries as the same objects; so do their rows."""
    before = ev.controller_down()
    assert len(before.objects) > 1
    current = [before]
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ModelCollector(lambda: current[0]))
    text_format(registry)
    rendered = {m.name: m for m in registry.collect()}["stalewatch_object_stale"]

    changed = dataclasses.replace(before.objects[0], stale=not before.objects[0].stale)
    current[0] = dataclasses.replace(before, objects=[changed, *before.objects[1:]])
    body = text_format(registry)
    again = {m.name: m for m in registry.collect()}["stalewatch_object_stale"]

    assert body == generate_latest(registry)
    assert again is not rendered
    assert again.chunks[0] != rendered.chunks[0]
    assert all(new is old for new, old in zip(again.chunks[1:], rendered.chunks[1:], strict=True))


def test_violations_no_stack_owns_are_counted_under_the_unattributed_stack() -> None:
    labels = {
        "engine": "gatekeeper",
        "policy_kind": "K8sRequiredLabels",
        "policy": "must-have-owner",
        "enforcement_action": "dryrun",
        "result": "fail",
    }
    scene = ev.policy_compliance()
    owned = {"stack_kind": "Kustomization", "stack_namespace": "flux-system", "stack_name": "team-a"}
    nobody = {"stack_kind": "unattributed", "stack_namespace": "", "stack_name": ""}
    assert value(scene, "stalewatch_policy_violations", **labels, **owned) == 20
    assert value(scene, "stalewatch_policy_violations", **labels, **nobody) == 3
