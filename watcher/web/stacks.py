"""Stacks on the page: one header row per root Kustomization, its tree under it when open.

Collapsed by default and paginated (STACKS_PER_PAGE headers a page; an open stack shows its
first ROWS_OPEN rows, its own page /stacks/NS/NAME all of them, ROWS_PER_PAGE at a time), so
5,000 rows never make one page. Without scripts a stack opens by a link (`?open=NS/NAME`), so
the URL says what is open. A search opens the stacks it matches and shows the rows it matched,
with their parents.

Each header and each row is a part of its own (watcher.web.parts): its id comes from the
stack's root and the row's object, so the stream can replace a row in place.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape
from typing import Protocol
from urllib.parse import quote

from watcher.export.report import plural
from watcher.model.cluster.compliance import StackViolations
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.objects import Key, describe
from watcher.model.ingest.revisions import short
from watcher.model.store.graph import Snapshot
from watcher.model.types import Rejection
from watcher.model.views.row_verdicts import Verdict
from watcher.model.views.stacks import STACK_KINDS, Forest, Reconciler, Row, Stack, build_forest
from watcher.web.html import link, part_id, since
from watcher.web.parts import Part
from watcher.web.query import Query, slug
from watcher.web.search import found_in

STACKS_PER_PAGE = 50
ROWS_OPEN = 200
ROWS_PER_PAGE = 500
UNREAD_NAMED = 8
"""Policy objects whose counts cannot be read named on the page (all are counted)."""
HEADER = (
    "Object",
    "Status",
    "Why",
    "Source revision",
    "Applied",
    "Attempted",
    "Controller",
    "Findings",
    "Policy violations",
)
TABLE = '<table class="stacks"><thead><tr>' + "".join(f"<th>{h}</th>" for h in HEADER) + "</tr></thead>"


class Model(Protocol):
    """What the pages read of the live model (engine.HealthModel)."""

    generation: int

    def snapshot(self, kinds: Iterable[tuple[str, str]], *, namespace: str | None = None) -> Snapshot: ...


class StacksCache:
    """One Stacks per evaluation generation: a view of the same generation (a reload, the
    stream's next comparison) reuses its forest; a new generation takes a new snapshot."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self._kept: tuple[int, list[Rejection], Stacks] | None = None

    def current(self, evaluation: Evaluation | None) -> Stacks | None:
        """Taken on the event loop (the snapshot must not race the watches)."""
        if evaluation is None:
            return None
        generation, kept = self.model.generation, self._kept
        if kept is not None and kept[0] == generation and kept[1] is evaluation.rejected:
            return kept[2]
        stacks = Stacks(self.model.snapshot(STACK_KINDS), evaluation)
        self._kept = (generation, evaluation.rejected, stacks)
        return stacks


class Stacks:
    """The forest of one evaluation generation, built once, the first time a view asks for it
    (in a worker thread: the snapshot it reads was taken on the event loop)."""

    def __init__(self, snapshot: Snapshot, evaluation: Evaluation) -> None:
        self._snapshot, self._evaluation = snapshot, evaluation
        self._forest: Forest | None = None
        self._lock = threading.Lock()

    def forest(self) -> Forest:
        with self._lock:
            if self._forest is None:
                self._forest = build_forest(self._snapshot, self._evaluation)
            return self._forest


def object_href(key: Key) -> str | None:
    """`/objects/KIND/NAMESPACE/NAME`, or `/objects/KIND/NAME` for a cluster-scoped object;
    None when no path names it (`path`)."""
    parts = [key.kind, key.namespace, key.name] if key.namespace else [key.kind, key.name]
    return path("/objects", parts)


def stack_href(root: Key) -> str | None:
    """`/stacks/NAMESPACE/NAME`; None when no path names it (`path`)."""
    return path("/stacks", [root.namespace, root.name])


UNLINKABLE = frozenset({"", ".", ".."})
"""Path segments a browser does not keep: `/objects/Kind/ns/..` is `/objects/Kind/`, and an
empty one names nothing. A name from an inventory (or a snapshot) can be any of them."""


def path(base: str, segments: Sequence[str]) -> str | None:
    """`base/SEGMENT/...` each quoted whole (a `/` in a name stays inside its segment as %2F), or
    None when a segment is UNLINKABLE: the object is then named, not linked."""
    if any(segment in UNLINKABLE for segment in segments):
        return None
    return base + "".join("/" + quote(segment, safe="") for segment in segments)


def stack_id(root: Key) -> str:
    return part_id("stack", root.namespace, root.name)


def row_id(root: Key, key: Key) -> str:
    return part_id("row", root.namespace, root.name, key.group, key.kind, key.namespace, key.name)


# -- "/" ---------------------------------------------------------------------------------------


def section(forest: Forest | None, query: Query, *, now: datetime) -> Iterable[Part]:
    """The stacks section's parts: its summary, then per stack of this page its header and,
    when open (asked, or matched by a search), its rows."""
    if forest is None:
        yield _summary("<p>Stacks are not available here (no live model).</p>")
        return
    listed = _listed(forest, query)
    pages = max(1, -(-len(listed) // STACKS_PER_PAGE))
    page = min(query.page, pages)
    yield _summary(_summary_text(forest, listed, query, page=page, pages=pages))
    for stack, rows in listed[(page - 1) * STACKS_PER_PAGE : page * STACKS_PER_PAGE]:
        key = (stack.root.namespace, stack.root.name)
        opened = query.searching or key in query.opened
        yield header(stack, query, opened=opened, matched=len(rows) if query.searching else None, now=now)
        if opened:
            yield from _rows(stack, rows[:ROWS_OPEN], now=now)
            if len(rows) > ROWS_OPEN:
                yield _more_rows(stack, len(rows) - ROWS_OPEN, query)


def _listed(forest: Forest, query: Query) -> list[tuple[Stack, Sequence[Row]]]:
    if not query.searching:
        return [(stack, stack.rows) for stack in forest.stacks]
    found = ((stack, found_in(stack, query)) for stack in forest.stacks)
    return [(stack, rows) for stack, rows in found if rows]


def _summary(html: str) -> Part:
    return Part("stacks-summary", "stacks-head", f'<div id="stacks-summary">{html}</div>')


def _summary_text(
    forest: Forest, listed: Sequence[tuple[Stack, Sequence[Row]]], query: Query, *, page: int, pages: int
) -> str:
    rows = sum(len(stack.rows) for stack in forest.stacks)
    text = f"{plural(len(forest.stacks), 'stack')}, {plural(rows, 'row')}"
    if query.searching:
        hits = sum(len(r) for _, r in listed)
        text += f"; the search shows {plural(hits, 'row')} in {plural(len(listed), 'stack')}"
    lines = [f"<p>{escape(text)}.</p>"]
    if pages > 1:
        links = [
            f"<strong>{n}</strong>" if n == page else f'<a href="{escape(query.href(page=n))}#stacks">{n}</a>'
            for n in range(1, pages + 1)
        ]
        lines.append(f'<p class="pages">Page: {" ".join(links)}</p>')
    if forest.policies_blind:
        blind = ", ".join(forest.policies_blind)
        lines.append(
            f'<p class="down">Policy violations not judged: stalewatch cannot list {escape(blind)} '
            "(forbidden or not listed yet).</p>"
        )
    if forest.policies_unread:
        unread = forest.policies_unread
        named = "; ".join(f"{describe(u.obj)} ({u.reason})" for u in unread[:UNREAD_NAMED])
        more = f" and {len(unread) - UNREAD_NAMED} more" if len(unread) > UNREAD_NAMED else ""
        lines.append(
            f'<p class="down">Policy violations not judged: the counts of {escape(named)}{more}'
            " cannot be read.</p>"
        )
    if not forest.stacks:
        lines.append("<p>No root Kustomization seen.</p>")
    elif query.searching and not listed:
        lines.append("<p>Nothing matches this search.</p>")
    return "".join(lines)


def header(
    stack: Stack, query: Query, *, opened: bool, matched: int | None, now: datetime, toggle: bool = True
) -> Part:
    """A stack's header row: its root, the worst verdict of its rows and how many are stale or
    failing; the toggle opens or closes it on `/`, the name links its own page."""
    root = stack.rows[0]
    ident = stack_id(stack.root)
    key = (stack.root.namespace, stack.root.name)
    if query.searching or not toggle:
        toggler = ""
    else:
        flipped = query.opened - {key} if opened else query.opened | {key}
        label = "▾" if opened else "▸"
        what = "close" if opened else "open"
        href = escape(query.href(opened=frozenset(flipped)) + "#" + ident)
        toggler = f'<a class="toggle" href="{href}" title="{what}">{label}</a> '
    counts = [f"{stack.counts[v]} {v}" for v in Verdict if stack.counts.get(v)]
    size = f"{plural(len(stack.rows), 'row')}: " + ", ".join(counts)
    if matched is not None:
        size = f"{matched} shown of " + size
    name = link(stack_href(stack.root), describe(stack.root))
    cells = [
        f"{toggler}{name}",
        _verdict(stack.worst),
        escape(size),
        *_revisions(root),
        _reconciler(root.reconciler, now),
        escape(plural(sum(len(r.findings) for r in stack.rows), "finding")),
        _violations([v for row in stack.rows for v in row.violations]),
    ]
    tds = "".join(f"<td>{cell}</td>" for cell in cells)
    return Part(ident, "stacks-rows", f'<tr id="{ident}" class="stackhead">{tds}</tr>')


def _rows(stack: Stack, rows: Iterable[Row], *, now: datetime) -> Iterable[Part]:
    for row in rows:
        ident = row_id(stack.root, row.key)
        yield Part(ident, "stacks-rows", row_html(row, ident, now=now))


def row_html(row: Row, ident: str, *, now: datetime) -> str:
    depth = min(row.depth, 8)
    name = link(object_href(row.key), describe(row.key))
    if row.orphaned:
        name += ' <span class="cached">(left behind by prune)</span>'
    cells = [
        f'<span class="d{depth}">{name}</span>',
        _verdict(row.verdict) + _cached(row),
        escape(row.reason),
        *_revisions(row),
        _reconciler(row.reconciler, now),
        escape(", ".join(sorted({str(f.type) for f in row.findings}))),
        _violations(row.violations),
    ]
    css = "skew" if row.skew else ("bad" if row.verdict in (Verdict.FAILING, Verdict.STALE) else "")
    tds = "".join(f"<td>{cell}</td>" for cell in cells)
    return f'<tr id="{ident}"' + (f' class="{css}"' if css else "") + f">{tds}</tr>"


def _more_rows(stack: Stack, count: int, query: Query) -> Part:
    ident = part_id("more", stack.root.namespace, stack.root.name)
    whole = stack_href(stack.root)
    href = query.href(whole, opened=frozenset(), page=1) if whole is not None else None
    text = f"and {count} more rows: {link(href, 'the whole stack')}"
    return Part(
        ident, "stacks-rows", f'<tr id="{ident}"><td colspan="{len(HEADER)}" class="more">{text}</td></tr>'
    )


def _violations(rows: Sequence[StackViolations]) -> str:
    """How many violations an audit reports on what the row owns, and of which policies (an
    audit's information for the owner, not a verdict: the row's status does not change)."""
    if not rows:
        return ""
    total = sum(r.count for r in rows)
    policies = sorted({r.policy.name or f"{r.policy.engine} (unlisted)" for r in rows})
    return f'<span class="violations">{total}</span>: {escape(", ".join(policies))}'


def _verdict(verdict: Verdict) -> str:
    return f'<span class="v v-{slug(verdict)}">{escape(verdict.value)}</span>'


def _cached(row: Row) -> str:
    """What a stale object's cached status says, shown as such, never as its state."""
    if row.verdict is Verdict.STALE and row.status:
        return f' <span class="cached">(cached: {escape(row.status)})</span>'
    return ""


def _revisions(row: Row) -> list[str]:
    """Source revision, applied (marked when it is not the source's) and attempted when it
    differs from what was applied (a HelmRelease's chart attempted vs deployed)."""
    source = _rev(row.revision)
    applied = _rev(row.applied) + (' <strong class="down">skew</strong>' if row.skew else "")
    attempted = _rev(row.attempted) if row.attempted and row.attempted != row.applied else ""
    return [source, applied, attempted]


def _rev(revision: str) -> str:
    if not revision:
        return ""
    return f'<code title="{escape(revision)}">{escape(short(revision))}</code>'


def _reconciler(reconciler: Reconciler | None, now: datetime) -> str:
    if reconciler is None:
        return ""
    name = escape(reconciler.name)
    if reconciler.alive is None:
        return f'{name} <span class="down">unknown</span>: {escape(reconciler.reason)}'
    state = '<span class="up">up</span>' if reconciler.alive else '<span class="down">down</span>'
    when = f" since {escape(since(reconciler.since, now))}" if reconciler.since else ""
    why = "" if reconciler.alive else f": {escape(reconciler.reason)}"
    return f"{name} {state}{when}{why}"


# -- /stacks/NS/NAME ---------------------------------------------------------------------------


def stack_page(stack: Stack, query: Query, *, now: datetime) -> Iterable[Part]:
    """One stack whole: its header, then its rows (or a search's), ROWS_PER_PAGE at a time."""
    rows = found_in(stack, query) if query.searching else list(stack.rows)
    pages = max(1, -(-len(rows) // ROWS_PER_PAGE))
    page = min(query.page, pages)
    shown = f"{plural(len(rows), 'row')}" + (f", page {page} of {pages}" if pages > 1 else "")
    lines = [f"<h2>Stack {escape(describe(stack.root))}</h2><p>{escape(shown)}.</p>"]
    if pages > 1:
        here = stack_href(stack.root) or ""  # this page, which its URL named: "" is that URL
        links = [
            f"<strong>{n}</strong>" if n == page else f'<a href="{escape(query.href(here, page=n))}">{n}</a>'
            for n in range(1, pages + 1)
        ]
        lines.append(f'<p class="pages">Page: {" ".join(links)}</p>')
    yield _summary("".join(lines))
    matched = len(rows) if query.searching else None
    yield header(stack, query, opened=True, matched=matched, now=now, toggle=False)
    yield from _rows(stack, rows[(page - 1) * ROWS_PER_PAGE : page * ROWS_PER_PAGE], now=now)


def missing(root: Key) -> Part:
    """The /stacks/NS/NAME of a stack that is not there (a 404), saying where to look."""
    href = escape(Query(text=f"name:{root.name}").href())
    text = (
        f"<p>No stack whose root is {escape(describe(root))}: no Kustomization of that name, or "
        "another Kustomization applied it (then it is in that one's stack: "
        f'<a href="{href}">search for it</a>).</p>'
    )
    return _summary(text)
