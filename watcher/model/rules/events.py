"""RetryLoop: the same Warning Event about one object, recurring for longer than a threshold."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from watcher.model.ingest.objects import after, describe, integer, sentence, text, time_at
from watcher.model.rules.context import Ctx
from watcher.model.types import Finding, FindingType, Subject, rfc3339

_CORE_KINDS = ("Pod", "Node", "Service", "PersistentVolumeClaim")
_APPS_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")


def involved_subject(event: Mapping[str, Any]) -> Subject | None:
    """The object an Event is about; older Events omit apiVersion for built-in kinds."""
    ref = event.get("involvedObject")
    if not isinstance(ref, Mapping):
        return None
    kind = ref["kind"]
    api_version = ref.get("apiVersion") or (
        "v1" if kind in _CORE_KINDS else "apps/v1" if kind in _APPS_KINDS else ""
    )
    namespace = ref.get("namespace", event["metadata"].get("namespace", ""))
    return Subject(apiVersion=api_version, kind=kind, namespace=namespace, name=ref["name"])


def event_window(event: Mapping[str, Any]) -> tuple[int, datetime | None, datetime | None]:
    """(count, first, last) across core/v1 and events.k8s.io/v1 (series) spellings."""
    count = integer(event, "series", "count") or integer(event, "count") or 1
    first = time_at(event, "firstTimestamp") or time_at(event, "eventTime")
    last = (
        time_at(event, "series", "lastObservedTime")
        or time_at(event, "lastTimestamp")
        or time_at(event, "eventTime")
    )
    return count, first, last


def retry_loop(event: Mapping[str, Any], ctx: Ctx) -> Finding | None:
    """A Warning seen at least twice, first to last longer than the threshold, and still recent.

    One finding per involved object and reason (id suffix); correlation merges Events that
    share both. It ends by itself once the Event is older than retry_loop_recent.
    """
    subject = involved_subject(event)
    if subject is None or text(event, "type") != "Warning":
        return None
    count, first, last = event_window(event)
    thresholds = ctx.config.thresholds
    if count < 2 or first is None or last is None or last - first < thresholds.retry_loop:
        return None
    history_at = after(last, thresholds.retry_loop_recent)
    if history_at < ctx.now:
        return None
    ctx.pending.append(history_at)
    reason = text(event, "reason")
    message = sentence(
        f"{describe(subject)} keeps failing: Warning {reason} repeated {count} times from {rfc3339(first)} "
        f"to {rfc3339(last)}: {text(event, 'message')}"
    )
    message += " It is retrying without success; fix the cause in the message."
    evidence = {
        "event": event["metadata"]["name"],
        "reason": reason,
        "count": count,
        "message": text(event, "message"),
        "firstTimestamp": rfc3339(first),
        "lastTimestamp": rfc3339(last),
    }
    return ctx.finding(FindingType.RETRY_LOOP, subject, message, first, evidence, reason)
