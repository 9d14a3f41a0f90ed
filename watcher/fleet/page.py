"""The fleet page: which clusters can be trusted, which root causes they share, what version
runs where. Server-rendered like the single pane (watcher.web.page), with its stylesheet, table
rows, escaping and Content-Security-Policy: no script at all, a meta refresh to stay live, and
every value escaped (names and revisions come from whoever writes to the clusters or the store).

First the store: a Prometheus that is down or answers an error is said so at the top, in red,
and nothing below it is green. Then the clusters, worst first; the root causes grouped across
clusters; the version matrix.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from urllib.parse import urlencode

from watcher.export.report import plural
from watcher.fleet.model import Cell, Fleet, RootGroup
from watcher.fleet.queries import Filters
from watcher.model.ingest.objects import format_age
from watcher.model.types import rfc3339
from watcher.web.page import CSS, REFRESH_SECONDS, row, security_headers

FLEET_CSS = (
    CSS
    + """
.state{font-weight:700}.state.healthy{color:#188038}.state.unknown{color:#5f6368;font-style:italic}
.state.stale{color:#b06000}.state.critical{color:#c5221f}.state.warning{color:#b06000}.state.info{color:#1a73e8}
tr.unknown td{background:#f1f3f4}td.off{background:#fce8e6;font-weight:600}td.lag{outline:2px dashed #e37400}
td.absent{color:#9aa0a6}.src{color:#5f6368;display:block;font-size:.85em}
form.filters label{margin-right:1em}form.filters input{width:12em}
"""
)
_ROW_CSS = {"unknown": "unknown", "healthy": ""}
"""A cluster's row: grey when unknown, plain when healthy, red otherwise."""
HEADERS = security_headers(FLEET_CSS, forms=True)
"""Sent with the page: the single pane's policy, forms submitting to this origin only."""


def render_fleet(fleet: Fleet) -> bytes:
    """The whole page as UTF-8."""
    unknown = sum(c.state == "unknown" for c in fleet.clusters)
    title = f"stalewatch fleet: {plural(len(fleet.clusters), 'cluster')}" + (
        f", {unknown} unknown" if unknown else ""
    )
    head = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{FLEET_CSS}</style></head><body>"
    )
    body = [
        *_header(fleet),
        *_clusters(fleet),
        *_roots(fleet),
        *_matrix(fleet),
    ]
    return "\n".join([head, *body, "</body></html>\n"]).encode()


def query_string(filters: Filters) -> str:
    kept = {k: v for k, v in filters.to_dict().items() if v}
    return "?" + urlencode(kept) if kept else ""


def _header(fleet: Fleet) -> Iterable[str]:
    api = escape("/api/v1/fleet" + query_string(fleet.filters))
    yield f'<header><h1>stalewatch fleet</h1><nav><a href="{api}">fleet JSON</a></nav>'
    store = f"the store at {fleet.prometheus}"
    if fleet.errors:
        failed = "; ".join(f"{name}: {error}" for name, error in sorted(fleet.errors.items()))
        yield f'<p class="banner failed">NOT KNOWN: {escape(store)} did not answer: {escape(failed)}.</p>'
    if fleet.warnings:
        said = "; ".join(fleet.warnings)
        yield f'<p class="banner stale">PARTIAL: {escape(store)} warned: {escape(said)}.</p>'
    if not fleet.errors and not fleet.warnings:
        yield f'<p class="banner live">Live: {escape(store)} answered every query.</p>'
    asked = rfc3339(fleet.now) or ""
    yield f"<p>Asked at <time>{escape(asked)}</time>; this page refreshes every {REFRESH_SECONDS}s.</p>"
    yield from _filter_form(fleet.filters)
    yield "</header>"


def _filter_form(filters: Filters) -> Iterable[str]:
    """A GET form: the filters live in the query string, where a link or a bookmark keeps them."""
    yield '<form class="filters" method="get" action="/">'
    for field, value in filters.to_dict().items():
        yield f'<label>{field} <input name="{field}" value="{escape(value)}" placeholder="regex"></label>'
    yield '<button type="submit">filter</button></form>'


def _clusters(fleet: Fleet) -> Iterable[str]:
    yield '<section id="clusters"><h2>Clusters</h2>'
    if not fleet.clusters:
        known = "No cluster is known" if "up" in fleet.errors else "No stalewatch reports to this store"
        yield f'<p class="stale">{escape(known)}: nothing here is healthy.</p></section>'
        return
    if fleet.healthy:
        yield f'<p class="healthy">All {escape(plural(len(fleet.clusters), "cluster"))} healthy.</p>'
    yield row("th", ["Cluster", "State", "Why", "Last sample", "Root causes", "Controllers down"])
    for c in fleet.clusters:
        age = format_age(c.last_sample, fleet.now) if c.last_sample else "never"
        if "last_sample" in c.unreadable:
            age = "not known (unreadable)"
        counts = ", ".join(f"{n} {s}" for s, n in c.roots.items() if n)
        down = ", ".join(
            f"{d.namespace}/{d.name}" + (f" ({d.reason})" if d.reason else "") for d in c.controllers_down
        )
        state = f'<span class="state {escape(c.state)}">{escape(c.state)}</span>'
        yield row(
            "td",
            [None, None, c.why, age, counts, down],
            raw={0: _cluster_link(c.name, c.url), 1: state},
            css=_ROW_CSS.get(c.state, "bad"),
        )
    yield "</table></section>"


def _roots(fleet: Fleet) -> Iterable[str]:
    """The same root in many clusters is one line, with a link to each cluster's own page."""
    yield '<section id="roots"><h2>Root causes across the fleet</h2>'
    if "roots" in fleet.errors:
        yield f'<p class="stale">Not known: {escape(fleet.errors["roots"])}.</p></section>'
        return
    if not fleet.roots:
        yield "<p>No root cause in any cluster that reports.</p></section>"
        return
    for group in fleet.roots:
        yield _root_line(group)
    yield "</section>"


def _root_line(group: RootGroup) -> str:
    subject = f"{group.kind} {group.namespace + '/' if group.namespace else ''}{group.name}"
    what = escape(f"{group.type} {subject}" + (f", {group.reason}" if group.reason else ""))
    wheres = ", ".join(
        _cluster_link(w.cluster, w.url) + escape(_affected(w.blast_radius)) for w in group.clusters
    )
    count = escape(plural(len(group.clusters), "cluster"))
    severity = escape(group.severity)
    return (
        f'<article class="finding {severity}"><h3><span class="sev">{severity}</span> {what} '
        f"— {count}: {wheres}</h3></article>"
    )


def _affected(blast_radius: int | None) -> str:
    if blast_radius is None:
        return " (objects affected: not known)"
    return f" ({plural(blast_radius, 'object')} affected)" if blast_radius else ""


def _matrix(fleet: Fleet) -> Iterable[str]:
    """What version runs where: a row per object, a column per cluster."""
    yield '<section id="versions"><h2>What version runs where</h2>'
    for query in ("matrix_rows", "matrix"):
        if query in fleet.errors:
            yield f'<p class="stale">Not known: {escape(fleet.errors[query])}.</p></section>'
            return
    if not fleet.rows:
        yield "<p>No Kustomization, HelmRelease or Terraform with a source matches.</p></section>"
        return
    yield (
        "<p>Applied revision per cluster (chart version for a HelmRelease). Red: differs from the "
        "majority of clusters; dashed: lags its own source's revision (shown under it).</p>"
    )
    yield row("th", ["Kind", "Namespace", "Name", "Majority", *fleet.columns])
    for r in fleet.rows:
        first = 4
        raw = {first + i: _cell(r.cells.get(c)) for i, c in enumerate(fleet.columns)}
        classes = {first + i: _classes(r.cells.get(c)) for i, c in enumerate(fleet.columns)}
        names = [r.kind, r.namespace, r.name, r.majority or "none"]
        yield row("td", [*names, *([None] * len(fleet.columns))], raw=raw, classes=classes, mono=(3, *raw))
    yield "</table>"
    if fleet.matrix_bounded:
        shown = f"The first {len(fleet.rows)} objects, skewed first: narrow the filters for more."
        yield f'<p class="more">{escape(shown)}</p>'
    yield "</section>"


def _cell(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    shown = escape(cell.applied_revision or "not applied")
    if cell.lags_source:
        shown += f'<span class="src">source: {escape(cell.revision or "none")}</span>'
    return shown


def _classes(cell: Cell | None) -> str:
    """The highlighting: off the majority, lagging its source, or not in that cluster at all."""
    if cell is None:
        return "absent"
    return " ".join(name for name, on in (("off", cell.off_majority), ("lag", cell.lags_source)) if on)


def _cluster_link(name: str, url: str | None) -> str:
    label = escape(name or "(no cluster label)")
    return f'<a href="{escape(url)}">{label}</a>' if url else label
