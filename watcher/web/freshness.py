"""How fresh the page is: its indicator, and the script that keeps it (and the parts) live.

The indicator is rendered by the server with an honest first state (the age of the evaluation,
red unless the watch status is live), so a page without JavaScript, refreshed by its
`<noscript>` meta refresh, still says whether to trust it. With JavaScript, live.js takes it
over: it ticks "updated N s ago" from the ages the stream sends (the server's clock, never the
browser's) and turns it red when the stream drops or the data behind it is not live.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from html import escape
from importlib import resources
from typing import Any

from watcher.model.evaluation import Evaluation

SCRIPT = resources.files("watcher.web").joinpath("live.js").read_text(encoding="utf-8")
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
"""The page's only script, allowed by this hash in its CSP (no 'unsafe-inline', no 'self')."""

CSS = """
.freshness{display:inline-block;padding:.1em .6em;border-radius:4px;margin:.2em 0}
.freshness.ok{background:#e6f4ea;color:#137333}.freshness.bad{background:#c5221f;color:#fff;font-weight:600}
"""
"""The indicator's rules, part of the page's one stylesheet."""

SAYS = {
    "live": "",
    "pending": " · not yet synced",
    "stale": " · data stale",
    "failed": " · last evaluation failed",
    "lost": " · stream lost, not updating",
}
"""What the indicator adds to its age per state; live.js reads it from the indicator's
`data-says` (`lost` is its own: the stream dropped or went silent)."""


_SAYS_JSON = json.dumps(SAYS)
STREAM = "/api/v1/stream"


def freshness(status: Mapping[str, Any]) -> str:
    """`live` when nothing in the watch status speaks against the data; else why not, in the
    order the page's trust banner gives it: `failed` (the last evaluation), `stale`
    (unreachable, unauthorized, a broken watch), `pending` (the initial list is not finished)."""
    if status.get("evaluation_error"):
        return "failed"
    if not status.get("up") or status.get("unauthorized"):
        return "stale"
    if not status.get("synced"):
        return "pending"
    return "stale" if status.get("stale") else "live"


def state_of(evaluation: Evaluation | None, status: Mapping[str, Any]) -> str:
    return freshness(status) if evaluation is not None else "pending"


def age_of(evaluation: Evaluation | None, now: datetime) -> float | None:
    """Seconds since the evaluation, to a tenth; None before the first one."""
    return None if evaluation is None else round((now - evaluation.now).total_seconds(), 1)


def indicator(
    evaluation: Evaluation | None, status: Mapping[str, Any], *, now: datetime, stream: str = STREAM
) -> str:
    """`<p id="freshness">` as the server sees it at `now`; `stream` is the path of the page's
    stream (live.js adds the page's query string: the same view)."""
    state, age = state_of(evaluation, status), age_of(evaluation, now)
    when = "no evaluation yet" if age is None else f"updated {max(0, round(age))} s ago"
    css = "ok" if state == "live" else "bad"
    data = (
        f'data-state="{state}" data-age="{"" if age is None else age}" '
        f'data-says="{escape(_SAYS_JSON)}" data-stream="{escape(stream)}"'
    )
    return f'<p id="freshness" class="freshness {css}" {data}>{escape(when + SAYS[state])}</p>'


def script_tag() -> str:
    return f"<script>{SCRIPT}</script>"


NOSCRIPT_REFRESH = '<noscript><meta http-equiv="refresh" content="{seconds}"></noscript>'
"""Without JavaScript the page reloads itself; with it, the stream keeps it current instead."""


def with_script(headers: Mapping[str, str]) -> dict[str, str]:
    """A page's security headers, its CSP extended to run live.js (by its hash, nothing else)
    and to open the stream (connect-src 'self')."""
    policy = headers["Content-Security-Policy"]
    return {**headers, "Content-Security-Policy": f"{policy}; script-src '{SCRIPT_HASH}'; connect-src 'self'"}
