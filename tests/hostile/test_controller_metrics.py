"""Hostile /metrics bodies: whatever a controller's endpoint (or whatever answers on its port)
sends, a value that cannot be read is unknown and named, never 0, and a body too large or too
long is refused before it is held, never read partly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from watcher.model.ingest.controller_metrics import (
    MAX_LABEL_VALUE,
    MAX_PROBLEMS,
    ControllerMetrics,
    Unreadable,
    parse_controller_metrics,
)
from watcher.model.rules.heartbeat_rules import Liveness, Outcome, Reason, not_reconciling
from watcher.model.store.heartbeats import Heartbeats

BASE = 'controller_runtime_reconcile_total{controller="c",result="success"} 3\n'
OBJECT = 'gotk_reconcile_duration_seconds_count{kind="K",namespace="n",name="a"}'
REF = ("K", "n", "a")


def readable(body: bytes | str) -> ControllerMetrics:
    parsed = parse_controller_metrics(body)
    assert isinstance(parsed, ControllerMetrics), parsed
    return parsed


UNKNOWN_VALUES = {
    "nan": "NaN",
    "plus_inf": "+Inf",
    "minus_inf": "-Inf",
    "negative": "-1",
    "not_a_number": "three",
    "python_only_underscores": "1_000",
    "empty": "",
    "two_values": "1 2 3",
    "a_fractional_timestamp": "1 17.5",
}


@pytest.mark.parametrize("case", UNKNOWN_VALUES)
def test_an_objects_counter_that_is_not_a_finite_count_is_unknown_and_named_never_zero(case: str) -> None:
    got = readable(f"{BASE}{OBJECT} {UNKNOWN_VALUES[case]}\n")
    assert got.objects == {REF: None}
    assert len(got.problems) == 1
    assert "unknown" in got.problems[0]
    assert "line 2" in got.problems[0]


def test_a_nan_reconcile_total_makes_the_controllers_total_unknown() -> None:
    got = readable(BASE + 'controller_runtime_reconcile_total{controller="c",result="error"} NaN\n')
    assert got.reconciles == {"c": {"success": 3.0, "error": None}}
    assert got.reconciles_total() is None


def test_a_nan_queue_depth_is_unknown_not_an_empty_queue() -> None:
    got = readable(BASE + 'workqueue_depth{controller="c",name="c",priority="0"} NaN\n')
    assert got.queues["c"].depth is None


UNREADABLE_LABELS = {
    "unknown_escape": OBJECT.replace('name="a"', 'name="a\\t"'),
    "unclosed_value": 'gotk_reconcile_duration_seconds_count{kind="K",name="a} 1',
    "unquoted_value": "gotk_reconcile_duration_seconds_count{kind=K} 1",
    "label_twice": 'gotk_reconcile_duration_seconds_count{kind="K",kind="L",name="a"} 1',
    "bad_label_name": 'gotk_reconcile_duration_seconds_count{1kind="K"} 1',
    "unclosed_set": 'gotk_reconcile_duration_seconds_count{kind="K" 1',
    "no_space_before_value": f"{OBJECT}1",
    "a_label_value_longer_than_any_name": OBJECT.replace('name="a"', f'name="{"a" * (MAX_LABEL_VALUE + 1)}"'),
}


@pytest.mark.parametrize("case", UNREADABLE_LABELS)
def test_a_sample_whose_labels_cannot_be_read_is_named_and_not_taken(case: str) -> None:
    got = readable(f"{BASE}{UNREADABLE_LABELS[case]}\n")
    assert got.problems
    assert got.problems[0].startswith("line 2: gotk_reconcile_duration_seconds_count")
    assert REF not in got.objects or got.objects[REF] is None


def test_a_series_written_twice_is_unknown_whichever_value_came_last() -> None:
    got = readable(f"{BASE}{OBJECT} 1\n{OBJECT} 2\n")
    assert got.objects == {REF: None}
    assert "appears twice" in got.problems[0]


def test_a_malformed_type_line_and_a_nameless_sample_are_named() -> None:
    got = readable(BASE + "# TYPE gotk_reconcile_duration_seconds lasagna\n{} 1\n")
    assert [p.split(":")[0] for p in got.problems] == ["line 2", "line 3"]


def test_problems_past_the_limit_are_counted_not_listed() -> None:
    lines = "".join(
        f'gotk_reconcile_duration_seconds_count{{kind="K",namespace="n",name="o{i}"}} NaN\n'
        for i in range(50)
    )
    got = readable(BASE + lines)
    assert len(got.problems) == MAX_PROBLEMS
    assert got.problems_left_off == 50 - MAX_PROBLEMS
    assert all(value is None for value in got.objects.values())
    assert len(got.objects) == 50


def test_a_body_larger_than_the_bound_is_refused_before_it_is_decoded() -> None:
    got = parse_controller_metrics(b"\xff" * 101, max_bytes=100)
    assert got == Unreadable("the exposition is 101 bytes, more than the 100 read")


def test_a_body_with_more_samples_than_the_bound_is_refused_whole_not_read_partly() -> None:
    body = BASE + "".join(f"go_thing_{i} 1\n" for i in range(10))
    assert parse_controller_metrics(body, max_series=10) == Unreadable(
        "the exposition has more than 10 samples"
    )
    assert isinstance(parse_controller_metrics(body, max_series=11), ControllerMetrics)


def test_a_body_that_is_not_utf8_is_unreadable() -> None:
    assert parse_controller_metrics(BASE.encode() + b"\xc3\x28 1\n") == Unreadable(
        f"the exposition is not UTF-8 text (byte {len(BASE)})"
    )


@pytest.mark.parametrize(
    "body",
    ["", "<html>502 Bad Gateway</html>", "go_goroutines 12\n", "# HELP only\n"],
    ids=["empty", "proxy_error_page", "another_programs_metrics", "only_comments"],
)
def test_a_body_without_controller_runtime_series_is_unreadable_never_a_controller_with_no_objects(
    body: str,
) -> None:
    assert isinstance(parse_controller_metrics(body), Unreadable)


def test_a_sample_of_a_family_not_read_is_never_decoded_so_it_cannot_be_misread() -> None:
    got = readable(BASE + 'go_info{version="\\q"} NaN\n')
    assert got.problems == ()


def test_an_object_missing_from_a_read_that_lost_a_counter_line_is_unknown_never_not_reconciling() -> None:
    """The lost line may have been its own: absence proves nothing that read."""
    beats = Heartbeats()
    start = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    other = 'gotk_reconcile_duration_seconds_count{kind="K",namespace="n",name="b"} 1\n'
    beats.read("kc", at=start, samples=readable(BASE + other))
    lost = readable(BASE + other + 'gotk_reconcile_duration_seconds_count{kind="K",name="a\\q"} 1\n')
    assert lost.incomplete == {"gotk_reconcile_duration_seconds_count"}
    later = start + timedelta(hours=3)
    beats.read("kc", at=later, samples=lost)
    obj = {
        "apiVersion": "x/v1",
        "kind": "K",
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {"interval": "1m"},
    }
    verdict = not_reconciling(
        obj,
        beat=beats.object("kc", REF),
        controller=beats.controller("kc", now=later, stale_after=timedelta(seconds=90)),
        liveness=Liveness.UP,
        now=later,
    )
    assert (verdict.outcome, verdict.reason) == (Outcome.UNKNOWN, Reason.COUNTER_UNKNOWN)


def test_a_series_without_its_identifying_label_is_named_and_its_family_incomplete() -> None:
    got = readable(BASE + 'gotk_reconcile_duration_seconds_count{kind="K",namespace="n"} 1\n')
    assert got.problems == ("line 2: gotk_reconcile_duration_seconds_count: no name label",)
    assert got.objects == {}
    assert got.incomplete == {"gotk_reconcile_duration_seconds_count"}


def test_a_lost_reconcile_total_line_makes_the_total_unknown_not_smaller() -> None:
    got = readable(BASE + 'controller_runtime_reconcile_total{result="error"} 1\n')
    assert got.reconciles_total() is None


def test_a_lost_queue_line_makes_every_queues_depth_unknown() -> None:
    got = readable(
        BASE
        + 'workqueue_depth{controller="c",name="c",priority="0"} 0\n'
        + 'workqueue_depth{controller="d",name="d\\q",priority="0"} 7\n'
    )
    assert got.queues["c"].depth is None
