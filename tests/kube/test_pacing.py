"""Pacing: how long the live loop waits before its next pass, from what the last ones cost."""

from __future__ import annotations

import pytest

from watcher.kube.pacing import Pacing

FIXED, PER_CHANGE = 0.0005, 0.0001
"""A pass's cost in these tests: FIXED once, plus PER_CHANGE for each change it evaluates."""


@pytest.mark.parametrize(
    ("debounce", "last_pass", "woken_at", "wait"),
    [
        pytest.param(0.0, None, 100.0, 0.0, id="the-first-change-is-evaluated-at-once"),
        pytest.param(0.0, (9.98, 10.0, 0.02), 100.0, 0.0, id="a-change-after-a-quiet-spell-at-once"),
        pytest.param(0.05, None, 100.0, 0.05, id="a-debounce-is-the-least-wait-after-a-change"),
        pytest.param(
            0.0,
            (99.99, 100.0, 0.002),
            100.0,
            0.002 * Pacing.SHARE,
            id="back-to-back-passes-are-spread-by-cost",
        ),
        pytest.param(
            0.0,
            (100.0, 100.0, 0.0001),
            100.0,
            0.0001 * Pacing.SHARE,
            id="a-cheap-pass-is-followed-almost-at-once",
        ),
        pytest.param(
            0.05, (100.0, 100.0, 0.0001), 100.0, 0.05, id="a-cheap-pass-never-waits-less-than-the-debounce"
        ),
        pytest.param(
            0.0,
            (99.9, 100.0, 0.1),
            100.0,
            0.4,
            id="the-next-pass-starts-at-most-longest-after-the-last-began",
        ),
        pytest.param(
            0.0, (99.7, 100.0, 0.3), 100.0, 0.3, id="a-pass-longer-than-half-longest-waits-its-own-time"
        ),
        pytest.param(
            0.0, (98.0, 100.0, 2.0), 100.0, 0.5, id="a-costly-pass-never-delays-a-change-past-longest"
        ),
    ],
)
def test_passes_wait_in_proportion_to_their_cost_within_bounds(
    debounce: float, last_pass: tuple[float, float, float] | None, woken_at: float, wait: float
) -> None:
    pacing = Pacing(debounce=debounce, longest=0.5)
    if last_pass is not None:
        started, ended, cost = last_pass
        pacing.passed(started=started, ended=ended, cost=cost, changes=10)
    assert pacing.delay(woken_at) == pytest.approx(wait)


def churned(pacing: Pacing, batches: list[int], *, at: float = 100.0) -> float:
    """Passes of these batch sizes, each costing FIXED + PER_CHANGE a change; the moment the last ended."""
    for changes in batches:
        cost = FIXED + PER_CHANGE * changes
        at += 0.001
        pacing.passed(started=at, ended=at + cost, cost=cost, changes=changes)
        at += cost
    return at


VARIED = [5, 40, 12, 25, 3, 30] * 4 + [8]
"""Batches of churn, an odd number of them: the pass after them waits its full share."""


def test_under_churn_only_the_cost_changes_do_not_explain_is_waited_for() -> None:
    pacing = Pacing(debounce=0.0, longest=0.5)
    at = churned(pacing, VARIED)
    assert pacing.delay(at) == pytest.approx(FIXED * Pacing.SHARE, abs=1e-6)


def test_every_other_wait_is_half_so_that_the_batches_vary() -> None:
    pacing = Pacing(debounce=0.0, longest=0.5)
    at = churned(pacing, [*VARIED, 8])
    assert pacing.delay(at) == pytest.approx(FIXED * Pacing.SHARE / 2, abs=1e-6)


def test_until_batches_vary_a_pass_waits_for_its_whole_cost() -> None:
    pacing = Pacing(debounce=0.0, longest=0.5)
    at = churned(pacing, [20] * 9)
    assert pacing.delay(at) == pytest.approx((FIXED + PER_CHANGE * 20) * Pacing.SHARE)


def test_a_pass_over_everything_among_cheap_ones_waits_for_what_it_cost_beyond_its_changes() -> None:
    pacing = Pacing(debounce=0.0, longest=0.5)
    at = churned(pacing, VARIED)
    pacing.passed(started=at, ended=at + 0.01, cost=0.01, changes=12)
    beyond = 0.01 - PER_CHANGE * 12
    assert pacing.delay(at + 0.01) == pytest.approx(beyond * Pacing.SHARE / 2, rel=1e-3)


def test_a_pass_over_everything_does_not_move_what_a_change_is_learnt_to_cost() -> None:
    pacing = Pacing(debounce=0.0, longest=0.5)
    at = churned(pacing, VARIED)
    pacing.passed(started=at, ended=at + 0.01, cost=0.01, changes=12)
    at = churned(pacing, [8], at=at + 0.01)
    assert pacing.delay(at) == pytest.approx(FIXED * Pacing.SHARE, abs=1e-6)


def test_when_costs_move_for_good_the_fit_starts_again() -> None:
    pacing = Pacing(debounce=0.0, longest=0.5)
    at = churned(pacing, VARIED)
    for changes in [*VARIED] * 2:  # an incident: every pass costs four times as much
        cost = 4 * (FIXED + PER_CHANGE * changes)
        pacing.passed(started=at, ended=at + cost, cost=cost, changes=changes)
        at += cost + 0.001
    at -= 0.001
    assert pacing.delay(at) == pytest.approx(4 * FIXED * Pacing.SHARE, rel=1e-3)


def test_a_costly_pass_still_lets_no_change_wait_past_longest() -> None:
    pacing = Pacing(debounce=0.0, longest=0.5)
    at = churned(pacing, VARIED)
    pacing.passed(started=at, ended=at + 0.3, cost=0.3, changes=12)
    assert pacing.delay(at + 0.3) == pytest.approx(0.3)
