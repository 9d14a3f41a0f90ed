"""The compliance section of `stalewatch analyze`: policy violations per stack, after the roots.

A section, not findings: audit results are information for each stack's owner (a dryrun or warn
constraint denies nothing; a deny one reports objects admitted before it), so they change no exit
code and page nobody. What stalewatch could not look at is said (a policy kind it cannot list, a
constraint never audited, a constraint or report whose counts cannot be read, with why), never
shown as compliant.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from watcher.model.cluster.audits import COUNTED, Policy
from watcher.model.cluster.compliance import ComplianceReport, StackViolations
from watcher.model.ingest.objects import Key, describe
from watcher.model.types import rfc3339

HEADING = "Policy compliance (audit results, for each stack's owner; pages nobody):"


def policy_name(policy: Policy) -> str:
    return " ".join(filter(None, (policy.engine, policy.kind, policy.name or "(results not listed)")))


def stack_name(stack: Key | None) -> str:
    return describe(stack) if stack is not None else "unattributed"


def counts(rows: list[StackViolations]) -> str:
    """`3 fail, 1 warn`: the results in COUNTED order."""
    by_result: dict[str, int] = defaultdict(int)
    for row in rows:
        by_result[row.result] += row.count
    return ", ".join(f"{by_result[r]} {r}" for r in COUNTED if by_result[r])


def text_lines(report: ComplianceReport | None) -> list[str]:
    """The section's lines ([] when there is no policy object and no policy kind unseen)."""
    if report is None or not report.seen:
        return []
    lines = [HEADING]
    grouped: dict[tuple[Policy, str], dict[Key | None, list[StackViolations]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in report.violations:
        grouped[row.policy, row.action][row.stack].append(row)
    audits = {audit.policy: audit for audit in report.audits}
    for (policy, action), stacks in grouped.items():
        audit = audits.get(policy)
        when = f", audited {rfc3339(audit.audited)}" if audit is not None and audit.audited else ""
        total = sum(r.count for rows in stacks.values() for r in rows)
        least = "at least " if audit is not None and audit.total is None else ""
        lines.append(
            f"  {policy_name(policy)} ({action}): {least}{total} violation{'' if total == 1 else 's'}{when}"
        )
        for stack, rows in stacks.items():
            objects = sorted({o for r in rows for o in r.objects})
            named = f" ({', '.join(describe(o) for o in objects)})" if objects else " (counted, not listed)"
            lines.append(f"    {stack_name(stack)}: {counts(rows)}{named}")
    for audit in report.audits:
        if audit.total is None:  # said below, with why
            continue
        if audit.audited is None:
            lines.append(f"  {policy_name(audit.policy)} ({audit.action}): not judged, never audited yet")
        elif audit.total == 0:
            stamp = rfc3339(audit.audited)
            lines.append(f"  {policy_name(audit.policy)} ({audit.action}): no violations, audited {stamp}")
    lines += [
        f"  not judged: {describe(u.obj)}: its counts cannot be read ({u.reason})" for u in report.unread
    ]
    if report.blind:
        lines.append(
            f"  not judged: stalewatch cannot list {', '.join(report.blind)} (forbidden or not listed yet)"
        )
    if not report.violations and not report.blind and not report.unread:
        lines.append("  no violations reported")
    return lines


def document(report: ComplianceReport | None) -> dict[str, Any]:
    """`analyze -o json`'s "compliance": the same rows and audits, always this shape."""
    found = report or ComplianceReport()
    return {
        "violations": [
            {
                "engine": row.policy.engine,
                "policy_kind": row.policy.kind,
                "policy": row.policy.name,
                "enforcement_action": row.action,
                "result": row.result,
                "stack": _key(row.stack),
                "count": row.count,
                "objects": [_key(o) for o in row.objects],
            }
            for row in found.violations
        ],
        "constraints": [
            {
                "kind": audit.policy.kind,
                "name": audit.policy.name,
                "enforcement_action": audit.action,
                "audited": rfc3339(audit.audited) if audit.audited else None,
                "total": audit.total,
                "listed": audit.listed,
            }
            for audit in found.audits
        ],
        "reports": found.reports,
        "not_judged": list(found.blind),
        "unreadable": [{"object": _key(u.obj), "reason": u.reason} for u in found.unread],
    }


def _key(key: Key | None) -> str | None:
    if key is None:
        return None
    return "/".join(filter(None, (key.kind, key.namespace, key.name)))
