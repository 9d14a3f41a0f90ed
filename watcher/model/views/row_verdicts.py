"""What stalewatch makes of one stack row (stacks.py), as rules in order: first that applies wins.

Kept apart from the tree so the verdict reads as a table: not judged beats everything (nothing
was concluded), a stale status beats what it says (a cached report), a finding beats Current.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from watcher.model.types import Finding, FindingType, ObjectHealth, Severity, Status


class Verdict(StrEnum):
    """What stalewatch makes of a row, worst first (a stack's header shows its worst)."""

    FAILING = "failing"
    STALE = "stale"
    NOT_JUDGED = "not judged"
    MISSING = "missing"
    IN_PROGRESS = "in progress"
    CURRENT = "current"


RANK: Mapping[Verdict, int] = {verdict: rank for rank, verdict in enumerate(Verdict)}


@dataclass(frozen=True, slots=True)
class Facts:
    status: Status
    reason: str
    health: ObjectHealth | None
    findings: tuple[Finding, ...]
    rejected: str | None


def _not_judged(facts: Facts) -> str | None:
    return f"not judged: {facts.rejected}" if facts.rejected is not None else None


def _stale(facts: Facts) -> str | None:
    if facts.health is not None and facts.health.stale:
        return f"its controller {facts.health.controller} is down: {facts.status} is a cached report"
    return None


def _failing(facts: Facts) -> str | None:
    found = [
        f
        for f in facts.findings
        if f.severity is not Severity.INFO and f.type is not FindingType.STATUS_STALE
    ]
    if found:
        return ", ".join(sorted({str(f.type) for f in found}))
    return f"{facts.status}: {facts.reason}" if facts.status is Status.FAILED else None


def _current(facts: Facts) -> str | None:
    return facts.reason if facts.status is Status.CURRENT else None


def _in_progress(facts: Facts) -> str | None:
    return f"{facts.status}: {facts.reason}" if facts.reason else str(facts.status)


_RULES: tuple[tuple[Verdict, Callable[[Facts], str | None]], ...] = (
    (Verdict.NOT_JUDGED, _not_judged),
    (Verdict.STALE, _stale),
    (Verdict.FAILING, _failing),
    (Verdict.CURRENT, _current),
    (Verdict.IN_PROGRESS, _in_progress),
)
"""First rule that applies wins: not judged beats everything (nothing was concluded), a stale
status beats what it says (it is a cached report), a finding beats a Current status."""


def judge_row(facts: Facts) -> tuple[Verdict, str]:
    for verdict, rule in _RULES:
        reason = rule(facts)
        if reason is not None:
            return verdict, reason
    raise AssertionError("the last rule always applies")
