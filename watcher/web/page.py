"""The single-pane web view at `/`: the page on-call keeps open during an incident.

The page is a skeleton of containers (the header, the root causes, the stacks, the tables...)
filled with keyed parts (watcher.web.parts): `page_parts` renders the parts of a view and
`render_page` places them. The live stream renders the same parts again after an evaluation and
sends those that changed, so the page after a delta is the page after a reload by construction.
`/stacks/NS/NAME` is a view of the same kind (its query names the stack).

Server-rendered and self-contained: no external assets (the cluster may be offline), a meta
refresh for browsers without scripts. Every value is escaped, because condition and event
messages are written by whoever can write to the cluster; the Content-Security-Policy (only this
page's own stylesheet and its one script, live.js, each by hash; forms to this origin only) is the
second wall. `/stacks/...` and `/objects/...` are rendered the same way without the script (a
meta refresh keeps them current). Row counts are bounded so a large cluster cannot turn the page
into megabytes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from html import escape
from typing import Any

from watcher.export.report import plural
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.kinds import KUSTOMIZE_GROUP
from watcher.model.ingest.objects import Key
from watcher.model.views.row_verdicts import Verdict
from watcher.model.views.timeline import Snapshot
from watcher.web import cards, freshness, stacks, tables
from watcher.web.cards import MAX_AFFECTED as MAX_AFFECTED
from watcher.web.cards import MAX_ROOTS as MAX_ROOTS
from watcher.web.cards import MAX_ROWS as MAX_ROWS
from watcher.web.changes import changes_parts
from watcher.web.html import neutral
from watcher.web.html import row as row
from watcher.web.parts import Part
from watcher.web.query import Query, slug
from watcher.web.stacks import Stacks

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
table.stacks{width:100%}tr.stackhead td{background:#f1f3f4;font-weight:600;border-top:2px solid #dadce0}
a.toggle{text-decoration:none;display:inline-block;width:1.2em}.cached{color:#5f6368;font-weight:400}
.v{font-weight:600}.v-failing,.v-stale,.v-missing{color:#c5221f}.v-not-judged{color:#b06000}
.v-in-progress{color:#1a73e8}.v-current{color:#188038}code{word-break:break-all}
.d1{padding-left:1.2em}.d2{padding-left:2.4em}.d3{padding-left:3.6em}.d4{padding-left:4.8em}
.d5{padding-left:6em}.d6{padding-left:7.2em}.d7{padding-left:8.4em}.d8{padding-left:9.6em}
span[class^=d]{display:inline-block}form.search{margin:.4em 0}form.search input[type=search]{width:28em}
form.search label{margin-right:.6em}pre.cmd{background:#f1f3f4;padding:.4em .8em;white-space:pre-wrap}
ul.changes{list-style:none;padding-left:0}.change time{font-family:monospace}code{background:#f1f3f4}
"""


def security_headers(css: str, *, forms: bool = False) -> Mapping[str, str]:
    """The headers of a page whose only stylesheet is `css`: no script may run, not even an
    injected one; only that stylesheet (by its hash); forms may submit to this origin only when
    `forms` (the search box, the fleet's filter form), else nowhere."""
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
STATIC_HEADERS = security_headers(PAGE_CSS, forms=True)
"""Sent with the stack and object pages: their stylesheet by its hash; the search box submits here."""
SECURITY_HEADERS = freshness.with_script(STATIC_HEADERS)
"""Sent with the page: its stylesheet and live.js, each by its hash, and the stream."""


@dataclass(frozen=True, slots=True)
class PageState:
    """What one view of the page is rendered from, taken at once so the parts agree."""

    evaluation: Evaluation | None
    status: Mapping[str, Any] = field(default_factory=dict)
    """The watch status of /api/v1/findings (up, synced, stale, forbidden_kinds, unsynced_kinds,
    unjudged_kinds)."""
    objects: int = 0
    """How many objects the watcher holds."""
    load_errors: int = 0
    """How many it skipped as malformed."""
    stacks: Stacks | None = None
    """The evaluation's stacks (None: no live model behind this page)."""
    changes: Snapshot | None = None
    """The live model's timeline (None: this server keeps none): recent changes, root cards."""


PartsOf = Callable[[PageState, Query, datetime], Iterable[Part]]


@dataclass(frozen=True, slots=True)
class Section:
    """Part of the skeleton: trusted markup around its containers (`markup` has one more item
    than `containers`: before the first, between them, after the last), what fills them, and
    whether it is shown before the first evaluation."""

    containers: tuple[str, ...]
    markup: tuple[str, ...]
    parts: PartsOf
    always: bool = False


def _section(name: str, parts: PartsOf, heading: str = "") -> Section:
    """A <section> that is its own single container."""
    return Section((name,), (f'<section id="{name}">{heading}', "</section>"), parts)


def _trust(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
    yield cards.trust(state.evaluation, state.status, now=now, load_errors=state.load_errors)


def _of(build: Callable[[Evaluation, Query], Iterable[Part]]) -> PartsOf:
    """A section's parts drawn from the evaluation (there is one unless Section.always)."""

    def parts(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
        assert state.evaluation is not None
        return build(state.evaluation, query)

    return parts


def _roots(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
    assert state.evaluation is not None
    return cards.roots(state.evaluation, objects=state.objects, changes=state.changes)


def _changes(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
    return changes_parts(state.changes, now=now)


def _controllers(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
    assert state.evaluation is not None
    scope = state.status.get("scope") or {}
    evaluation = state.evaluation
    return tables.controllers(evaluation.controllers, now=evaluation.now, namespaces=scope.get("namespaces"))


def _stacks(state: PageState, query: Query, now: datetime) -> Iterable[Part]:
    yield from _search(query)
    forest = state.stacks.forest() if state.stacks is not None else None
    if query.stack is None:
        yield from stacks.section(forest, query, now=now)
        return
    stack = forest.stack(query.stack) if forest is not None else None
    if stack is None:
        yield stacks.missing(query.stack)
    else:
        yield from stacks.stack_page(stack, query, now=now)


def _search(query: Query) -> Iterable[Part]:
    """The search box (a GET form: the URL is the view) and what the query got wrong."""
    path = (stacks.stack_href(query.stack) or "") if query.stack is not None else "/"  # "": this URL
    boxes = "".join(
        f'<label><input type="checkbox" name="status" value="{slug(v)}"'
        + (" checked" if v in query.statuses else "")
        + f"> {escape(v.value)}</label>"
        for v in Verdict
    )
    form = (
        f'<form id="search" class="search" method="get" action="{escape(path)}">'
        f'<input type="search" name="q" value="{escape(query.text)}" '
        'placeholder="kind, namespace, name, revision prefix, finding type" aria-label="search">'
        f' {boxes}<button type="submit">Search</button>'
    )
    if query.searching:
        form += f' <a href="{escape(path)}">clear</a>'
    yield Part("search", "stacks-head", form + "</form>")
    if query.problems:
        lines = "".join(f"<li>{escape(p)}</li>" for p in query.problems)
        html = (
            '<div id="query-problems" class="banner stale">'
            f"<p>This URL asks for what the page cannot show:</p><ul>{lines}</ul></div>"
        )
        yield Part("query-problems", "stacks-head", html)


NAV = (
    '<h1><a href="/">stalewatch</a></h1><nav><a href="/api/v1/findings">findings JSON</a>'
    '<a href="/metrics">metrics</a></nav>'
)
HEADER = Section(("header",), (f'<header id="header">{NAV}', "</header>"), _trust, always=True)
STACKS = Section(
    ("stacks-head", "stacks-rows"),
    (
        '<section id="stacks"><h2>Stacks</h2><div id="stacks-head">',
        f'</div>{stacks.TABLE}<tbody id="stacks-rows">',
        "</tbody></table></section>",
    ),
    _stacks,
)
SECTIONS: tuple[Section, ...] = (
    HEADER,
    _section("roots", _roots, "<h2>Root causes</h2>"),
    _section("changes", _changes),
    STACKS,
    _section("rejected", _of(lambda e, q: cards.rejected(e.rejected))),
    _section("controllers", _controllers),
    _section(
        "objects", _of(lambda e, q: tables.objects(e.objects, e.findings, namespace=q.namespace, now=e.now))
    ),
    _section("revisions", _of(lambda e, q: tables.revisions(e.revisions, namespace=q.namespace))),
)
"""The page's sections in document order."""
STACK_SECTIONS: tuple[Section, ...] = (HEADER, STACKS)
"""/stacks/NS/NAME: whether to trust it, then the stack."""
OBJECT = Section(("object",), ('<section id="object">', "</section>"), lambda state, query, now: ())
"""/objects/...: filled by watcher.web.objects."""


def _view(query: Query) -> tuple[Section, ...]:
    return SECTIONS if query.stack is None else STACK_SECTIONS


def page_parts(state: PageState, query: Query, *, now: datetime) -> list[Part]:
    """Every part of the view `query` asks for, in document order; `now` is the wall clock (to
    say how old the evaluation is). What the page renders and what the stream compares."""
    parts = (part for section in _shown(state, query) for part in section.parts(state, query, now))
    return [replace(part, html=neutral(part.html)) for part in parts]


def _shown(state: PageState, query: Query) -> list[Section]:
    return [s for s in _view(query) if s.always or state.evaluation is not None]


def found(state: PageState, query: Query) -> bool:
    """Whether the view exists (a /stacks/NS/NAME view: whether that stack does)."""
    if query.stack is None or state.evaluation is None:
        return True
    forest = state.stacks.forest() if state.stacks is not None else None
    return forest is not None and forest.stack(query.stack) is not None


def render_page(state: PageState, query: Query, *, now: datetime) -> bytes:
    """The whole page as UTF-8: the skeleton with `page_parts` in their containers."""
    return render_parts(
        _shown(state, query),
        page_parts(state, query, now=now),
        state=state,
        title=_title(state, query),
        now=now,
        live=query.stack is None,
    )


def render_parts(
    sections: Iterable[Section],
    parts: Iterable[Part],
    *,
    state: PageState,
    title: str,
    now: datetime,
    live: bool,
) -> bytes:
    """The skeleton of `sections` with `parts` placed in their containers, in order, after the
    freshness indicator (outside every container: live.js keeps it); `live`: with the script
    that keeps the parts live (the stream serves the views of `/`), else a plain meta refresh."""
    by_container: dict[str, list[str]] = {}
    for part in parts:
        by_container.setdefault(part.container, []).append(part.html)
    body = [document_head(title, live=live), freshness.indicator(state.evaluation, state.status, now=now)]
    for section in sections:
        for markup, container in zip(section.markup, section.containers, strict=False):
            body += [markup, *by_container.get(container, ())]
        body.append(section.markup[-1])
    script = [freshness.script_tag()] if live else []
    return neutral("\n".join([*body, *script, "</body></html>\n"])).encode()


def render_object(state: PageState, parts: Iterable[Part], *, title: str, now: datetime) -> bytes:
    """/objects/...: whether to trust it, then the object's `parts` (watcher.web.objects)."""
    header = [*_trust(state, Query(), now)]
    return render_parts(
        (HEADER, OBJECT), [*header, *parts], state=state, title=f"stalewatch · {title}", now=now, live=False
    )


def _title(state: PageState, query: Query) -> str:
    roots = len(state.evaluation.roots) if state.evaluation is not None else 0
    title = f"stalewatch: {plural(roots, 'root cause')}" if roots else "stalewatch"
    if query.stack is not None:
        title = f"{title} · stack {query.stack.namespace}/{query.stack.name}"
    return title


def document_head(title: str, *, live: bool) -> str:
    """Everything up to <body>: the meta refresh (only without scripts when the page is `live`)."""
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"{freshness.NOSCRIPT_REFRESH.format(seconds=REFRESH_SECONDS) if live else refresh}"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{PAGE_CSS}</style></head><body>"
    )


def stack_key(namespace: str, name: str) -> Key:
    return Key(KUSTOMIZE_GROUP, "Kustomization", namespace, name)
