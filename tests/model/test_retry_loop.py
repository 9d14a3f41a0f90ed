"""RetryLoop as real controllers' Events make it (tests/lab's recordings show each case).

kustomize-controller writes one Event per failed attempt when its message carries a random part
(`kustomization path not found: stat /tmp/kustomization-<random>/...`), each with count 1: the
API server never aggregates them, so only all of them together are the loop. Events outlive their
object by the API server's event TTL, and stay recent after the object recovered.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    Obj,
    by_id,
    cond,
    flux,
    git_repository,
    kustomization,
    run,
    ts,
    warning_about,
)
from watcher.model.types import FindingType

KS = "Kustomization/flux-system"
LOOP = f"RetryLoop/{KS}/apps/ArtifactFailed"
ENOENT = "no such file or directory"


def attempt(n: int, *, ago: timedelta, about: str = "apps") -> Obj:
    """One failed attempt's Event, its message with a temporary directory of its own."""
    return warning_about(
        about,
        name=f"{about}.{n:04x}",
        reason="ArtifactFailed",
        message=f"kustomization path not found: stat /tmp/kustomization-{1000 + n}/nope: {ENOENT}",
        count=1,
        first=ago,
        last=ago,
    )


def attempts(minutes: int, *, about: str = "apps") -> list[Obj]:
    """One attempt a minute for `minutes` minutes, the last one a minute ago."""
    return [attempt(n, ago=(minutes - n) * MIN, about=about) for n in range(minutes)]


def failing_apps() -> Obj:
    return kustomization(
        "apps", conditions=[cond("Ready", "False", "ArtifactFailed", "kustomization path not found", ago=MIN)]
    )


def recovered_apps(*, ago: timedelta) -> Obj:
    return kustomization(
        "apps", conditions=[cond("Ready", "True", "ReconciliationSucceeded", "Applied", ago=ago)]
    )


def attempting(reason: str, *, ago: timedelta) -> Obj:
    """A Kustomization in the middle of an attempt: Ready=Unknown, Reconciling=True `reason`."""
    return kustomization(
        "apps",
        conditions=[
            cond("Ready", "Unknown", "Progressing", "Reconciliation in progress", ago=ago),
            cond("Reconciling", "True", reason, "Fetching manifests", ago=ago),
        ],
    )


CASES = [
    pytest.param([failing_apps(), *attempts(12)], {LOOP}, id="one-event-per-attempt-adds-up-to-a-loop"),
    pytest.param(
        [failing_apps(), *attempts(8)], set(), id="attempts-for-less-than-the-threshold-are-no-loop-yet"
    ),
    pytest.param(
        [kustomization("other"), *attempts(12)], set(), id="events-about-a-deleted-object-raise-nothing"
    ),
    pytest.param([*attempts(12)], {LOOP}, id="events-about-a-kind-the-snapshot-does-not-hold-still-count"),
    pytest.param(
        [recovered_apps(ago=MIN // 2), *attempts(12)],
        set(),
        id="an-object-ready-since-its-last-warning-has-recovered",
    ),
    pytest.param(
        [attempting("Progressing", ago=MIN // 2), *attempts(12)],
        set(),
        id="an-attempt-begun-after-a-success-since-its-last-warning-has-recovered",
    ),
    pytest.param(
        [attempting("ProgressingWithRetry", ago=MIN // 2), *attempts(12)],
        {LOOP},
        id="a-retry-after-a-failure-is-the-loop-still-running",
    ),
    pytest.param(
        [recovered_apps(ago=3 * MIN), *attempts(12)],
        {LOOP},
        id="warnings-after-ready-true-are-a-loop-still-running",
    ),
]


@pytest.mark.parametrize(("objs", "expected"), CASES)
def test_retry_loop_counts_every_event_about_one_object_and_reason(
    objs: list[Obj], expected: set[str]
) -> None:
    found = by_id(run(flux(), git_repository(), objs))
    assert {fid for fid, f in found.items() if f.type is FindingType.RETRY_LOOP} == expected


def test_a_loop_of_one_event_per_attempt_is_dated_from_the_first_and_quotes_the_last() -> None:
    loop = by_id(run(flux(), git_repository(), failing_apps(), attempts(12)))[LOOP]

    assert loop.since == NOW - 12 * MIN
    assert (loop.evidence["count"], loop.evidence["events"]) == (12, 12)
    assert loop.evidence["event"] == "apps.000b"
    assert loop.message == (
        "Kustomization flux-system/apps keeps failing: Warning ArtifactFailed repeated 12 times in 12 "
        f"Events from {ts(12 * MIN)} to {ts(MIN)}: kustomization path not found: "
        f"stat /tmp/kustomization-1011/nope: {ENOENT}. "
        "It is retrying without success; fix the cause in the message."
    )
