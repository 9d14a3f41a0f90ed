"""The label values of the families about findings and policy violations.

metrics.py declares each family once; what it shows of a finding type (its root, which policy
denies which object, which installer puts which CRD at risk, what a Kustomization left behind, who
fights over an object) is read off the findings' evidence here, and each stack's violations off
the compliance report: one function per family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import NamedTuple

from watcher.export.families import Values
from watcher.model.cluster.compliance import StackViolations
from watcher.model.evaluation import Evaluation
from watcher.model.types import Finding, FindingType, Subject

OBJECT_LABELS = ("kind", "namespace", "name")

where: Callable[[Subject], Values] = itemgetter(*OBJECT_LABELS)
"""A subject's kind, namespace and name (an itemgetter: this runs for every series of every object)."""


class Rooted(NamedTuple):
    """A finding with its label values, the root it belongs to resolved across the findings."""

    values: Values
    since: float | None


def rooted(findings: Sequence[Finding]) -> list[Rooted]:
    """Each finding with its label values; a group built whole, as roots are found across the list."""
    by_id = {f.id: f for f in findings}
    rooted = []
    for finding in findings:
        root = _root_of(finding, by_id)
        values = (
            str(finding.type),
            str(finding.severity),
            *where(finding.subject),
            "true" if finding.is_root else "false",
            *((str(root.type), *where(root.subject)) if root else ("", "", "", "")),
        )
        rooted.append(Rooted(values, None if finding.since is None else finding.since.timestamp()))
    return rooted


def _root_of(finding: Finding, by_id: dict[str, Finding]) -> Finding | None:
    """Follows root_cause links to the finding that has none; None if the chain breaks or loops."""
    current = finding
    visited: set[str] = set()
    while current.root_cause is not None:
        if current.id in visited or current.root_cause not in by_id:
            return None
        visited.add(current.id)
        current = by_id[current.root_cause]
    return current


def denied(findings: Sequence[Finding]) -> list[Values]:
    """(engine, policy, kind, namespace, name) per policy of each PolicyDenied: which policy
    blocks which trying object, so a dashboard can group by policy (and engine)."""
    return [
        (f.evidence["engine"], policy, *where(f.subject))
        for f in findings
        if f.type is FindingType.POLICY_DENIED
        for policy in f.evidence["policies"]
    ]


def at_risk(findings: Sequence[Finding]) -> list[Values]:
    """(crd, installer, controller, controller_installer) per installer and controller at risk of
    each CRDOwnershipRisk: which release's removal takes which other stack's controller down. A CRD
    two installers claim with no foreign controller has one series per installer, controller ""."""
    return [
        (f.subject["name"], installer, controller["name"], controller["deployed_by"] or "")
        for f in findings
        if f.type is FindingType.CRD_OWNERSHIP_RISK
        for installer in f.evidence["installed_by"]
        for controller in f.evidence["controllers"] or [{"name": "", "deployed_by": None}]
    ]


def risked_objects(findings: Sequence[Finding]) -> list[tuple[str, int]]:
    """(crd, objects) per CRDOwnershipRisk whose instances could be counted."""
    return [
        (f.subject["name"], f.evidence["objects"])
        for f in findings
        if f.type is FindingType.CRD_OWNERSHIP_RISK and f.evidence["objects"] is not None
    ]


def orphaned(findings: Sequence[Finding]) -> list[tuple[Values, float]]:
    """(namespace, name, reason) of each Kustomization with PruneOrphan findings, and how many:
    what each stack left behind, by why (a fixed set, prune.py)."""
    counts: dict[Values, int] = {}
    for f in findings:
        if f.type is FindingType.PRUNE_ORPHAN:
            _, namespace, name = f.evidence["kustomization"].split("/", 2)
            key = (namespace, name, f.evidence["reason"])
            counts[key] = counts.get(key, 0) + 1
    return [(key, float(count)) for key, count in sorted(counts.items())]


UNATTRIBUTED = "unattributed"
"""stack_kind of the violations no stack owns (and those an audit counts but does not list);
stack_namespace and stack_name are then empty. No Kubernetes kind is spelled in lower case."""


def violations(e: Evaluation) -> Sequence[StackViolations]:
    return e.compliance.violations if e.compliance is not None else ()


def violation_labels(row: StackViolations) -> Values:
    stack = (row.stack.kind, row.stack.namespace, row.stack.name) if row.stack else (UNATTRIBUTED, "", "")
    policy = row.policy
    return (policy.engine, policy.kind, policy.name, row.action, row.result, *stack)


MAX_MANAGERS = 8
"""Managers exposed per ConflictingWriters finding (a label value each)."""


def fights(findings: Sequence[Finding]) -> list[tuple[Values, float]]:
    """((manager, kind, namespace, name), flips in the window) per manager of each
    ConflictingWriters: which writers fight over which object, and how often."""
    return [
        ((manager, *where(f.subject)), float(f.evidence["flips"]))
        for f in findings
        if f.type is FindingType.CONFLICTING_WRITERS
        for manager in f.evidence["managers"][:MAX_MANAGERS]
    ]
