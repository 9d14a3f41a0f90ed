"""The controller metrics parser on real Flux controllers' /metrics (tests/lab/recordings) and on
the corners of text format 0.0.4 they do not happen to use. Expected values are read off the
recorded files by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from watcher.model.ingest.controller_metrics import (
    ControllerMetrics,
    Queue,
    Unreadable,
    parse_controller_metrics,
)

RECORDINGS = Path(__file__).parents[1] / "lab" / "recordings" / "metrics"
NS = "flux-system"


def recorded(checkpoint: str, controller: str) -> ControllerMetrics | Unreadable:
    return parse_controller_metrics((RECORDINGS / checkpoint / f"{controller}.txt").read_bytes())


def readable(body: bytes | str) -> ControllerMetrics:
    parsed = parse_controller_metrics(body)
    assert isinstance(parsed, ControllerMetrics), parsed
    return parsed


RECORDED: dict[str, tuple[str, str, dict[str, Any]]] = {
    "kustomize_controller_early_reports_every_kustomization_including_the_one_deleted_later": (
        "early",
        "kustomize-controller",
        {
            "objects": {
                ("Kustomization", NS, "apps"): 5,
                ("Kustomization", NS, "gone"): 7,
                ("Kustomization", NS, "on-missing"): 7,
                ("Kustomization", NS, "path-missing"): 5,
                ("Kustomization", NS, "rejected"): 5,
            },
            "reconciles": {"kustomization": {"error": 0, "requeue": 5, "requeue_after": 24, "success": 0}},
            "total": 29,
            "workers": {"kustomization": 0},
            "queue": ("kustomization", Queue(0, 0, 0)),
            "started_at": 1.79662812626e09,
        },
    ),
    "source_controller_failing_reports_git_repositories_and_helm_charts": (
        "failing",
        "source-controller",
        {
            "objects": {
                ("GitRepository", NS, "lab"): 15,
                ("GitRepository", NS, "missing"): 11,
                ("HelmChart", NS, "flux-system-no-wait"): 15,
                ("HelmChart", NS, "flux-system-wait-fails"): 15,
            },
            "total": 67,
            "workers": {
                "bucket": 0,
                "gitrepository": 0,
                "helmchart": 0,
                "helmrepository": 0,
                "ocirepository": 0,
            },
            "queue": ("gitrepository", Queue(0, 0, 0)),
            "started_at": 1.796628126e09,
        },
    ),
    "helm_controller_with_its_source_down_has_two_workers_busy": (
        "source-controller-down",
        "helm-controller",
        {
            "objects": {("HelmRelease", NS, "no-wait"): 17, ("HelmRelease", NS, "wait-fails"): 4},
            "reconciles": {"helmrelease": {"error": 1, "requeue": 2, "requeue_after": 18, "success": 0}},
            "total": 21,
            "workers": {"helmrelease": 2},
            "queue": ("helmrelease", Queue(0, 7.070858374, 10.698292329000001)),
        },
    ),
    "kustomize_controller_with_its_source_down_has_four_workers_busy": (
        "source-controller-down",
        "kustomize-controller",
        {
            "total": 91,
            "workers": {"kustomization": 4},
            "queue": ("kustomization", Queue(0, 11.446229462, 36.862105600999996)),
        },
    ),
}


@pytest.mark.parametrize("case", RECORDED)
def test_a_recorded_exposition_reads_as_written_in_the_file(case: str) -> None:
    checkpoint, controller, want = RECORDED[case]
    got = recorded(checkpoint, controller)
    assert isinstance(got, ControllerMetrics)
    assert got.problems == ()
    if "objects" in want:
        assert got.objects == want["objects"]
    if "reconciles" in want:
        assert got.reconciles == want["reconciles"]
    assert got.reconciles_total() == want["total"]
    assert got.active_workers == want["workers"]
    name, queue = want["queue"]
    assert got.queues[name] == queue
    if "started_at" in want:
        assert got.started_at == want["started_at"]


@pytest.mark.parametrize(
    "path", sorted(RECORDINGS.glob("*/*.txt")), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_every_recorded_exposition_of_a_running_controller_reads_without_a_problem(path: Path) -> None:
    got = parse_controller_metrics(path.read_bytes())
    if path.read_text().startswith("# unreadable"):
        assert isinstance(got, Unreadable)
    else:
        assert isinstance(got, ControllerMetrics)
        assert got.problems == ()
        assert got.objects


def test_the_recording_of_a_controller_that_was_down_is_unreadable_not_an_empty_healthy_read() -> None:
    got = recorded("source-controller-down", "source-controller")
    assert got == Unreadable(
        "no controller_runtime_reconcile_total series: not a controller-runtime metrics endpoint"
    )


def test_a_library_queue_is_read_but_kept_apart_by_name() -> None:
    got = recorded("early", "kustomize-controller")
    assert isinstance(got, ControllerMetrics)
    assert set(got.queues) == {"kustomization", "DynamicClientCertificate"}


BASE = 'controller_runtime_reconcile_total{controller="c",result="success"} 3\n'


FORMAT: dict[str, tuple[str, dict[tuple[str, str, str], float | None]]] = {
    "escapes_in_a_label_value_are_undone": (
        'gotk_reconcile_duration_seconds_count{kind="K",namespace="n",name="a\\"b\\\\c\\nd"} 2\n',
        {("K", "n", 'a"b\\c\nd'): 2.0},
    ),
    "a_timestamp_after_the_value_is_read_and_set_aside": (
        'gotk_reconcile_duration_seconds_count{kind="K",namespace="n",name="a"} 2 1796628126000\n',
        {("K", "n", "a"): 2.0},
    ),
    "blanks_around_labels_and_a_trailing_comma_are_allowed": (
        'gotk_reconcile_duration_seconds_count{ kind = "K" ,\tnamespace="n", name="a", } \t 4e0\n',
        {("K", "n", "a"): 4.0},
    ),
    "help_and_type_lines_and_free_comments_are_not_samples": (
        "# HELP gotk_reconcile_duration_seconds The duration in seconds of a GitOps reconciliation.\n"
        "# TYPE gotk_reconcile_duration_seconds histogram\n"
        "# just a comment {not a sample}\n"
        'gotk_reconcile_duration_seconds_count{kind="K",namespace="n",name="a"} 1\n',
        {("K", "n", "a"): 1.0},
    ),
    "crlf_line_ends_are_read": (
        'gotk_reconcile_duration_seconds_count{kind="K",namespace="n",name="a"} 7\r\n',
        {("K", "n", "a"): 7.0},
    ),
    "label_order_does_not_matter": (
        'gotk_reconcile_duration_seconds_count{name="a",namespace="n",kind="K"} 1\n',
        {("K", "n", "a"): 1.0},
    ),
}


@pytest.mark.parametrize("case", FORMAT)
def test_text_format_0_0_4_corners_read_as_prometheus_reads_them(case: str) -> None:
    body, objects = FORMAT[case]
    got = readable(BASE + body)
    assert got.problems == ()
    assert got.objects == objects


def test_a_queues_depth_is_summed_over_its_priorities() -> None:
    got = readable(
        BASE
        + 'workqueue_depth{controller="c",name="c",priority="0"} 2\n'
        + 'workqueue_depth{controller="c",name="c",priority="10"} 3\n'
    )
    assert got.queues["c"].depth == 5
