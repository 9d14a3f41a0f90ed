"""The top of the page as parts: whether to trust it, then the root causes and what was set aside.

It says the same thing as `stalewatch analyze`, in the same order: first whether the data can be
trusted (live, stale, not yet synced, kinds we may not see), then the root causes, most severe
first, each with its blast radius and evidence. Symptoms never stand alone: they are listed
under the root that explains them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

from watcher.export.report import (
    SubjectKey,
    by_root,
    group_by_kind,
    heartbeats_unknown,
    no_findings,
    plain,
    plural,
    rejected_line,
    summary_line,
    symptom_tags,
)
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.objects import describe, format_age
from watcher.model.types import Finding, Rejection, Severity, rfc3339
from watcher.model.views.timeline import Snapshot
from watcher.web.changes import preceding_block
from watcher.web.html import more, part_id, row, since
from watcher.web.parts import Part

MAX_ROOTS = 50
MAX_AFFECTED = 200
"""Per root: a controller outage can drag down thousands of objects; the JSON API has them all."""
MAX_ROWS = 500

_SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity)}


def sorted_roots(evaluation: Evaluation) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """Roots most severe first, and the symptoms under each."""
    roots, symptoms = by_root(evaluation.findings)
    roots.sort(key=lambda root: _SEVERITY_RANK[root.severity])
    return roots, symptoms


def trust(
    evaluation: Evaluation | None, status: Mapping[str, Any], *, now: datetime, load_errors: int
) -> Part:
    """The banners, how old the evaluation is and what was skipped: one part, read first."""
    lines = [f'<p class="banner {css}">{escape(text)}</p>' for css, text in _banners(status)]
    if evaluation is None:
        lines.append(
            '<p class="banner pending">No evaluation yet: waiting for the first list of the cluster.</p>'
        )
    else:
        age = format_age(evaluation.now, now)
        lines.append(
            f"<p>Evaluated at <time>{escape(rfc3339(evaluation.now) or '')}</time> ({escape(age)}).</p>"
        )
    if load_errors:
        what = plural(load_errors, "object")
        lines.append(f"<p>{escape(what)} skipped as malformed (see the log): not evaluated.</p>")
    return Part("trust", "header", '<div id="trust">' + "".join(lines) + "</div>")


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
    elif status.get("unjudged_kinds"):
        listed = ", ".join(status["unjudged_kinds"])
        yield "pending", f"Not yet judged: initial list finished for {listed}; the next evaluation judges it."
    elif status.get("stale"):
        yield "stale", "STALE: a watch is broken; what follows may lag the cluster."
    else:
        yield "live", "Live: every watch is synced and the API server answers."
    forbidden = [
        f"{k['kind']}.{k['group']}" if k["group"] else k["kind"] for k in status.get("forbidden_kinds") or []
    ]
    if forbidden:
        yield "stale", "Cannot see (403 Forbidden, not judged): " + ", ".join(forbidden)
    scope = status.get("scope") or {}
    if scope.get("mode") == "namespaces":  # a tenant's view: say what is outside it
        yield "pending", scope["said"][:1].upper() + scope["said"][1:]


def roots(evaluation: Evaluation, *, objects: int, changes: Snapshot | None = None) -> Iterable[Part]:
    """The summary line, then one card per root (most severe first), then how many more; each
    card with the `changes` that preceded it when the server keeps a timeline."""
    found, symptoms = sorted_roots(evaluation)
    rejected = evaluation.rejected
    if not found and not objects and not evaluation.unread:
        summary = "<p>No objects seen yet.</p>"
    elif not found:
        unknown = heartbeats_unknown(evaluation.controllers)
        said = no_findings(
            objects,
            rejected,
            unjudged=evaluation.unjudged,
            unread=evaluation.unread,
            heartbeats_unknown=unknown,
        )
        healthy = not rejected and not evaluation.unjudged and not evaluation.unread and not unknown
        summary = f'<p class="{"healthy" if healthy else "stale"}">{escape(said)}</p>'
    else:
        said = summary_line(
            found, len(evaluation.findings), objects, unjudged=evaluation.unjudged, unread=evaluation.unread
        )
        summary = f"<p>{escape(said)}</p>"
    yield Part("roots-summary", "roots", f'<div id="roots-summary">{summary}</div>')
    for root in found[:MAX_ROOTS]:
        ident = root_part_id(root)
        before = preceding_block(root, evaluation, changes, now=evaluation.now) if changes is not None else ""
        card = _root(root, symptoms.get(root.id, []), ident=ident, now=evaluation.now, before=before)
        yield Part(ident, "roots", "".join(card))
    if len(found) > MAX_ROOTS:
        text = "".join(more(len(found) - MAX_ROOTS, "root causes (all in the findings JSON)"))
        yield Part("roots-more", "roots", f'<div id="roots-more">{text}</div>')


def root_part_id(root: Finding) -> str:
    return root_card_id(root.id)


def root_card_id(finding_id: str) -> str:
    """A root card's id: from the finding's id, itself stable per type and subject."""
    return part_id("root", finding_id)


def _root(
    root: Finding, symptoms: list[Finding], *, ident: str, now: datetime, before: str = ""
) -> Iterable[str]:
    severity = escape(str(root.severity))
    when = f"since {since(root.since, now)}" if root.since else "since unknown"
    yield f'<article class="finding {severity}" id="{ident}">'
    yield (
        f'<h3><span class="sev">{severity}</span> {escape(str(root.type))}: '
        f'<span class="subject">{escape(describe(root.subject))}</span></h3>'
    )
    yield f'<p class="since">{escape(when)}</p><p class="message">{escape(root.message)}</p>'
    yield before  # the changes that preceded it (escaped markup), "" without a timeline
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
    yield from more(len(tags) - MAX_AFFECTED, "affected objects")


def rejected(found: Sequence[Rejection]) -> Iterable[Part]:
    """What was not judged in full, and why: never hidden behind "all healthy"."""
    if not found:
        return
    lines = [f'<h2>Rejected</h2><p class="stale">{escape(rejected_line(found))}.</p>']
    lines.append(row("th", ["Object", "Field", "Value", "Reason", "Then"]))
    for r in found[:MAX_ROWS]:
        then = "left out, the rest evaluated" if r.evaluated else "not evaluated"
        lines.append(row("td", [describe(r.subject), r.field, r.value, str(r.reason), then], css="bad"))
    lines.append("</table>")
    lines.extend(more(len(found) - MAX_ROWS, "rejected (all in the findings JSON)"))
    yield Part("rejected-list", "rejected", '<div id="rejected-list">' + "".join(lines) + "</div>")
