"""What policy engines' audits say is violated, read from each policy object alone (pure).

Two shapes carry audit results, both declared in ingest/schema.py:

* a Gatekeeper constraint (constraints.gatekeeper.sh, one kind per ConstraintTemplate): its
  status.totalViolations is the real count, status.violations[] lists at most
  --constraint-violations-limit of them (20 unless set), each naming its object (group and version
  since Gatekeeper 3.7; before, kind, namespace and name only) and its enforcementAction (deny,
  dryrun, warn; scoped); status.auditTimestamp says when the audit ran (absent: never audited,
  which says nothing about compliance);
* a wgpolicyk8s.io/v1alpha2 PolicyReport or ClusterPolicyReport: results[] with policy, rule,
  result (pass, fail, warn, error, skip), the objects in resources[] or else the report's scope,
  and summary counts. Kyverno names a ClusterPolicy by its name and a namespaced Policy as
  "<namespace>/<name>", and writes `warn` for a failure of a policy that is not scored.

Counted as violations: Gatekeeper's listed and unlisted ones, and the fail, warn and error
results (an error is a check that could not run: not compliant either). Whatever is counted but
not listed (a constraint's total past its list, a report's summary past its results) is a
violation of no known object: unattributed, never dropped.

A count that cannot be read (a totalViolations or summary count that is a string, a boolean, a
number past int64 or below zero; the projection rejects all but the last and drops them) says
nothing about compliance: the object's Read carries why (`unread`), and compliance.py lists it
not judged, never "no violations". What it lists is still counted (at least that many).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watcher.model.ingest.kinds import GATEKEEPER_GROUP, KINDS, KYVERNO_GROUP, POLICY_REPORT_GROUP
from watcher.model.ingest.objects import Key, dig, group_of, key_of, text, time_at
from watcher.model.ingest.projection import REJECTED

COUNTED = ("fail", "warn", "error")
"""The results that are not compliance, in the order they are shown."""
DEFAULT_ACTION = "deny"
"""A constraint's spec.enforcementAction when unset (Gatekeeper's default)."""
_TOKEN = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}")
_GROUPS: Mapping[str, str] = {k.kind: k.group for k in KINDS}
"""The group of a kind stalewatch knows, for audits written before Gatekeeper named groups."""


@dataclass(frozen=True, slots=True, order=True)
class Policy:
    """A policy as its engine names it: a constraint (kind + name), a Kyverno policy."""

    engine: str
    """gatekeeper, kyverno, vap, or another report source (lower case)."""
    kind: str
    """The constraint's kind; ClusterPolicy or Policy; "" when the report does not say."""
    name: str
    """"" for results a report counts but does not list."""


@dataclass(frozen=True, slots=True)
class Violation:
    policy: Policy
    action: str
    """Gatekeeper's enforcement action; "" for a report (the policy says: compliance.py)."""
    result: str
    obj: Key | None
    """None: counted but not listed."""
    count: int = 1
    rule: str = ""
    """A report's rule: a Kyverno rule's own failureAction decides its action."""


@dataclass(frozen=True, slots=True)
class Audit:
    """What one Gatekeeper constraint's last audit said."""

    policy: Policy
    action: str
    audited: datetime | None
    """None: never audited (no status yet): not judged, never compliant."""
    total: int | None
    """None: its totalViolations cannot be read (Read.unread says why)."""
    listed: int


@dataclass(frozen=True, slots=True)
class Read:
    """One policy object's violations, and its audit when it is a constraint."""

    violations: tuple[Violation, ...]
    audit: Audit | None = None
    unread: str = ""
    """Why its counts cannot be read ("" when they can): not judged, whatever it lists."""


def unread(obj: Mapping[str, Any], counts: Mapping[str, Any]) -> str:
    """Why the counts at these fields (dotted, as the projection names its rejected fields) cannot
    be read: each rejected (the projection dropped it), or negative; "" when all can."""
    problems = [
        f"{r['field']} {r['problem']} ({r['value']!a})"
        for r in obj.get(REJECTED) or ()
        if any(r["field"] == field or field.startswith(f"{r['field']}.") for field in counts)
    ]
    problems += [
        f"{field} is negative ({value})"
        for field, value in counts.items()
        if isinstance(value, int) and value < 0
    ]
    return "; ".join(problems)


def read_constraint(obj: Mapping[str, Any]) -> Read:
    key = key_of(obj)
    policy = Policy("gatekeeper", key.kind, key.name)
    action = (text(obj, "spec", "enforcementAction") or DEFAULT_ACTION).lower()
    audited = time_at(obj, "status", "auditTimestamp")
    listed = dig(obj, "status", "violations") or []
    counted = dig(obj, "status", "totalViolations")
    why = unread(obj, {"status.totalViolations": counted})
    total = counted if isinstance(counted, int) and counted >= len(listed) else len(listed)
    found = [
        Violation(policy, (v.get("enforcementAction") or action).lower(), "fail", _violated(v))
        for v in listed
    ]
    if total > len(listed):
        found.append(Violation(policy, action, "fail", None, total - len(listed)))
    audit = Audit(policy, action, audited, None if why else total, len(listed))
    return Read(tuple(found), audit, why)


def _violated(entry: Mapping[str, Any]) -> Key:
    """The object a constraint's violation names; "" group is core (projection drops an empty
    string), and an entry without a version predates groups: the group of a kind we know."""
    group = entry.get("group", "") if entry.get("version") else _GROUPS.get(entry["kind"], "")
    return Key(group, entry["kind"], entry.get("namespace", ""), entry["name"])


def read_report(obj: Mapping[str, Any]) -> Read:
    namespace = obj["metadata"].get("namespace", "")
    scope = obj.get("scope")
    found: list[Violation] = []
    listed = dict.fromkeys(COUNTED, 0)
    engines: set[str] = set()
    for result in obj.get("results") or ():
        outcome = result.get("result", "")
        if outcome not in listed:
            continue
        listed[outcome] += 1
        policy = _report_policy(result)
        engines.add(policy.engine)
        subjects = result.get("resources") or ([scope] if scope else [])
        rule = result.get("rule", "")
        found += [Violation(policy, "", outcome, _referred(s, namespace), rule=rule) for s in subjects] or [
            Violation(policy, "", outcome, None, rule=rule)
        ]
    summary = obj.get("summary") or {}
    engine = next(iter(engines)) if len(engines) == 1 else "kyverno"
    for outcome in COUNTED:
        counted = summary.get(outcome)
        if isinstance(counted, int) and counted > listed[outcome]:
            found.append(Violation(Policy(engine, "", ""), "", outcome, None, counted - listed[outcome]))
    return Read(tuple(found), unread=unread(obj, {f"summary.{o}": summary.get(o) for o in COUNTED}))


def _report_policy(result: Mapping[str, Any]) -> Policy:
    """Who wrote the result (its source), and the policy it names."""
    source = result.get("source", "kyverno")
    name = result["policy"]
    if source.lower() == "kyverno":
        return Policy("kyverno", "Policy" if "/" in name else "ClusterPolicy", name)
    if source.startswith("ValidatingAdmissionPolicy"):
        return Policy("vap", "ValidatingAdmissionPolicy", name)
    engine = source.lower()
    return Policy(engine if _TOKEN.fullmatch(engine) else "policyreport", "", name)


def _referred(ref: Mapping[str, Any], namespace: str) -> Key:
    """An ObjectReference as a key; in a namespaced report a reference without one is in its namespace."""
    group = group_of(ref["apiVersion"]) if ref.get("apiVersion") else _GROUPS.get(ref["kind"], "")
    return Key(group, ref["kind"], ref.get("namespace", namespace), ref["name"])


READERS: Mapping[str, Callable[[Mapping[str, Any]], Read]] = {
    GATEKEEPER_GROUP: read_constraint,
    POLICY_REPORT_GROUP: read_report,
}
"""The reader of each policy group's objects (Kyverno's policies hold no audit: compliance.py
reads them for their action)."""


def kyverno_action(policy: Mapping[str, Any], rule: str) -> str:
    """What a Kyverno policy does when this rule fails: the rule's validate.failureAction (Kyverno
    1.13), else the policy's validationFailureAction, else Audit (Kyverno's default); lower case."""
    default = text(policy, "spec", "validationFailureAction") or "Audit"
    found: Mapping[str, Any] = next(
        (r for r in dig(policy, "spec", "rules") or () if r.get("name") == rule), {}
    )
    return str(dig(found, "validate", "failureAction") or default).lower()


def kyverno_key(name: str) -> Key:
    """A Kyverno policy named as reports and denials name it: "<namespace>/<name>" is a Policy."""
    namespace, _, plain = name.rpartition("/")
    return Key(KYVERNO_GROUP, "Policy" if namespace else "ClusterPolicy", namespace, plain)
