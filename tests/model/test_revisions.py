"""Flux revisions compare by digest, whatever their spelling; durations and times parse like Go's,
and an age is spelled as on-call says it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from watcher.model.ingest.objects import format_age, parse_duration, parse_time
from watcher.model.ingest.revisions import parse_revision, same_revision, short

A = "a" * 40
B = "b" * 40
D = "d" * 64

SAME = [
    pytest.param(f"main@sha1:{A}", f"main/{A}", True, id="v1-git-revision-equals-legacy-branch-slash-sha"),
    pytest.param(f"sha256:{D}", f"latest@sha256:{D}", True, id="bare-digest-equals-tag-at-digest"),
    pytest.param(f"v1.2.3@sha256:{D}", f"sha256:{D}", True, id="semver-tag-at-digest-equals-digest"),
    pytest.param(f"latest/sha256:{D}", f"latest@sha256:{D}", True, id="legacy-oci-spelling-equals-v1"),
    pytest.param(D, f"sha256:{D}", True, id="legacy-bucket-bare-hex-equals-digest"),
    pytest.param(f"main@sha1:{A.upper()}", f"main@sha1:{A}", True, id="digest-case-is-ignored"),
    pytest.param(f"main@sha1:{A}", f"main@sha1:{B}", False, id="different-commits-differ"),
    pytest.param(f"main@sha1:{A}", f"release@sha1:{A}", True, id="ref-is-only-a-label"),
    pytest.param("6.5.0", "6.5.0", True, id="chart-versions-equal"),
    pytest.param("v6.5.0", "6.5.0", True, id="leading-v-is-ignored-on-versions"),
    pytest.param("6.5.0", "6.5.1", False, id="chart-versions-differ"),
    pytest.param("6.5.0+abcdef1", "6.5.0", False, id="build-metadata-matters"),
    pytest.param("", "", False, id="unknown-equals-nothing"),
    pytest.param(f"main@sha1:{A}", "", False, id="known-never-equals-unknown"),
]


@pytest.mark.parametrize(("left", "right", "same"), SAME)
def test_same_revision_compares_digests_not_strings(left: str, right: str, same: bool) -> None:
    assert same_revision(left, right) is same
    assert same_revision(right, left) is same


def test_parse_revision_splits_ref_and_digest() -> None:
    parsed = parse_revision(f"refs/heads/main@sha1:{A}")

    assert (parsed.ref, parsed.digest) == ("refs/heads/main", A)


@pytest.mark.parametrize(
    ("revision", "shown"),
    [
        pytest.param(f"main@sha1:{A}", "main@aaaaaaaaaaaa", id="ref-and-short-digest"),
        pytest.param(f"sha256:{D}", "dddddddddddd", id="digest-only"),
        pytest.param("6.5.0", "6.5.0", id="version-as-is"),
    ],
)
def test_short_revision_for_messages(revision: str, shown: str) -> None:
    assert short(revision) == shown


@pytest.mark.parametrize(
    ("text", "duration"),
    [
        pytest.param("5m", timedelta(minutes=5), id="minutes"),
        pytest.param("1h30m", timedelta(hours=1, minutes=30), id="hours-and-minutes"),
        pytest.param("10s", timedelta(seconds=10), id="seconds"),
        pytest.param("1.5h", timedelta(minutes=90), id="fractional-hours"),
        pytest.param("2h45m30s", timedelta(hours=2, minutes=45, seconds=30), id="three-units"),
        pytest.param("300ms", timedelta(milliseconds=300), id="milliseconds"),
        pytest.param("0", timedelta(0), id="zero"),
        pytest.param("5", None, id="unitless-is-not-a-duration"),
        pytest.param("5 m", None, id="spaces-are-not-allowed"),
        pytest.param("-5m", None, id="negative-interval-is-rejected"),
        pytest.param("", None, id="empty"),
    ],
)
def test_parse_duration_reads_go_durations(text: str, duration: timedelta | None) -> None:
    assert parse_duration(text) == duration


@pytest.mark.parametrize(
    ("age", "text"),
    [
        pytest.param(timedelta(seconds=0), "0s ago", id="now"),
        pytest.param(timedelta(seconds=45), "45s ago", id="seconds"),
        pytest.param(timedelta(minutes=4, seconds=30), "4m30s ago", id="minutes-and-seconds"),
        pytest.param(timedelta(hours=3, minutes=12, seconds=9), "3h12m ago", id="two-largest-units"),
        pytest.param(timedelta(days=7, seconds=5), "7d ago", id="zero-units-skipped"),
        pytest.param(timedelta(seconds=-5), "in the future", id="clock-skew"),
    ],
)
def test_ages_read_like_on_call_says_them(age: timedelta, text: str) -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert format_age(now - age, now) == text


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        pytest.param("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=UTC), id="rfc3339-zulu"),
        pytest.param(
            "2024-05-01T12:00:00.123456789Z",
            datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC),
            id="nanoseconds-are-truncated",
        ),
        pytest.param(
            "2024-05-01T14:00:00+02:00", datetime(2024, 5, 1, 12, tzinfo=UTC), id="offset-is-normalised"
        ),
        pytest.param("yesterday", None, id="not-a-time"),
    ],
)
def test_parse_time_reads_kubernetes_timestamps(text: str, moment: datetime | None) -> None:
    assert parse_time(text) == moment
