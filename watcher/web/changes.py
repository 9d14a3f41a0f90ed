"""What changed, on the page: the recent changes block, and the changes before each root cause.

Rendered from a Snapshot of the live model's timeline (model/timeline.py). Every value in an
entry came from the cluster (names, images, condition messages) and is escaped here. A
timeline that is not comparing yet, or that dropped its oldest entries, says so: "no change"
must never stand for "not looked".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape

from watcher.export.report import plural
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.objects import format_age
from watcher.model.types import Finding, rfc3339
from watcher.model.views.timeline import Entry, Snapshot, root_changes
from watcher.web.html import link, more
from watcher.web.parts import Part

MAX_RECENT = 20
"""On the page; /api/v1/timeline has every entry kept."""
MAX_PRECEDING = 5
"""Per root card: the newest changes on its subject and its controller."""


def render_change(entry: Entry, *, now: datetime) -> str:
    """One entry as a list item: when (UTC, and how long ago), what, and the undo command if any."""
    when = escape(rfc3339(entry.at) or "")
    clock, age = entry.at.strftime("%H:%M:%S"), format_age(entry.at, now)
    line = (
        f'<li class="change {escape(str(entry.type))}"><time datetime="{when}" title="{when}">'
        f"{escape(clock)}</time> ({escape(age)}) {escape(entry.message)}"
    )
    undo = entry.details.get("undo")
    if undo:
        line += f"; <code>{escape(undo)}</code>"
    return line + "</li>"


def render_changes(entries: Sequence[Entry], *, now: datetime) -> str:
    """Entries (newest first) as a list; "" when there are none."""
    if not entries:
        return ""
    return '<ul class="changes">' + "".join(render_change(e, now=now) for e in entries) + "</ul>"


def recent_changes(snapshot: Snapshot, *, now: datetime) -> Part:
    """The page's "Recent changes" part: the newest MAX_RECENT entries, and what is missing."""
    everything = link("/api/v1/timeline", "All as JSON")
    lines = [
        f"<h2>Recent changes</h2><p>{_coverage(snapshot, now=now)} {everything}</p>",
        render_changes(snapshot.entries[:MAX_RECENT], now=now),
    ]
    lines.extend(more(len(snapshot.entries) - MAX_RECENT, "changes (all in the timeline JSON)"))
    return Part("changes-recent", "changes", '<div id="changes-recent">' + "".join(lines) + "</div>")


def _coverage(snapshot: Snapshot, *, now: datetime) -> str:
    """What the entries cover (escaped): since when they are compared, and what was dropped."""
    if snapshot.comparing_since is None:
        said = "Not comparing evaluations yet: the watches are still listing."
    else:
        start = snapshot.comparing_since.strftime("%H:%M:%S UTC")
        count = plural(len(snapshot.entries), "change") if snapshot.entries else "No change"
        said = f"{count} recorded since {start} ({format_age(snapshot.comparing_since, now)})."
    if snapshot.dropped:
        said += f" {plural(snapshot.dropped, 'older change')} dropped to stay within the bound."
    return escape(said)


def preceding_block(root: Finding, evaluation: Evaluation, snapshot: Snapshot, *, now: datetime) -> str:
    """A root card's "Changes before it": on its subject and its controller, newest first."""
    found = root_changes(root, evaluation.objects, snapshot.entries, limit=MAX_PRECEDING)
    if found:
        return "<h4>Changes before it</h4>" + render_changes(found, now=now)
    if snapshot.comparing_since is None:
        return '<p class="more">Changes before it: not known yet (the watches are still listing).</p>'
    start = snapshot.comparing_since.strftime("%H:%M:%S UTC")
    dropped = " (older changes were dropped)" if snapshot.dropped else ""
    said = f"Changes before it: none recorded on it or its controller since {start}{dropped}."
    return f'<p class="more">{escape(said)}</p>'


def changes_parts(snapshot: Snapshot | None, *, now: datetime) -> Iterable[Part]:
    """The changes section's parts; none when this server keeps no timeline."""
    if snapshot is not None:
        yield recent_changes(snapshot, now=now)
