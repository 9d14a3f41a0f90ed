"""The analyze report rendered from hand-made Evaluations: layout rules, not the model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from watcher.export.report import render_json, render_text
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.objects import describe
from watcher.model.types import Finding, FindingType, Severity, Subject

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def subject(kind: str, namespace: str, name: str) -> Subject:
    return {"apiVersion": "example.io/v1", "kind": kind, "namespace": namespace, "name": name}


DEPLOY = subject("Deployment", "flux-system", "tofu-controller")
TF_VPC = subject("Terraform", "flux-system", "vpc")
TF_EKS = subject("Terraform", "flux-system", "eks")
KS_APPS = subject("Kustomization", "flux-system", "apps")


def finding(
    type_: FindingType,
    subj: Subject,
    *,
    severity: Severity = Severity.WARNING,
    root: str | None = None,
    **extra: Any,
) -> Finding:
    return Finding(
        id=f"{type_}/{subj['kind']}/{subj['namespace']}/{subj['name']}",
        type=type_,
        severity=severity,
        subject=subj,
        message=extra.pop("message", f"{subj['name']} is {type_}"),
        since=extra.pop("since", NOW - timedelta(days=7, hours=2, minutes=5)),
        evidence=extra.pop("evidence", {}),
        root_cause=root,
        affected=extra.pop("affected", []),
    )


def evaluation(*findings: Finding) -> Evaluation:
    return Evaluation(now=NOW, findings=list(findings), objects=[], controllers=[], revisions=[])


DOWN = finding(
    FindingType.CONTROLLER_DOWN,
    DEPLOY,
    severity=Severity.CRITICAL,
    message="tofu-controller is down.\nFix the image.",
    evidence={
        "pod": "tofu-controller-7kq2p",
        "reason": "ImagePullBackOff",
        "restarts": 0,
        "images": ["a", "b"],
    },
    affected=[TF_VPC, KS_APPS, TF_EKS],
)
STALE_VPC = finding(FindingType.STATUS_STALE, TF_VPC, severity=Severity.INFO, root=DOWN.id)
STALE_EKS = finding(FindingType.STATUS_STALE, TF_EKS, severity=Severity.INFO, root=DOWN.id)
BLOCKED = finding(FindingType.DEPENDENCY_BLOCKED, KS_APPS, root=DOWN.id)


def test_a_clean_evaluation_says_how_many_objects_were_healthy() -> None:
    assert render_text(evaluation(), objects=42) == "No findings: 42 objects evaluated, all healthy.\n"


def test_a_root_block_lists_symptoms_in_its_blast_radius_grouped_by_kind() -> None:
    text = render_text(evaluation(DOWN, STALE_VPC, BLOCKED, STALE_EKS), objects=30)
    assert text == (
        "CRITICAL ControllerDown: Deployment flux-system/tofu-controller\n"
        "  since 2026-11-23T09:55:00Z (7d2h ago)\n"
        "  tofu-controller is down.\n"
        "        Fix the image.\n"
        "  blast radius: 3 objects\n"
        "    Kustomization (1)\n"
        "      flux-system/apps  DependencyBlocked\n"
        "    Terraform (2)\n"
        "      flux-system/eks   StatusStale\n"
        "      flux-system/vpc   StatusStale\n"
        "  evidence:\n"
        "    pod: tofu-controller-7kq2p\n"
        "    reason: ImagePullBackOff\n"
        "    restarts: 0\n"
        '    images: ["a","b"]\n'
        "\n"
        "1 root cause (1 critical), 3 symptoms; 30 objects evaluated.\n"
    )


def test_symptoms_are_never_reported_as_problems_of_their_own() -> None:
    text = render_text(evaluation(DOWN, STALE_VPC, BLOCKED, STALE_EKS), objects=30)
    assert [line for line in text.splitlines() if not line.startswith(" ")] == [
        "CRITICAL ControllerDown: Deployment flux-system/tofu-controller",
        "",
        "1 root cause (1 critical), 3 symptoms; 30 objects evaluated.",
    ]


def test_a_symptom_whose_root_is_missing_is_shown_as_a_root_rather_than_dropped() -> None:
    orphan = finding(FindingType.STATUS_STALE, TF_VPC, severity=Severity.INFO, root="ControllerDown/gone")
    text = render_text(evaluation(orphan), objects=1)
    assert text.startswith("INFO StatusStale: Terraform flux-system/vpc\n")


def test_several_roots_keep_the_models_order_and_the_summary_counts_them_by_severity() -> None:
    stuck = finding(FindingType.STUCK_RECONCILING, KS_APPS, since=None)
    text = render_text(evaluation(DOWN, stuck, STALE_VPC), objects=9)
    assert "\n\nWARNING StuckReconciling: Kustomization flux-system/apps\n  since unknown\n" in text
    assert text.endswith("2 root causes (1 critical, 1 warning), 1 symptom; 9 objects evaluated.\n")


def test_load_errors_are_pointed_at_and_never_called_all_healthy() -> None:
    assert render_text(evaluation(), objects=3, load_errors=2) == (
        "No findings in the 3 objects evaluated.\n"
        "2 load errors (see stderr): what they name was not evaluated.\n"
    )


def test_colour_marks_severity_and_subject_only_when_asked() -> None:
    coloured = render_text(evaluation(DOWN), objects=1, color=True)
    assert coloured.startswith(
        "\x1b[1;31mCRITICAL\x1b[0m ControllerDown: \x1b[1mDeployment flux-system/tofu-controller\x1b[0m\n"
    )
    assert "\x1b[" not in render_text(evaluation(DOWN), objects=1)


@pytest.mark.parametrize(
    ("subj", "text"),
    [
        pytest.param(KS_APPS, "Kustomization flux-system/apps", id="namespaced"),
        pytest.param(
            subject("CustomResourceDefinition", "", "terraforms.infra.contrib.fluxcd.io"),
            "CustomResourceDefinition terraforms.infra.contrib.fluxcd.io",
            id="cluster-scoped",
        ),
    ],
)
def test_subjects_are_named_like_kubectl(subj: Subject, text: str) -> None:
    assert describe(subj) == text


def test_json_is_the_findings_as_to_dict_plus_a_fixed_shape_summary() -> None:
    document = orjson.loads(render_json(evaluation(DOWN, STALE_VPC, BLOCKED), objects=30, load_errors=1))
    assert document["findings"] == [f.to_dict() for f in (DOWN, STALE_VPC, BLOCKED)]
    assert document["summary"] == {
        "now": "2026-11-30T12:00:00Z",
        "objects": 30,
        "findings": 3,
        "roots": 1,
        "by_severity": {"critical": 1, "warning": 1, "info": 1},
        "by_type": {
            str(t): {"ControllerDown": 1, "StatusStale": 1, "DependencyBlocked": 1}.get(t, 0)
            for t in FindingType
        },
        "load_errors": 1,
        "rejected": 0,
        "unjudged": {},
        "unread": {},
    }
    assert document["rejected"] == []


def test_a_symptom_on_the_roots_own_object_is_noted_on_the_root_not_in_its_blast_radius() -> None:
    skew = finding(FindingType.REVISION_SKEW, KS_APPS)
    stuck = finding(FindingType.STUCK_RECONCILING, KS_APPS, root=skew.id)
    lines = render_text(evaluation(skew, stuck), objects=4).splitlines()
    assert lines[3:5] == ["  also on this object: StuckReconciling", ""]
    assert not any("blast radius" in line for line in lines)


def test_nothing_loaded_is_not_called_healthy() -> None:
    assert render_text(evaluation(), objects=0, load_errors=1) == (
        "No objects were evaluated.\n1 load error (see stderr): what they name was not evaluated.\n"
    )
