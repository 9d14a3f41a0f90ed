"""The single-pane web view at `/`: the page on-call keeps open during an incident.

It says the same thing as `stalewatch analyze`, in the same order: first whether the data can be
trusted (live, stale, not yet synced, kinds we may not see), then the root causes, most severe
first, each with its blast radius and evidence; then the controllers, the GitOps objects and the
revisions they run. Symptoms never stand alone: they are listed under the root that explains them.

Server-rendered and self-contained: no scripts, no external assets (the cluster may be offline),
a meta refresh instead of polling. Every value is escaped, because condition and event messages
are written by whoever can write to the cluster; the Content-Security-Policy (no scripts at all,
only this page's own stylesheet by hash) is the second wall. Row counts are bounded so a large
cluster cannot turn the page into megabytes.
"""

from __future__ import annotations

import base64
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from watcher.export.report import (
    SubjectKey,
    by_root,
    group_by_kind,
    no_findings,
    plain,
    plural,
    rejected_line,
    subject_key,
    summary_line,
    symptom_tags,
)
from watcher.model.objects import describe, format_age
from watcher.model.types import (
    ControllerHealth,
    Evaluation,
    Finding,
    ObjectHealth,
    Rejection,
    RevisionInfo,
    Severity,
    Status,
    rfc3339,
)

REFRESH_SECONDS = 10
MAX_ROOTS = 50
MAX_AFFECTED = 200
"""Per root: a controller outage can drag down thousands of objects; the JSON API has them all."""
MAX_ROWS = 500

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


SECURITY_HEADERS = security_headers(CSS)
"""Sent with the page."""

_SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity)}


def render_page(
    evaluation: Evaluation | None,
    status: Mapping[str, Any],
    *,
    objects: int,
    load_errors: int,
    now: datetime,
    namespace: str | None = None,
) -> bytes:
    """The whole page as UTF-8. `status` is the watch status of /api/v1/findings (up, synced,
    stale, forbidden_kinds, unsynced_kinds); `objects` and `load_errors` are the watcher's counts;
    `now` is the wall clock (to say how old the evaluation is); `namespace` filters the objects and
    revisions tables."""
    roots: list[Finding] = []
    body = [*_header(evaluation, status, now=now, load_errors=load_errors)]
    if evaluation is not None:
        roots, symptoms = by_root(evaluation.findings)
        roots.sort(key=lambda root: _SEVERITY_RANK[root.severity])
        body += _findings(
            roots,
            symptoms,
            findings=len(evaluation.findings),
            objects=objects,
            rejected=evaluation.rejected,
            now=evaluation.now,
        )
        body += _rejected(evaluation.rejected)
        body += _controllers(evaluation.controllers, now=evaluation.now)
        body += _objects(evaluation.objects, evaluation.findings, namespace=namespace, now=evaluation.now)
        body += _revisions(evaluation.revisions, namespace=namespace)
    title = f"stalewatch: {plural(len(roots), 'root cause')}" if roots else "stalewatch"
    head = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
    )
    return "\n".join([head, *body, "</body></html>\n"]).encode()


def _header(
    evaluation: Evaluation | None, status: Mapping[str, Any], *, now: datetime, load_errors: int
) -> Iterable[str]:
    yield '<header><h1>stalewatch</h1><nav><a href="/api/v1/findings">findings JSON</a>'
    yield '<a href="/metrics">metrics</a></nav>'
    for css, text in _banners(status):
        yield f'<p class="banner {css}">{escape(text)}</p>'
    if evaluation is None:
        yield '<p class="banner pending">No evaluation yet: waiting for the first list of the cluster.</p>'
    else:
        age = format_age(evaluation.now, now)
        yield f"<p>Evaluated at <time>{escape(rfc3339(evaluation.now) or '')}</time> ({escape(age)}).</p>"
    if load_errors:
        what = plural(load_errors, "object")
        yield f"<p>{escape(what)} skipped as malformed (see the log): not evaluated.</p>"
    yield "</header>"


def _banners(status: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """Whether to trust what follows: the first thing on-call must know."""
    if status.get("evaluation_error"):
        error = status["evaluation_error"]
        yield "failed", f"STALE: the last evaluation failed ({error}); this is the previous one."
    if not status.get("up"):
        yield "stale", "STALE: the Kubernetes API server is unreachable; this is the last known state."
    elif status.get("unauthorized"):
        yield "stale", f"STALE: {status['unauthorized']}; this is the last known state, if any."
    elif not status.get("synced"):
        pending = ", ".join(status.get("unsynced_kinds") or []) or "the kinds to watch"
        yield "pending", f"Not yet synced: initial list not finished for {pending}."
    elif status.get("stale"):
        yield "stale", "STALE: a watch is broken; what follows may lag the cluster."
    else:
        yield "live", "Live: every watch is synced and the API server answers."
    forbidden = [
        f"{k['kind']}.{k['group']}" if k["group"] else k["kind"] for k in status.get("forbidden_kinds") or []
    ]
    if forbidden:
        yield "stale", "Cannot see (403 Forbidden, not judged): " + ", ".join(forbidden)


def _findings(
    roots: Sequence[Finding],
    symptoms: Mapping[str, list[Finding]],
    *,
    findings: int,
    objects: int,
    rejected: Sequence[Rejection],
    now: datetime,
) -> Iterable[str]:
    yield '<section id="roots"><h2>Root causes</h2>'
    if not roots and not objects:
        yield "<p>No objects seen yet.</p></section>"
        return
    if not roots:
        yield f'<p class="{"stale" if rejected else "healthy"}">{escape(no_findings(objects, rejected))}</p>'
        yield "</section>"
        return
    yield f"<p>{escape(summary_line(roots, findings, objects))}</p>"
    for root in roots[:MAX_ROOTS]:
        yield from _root(root, symptoms.get(root.id, []), now=now)
    yield from _more(len(roots) - MAX_ROOTS, "root causes (all in the findings JSON)")
    yield "</section>"


def _root(root: Finding, symptoms: list[Finding], *, now: datetime) -> Iterable[str]:
    severity = escape(str(root.severity))
    since = f"since {_since(root.since, now)}" if root.since else "since unknown"
    yield f'<article class="finding {severity}" id="{escape(root.id)}">'
    yield (
        f'<h3><span class="sev">{severity}</span> {escape(str(root.type))}: '
        f'<span class="subject">{escape(describe(root.subject))}</span></h3>'
    )
    yield f'<p class="since">{escape(since)}</p><p class="message">{escape(root.message)}</p>'
    own, tags = symptom_tags(root, symptoms)
    if own:
        yield f"<p>Also on this object: {escape(', '.join(own))}</p>"
    yield from _blast_radius(tags)
    if root.evidence:
        yield '<details><summary>Evidence</summary><dl class="evidence">'
        for key, value in root.evidence.items():
            yield f"<dt>{escape(str(key))}</dt><dd>{escape(plain(value))}</dd>"
        yield "</dl></details>"
    yield "</article>"


def _blast_radius(tags: dict[SubjectKey, set[str]]) -> Iterable[str]:
    """Affected subjects grouped by kind, each with the symptom types found on it."""
    if not tags:
        return
    by_kind = group_by_kind(tags, limit=MAX_AFFECTED)
    yield f'<h4>Blast radius: {escape(plural(len(tags), "object"))}</h4><dl class="blast">'
    for kind, entries in by_kind.items():
        yield f"<dt>{escape(kind)} ({len(entries)})</dt><dd><ul>"
        for label, types in entries:
            subject = f'<span class="subject">{escape(label)}</span>'
            yield f'<li>{subject} <span class="tags">{escape(types)}</span></li>'
        yield "</ul></dd>"
    yield "</dl>"
    yield from _more(len(tags) - MAX_AFFECTED, "affected objects")


def _rejected(rejected: Sequence[Rejection]) -> Iterable[str]:
    """What was not judged in full, and why: never hidden behind "all healthy"."""
    if not rejected:
        return
    yield f'<section id="rejected"><h2>Rejected</h2><p class="stale">{escape(rejected_line(rejected))}.</p>'
    yield row("th", ["Object", "Field", "Value", "Reason", "Then"])
    for r in rejected[:MAX_ROWS]:
        then = "left out, the rest evaluated" if r.evaluated else "not evaluated"
        yield row("td", [describe(r.subject), r.field, r.value, str(r.reason), then], css="bad")
    yield "</table>"
    yield from _more(len(rejected) - MAX_ROWS, "rejected (all in the findings JSON)")
    yield "</section>"


def _controllers(controllers: Sequence[ControllerHealth], *, now: datetime) -> Iterable[str]:
    yield '<section id="controllers"><h2>Controllers</h2>'
    if not controllers:
        yield "<p>No controller workload found.</p></section>"
        return
    yield row("th", ["Controller", "Workload", "State", "Reason", "Groups", "Since"])
    for c in sorted(controllers, key=lambda c: (c.up, c.name, subject_key(c.subject))):
        state = '<span class="up">up</span>' if c.up else '<span class="down">down</span>'
        cells = [c.name, describe(c.subject), None, c.reason, ", ".join(c.groups), _since(c.since, now)]
        yield row("td", cells, raw={2: state}, css="" if c.up else "bad")
    yield "</table></section>"


def _objects(
    objects: Sequence[ObjectHealth], findings: Sequence[Finding], *, namespace: str | None, now: datetime
) -> Iterable[str]:
    """Each object with the finding types on it. kstatus says InProgress alike for an object at
    work, one waiting on a dependency and one failing over and over (Ready=False, whatever its
    reason), so the findings column is what tells them apart. Problems first, so the row bound
    never hides them."""
    yield '<section id="objects"><h2>GitOps objects</h2>'
    yield from _namespace_filter(sorted({o.subject["namespace"] for o in objects} - {""}), namespace)
    shown = [o for o in objects if namespace is None or o.subject["namespace"] == namespace]
    if not shown:
        where = f" in namespace {namespace}" if namespace is not None else ""
        yield f"<p>No GitOps objects{escape(where)}.</p></section>"
        return
    types: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for found in findings:
        types[subject_key(found.subject)].add(str(found.type))

    def bad(o: ObjectHealth) -> bool:
        return o.stale or o.status != Status.CURRENT or bool(types.get(subject_key(o.subject)))

    shown.sort(key=lambda o: (not bad(o), subject_key(o.subject)))
    header = ["Kind", "Namespace", "Name", "Status", "Reason", "Findings", "Controller", "Last transition"]
    yield row("th", header)
    for o in shown[:MAX_ROWS]:
        mark = escape(str(o.status)) + (' <strong class="down">stale</strong>' if o.stale else "")
        subject, on = o.subject, ", ".join(sorted(types.get(subject_key(o.subject), ())))
        cells = [subject["kind"], subject["namespace"], subject["name"], None, o.reason, on, o.controller]
        yield row("td", [*cells, _since(o.last_transition, now)], raw={3: mark}, css="bad" if bad(o) else "")
    yield "</table>"
    yield from _more(len(shown) - MAX_ROWS, "objects")
    yield "</section>"


def _revisions(revisions: Sequence[RevisionInfo], *, namespace: str | None) -> Iterable[str]:
    """What each object should run (its source's revision) next to what it applied; skew first."""
    shown = [r for r in revisions if namespace is None or r.subject["namespace"] == namespace]
    yield '<section id="revisions"><h2>Revisions</h2>'
    if not shown:
        yield "<p>No revisions here.</p></section>"
        return
    shown.sort(key=lambda r: (r.revision == r.applied_revision, subject_key(r.subject)))
    yield row("th", ["Object", "Source", "Source revision", "Applied revision"])
    for r in shown[:MAX_ROWS]:
        skew = r.revision != r.applied_revision
        cells = [describe(r.subject), r.source, r.revision, r.applied_revision]
        yield row("td", cells, css="skew" if skew else "", mono=(2, 3))
    yield "</table>"
    yield from _more(len(shown) - MAX_ROWS, "revisions")
    yield "</section>"


def _namespace_filter(namespaces: list[str], chosen: str | None) -> Iterable[str]:
    """Plain links (no JS, no form): `/?namespace=NS` is also what an on-call bookmarks.
    Cluster-scoped objects show only under "all"."""
    if not namespaces:
        return
    links = ['<a href="/#objects">all</a>' if chosen is not None else "<strong>all</strong>"]
    for ns in namespaces:
        label = escape(ns)
        href = escape("/?" + urlencode({"namespace": ns}) + "#objects")
        links.append(f"<strong>{label}</strong>" if ns == chosen else f'<a href="{href}">{label}</a>')
    yield f'<p class="filter">Namespace: {" · ".join(links)}</p>'


def row(
    cell: str,
    values: Sequence[str | None],
    *,
    raw: Mapping[int, str] | None = None,
    css: str = "",
    mono: Sequence[int] = (),
    classes: Mapping[int, str] | None = None,
) -> str:
    """One table row; a header row also opens the table. `raw` cells are already-escaped markup;
    `mono` cells are revisions; `classes` are more (trusted) class names of some cells."""
    raw, classes = raw or {}, classes or {}
    cells = []
    for i, value in enumerate(values):
        content = raw[i] if i in raw else escape(value or "")
        names = " ".join(filter(None, ("rev" if i in mono else "", classes.get(i, ""))))
        attr = f' class="{names}"' if names else ""
        cells.append(f"<{cell}{attr}>{content}</{cell}>")
    line = (f'<tr class="{css}">' if css else "<tr>") + "".join(cells) + "</tr>"
    return f"<table>{line}" if cell == "th" else line


def _since(moment: datetime | None, now: datetime) -> str:
    return f"{rfc3339(moment)} ({format_age(moment, now)})" if moment else ""


def _more(count: int, what: str) -> Iterable[str]:
    if count > 0:
        yield f'<p class="more">and {count} more {escape(what)}</p>'
