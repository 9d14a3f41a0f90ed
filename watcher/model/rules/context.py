"""What a per-object rule may use besides its object: the clock, the config, other objects."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from watcher.model.ingest.flux import Revisions, revisions
from watcher.model.ingest.objects import Lookup, after, finding_id
from watcher.model.types import DEFAULT_SEVERITIES, Finding, FindingType, ModelConfig, Subject


@dataclass(slots=True)
class Ctx:
    """Rules never read the clock: `due()` both answers "has this lasted its threshold?" and,
    when not yet, records the moment it will, so the incremental model knows when to look
    again without an event (`pending`). A Ctx serves one object's evaluation."""

    now: datetime
    config: ModelConfig
    lookup: Lookup
    pods: Callable[[str], Iterable[Mapping[str, Any]]] = lambda namespace: ()
    """The Pods of a namespace: a StatefulSet or DaemonSet keeps no time of its own, its Pods do."""
    pending: list[datetime] = field(default_factory=list)
    _revisions: Revisions | None = field(default=None, init=False, repr=False)

    def revisions(self, obj: Mapping[str, Any]) -> Revisions:
        """The object's revisions and its source's, read once: its rule and the revision
        table both want them, and for a Flux object they are most of its evaluation."""
        if self._revisions is None:
            self._revisions = revisions(obj, self.lookup)
        return self._revisions

    def due(self, since: datetime | None, threshold: timedelta) -> bool:
        """Has the state that began at `since` lasted `threshold`? If not yet, note when."""
        if since is None:
            return False
        at = after(since, threshold)
        if at <= self.now:
            return True
        self.pending.append(at)
        return False

    def finding(
        self,
        kind: FindingType,
        subject: Subject,
        message: str,
        since: datetime | None,
        evidence: dict[str, Any],
        *extra_id: str,
    ) -> Finding:
        return new_finding(self.config, kind, subject, message, since, evidence, *extra_id)


def new_finding(
    config: ModelConfig,
    kind: FindingType,
    subject: Subject,
    message: str,
    since: datetime | None,
    evidence: dict[str, Any],
    *extra_id: str,
) -> Finding:
    """A finding with its stable id and its configured severity (the default one if unset)."""
    severity = config.severities.get(kind, DEFAULT_SEVERITIES[kind])
    return Finding(finding_id(kind, subject, *extra_id), kind, severity, subject, message, since, evidence)


Rule = Callable[[Mapping[str, Any], Ctx], Finding | None]
"""A per-object rule: a candidate finding about `obj`, or None."""
