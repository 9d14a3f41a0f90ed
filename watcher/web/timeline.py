"""`GET /api/v1/timeline`: what changed, newest first (the live model's Timeline, timeline.py).

  ?since=     an RFC 3339 time (2026-12-01T09:00:00Z; an offset's `+` as %2B or left as the
              space a query string makes of it) or a duration back from now, read as every
              duration setting is (15m, 1h30m; up to Go's longest, 2562047h), with its unit
              (a bare number could as well be a Unix time)
  ?subject=   KIND/NAMESPACE/NAME, or a prefix of it (Deployment/flux-system/, Terraform/)
  ?limit=     at most this many entries (1 to MAX_LIMIT, default DEFAULT_LIMIT)

A parameter it cannot read, or does not know, is a 400 whose JSON body names it in one line:
a typo must not silently widen the answer. The summary says how many entries the timeline
keeps and how many it dropped, and whether the answer is `complete`: an answer reaching back
past the oldest entry kept, after some were dropped, is missing its start and says so;
`comparing_since` says from when root causes and controllers are compared (null: not yet, the
watches are still listing), since what was open then was open before stalewatch looked.

The app carries the timeline under TIMELINE (the live Runtime sets it); an app without one
answers 503, never an empty timeline it did not keep.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web
from multidict import MultiMapping

from watcher.config import setting_duration
from watcher.model.ingest.objects import parse_time
from watcher.model.types import rfc3339
from watcher.model.views.timeline import Snapshot, Timeline
from watcher.web.query import whole_number

TIMELINE: web.AppKey[Timeline] = web.AppKey("timeline", Timeline)

DEFAULT_LIMIT = 200
MAX_LIMIT = 5000

_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d{1,9})?([Zz]|[+-]\d\d:\d\d)", re.ASCII)

_BARE_NUMBER = re.compile(r"[\d.]+")
"""Seconds to a setting, but in `since` as likely a Unix time: refused, not guessed."""


class BadParameter(ValueError):
    """A query parameter that cannot be read; the message names it."""


def parse_since(value: str, *, now: datetime) -> datetime:
    text = value.strip()
    if text[-6:-5] == " ":  # the `+` of an offset, decoded as a space by the query string
        text = f"{text[:-6]}+{text[-5:]}"
    if _RFC3339.fullmatch(text):
        moment = parse_time(text.upper())
        if moment is not None:
            return moment
    if _BARE_NUMBER.fullmatch(text):
        raise BadParameter(f"since: {value[:80]!r} has no unit (seconds? a Unix time?): say 90s or a time")
    try:
        return now - setting_duration(text)
    except (ValueError, OverflowError) as error:  # OverflowError: back past year 1
        raise BadParameter(
            f"since: neither an RFC 3339 time such as 2026-12-01T09:00:00Z nor a duration: {error}"
        ) from None


def parse_limit(value: str, *, now: datetime) -> int:
    number = whole_number(value.strip(), low=1, high=MAX_LIMIT)
    if number is None:
        raise BadParameter(f"limit: expected a whole number from 1 to {MAX_LIMIT}; got {value[:80]!r}")
    return number


def parse_subject(value: str, *, now: datetime) -> str:
    if len(value) > 600 or any(c.isspace() for c in value):
        raise BadParameter(f"subject: expected KIND/NAMESPACE/NAME or a prefix of it; got {value[:80]!r}")
    return value


_PARAMETERS: Mapping[str, Callable[..., Any]] = {
    "since": parse_since,
    "subject": parse_subject,
    "limit": parse_limit,
}


def read_query(query: MultiMapping[str], *, now: datetime) -> dict[str, Any]:
    """The parameters as the query method takes them; BadParameter naming the first bad one."""
    read: dict[str, Any] = {}
    for name in query:
        if name not in _PARAMETERS:
            known = ", ".join(_PARAMETERS)
            raise BadParameter(f"{name[:40]}: not a parameter of /api/v1/timeline (known: {known})")
        values = query.getall(name)
        if len(values) > 1:
            raise BadParameter(f"{name}: given {len(values)} times; give it once")
        read[name] = _PARAMETERS[name](values[0], now=now)
    return read


def timeline_document(timeline: Timeline, *, now: datetime, **query: Any) -> bytes:
    since: datetime | None = query.get("since")
    entries = timeline.query(
        since=since, subject=query.get("subject", ""), limit=query.get("limit", DEFAULT_LIMIT)
    )
    oldest = timeline.oldest
    complete = not timeline.dropped or (since is not None and oldest is not None and since >= oldest)
    document = {
        "entries": [entry.to_dict() for entry in entries],
        "summary": {
            "now": rfc3339(now),
            "returned": len(entries),
            "kept": len(timeline),
            "limit": timeline.limit,
            "dropped": timeline.dropped,
            "oldest": rfc3339(oldest),
            "complete": complete,
            "comparing_since": rfc3339(timeline.comparing_since),
        },
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def snapshot_of(app: web.Application) -> Snapshot | None:
    """The app's timeline as a view renders it (None when it keeps none), taken on the event loop."""
    kept = app.get(TIMELINE)
    return kept.snapshot() if kept is not None else None


def _error(status: int, message: str) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps({"error": message}) + b"\n", content_type="application/json"
    )


async def timeline(request: web.Request) -> web.Response:
    """The handler; entries are read on the event loop, where the model adds them."""
    kept = request.app.get(TIMELINE)
    if kept is None:
        return _error(503, "timeline: this server keeps no timeline")
    now = datetime.now(UTC)
    try:
        query = read_query(request.query, now=now)
    except BadParameter as error:
        return _error(400, str(error))
    return web.Response(body=timeline_document(kept, now=now, **query), content_type="application/json")
