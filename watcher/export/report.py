"""The `stalewatch analyze` report: root causes first, each with the blast radius it explains.

On-call reads this top-down during an incident, so every root is one block: what is wrong and
since when, what to do (the model's message), which objects it drags down (grouped by kind, each
with the symptom the model found on it), and the evidence. Symptoms never appear as problems
of their own: that is the whole point of correlating them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from watcher.export import compliance
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.objects import describe, format_age
from watcher.model.types import (
    ControllerHealth,
    Finding,
    FindingType,
    HeartbeatState,
    Rejection,
    Severity,
    Subject,
    rfc3339,
)
from watcher.terminal import lines_of, printable

SubjectKey = tuple[str, str, str]

_COLORS = {
    Severity.CRITICAL: "\x1b[1;31m",
    Severity.WARNING: "\x1b[33m",
    Severity.INFO: "\x1b[36m",
}
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"


def render_text(evaluation: Evaluation, *, objects: int, load_errors: int = 0, color: bool = False) -> str:
    """The human report; `objects` is how many objects were evaluated, `load_errors` how many
    files or objects were skipped (their messages go to stderr, the report only points at them)."""
    lines: list[Line] = []
    if evaluation.findings:
        roots, symptoms = by_root(evaluation.findings)
        for root in roots:
            lines += [*_root_block(root, symptoms[root.id], now=evaluation.now), ""]
        found = len(evaluation.findings)
        lines.append(
            summary_line(roots, found, objects, unjudged=evaluation.unjudged, unread=evaluation.unread)
        )
    elif objects or evaluation.unread:
        lines.append(
            no_findings(
                objects,
                evaluation.rejected,
                load_errors=load_errors,
                unjudged=evaluation.unjudged,
                unread=evaluation.unread,
                heartbeats_unknown=heartbeats_unknown(evaluation.controllers),
            )
        )
    else:
        lines.append("No objects were evaluated.")
    beats = heartbeat_lines(evaluation.controllers)
    if beats:
        lines += ["", *beats]
    section = compliance.text_lines(evaluation.compliance)
    if section:
        lines += ["", *section]
    if evaluation.rejected:
        lines.append(f"{rejected_line(evaluation.rejected)}:")
        for rejection in evaluation.rejected:
            lines += _indented(rejection.message, "  ")
    if load_errors:
        lines.append(f"{plural(load_errors, 'load error')} (see stderr): what they name was not evaluated.")
    return "".join(_emit(line, color=color) + "\n" for line in lines)


def render_json(evaluation: Evaluation, *, objects: int, load_errors: int = 0) -> bytes:
    """`{"findings": [Finding.to_dict(), ...], "summary": {...}}`, indented, newline-terminated."""
    document = {
        "findings": [finding.to_dict() for finding in evaluation.findings],
        "summary": summary(evaluation, objects=objects, load_errors=load_errors),
        "rejected": [rejection.to_dict() for rejection in evaluation.rejected],
        "compliance": compliance.document(evaluation.compliance),
        "heartbeats": [heartbeat_document(c) for c in evaluation.controllers if c.heartbeat is not None],
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def heartbeat_lines(controllers: Sequence[ControllerHealth]) -> list[str]:
    """What the recorded /metrics say of each controller's reconciling, Unknown ones with why;
    nothing when no metrics were given (nothing was said of reconciling, neither way)."""
    beats = [c for c in controllers if c.heartbeat is not None]
    if not beats:
        return []
    width = max(len(c.name) for c in beats)
    lines = ["Controller heartbeats (from the recorded /metrics):"]
    for c in beats:
        beat = c.heartbeat
        assert beat is not None
        said = f"{beat.state}: {beat.detail}" if beat.detail else str(beat.state)
        if beat.last_reconciled is not None:
            said += f" (its counters last moved by {rfc3339(beat.last_reconciled)})"
        lines.append(f"  {c.name:<{width}}  {said}")
    return lines


def heartbeats_unknown(controllers: Sequence[ControllerHealth]) -> int:
    """Controllers whose heartbeat is judged and unknown: their objects may be overdue unseen."""
    return sum(c.heartbeat is not None and c.heartbeat.state is HeartbeatState.UNKNOWN for c in controllers)


def heartbeat_document(c: ControllerHealth) -> dict[str, Any]:
    """One controller's heartbeat in the JSON report, as the page shows it."""
    beat = c.heartbeat
    assert beat is not None
    return {
        "controller": c.name,
        "subject": c.subject,
        "state": str(beat.state),
        "detail": beat.detail,
        "last_reconciled": rfc3339(beat.last_reconciled) if beat.last_reconciled else None,
        "since": rfc3339(beat.since) if beat.since else None,
        "overdue": beat.overdue,
    }


def no_findings(
    objects: int,
    rejected: Sequence[Rejection],
    *,
    load_errors: int = 0,
    unjudged: Sequence[tuple[str, str, int]] = (),
    unread: Sequence[tuple[str, str, int]] = (),
    heartbeats_unknown: int = 0,
) -> str:
    """Never "all healthy" while some object was not judged (in full, or at all: no rule could
    read it, or its kind was not read), some input not read, or some controller's heartbeat is
    unknown (its objects may be overdue unseen)."""
    if unjudged or unread:
        judged = objects - sum(n for _, _, n in unjudged)
        return f"No findings on {plural(judged, 'judged object')}{not_judged(unjudged, unread)}."
    if rejected:
        not_in_full = rejected_objects(rejected)
        return f"No findings: {plural(objects, 'object')} evaluated, {not_in_full} not in full (see below)."
    if load_errors:
        return f"No findings in the {plural(objects, 'object')} evaluated."
    if heartbeats_unknown:
        unknown = plural(heartbeats_unknown, "controller")
        return (
            f"No findings: {plural(objects, 'object')} evaluated, {unknown} not seen reconciling (see below)."
        )
    return f"No findings: {plural(objects, 'object')} evaluated, all healthy."


def not_judged(unjudged: Sequence[tuple[str, str, int]], unread: Sequence[tuple[str, str, int]] = ()) -> str:
    """`; 2 objects of 2 kinds not judged (no status to read): Widget.example.com (1), ...`, then
    `; 3 objects of 1 kind listed by Kustomizations not read: Certificate.cert-manager.io (3)`,
    or nothing."""
    said = ""
    if unjudged:
        said += f"; {_kinds(unjudged)} not judged (no status to read): {_counts(unjudged)}"
    if unread:
        said += f"; {_kinds(unread)} listed by Kustomizations not read: {_counts(unread)}"
    return said


def _kinds(counts: Sequence[tuple[str, str, int]]) -> str:
    return f"{plural(sum(n for _, _, n in counts), 'object')} of {plural(len(counts), 'kind')}"


def _counts(counts: Sequence[tuple[str, str, int]]) -> str:
    return ", ".join(f"{kind_label(group, kind)} ({n})" for group, kind, n in counts)


def kind_label(group: str, kind: str) -> str:
    return f"{kind}.{group}" if group else kind


def rejected_objects(rejected: Sequence[Rejection]) -> int:
    return len({subject_key(r.subject) for r in rejected})


def rejected_line(rejected: Sequence[Rejection]) -> str:
    return f"{plural(rejected_objects(rejected), 'object')} set aside in whole or in part (rejected)"


def summary(evaluation: Evaluation, *, objects: int, load_errors: int) -> dict[str, Any]:
    """Counts with every severity and finding type present (zeros included) so the shape is fixed."""
    severities = Counter(f.severity for f in evaluation.findings)
    types = Counter(f.type for f in evaluation.findings)
    return {
        "now": rfc3339(evaluation.now),
        "objects": objects,
        "findings": len(evaluation.findings),
        "roots": len(evaluation.roots),
        "by_severity": {str(s): severities[s] for s in Severity},
        "by_type": {str(t): types[t] for t in FindingType},
        "load_errors": load_errors,
        "rejected": rejected_objects(evaluation.rejected),
        "unjudged": {kind_label(group, kind): n for group, kind, n in evaluation.unjudged},
        "unread": {kind_label(group, kind): n for group, kind, n in evaluation.unread},
    }


def by_root(findings: list[Finding]) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """Roots in the model's order; a symptom whose root is missing is shown as a root, never dropped."""
    ids = {f.id for f in findings}
    roots = [f for f in findings if f.root_cause is None or f.root_cause not in ids]
    symptoms: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.root_cause is not None and finding.root_cause in ids:
            symptoms[finding.root_cause].append(finding)
    return roots, symptoms


def symptom_tags(root: Finding, symptoms: list[Finding]) -> tuple[list[str], dict[SubjectKey, set[str]]]:
    """(types of the symptoms on the root's own object, {each other affected object: its symptom types})."""
    own_key = subject_key(root.subject)
    own: set[str] = set()
    tags: dict[SubjectKey, set[str]] = {subject_key(s): set() for s in root.affected}
    for symptom in symptoms:
        key = subject_key(symptom.subject)
        if key == own_key:
            own.add(str(symptom.type))
        else:
            tags.setdefault(key, set()).add(str(symptom.type))
    return sorted(own), tags


def group_by_kind(
    tags: dict[SubjectKey, set[str]], *, limit: int | None = None
) -> dict[str, list[tuple[str, str]]]:
    """{kind: [("namespace/name", "Type, Type"), ...]} in subject order, the first `limit` subjects."""
    by_kind: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for kind, namespace, name in sorted(tags)[:limit]:
        label = f"{namespace}/{name}" if namespace else name
        by_kind[kind].append((label, ", ".join(sorted(tags[kind, namespace, name]))))
    return by_kind


def summary_line(
    roots: Sequence[Finding],
    findings: int,
    objects: int,
    *,
    unjudged: Sequence[tuple[str, str, int]] = (),
    unread: Sequence[tuple[str, str, int]] = (),
) -> str:
    severities = Counter(root.severity for root in roots)
    split = ", ".join(f"{severities[s]} {s}" for s in Severity if severities[s])
    return (
        f"{plural(len(roots), 'root cause')} ({split}), {plural(findings - len(roots), 'symptom')}; "
        f"{plural(objects, 'object')} evaluated{not_judged(unjudged, unread)}."
    )


def subject_key(subject: Subject) -> SubjectKey:
    return subject["kind"], subject["namespace"], subject["name"]


def plain(value: object) -> str:
    """Evidence values as one line: strings as they are, anything else as JSON (or, for what
    JSON cannot hold such as an integer past 64 bits, as Python spells it)."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return repr(value)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class _Header:
    """A root's first line, the only report line that starts with a severity."""

    severity: Severity
    type: FindingType
    subject: str


Line = str | _Header
"""One report line before it is made printable; cluster text in it is still raw."""


def _emit(line: Line, *, color: bool) -> str:
    """The one place report text is made printable; colour is added after, so it is ours."""
    if isinstance(line, str):
        return printable(line)
    severity, subject = str(line.severity).upper(), printable(line.subject)
    if color:
        severity, subject = f"{_COLORS[line.severity]}{severity}{_RESET}", f"{_BOLD}{subject}{_RESET}"
    return f"{severity} {line.type}: {subject}"


def _root_block(root: Finding, symptoms: list[Finding], *, now: datetime) -> list[Line]:
    since = f"since {rfc3339(root.since)} ({format_age(root.since, now)})" if root.since else "since unknown"
    lines: list[Line] = [_Header(root.severity, root.type, describe(root.subject)), f"  {since}"]
    lines += _indented(root.message, "  ")
    own, tags = symptom_tags(root, symptoms)
    if own:
        lines.append(f"  also on this object: {', '.join(own)}")
    lines += _blast_radius(tags)
    if root.evidence:
        lines.append("  evidence:")
        for key, value in root.evidence.items():
            lines += _indented(f"{key}: {plain(value)}", "    ")
    return lines


def _blast_radius(tags: dict[SubjectKey, set[str]]) -> list[str]:
    """Affected subjects grouped by kind, each tagged with the finding types seen on it."""
    if not tags:
        return []
    by_kind = group_by_kind(tags)
    width = max(len(label) for entries in by_kind.values() for label, _ in entries)
    lines = [f"  blast radius: {plural(len(tags), 'object')}"]
    for kind, entries in by_kind.items():
        lines.append(f"    {kind} ({len(entries)})")
        lines += [f"      {label:<{width}}  {types}".rstrip() for label, types in entries]
    return lines


CONTINUATION = " " * 8
"""Where a text's second and later lines start: deeper than any line of a root block (the
deepest, a blast radius entry, starts at 6), so a newline in a message the cluster wrote cannot
start a `blast radius:`, `evidence:` or entry line of its own."""


def _indented(text: str, prefix: str) -> list[str]:
    """A text at the block's indent, its continuation lines at CONTINUATION: none can pass for
    a report line. A first line that starts with whitespace is continued too, as it could
    otherwise pass for a deeper line of the block."""
    lines = lines_of(text)
    first = CONTINUATION if lines[0][:1].isspace() else prefix
    indents = [first] + [CONTINUATION] * (len(lines) - 1)
    return [(indent + line).rstrip() for indent, line in zip(indents, lines, strict=True)]
