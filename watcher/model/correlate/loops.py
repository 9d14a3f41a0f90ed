"""RetryLoop, settled over every Event about one object with one reason.

Per Event, rules/events.py keeps an attempt record; here the records of one (object, reason)
become one RetryLoop, or none: below the threshold in all, or about an object that is gone.
Events outlive their object by the API server's event TTL (an hour by default), and a Flux
object deleted while it failed leaves its Warnings behind: those raise nothing once the object
is known to be gone: absent while the store holds its kind (so the kind is watched and listed).
Nor do the Warnings of an object that has recovered since (its controller said so after the last
of them): they stay recent for retry_loop_recent, and a fixed object is not a loop still running.
That also covers an object deleted and created again under the same name, once it is Ready:
creationTimestamp cannot tell (a restore or a replay creates objects anew, older Events and all).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from watcher.model.ingest.flux import PROGRESSING
from watcher.model.ingest.objects import Key, condition, parse_time, transition
from watcher.model.rules.events import loop_of
from watcher.model.store.graph import Listing
from watcher.model.store.working import key_of_subject
from watcher.model.types import Finding, FindingType, ModelConfig


class RetryLoops:
    """The RetryLoops of the model's Events, kept settled between evaluations.

    Attempts are filed as the engine judges Events (`file`); an (object, reason) is settled again
    only when one of its attempts changed or its object was touched (`settle`), so hundreds of
    Events that add up to nothing cost nothing per evaluation, and correlation sees the settled
    loops alone and runs again only when one of them changed.
    """

    def __init__(self) -> None:
        self._attempts: dict[str, dict[Key, Finding]] = {}
        """Attempt records by loop id (object and reason), by the key of the Event each is from."""
        self._loop_of: dict[Key, str] = {}
        """Each Event's loop id."""
        self._by_subject: dict[Key, set[str]] = defaultdict(set)
        """The loop ids about each object."""
        self._settled: dict[str, tuple[Finding, bool]] = {}
        self._absent: set[str] = set()
        """Loops whose object was absent when settled: gone or not depends on whether its kind is held."""
        self._dirty: set[str] = set()
        self._loops: list[tuple[Finding, bool]] | None = []

    def file(self, key: Key, findings: Sequence[Finding]) -> bool:
        """An object's candidates changed: True if they are an Event's attempt (or were), filed here."""
        attempt = findings[0] if len(findings) == 1 and findings[0].type is FindingType.RETRY_LOOP else None
        old = self._loop_of.get(key)
        if attempt is None and old is None:
            return False
        if old is not None and (attempt is None or attempt.id != old):
            self._drop(key, old)
        if attempt is not None:
            fid = self._loop_of[key] = attempt.id
            group = self._attempts.get(fid)
            if group is None:
                group = self._attempts[fid] = {}
                self._by_subject[key_of_subject(attempt.subject)].add(fid)
            group[key] = attempt
            self._dirty.add(fid)
        return True

    def _drop(self, key: Key, fid: str) -> None:
        del self._loop_of[key]
        group = self._attempts[fid]
        subject = key_of_subject(group.pop(key).subject)
        self._dirty.add(fid)
        if not group:
            del self._attempts[fid]
            ids = self._by_subject[subject]
            ids.discard(fid)
            if not ids:
                del self._by_subject[subject]

    def reads(self, key: Key) -> bool:
        """Whether a settled loop read this object (its Events are about it)."""
        return key in self._by_subject

    def touch_all(self) -> None:
        """Settle every loop again (blindness changed what every object looks like)."""
        self._dirty.update(self._attempts)

    def settle(self, view: Listing, touched: Collection[Key], config: ModelConfig) -> set[Key]:
        """Settle the loops whose attempts or object changed: the subjects whose loops changed."""
        dirty, self._dirty = self._dirty, set()
        by_subject = self._by_subject
        for key in touched if len(touched) < len(by_subject) else by_subject.keys() & touched:
            dirty.update(by_subject.get(key, ()))
        dirty.update(self._absent)  # whether its kind is held may have changed
        changed: set[Key] = set()
        for fid in dirty:
            group = self._attempts.get(fid)
            found, absent = _settle(view, _sorted_attempts(group), config) if group else (None, False)
            (self._absent.add if absent else self._absent.discard)(fid)
            settled = self._settled.get(fid)
            if found != settled:
                changed.add(key_of_subject((found or settled)[0].subject))  # type: ignore[index]
                if found is None:
                    del self._settled[fid]
                else:
                    self._settled[fid] = found
        if changed:
            self._loops = None
        return changed

    def loops(self) -> list[tuple[Finding, bool]]:
        """The settled RetryLoops in loop id order, each with whether its object is gone."""
        if self._loops is None:
            self._loops = [self._settled[fid] for fid in sorted(self._settled)]
        return self._loops


def _sorted_attempts(group: Mapping[Key, Finding]) -> list[Finding]:
    """An (object, reason)'s attempts in the order of their Events' keys (what loop_of reads)."""
    return [group[key] for key in sorted(group)]


def _settle(
    view: Listing, attempts: Sequence[Finding], config: ModelConfig
) -> tuple[tuple[Finding, bool] | None, bool]:
    """The RetryLoop the attempts add up to, with whether its object is gone (a gone controller
    Pod's Events are still its controller's evidence: correlation decides), or None (none, or the
    object has recovered since); and whether the object is absent."""
    key = key_of_subject(attempts[0].subject)
    obj = view.get(key)
    found = loop_of(attempts, config)
    if found is None or _recovered(obj, found):
        return None, obj is None
    return (found, obj is None and view.holds(key.group, key.kind)), obj is None


def _recovered(obj: Mapping[str, Any] | None, loop: Finding) -> bool:
    """Its controller said it succeeded after the last Warning: Ready=True since then, or a new
    attempt begun since then with Reconciling's plain `Progressing` (a Flux controller starts
    every attempt with Ready=Unknown, and says ProgressingWithRetry when the one before failed)."""
    if obj is None:
        return False
    last = parse_time(loop.evidence["lastTimestamp"])
    ready, reconciling = condition(obj, "Ready"), condition(obj, "Reconciling")
    if ready is not None and ready["status"] == "True":
        since = transition(ready)
    elif (
        reconciling is not None
        and reconciling["status"] == "True"
        and reconciling.get("reason") == PROGRESSING
    ):
        since = transition(reconciling)
    else:
        return False
    return since is not None and last is not None and since >= last
