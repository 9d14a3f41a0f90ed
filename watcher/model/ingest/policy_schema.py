"""What stalewatch reads of the policy engines' kinds (kinds.POLICY_FAMILIES), read by cluster/compliance.py:
Gatekeeper constraints, wgpolicyk8s.io policy reports and Kyverno policies. Declared as schema.py
declares the rest (schema.kind_schema finds them here)."""

from __future__ import annotations

from watcher.model.ingest.kinds import GATEKEEPER_GROUP, KYVERNO_GROUP, POLICY_REPORT_GROUP
from watcher.model.ingest.schema_nodes import (
    METADATA,
    METADATA_WITHOUT_HISTORY,
    NAME,
    TOKEN,
    I,
    Kind,
    List,
    Obj,
    Str,
    Time,
)

VIOLATIONS_KEPT = 500
"""Per constraint. Gatekeeper lists at most --constraint-violations-limit violations (20 unless
set) and counts them all in totalViolations; what is not listed (here or there) is counted as
unattributed, never dropped."""
RESULTS_KEPT = 2000
"""Per policy report (Kyverno writes one per resource since 1.10; older ones, one per namespace,
can be long): results beyond this are counted from its summary, unattributed."""
RESOURCES_KEPT = 16
_SUBJECT = Obj(
    {"apiVersion": TOKEN, "kind": TOKEN, "namespace": NAME, "name": NAME}, required=("kind", "name")
)

_CONSTRAINT = Kind(
    METADATA,
    {
        "spec": Obj({"enforcementAction": TOKEN}),
        "status": Obj(
            {
                "auditTimestamp": Time(),
                "totalViolations": I,
                "violations": List(
                    Obj(
                        {
                            "group": TOKEN,
                            "version": TOKEN,
                            "kind": TOKEN,
                            "namespace": NAME,
                            "name": NAME,
                            "enforcementAction": TOKEN,
                        },
                        required=("kind", "name"),
                    ),
                    limit=VIOLATIONS_KEPT,
                    truncate=True,
                ),
            }
        ),
    },
)
"""A Gatekeeper constraint, whatever its kind (one per ConstraintTemplate): its action and its
last audit; no messages (they would be most of its size, and no label or rule reads them)."""

_POLICY_REPORT = Kind(
    METADATA_WITHOUT_HISTORY,
    {
        "": Obj(
            {
                "scope": _SUBJECT,
                "summary": Obj(dict.fromkeys(("pass", "fail", "warn", "error", "skip"), I)),
                "results": List(
                    Obj(
                        {
                            "source": TOKEN,
                            "policy": Str(317),  # a namespaced Kyverno Policy: "<namespace>/<name>"
                            "rule": TOKEN,
                            "result": TOKEN,
                            "severity": TOKEN,
                            "resources": List(_SUBJECT, limit=RESOURCES_KEPT, truncate=True),
                        },
                        required=("policy",),
                    ),
                    limit=RESULTS_KEPT,
                    truncate=True,
                ),
            }
        )
    },
)
"""A wgpolicyk8s.io/v1alpha2 PolicyReport or ClusterPolicyReport: its fields at the top level.
Rewritten on every background scan, so no managedFields."""

_KYVERNO_POLICY = Kind(
    METADATA,
    {
        "spec": Obj(
            {
                "validationFailureAction": TOKEN,
                "rules": List(
                    Obj({"name": TOKEN, "validate": Obj({"failureAction": TOKEN})}), limit=256, truncate=True
                ),
            }
        )
    },
)
"""A Kyverno ClusterPolicy or Policy: what its rules do when they fail (Audit or Enforce, per
policy before Kyverno 1.13, per rule's validate.failureAction since)."""

POLICY_KINDS: dict[tuple[str, str], Kind] = {
    (POLICY_REPORT_GROUP, "PolicyReport"): _POLICY_REPORT,
    (POLICY_REPORT_GROUP, "ClusterPolicyReport"): _POLICY_REPORT,
    (KYVERNO_GROUP, "ClusterPolicy"): _KYVERNO_POLICY,
    (KYVERNO_GROUP, "Policy"): _KYVERNO_POLICY,
}
GROUP_KINDS: dict[str, Kind] = {GATEKEEPER_GROUP: _CONSTRAINT}
"""Groups whose every kind is read alike (their kinds known only at runtime)."""
