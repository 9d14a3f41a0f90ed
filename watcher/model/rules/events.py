"""RetryLoop: Warning Events about one object with one reason, recurring for longer than a threshold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from watcher.model.ingest.objects import after, describe, integer, parse_time, sentence, text, time_at
from watcher.model.rules.context import Ctx, new_finding
from watcher.model.types import Finding, FindingType, ModelConfig, Subject, rfc3339

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
    """One Warning about an object, still recent: an *attempt* record, not yet a finding.

    Whether attempts add up to a loop is decided over every Event about the same object with
    the same reason (loop_of, in correlation): one Event's count is not the loop's. A controller
    whose message carries a random part (kustomize-controller's temporary directory) writes one
    Event per attempt, each with count 1, which the API server never aggregates. An attempt ends
    by itself once the Event is older than retry_loop_recent.
    """
    subject = involved_subject(event)
    if subject is None or text(event, "type") != "Warning":
        return None
    count, first, last = event_window(event)
    if first is None or last is None:
        return None
    history_at = after(last, ctx.config.thresholds.retry_loop_recent)
    if history_at < ctx.now:
        return None
    ctx.pending.append(history_at)
    reason = text(event, "reason")
    evidence = {
        "event": event["metadata"]["name"],
        "reason": reason,
        "count": count,
        "message": text(event, "message"),
        "firstTimestamp": rfc3339(first),
        "lastTimestamp": rfc3339(last),
    }
    return ctx.finding(FindingType.RETRY_LOOP, subject, "", first, evidence, reason)


def loop_of(attempts: Sequence[Finding], config: ModelConfig) -> Finding | None:
    """RetryLoop, when the attempts (retry_loop's records of the Events about one object with one
    reason) were seen at least twice in all and first to last longer than the threshold; its
    message quotes the latest Event."""
    count = sum(a.evidence["count"] for a in attempts)
    first = min(a.since for a in attempts if a.since is not None)
    latest = max(attempts, key=lambda a: (a.evidence["lastTimestamp"], a.evidence["event"]))
    last = parse_time(latest.evidence["lastTimestamp"])
    if count < 2 or last is None or last - first < config.thresholds.retry_loop:
        return None
    reason, said = latest.evidence["reason"], latest.evidence["message"]
    repeated = f"{count} times" + (f" in {len(attempts)} Events" if len(attempts) > 1 else "")
    message = sentence(
        f"{describe(latest.subject)} keeps failing: Warning {reason} repeated {repeated} from "
        f"{rfc3339(first)} to {rfc3339(last)}: {said}"
    )
    message += " It is retrying without success; fix the cause in the message."
    evidence = {
        "event": latest.evidence["event"],
        "events": len(attempts),
        "reason": reason,
        "count": count,
        "message": said,
        "firstTimestamp": rfc3339(first),
        "lastTimestamp": rfc3339(last),
    }
    return new_finding(config, FindingType.RETRY_LOOP, latest.subject, message, first, evidence, reason)
