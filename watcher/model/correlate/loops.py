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

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from watcher.model.ingest.flux import PROGRESSING
from watcher.model.ingest.objects import condition, parse_time, transition
from watcher.model.rules.events import loop_of
from watcher.model.store.working import Pass, key_of_subject
from watcher.model.types import Finding


def settle_loops(run: Pass, attempts: Mapping[str, Sequence[Finding]]) -> Iterator[tuple[Finding, bool]]:
    """The RetryLoops the attempts add up to, by finding id (object and reason), each with
    whether its object is gone (a gone controller Pod's Events are still its controller's
    evidence: correlation decides)."""
    for fid in sorted(attempts):
        key = key_of_subject(attempts[fid][0].subject)
        obj = run.store.get(key)
        found = loop_of(attempts[fid], run.config)
        if found is not None and not _recovered(obj, found):
            yield found, obj is None and run.store.holds(key.group, key.kind)


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
