"""Small readers over projected objects: keys, subjects, conditions, times and durations.

Every rule reads objects through these so that the rules stay one-liners. They assume
the shape `project()` guarantees (right types where present) and never raise on a
missing field: absence is a normal state in Kubernetes JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import msgspec

from watcher.model.types import Subject


class Condition(TypedDict, total=False):
    """One status.conditions entry as projected (type and status always present)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    lastUpdateTime: str
    observedGeneration: int


class Key(msgspec.Struct, frozen=True, order=True, gc=False):
    """Identity of an object across API versions: group, kind, namespace, name.

    Hashable and ordered field by field, like the tuple it could be, but outside the garbage
    collector's view: the store, its indexes and the findings hold one per object, and as
    tuples (a NamedTuple is never untracked) they were half of what each collection walked.
    """

    group: str
    kind: str
    namespace: str
    name: str


Lookup = Callable[[Key], Mapping[str, Any] | None]
"""Another object by key (None when absent or blind): how rules read beyond their object."""


def group_of(api_version: str) -> str:
    """ "apps/v1" -> "apps", "v1" -> "" (the core group)."""
    return api_version.rpartition("/")[0]


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return Key(group_of(obj["apiVersion"]), obj["kind"], meta.get("namespace", ""), meta["name"])


def controller_owner(obj: Mapping[str, Any]) -> Key | None:
    """The object's controlling owner (the ownerReference with controller: true and a name), in
    the object's namespace, as a Key."""
    namespace = obj["metadata"].get("namespace", "")
    for ref in dig(obj, "metadata", "ownerReferences") or ():
        if ref.get("controller", False) and ref.get("name"):
            return Key(group_of(ref.get("apiVersion", "")), ref.get("kind", ""), namespace, ref["name"])
    return None


def subject_of(obj: Mapping[str, Any]) -> Subject:
    meta = obj["metadata"]
    return Subject(
        apiVersion=obj["apiVersion"], kind=obj["kind"], namespace=meta.get("namespace", ""), name=meta["name"]
    )


def describe(subject: Subject | Key) -> str:
    """`Kind ns/name` (or `Kind name` when cluster-scoped): how messages name an object."""
    if isinstance(subject, Key):
        kind, namespace, name = subject.kind, subject.namespace, subject.name
    else:
        kind, namespace, name = subject["kind"], subject["namespace"], subject["name"]
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def finding_id(kind: str, subject: Subject, *extra: str) -> str:
    """Stable finding id: `Type/Kind/namespace/name[/extra]` (no namespace part if cluster-scoped)."""
    parts = [kind, subject["kind"]]
    if subject["namespace"]:
        parts.append(subject["namespace"])
    parts.append(subject["name"])
    parts.extend(extra)
    return "/".join(parts)


def dig(obj: Mapping[str, Any], *path: str) -> Any:
    """The value at `path`, or None when any step is missing."""
    current: Any = obj
    for step in path:
        if type(current) is dict or isinstance(current, Mapping):  # a dict is by far the usual case
            current = current.get(step)
        else:
            return None
    return current


def text(obj: Mapping[str, Any], *path: str) -> str:
    value = dig(obj, *path)
    return value if isinstance(value, str) else ""


def integer(obj: Mapping[str, Any], *path: str, default: int | None = None) -> int | None:
    value = dig(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def conditions(obj: Mapping[str, Any]) -> list[Condition]:
    status = obj.get("status")  # dig()'s answer, without its loop: every rule reads conditions
    found = status.get("conditions") if type(status) is dict else dig(obj, "status", "conditions")
    return found if isinstance(found, list) else []


def condition(obj: Mapping[str, Any], kind: str) -> Condition | None:
    """The first condition of this type (kstatus, too, reads the first match)."""
    for cond in conditions(obj):
        if cond["type"] == kind:
            return cond
    return None


def said(cond: Condition | None, kind: str, *, message: bool = True) -> str:
    """The one spelling of a condition in messages: `Ready=False (Reason: its message)`, or
    `no Ready condition`. Without `message` the reason alone (a cached report's message is
    old news)."""
    if cond is None:
        return f"no {kind} condition"
    return f"{kind}={cond['status']}{said_why(cond, message=message)}"


def said_why(cond: Condition, *, message: bool = True) -> str:
    """` (Reason: its message)` of said(), for a message that puts words between a condition's
    status and its reason; the message's closing full stop and line breaks are dropped (the
    sentence around it has its own: source-controller ends a clone's HTTP error body with a
    newline), and nothing is said when neither is set."""
    text = cond.get("message", "").rstrip(". \t\r\n") if message else ""
    detail = ": ".join(part for part in (cond.get("reason", ""), text) if part)
    return f" ({detail})" if detail else ""


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond["status"] == "True"


def parse_time(value: object) -> datetime | None:
    """RFC3339 (with or without fraction, `Z` or offset) to an aware UTC datetime; else None.

    None, too, for a time that is no moment in UTC (9999-12-31T23:59:59-01:00): project()
    rejects those in the fields it keeps, and an annotation (requestedAt) is read as no time.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


NEVER = datetime.max.replace(tzinfo=UTC)
"""Where a deadline lands when the arithmetic leaves the calendar (a timestamp in year 9999)."""


def after(moment: datetime, delta: timedelta) -> datetime:
    """moment + delta, or NEVER when that is past the end of the calendar."""
    try:
        return moment + delta
    except OverflowError:
        return NEVER


def time_at(obj: Mapping[str, Any], *path: str) -> datetime | None:
    return parse_time(dig(obj, *path))


def transition(cond: Condition | None) -> datetime | None:
    return None if cond is None else parse_time(cond.get("lastTransitionTime"))


def newest_transition(obj: Mapping[str, Any]) -> datetime | None:
    times = [t for t in (transition(c) for c in conditions(obj)) if t is not None]
    return max(times, default=None)


def spec_written_at(obj: Mapping[str, Any]) -> datetime | None:
    """The last write to anything but status, from managedFields; creation when there are none
    and the object is still at its first generation. None when nothing dates it.

    A spec edit or an annotation (e.g. reconcile.fluxcd.io/requestedAt) happened no later
    than this, so it bounds how long a controller has had to notice the change. Past the first
    generation creationTimestamp dates nothing: an object created in 2020 whose controller is
    one generation behind now is not behind "since 2020" (kubectl get omits managedFields, so
    snapshots often carry none; the live watcher always has them).
    """
    times = [
        parse_time(entry.get("time"))
        for entry in dig(obj, "metadata", "managedFields") or ()
        if entry.get("subresource", "") != "status"
    ]
    known = [t for t in times if t is not None]
    created = time_at(obj, "metadata", "creationTimestamp")
    generation = integer(obj, "metadata", "generation")
    if created is not None and (generation is None or generation <= 1):
        known.append(created)
    return max(known, default=None)


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
MAX_DURATION_SECONDS = 100 * 365 * 86400.0
"""Anything longer is not an interval anyone meant (and would overflow date arithmetic)."""
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(value: str) -> float | None:
    """The seconds a Go duration spells ("5m", "1h30m", "1.5h", "250ms", "0"), with no upper
    bound (each caller has its own); None if it is not one: spaces, a bare number or a negative."""
    body = value[1:] if value[:1] in ("+", "-") else value
    if body == "0":
        return 0.0
    parts = _DURATION_PART.findall(body)
    if not parts or "".join(n + u for n, u in parts) != body or value.startswith("-"):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def parse_duration(value: object) -> timedelta | None:
    """A Go/Flux duration such as "5m", "1h30m", "10s", "1.5h" or "2h45m30s"; None if not one
    (or longer than MAX_DURATION_SECONDS)."""
    seconds = duration_seconds(value) if isinstance(value, str) else None
    return timedelta(seconds=seconds) if seconds is not None and seconds <= MAX_DURATION_SECONDS else None


_EXACT_UNITS = (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))
_ROUGH_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def format_duration(delta: timedelta, *, rough: bool = False) -> str:
    """A duration as Go and Flux spell it, read back by parse_duration: 1h30m, 1m30s, 250ms, 0s
    (no zero parts, days as hours: 48h). `rough`: only the largest unit and the one below it,
    days included, as on-call says an age: 7d2h, 3h12m, 4m30s, 45s. The one spelling of a
    duration everywhere (thresholds in messages, settings, ages on the page and in reports)."""
    rest = max(delta, timedelta(0)) // timedelta(milliseconds=1)
    counts = []
    for unit, size in _ROUGH_UNITS if rough else _EXACT_UNITS:
        count, rest = divmod(rest, size)
        counts.append((count, unit))
    if rough:
        first = next((i for i, (count, _) in enumerate(counts) if count), 0)
        counts = counts[first : first + 2]
    return "".join(f"{count}{unit}" for count, unit in counts if count) or "0s"


def format_age(since: datetime, now: datetime) -> str:
    """How long before `now` `since` was, roughly: 3h12m ago (a second or more ahead: in the future)."""
    if now - since <= -timedelta(seconds=1):
        return "in the future"
    return f"{format_duration(now - since, rough=True)} ago"


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    found = dig(obj, "metadata", "labels")
    return found if isinstance(found, Mapping) else {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    found = dig(obj, "metadata", "annotations")
    return found if isinstance(found, Mapping) else {}


def is_deleting(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")  # dig()'s answer, without its loop: every Pod rule asks this first
    value = meta.get("deletionTimestamp") if type(meta) is dict else dig(obj, "metadata", "deletionTimestamp")
    return isinstance(value, str) and bool(value)


def condition_evidence(obj: Mapping[str, Any], *kinds: str) -> dict[str, Any]:
    """The named conditions as evidence: {type: {status, reason, message, lastTransitionTime}}."""
    out: dict[str, Any] = {}
    for kind in kinds:
        cond = condition(obj, kind)
        if cond is not None:
            out[kind] = {
                k: v for k, v in cond.items() if k in ("status", "reason", "message", "lastTransitionTime")
            }
    return out


def sentence(text: str) -> str:
    """`text` ending in exactly one full stop, for the message builders: what controllers write
    often ends with its own ('ReplicaSet "web-7d9f" has timed out progressing.'), and a second one
    appended after it reads as a typo in every alert."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else f"{text}."
