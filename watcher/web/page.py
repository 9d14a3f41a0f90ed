"""The single-pane web view at `/`: the page on-call keeps open during an incident.

The page is a skeleton of containers (the header, the root causes, the stacks, the tables...)
filled with keyed parts (watcher.web.parts): `page_parts` renders the parts of a view and
`render_page` places them. The live stream renders the same parts again after an evaluation and
sends those that changed, so the page after a delta is the page after a reload by construction.

Server-rendered and self-contained: no external assets (the cluster may be offline), a meta
refresh for browsers without scripts. Every value is escaped, because condition and event
messages are written by whoever can write to the cluster; the Content-Security-Policy (only this
page's own stylesheet and its one script, live.js, each by hash) is the second wall. Row counts
are bounded so a large cluster cannot turn the page into megabytes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Any

from watcher.export.report import plural
from watcher.model.types import Evaluation
from watcher.web import cards, freshness, tables
from watcher.web.cards import MAX_AFFECTED as MAX_AFFECTED
from watcher.web.cards import MAX_ROOTS as MAX_ROOTS
from watcher.web.cards import MAX_ROWS as MAX_ROWS
from watcher.web.html import row as row
from watcher.web.parts import Part
from watcher.web.query import Query

REFRESH_SECONDS = 10

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em 2em;color:#1b1f24;background:#fff}
h1{font-size:1.3em;margin:.6em 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
h3{font-size:1.05em;margin:0 0 .3em}h4{margin:.6em 0 .2em;font-size:.95em}
nav a{margin-right:1em}
.banner{padding:.5em .8em;border-radius:4px;margin:.4em 0}
.live{background:#e6f4ea}.stale{background:#fce8e6;font-weight:600}.pending{background:#fef7e0}
.failed{background:#c5221f;color:#fff;font-weight:600}
.finding{border-left:6px solid #9aa0a6;padding:.4em .8em;margin:.8em 0;background:#f8f9fa}
.finding.critical{border-color:#c5221f}.finding.warning{border-color:#e37400}
.finding.info{border-color:#1a73e8}
.sev{font-weight:700;text-transform:uppercase}.critical .sev{color:#c5221f}
.warning .sev{color:#b06000}.info .sev{color:#1a73e8}
.message{white-space:pre-wrap;margin:.3em 0}.since{color:#5f6368;margin:0}
.tags{color:#5f6368;margin-left:.3em}ul{margin:.1em 0 .3em;padding-left:1.4em}
dl.blast dt{font-weight:600}dl.blast dd{margin-left:1em}
dl.evidence{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}
dl.evidence dd{margin:0;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse;margin:.3em 0}
th,td{text-align:left;padding:.2em .7em;border-bottom:1px solid #dadce0;vertical-align:top}
th{background:#f1f3f4}td.rev{font-family:monospace;word-break:break-all}
tr.bad td,tr.skew td{background:#fce8e6}.down{color:#c5221f;font-weight:600}.up{color:#188038}
.healthy{font-size:1.1em;color:#188038}.more{color:#5f6368;font-style:italic}
"""


def security_headers(css: str, *, forms: bool = False) -> Mapping[str, str]:
    """The headers of a page whose only stylesheet is `css`: no script may run, not even an
    injected one; only that stylesheet (by its hash); forms may submit to this origin only when
    `forms` (the fleet's filter form), else nowhere."""
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    action = "'self'" if forms else "'none'"
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'sha256-{digest}'; form-action {action}; "
            "base-uri 'none'; frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


PAGE_CSS = CSS + freshness.CSS
SECURITY_HEADERS = freshness.with_script(security_headers(PAGE_CSS))
"""Sent with the page: its stylesheet and live.js, each by its hash, and the stream."""


@dataclass(frozen=True, slots=True)
class PageState:
    """What one view of the page is rendered from, taken at once so the parts agree."""

    evaluation: Evaluation | None
    status: Mapping[str, Any] = field(default_factory=dict)
    """The watch status of /api/v1/findings (up, synced, stale, forbidden_kinds, unsynced_kinds)."""
    objects: int = 0
    """How many objects the watcher holds."""
    load_errors: int = 0
    """How many it skipped as malformed."""


PartsOf = Callable[[PageState, Query, datetime], Iterable[Part]]


@dataclass(frozen=True, slots=True)
class Section:
    """A container of the skeleton: its opening markup (trusted, with the container's id), what
    fills it, and whether it is shown before the first evaluation."""

    container: str
    opening: str
    closing: str
    parts: PartsOf
    always: bool = False


def _trust(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
    yield cards.trust(state.evaluation, state.status, now=now, load_errors=state.load_errors)


def _needs(build: Callable[[Evaluation, Query, datetime], Iterable[Part]]) -> PartsOf:
    """A section's parts drawn from the evaluation (there is one: see Section.always)."""

    def parts(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
        assert state.evaluation is not None
        return build(state.evaluation, query, now)

    return parts


def _roots(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
    assert state.evaluation is not None
    return cards.roots(state.evaluation, objects=state.objects)


NAV = (
    '<h1>stalewatch</h1><nav><a href="/api/v1/findings">findings JSON</a><a href="/metrics">metrics</a></nav>'
)

SECTIONS: tuple[Section, ...] = (
    Section("header", f'<header id="header">{NAV}', "</header>", _trust, always=True),
    Section("roots", '<section id="roots"><h2>Root causes</h2>', "</section>", _roots),
    Section(
        "rejected",
        '<section id="rejected">',
        "</section>",
        _needs(lambda e, q, n: cards.rejected(e.rejected)),
    ),
    Section(
        "controllers",
        '<section id="controllers">',
        "</section>",
        _needs(lambda e, q, n: tables.controllers(e.controllers, now=e.now)),
    ),
    Section(
        "objects",
        '<section id="objects">',
        "</section>",
        _needs(lambda e, q, n: tables.objects(e.objects, e.findings, namespace=q.namespace, now=e.now)),
    ),
    Section(
        "revisions",
        '<section id="revisions">',
        "</section>",
        _needs(lambda e, q, n: tables.revisions(e.revisions, namespace=q.namespace)),
    ),
)
"""The page's containers in document order."""


def page_parts(state: PageState, query: Query, *, now: datetime) -> list[Part]:
    """Every part of the view `query` asks for, in document order; `now` is the wall clock (to
    say how old the evaluation is). What the page renders and what the stream compares."""
    return [part for section in _shown(state) for part in section.parts(state, query, now)]


def _shown(state: PageState) -> list[Section]:
    return [s for s in SECTIONS if s.always or state.evaluation is not None]


def render_page(state: PageState, query: Query, *, now: datetime) -> bytes:
    """The whole page as UTF-8: the skeleton with `page_parts` in their containers."""
    return render_parts(state, page_parts(state, query, now=now), now=now)


def render_parts(state: PageState, parts: Iterable[Part], *, now: datetime) -> bytes:
    """The skeleton with `parts` placed in their containers, in order; the freshness indicator
    (outside every container: live.js keeps it) and the script that keeps the parts live."""
    by_container: dict[str, list[str]] = {}
    for part in parts:
        by_container.setdefault(part.container, []).append(part.html)
    roots = len(state.evaluation.roots) if state.evaluation is not None else 0
    title = f"stalewatch: {plural(roots, 'root cause')}" if roots else "stalewatch"
    head = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"{freshness.NOSCRIPT_REFRESH.format(seconds=REFRESH_SECONDS)}"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{PAGE_CSS}</style></head><body>"
    )
    body = [head, freshness.indicator(state.evaluation, state.status, now=now)]
    for section in _shown(state):
        body += [section.opening, *by_container.get(section.container, ()), section.closing]
    return "\n".join([*body, freshness.script_tag(), "</body></html>\n"]).encode()
