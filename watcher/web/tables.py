"""The flat tables under the stacks, as parts: controllers, GitOps objects, revisions.

Each table is one part (it changes as a whole far less often than once per evaluation); the
rows are bounded so a large cluster cannot turn the page into megabytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape
from urllib.parse import urlencode

from watcher.export.report import subject_key
from watcher.model.ingest.objects import describe
from watcher.model.types import ControllerHealth, Finding, HeartbeatState, ObjectHealth, RevisionInfo, Status
from watcher.web.cards import MAX_ROWS
from watcher.web.html import more, row, since
from watcher.web.parts import Part


def controllers(
    found: Sequence[ControllerHealth], *, now: datetime, namespaces: Sequence[str] | None = None
) -> Iterable[Part]:
    """`namespaces`: namespace mode's, outside which a controller's workload cannot be seen: the
    controllers not found there are unknown, never up (nor down)."""
    lines = ["<h2>Controllers</h2>"]
    if namespaces:
        lines.append(
            '<p class="v-not-judged">Only the controllers in namespaces '
            f"{escape(', '.join(namespaces))} can be seen: any other (Flux's run in flux-system) is "
            "<strong>unknown</strong>, never taken as up, and what it reconciles is judged from its "
            "status alone.</p>"
        )
    if not found:
        lines.append("<p>No controller workload found.</p>")
    else:
        lines.append(row("th", ["Controller", "Workload", "State", "Reason", "Groups", "Since"]))
        for c in sorted(found, key=lambda c: (not _bad(c), c.up, c.name, subject_key(c.subject))):
            state, reason = _state(c, now)
            if c.scope:  # its --watch-label-selector cannot be read: whom it serves is unknown
                state += ', <span class="v-not-judged">serves unknown objects</span>'
                reason = f"{reason}; {c.scope}" if reason else c.scope
            cells = [c.name, describe(c.subject), None, reason, ", ".join(c.groups), since(c.since, now)]
            lines.append(row("td", cells, raw={2: state}, css="bad" if _bad(c) else ""))
        lines.append("</table>")
    yield _part("controllers", lines)


def _bad(c: ControllerHealth) -> bool:
    return not c.up or (c.heartbeat is not None and c.heartbeat.state is HeartbeatState.STUCK)


def _state(c: ControllerHealth, now: datetime) -> tuple[str, str]:
    """The State cell (markup) and the Reason: down, or up and what its heartbeat says (only
    "up" while no heartbeat is read: it says nothing of reconciling then)."""
    beat = c.heartbeat
    if not c.up:
        return '<span class="down">down</span>', c.reason
    if beat is None:
        return '<span class="up">up</span>', c.reason
    if beat.state is HeartbeatState.STUCK:
        return (
            f'<span class="down">up, not reconciling since {escape(since(beat.since, now))}</span>',
            beat.detail,
        )
    if beat.state is HeartbeatState.UNKNOWN:
        return '<span class="up">up</span>, <span class="v-not-judged">heartbeat unknown</span>', beat.detail
    return '<span class="up">up, reconciling</span>', c.reason


def objects(
    found: Sequence[ObjectHealth], findings: Sequence[Finding], *, namespace: str | None, now: datetime
) -> Iterable[Part]:
    """Each object with the finding types on it. kstatus says InProgress alike for an object at
    work, one waiting on a dependency and one failing over and over (Ready=False, whatever its
    reason), so the findings column is what tells them apart. Problems first, so the row bound
    never hides them."""
    lines = ["<h2>GitOps objects</h2>"]
    lines += _namespace_filter(sorted({o.subject["namespace"] for o in found} - {""}), namespace)
    shown = [o for o in found if namespace is None or o.subject["namespace"] == namespace]
    if not shown:
        where = f" in namespace {namespace}" if namespace is not None else ""
        lines.append(f"<p>No GitOps objects{escape(where)}.</p>")
        yield _part("objects", lines)
        return
    types: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for finding in findings:
        types[subject_key(finding.subject)].add(str(finding.type))

    def bad(o: ObjectHealth) -> bool:
        return o.stale or o.status != Status.CURRENT or bool(types.get(subject_key(o.subject)))

    shown.sort(key=lambda o: (not bad(o), subject_key(o.subject)))
    header = ["Kind", "Namespace", "Name", "Status", "Reason", "Findings", "Controller", "Last transition"]
    lines.append(row("th", header))
    for o in shown[:MAX_ROWS]:
        mark = escape(str(o.status)) + (' <strong class="down">stale</strong>' if o.stale else "")
        subject, on = o.subject, ", ".join(sorted(types.get(subject_key(o.subject), ())))
        cells = [subject["kind"], subject["namespace"], subject["name"], None, o.reason, on, o.controller]
        lines.append(
            row("td", [*cells, since(o.last_transition, now)], raw={3: mark}, css="bad" if bad(o) else "")
        )
    lines.append("</table>")
    lines += more(len(shown) - MAX_ROWS, "objects")
    yield _part("objects", lines)


def revisions(found: Sequence[RevisionInfo], *, namespace: str | None) -> Iterable[Part]:
    """What each object should run (its source's revision) next to what it applied; skew first."""
    shown = [r for r in found if namespace is None or r.subject["namespace"] == namespace]
    lines = ["<h2>Revisions</h2>"]
    if not shown:
        lines.append("<p>No revisions here.</p>")
    else:
        shown.sort(key=lambda r: (r.revision == r.applied_revision, subject_key(r.subject)))
        lines.append(row("th", ["Object", "Source", "Source revision", "Applied revision"]))
        for r in shown[:MAX_ROWS]:
            skew = r.revision != r.applied_revision
            cells = [describe(r.subject), r.source, r.revision, r.applied_revision]
            lines.append(row("td", cells, css="skew" if skew else "", mono=(2, 3)))
        lines.append("</table>")
        lines += more(len(shown) - MAX_ROWS, "revisions")
    yield _part("revisions", lines)


def _part(section: str, lines: Iterable[str]) -> Part:
    """A whole table as one part in its section."""
    ident = f"{section}-table"
    return Part(ident, section, f'<div id="{ident}">' + "".join(lines) + "</div>")


def _namespace_filter(namespaces: list[str], chosen: str | None) -> Iterable[str]:
    """Plain links (no JS): `/?namespace=NS` is also what an on-call bookmarks.
    Cluster-scoped objects show only under "all"."""
    if not namespaces:
        return
    links = ['<a href="/#objects">all</a>' if chosen is not None else "<strong>all</strong>"]
    for ns in namespaces:
        label = escape(ns)
        href = escape("/?" + urlencode({"namespace": ns}) + "#objects")
        links.append(f"<strong>{label}</strong>" if ns == chosen else f'<a href="{href}">{label}</a>')
    yield f'<p class="filter">Namespace: {" · ".join(links)}</p>'
