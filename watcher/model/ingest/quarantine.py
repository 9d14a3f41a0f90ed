"""Objects set aside: what the engine reports instead of judging what it could not.

Three ways in. project() drops a field whose value is wrong (of another type, no timestamp,
out of range) and lists it under the projection's `rejected` key; the object is judged on the
rest, and each dropped field is reported. A rule, a controller verdict or a health row that
raises on one object sets that object aside (nothing concluded from it, reported with the
error) instead of ending the evaluation of everything else: the engine guards each object's
judgement with one try, not each field. And an object project() refuses whole
(MalformedObject) is never taken in: the watcher lists it as unreadable.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from watcher.model.ingest.checks import OUT_OF_RANGE, VALUE_LIMIT
from watcher.model.ingest.objects import Key, describe, subject_of
from watcher.model.ingest.projection import REJECTED
from watcher.model.types import Rejection, RejectReason, Subject


def dropped_fields(obj: Mapping[str, Any]) -> list[Rejection]:
    """The fields project() dropped from this object as wrong (usually none)."""
    marks = obj.get(REJECTED)
    if not marks:
        return []
    subject = subject_of(obj)
    return [
        Rejection(
            subject=subject,
            reason=RejectReason(mark["reason"]),
            field=mark["field"],
            value=mark["value"],
            evaluated=True,
            message=f"{describe(subject)}: {_wrong(mark)}: left out, the rest of the object evaluated",
        )
        for mark in marks
    ]


def _wrong(mark: Mapping[str, str]) -> str:
    """What was wrong with one field, e.g. "spec.replicas 1e+20 is out of range (IntegerOutOfRange)"
    or "status.inventory.entries is not a list (WrongType, written: web)"."""
    problem = mark["problem"]
    if problem == OUT_OF_RANGE:
        return f"{mark['field']} {mark['value']} {problem} ({mark['reason']})"
    return f"{mark['field']} {problem} ({mark['reason']}, written: {mark['value']})"


def rule_failed(subject: Subject, error: Exception, *, what: str) -> Rejection:
    """`what` (e.g. "its rules") raised on this object: it is set aside, not judged."""
    return _not_evaluated(
        subject, RejectReason.RULE_ERROR, f"{type(error).__name__}: {error}", f"{what} failed on it"
    )


def unreadable(subject: Subject, problem: str) -> Rejection:
    """project() refused this object whole (`problem`, MalformedObject's message, which names it
    first): nothing of it was read, so nothing is concluded from it."""
    detail = problem.removeprefix(f"{describe(subject)}: ")
    return _not_evaluated(subject, RejectReason.MALFORMED, detail, "it could not be read")


def _not_evaluated(subject: Subject, reason: RejectReason, detail: str, because: str) -> Rejection:
    detail = detail[:VALUE_LIMIT]
    return Rejection(
        subject=subject,
        reason=reason,
        field="",
        value=detail,
        evaluated=False,
        message=f"{describe(subject)}: not evaluated, {because} ({detail})",
    )


class Step(enum.StrEnum):
    """The guarded steps of one object's judgement (their values order an object's rejections)."""

    INTAKE = "u"
    """Taking it in (the Store's bookkeeping, its writers)."""
    RULES = "o"
    """Its rules and rows."""
    VERDICT = "c"
    """Its controller's verdict, when it is a controller's workload."""


class SetAside:
    """What each step set aside of each object, listed in object order (Evaluation.rejected)."""

    def __init__(self) -> None:
        self._by: dict[tuple[Key, Step], list[Rejection]] = {}
        self._listed: list[Rejection] | None = []
        """The rejections in object order; None when they changed since."""

    def __bool__(self) -> bool:
        return bool(self._by)

    def record(self, key: Key, step: Step, rejections: list[Rejection]) -> None:
        """What `step` set aside of this object now (nothing: forget what it did before)."""
        if rejections:
            if self._by.get((key, step)) != rejections:
                self._by[key, step] = rejections
                self._listed = None
        elif self._by.pop((key, step), None) is not None:
            self._listed = None

    def verdict(self, key: Key, rejections: list[Rejection]) -> None:
        self.record(key, Step.VERDICT, rejections)

    def listed(self) -> list[Rejection]:
        if self._listed is None:
            self._listed = [r for _, found in sorted(self._by.items()) for r in found]
        return self._listed
