"""Policy compliance per stack: Gatekeeper's audit and policy reports, attributed to the stacks
that own the violating objects; and a PolicyDenied naming the constraint and who installed it.

The objects follow upstream's shapes: a constraint's status as Gatekeeper's audit writes it
(open-policy-agent/gatekeeper pkg/audit: totalViolations, violations[] with group, version, kind,
namespace, name, message, enforcementAction, at most --constraint-violations-limit of them, 20 by
default), and wgpolicyk8s.io/v1alpha2 reports as Kyverno writes them (a namespaced Policy named
"<namespace>/<name>", `warn` for a policy not scored, the summary counting every result).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    Obj,
    by_id,
    deployment,
    flux,
    git_repository,
    helm_release,
    kustomization,
    meta,
    pod,
    run,
    ts,
)
from tests.model.test_policy_denied import gateway, reconcile_error
from watcher.model.cluster.compliance import ComplianceReport
from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project

NOW_AUDIT = ts(5 * MIN)
KS = "kustomize.toolkit.fluxcd.io"


def ks_labels(name: str) -> dict[str, str]:
    return {f"{KS}/name": name, f"{KS}/namespace": "flux-system"}


def helm_labels(name: str, namespace: str) -> dict[str, str]:
    return {"helm.toolkit.fluxcd.io/name": name, "helm.toolkit.fluxcd.io/namespace": namespace}


def violation(kind: str, namespace: str, name: str, *, group: str = "apps", action: str = "deny") -> Obj:
    return {
        "group": group,
        "version": "v1",
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "message": 'you must provide labels: {"owner"}',
        "enforcementAction": action,
    }


def constraint(
    name: str = "must-have-owner",
    *,
    kind: str = "K8sRequiredLabels",
    violations: Sequence[Obj] = (),
    total: int | None = None,
    action: str | None = None,
    audited: bool = True,
    labels: dict[str, str] | None = None,
) -> Obj:
    spec: Obj = {"match": {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]}}
    if action is not None:
        spec["enforcementAction"] = action
    obj: Obj = {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": kind,
        "metadata": meta(name, None, labels=labels),
        "spec": spec,
    }
    if audited:
        obj["status"] = {
            "auditTimestamp": NOW_AUDIT,
            "totalViolations": len(violations) if total is None else total,
            "violations": list(violations),
        }
    return obj


def result(policy: str, outcome: str, *, rule: str = "check-owner", resources: Sequence[Obj] = ()) -> Obj:
    found: Obj = {"source": "kyverno", "policy": policy, "rule": rule, "result": outcome, "scored": True}
    found["message"] = "validation error: label 'owner' is required"
    if resources:
        found["resources"] = list(resources)
    return found


def ref(kind: str, namespace: str, name: str, api_version: str = "apps/v1") -> Obj:
    found = {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}"}
    return found | ({"namespace": namespace} if namespace else {})


def report(
    name: str,
    namespace: str | None,
    results: Sequence[Obj],
    *,
    scope: Obj | None = None,
    summary: dict[str, int] | None = None,
) -> Obj:
    counted = {
        k: sum(1 for r in results if r["result"] == k) for k in ("pass", "fail", "warn", "error", "skip")
    }
    obj: Obj = {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport" if namespace else "ClusterPolicyReport",
        "metadata": meta(name, namespace, generation=None),
        "results": list(results),
        "summary": summary or counted,
    }
    if scope is not None:
        obj["scope"] = scope
    return obj


def cluster_policy(name: str, action: str = "Audit", *, rule_action: str | None = None) -> Obj:
    """A Kyverno ClusterPolicy; `rule_action`: its rule's own validate.failureAction (Kyverno 1.13)."""
    validate: Obj = {"message": "owner is required"}
    if rule_action is not None:
        validate["failureAction"] = rule_action
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": meta(name, None),
        "spec": {"validationFailureAction": action, "rules": [{"name": "check-owner", "validate": validate}]},
    }


def two_stacks() -> list[Obj]:
    """Kustomization team-a installs Deployment team-a/web; HelmRelease team-b/api installs team-b/api."""
    return [
        *flux(),
        git_repository("flux-system"),
        kustomization("team-a", inventory=["team-a_web_apps_Deployment", "_team-a__Namespace"]),
        helm_release("api", "team-b"),
        deployment("web", "team-a", labels=ks_labels("team-a")),
        deployment("api", "team-b", labels=helm_labels("api", "team-b")),
    ]


def rows(evaluation: Any) -> list[tuple[str, str, str, str, str, int]]:
    """(policy, action, result, stack, first object, count) per row."""
    report_: ComplianceReport = evaluation.compliance
    return [
        (
            f"{r.policy.engine}:{r.policy.kind}/{r.policy.name}",
            r.action,
            r.result,
            f"{r.stack.kind}/{r.stack.namespace}/{r.stack.name}" if r.stack else "unattributed",
            f"{r.objects[0].kind}/{r.objects[0].namespace}/{r.objects[0].name}" if r.objects else "",
            r.count,
        )
        for r in report_.violations
    ]


GK = "gatekeeper:K8sRequiredLabels/must-have-owner"
CP = "kyverno:ClusterPolicy/require-owner"
CASES = [
    pytest.param(
        [
            constraint(
                violations=[
                    violation("Deployment", "team-a", "web"),
                    violation("Deployment", "team-b", "api"),
                ]
            )
        ],
        [
            (GK, "deny", "fail", "HelmRelease/team-b/api", "Deployment/team-b/api", 1),
            (GK, "deny", "fail", "Kustomization/flux-system/team-a", "Deployment/team-a/web", 1),
        ],
        id="a-constraints-violations-are-counted-in-the-stack-that-installed-each-object",
    ),
    pytest.param(
        [constraint(violations=[violation("Deployment", "team-a", "web")] * 20, total=23)],
        [
            (GK, "deny", "fail", "Kustomization/flux-system/team-a", "Deployment/team-a/web", 20),
            (GK, "deny", "fail", "unattributed", "", 3),
        ],
        id="a-truncated-audit-counts-its-total-and-the-unlisted-rest-unattributed",
    ),
    pytest.param(
        [constraint(action="dryrun", violations=[violation("Deployment", "team-a", "web", action="dryrun")])],
        [(GK, "dryrun", "fail", "Kustomization/flux-system/team-a", "Deployment/team-a/web", 1)],
        id="a-dryrun-constraints-violations-carry-its-action",
    ),
    pytest.param([constraint(violations=[])], [], id="a-constraint-audited-with-zero-violations-has-none"),
    pytest.param(
        [constraint(violations=[violation("Namespace", "", "team-a", group="")])],
        [(GK, "deny", "fail", "Kustomization/flux-system/team-a", "Namespace//team-a", 1)],
        id="an-object-stalewatch-does-not-watch-is-found-in-the-inventory-that-lists-it",
    ),
    pytest.param(
        [
            cluster_policy("require-owner"),
            report(
                "uid-web",
                "team-a",
                [result("require-owner", o) for o in ("pass", "fail", "warn", "skip")],
                scope=ref("Deployment", "team-a", "web"),
            ),
        ],
        [
            (CP, "audit", "fail", "Kustomization/flux-system/team-a", "Deployment/team-a/web", 1),
            (CP, "audit", "warn", "Kustomization/flux-system/team-a", "Deployment/team-a/web", 1),
        ],
        id="a-policy-reports-fail-and-warn-results-count-pass-and-skip-do-not",
    ),
    pytest.param(
        [
            cluster_policy("require-owner", rule_action="Enforce"),
            report(
                "uid-web",
                "team-a",
                [result("require-owner", "fail")],
                scope=ref("Deployment", "team-a", "web"),
            ),
        ],
        [(CP, "enforce", "fail", "Kustomization/flux-system/team-a", "Deployment/team-a/web", 1)],
        id="a-kyverno-rules-own-failure-action-beats-its-policys",
    ),
    pytest.param(
        [
            pod("web-7d9f-x2", "team-a", app="web"),
            report(
                "team-a-pods",
                "team-a",
                [
                    result(
                        "team-a/require-owner", "fail", resources=[ref("Pod", "team-a", "web-7d9f-x2", "v1")]
                    )
                ],
            ),
        ],
        [
            (
                "kyverno:Policy/team-a/require-owner",
                "unknown",
                "fail",
                "Kustomization/flux-system/team-a",
                "Pod/team-a/web-7d9f-x2",
                1,
            )
        ],
        id="a-pods-violation-is-its-deployments-stacks-and-an-unseen-policy-says-no-action",
    ),
    pytest.param(
        [
            report(
                "uid-team-a",
                None,
                [result("require-owner", "fail")],
                scope=ref("Namespace", "", "team-a", "v1"),
            )
        ],
        [(CP, "unknown", "fail", "Kustomization/flux-system/team-a", "Namespace//team-a", 1)],
        id="a-cluster-policy-report-for-a-cluster-scoped-object-names-the-stack-listing-it",
    ),
    pytest.param(
        [
            report(
                "uid-x", "team-c", [result("require-owner", "fail")], scope=ref("Deployment", "team-c", "x")
            )
        ],
        [(CP, "unknown", "fail", "unattributed", "Deployment/team-c/x", 1)],
        id="a-report-naming-an-object-stalewatch-does-not-know-is-unattributed-but-named",
    ),
    pytest.param(
        [
            report(
                "team-a-old",
                "team-a",
                [result("require-owner", "fail", resources=[ref("Deployment", "team-a", "web")])],
                summary={"pass": 4, "fail": 3, "warn": 0, "error": 1, "skip": 0},
            )
        ],
        [
            ("kyverno:/", "unknown", "error", "unattributed", "", 1),
            ("kyverno:/", "unknown", "fail", "unattributed", "", 2),
            (CP, "unknown", "fail", "Kustomization/flux-system/team-a", "Deployment/team-a/web", 1),
        ],
        id="results-a-report-counts-but-does-not-list-are-unattributed",
    ),
]


@pytest.mark.parametrize(("objects", "expected"), CASES)
def test_compliance_per_stack(
    objects: list[Obj], expected: list[tuple[str, str, str, str, str, int]]
) -> None:
    assert rows(run(two_stacks(), objects)) == expected


def test_a_constraint_never_audited_is_not_judged_not_compliant() -> None:
    found = run(two_stacks(), constraint(audited=False)).compliance
    assert found is not None
    [audit] = found.audits
    assert (audit.policy.name, audit.audited, audit.total) == ("must-have-owner", None, 0)


def test_no_policy_object_means_nothing_to_say() -> None:
    found = run(two_stacks()).compliance
    assert found == ComplianceReport()
    assert not found.seen


def test_a_policy_kind_stalewatch_cannot_list_is_blind_never_compliant() -> None:
    model = HealthModel()
    for obj in two_stacks():
        model.upsert(project(obj), now=NOW)
    model.set_blind({"PolicyReport", "ClusterPolicyReport"})
    found = model.evaluate(NOW).compliance
    assert found is not None
    assert found.blind == ("ClusterPolicyReport", "PolicyReport")
    assert found.seen
    assert found.violations == ()


def test_a_violation_resolved_by_the_next_audit_leaves_the_report() -> None:
    model = HealthModel()
    for obj in [*two_stacks(), constraint(violations=[violation("Deployment", "team-a", "web")])]:
        model.upsert(project(obj), now=NOW)
    assert rows(model.evaluate(NOW))
    model.upsert(project(constraint(violations=[])), now=NOW)
    assert rows(model.evaluate(NOW)) == []


# -- PolicyDenied names the constraint and the stack that installed it -----------------------------

DENIED = "PolicyDenied/EdgeGateway/checkout/storefront"


def denial(*extra: Obj) -> Any:
    return run(two_stacks(), gateway(), reconcile_error(count=40, first=30 * MIN, last=MIN), *extra)


def test_a_denial_names_the_visible_constraint_and_the_stack_that_installed_it() -> None:
    installed = constraint(
        "deny-public-loadbalancers", kind="K8sDenyLoadBalancer", labels=ks_labels("platform-policies")
    )
    finding = by_id(denial(installed))[DENIED]
    assert finding.evidence["policy_objects"] == ["K8sDenyLoadBalancer deny-public-loadbalancers"]
    assert finding.evidence["policy_installed_by"] == ["Kustomization flux-system/platform-policies"]
    assert finding.message.endswith(
        "Denied by K8sDenyLoadBalancer deny-public-loadbalancers "
        "(installed by Kustomization flux-system/platform-policies)."
    )


def test_a_denial_whose_constraint_is_not_visible_links_nothing() -> None:
    finding = by_id(denial(constraint("another-constraint")))[DENIED]
    assert "policy_objects" not in finding.evidence


def test_a_constraint_that_appears_later_is_linked_live() -> None:
    model = HealthModel()
    for obj in [*two_stacks(), gateway(), reconcile_error(count=40, first=30 * MIN, last=MIN)]:
        model.upsert(project(obj), now=NOW)
    assert "policy_objects" not in by_id(model.evaluate(NOW))[DENIED].evidence
    model.upsert(project(constraint("deny-public-loadbalancers", kind="K8sDenyLoadBalancer")), now=NOW)
    assert by_id(model.evaluate(NOW))[DENIED].evidence["policy_installed_by"] == [""]
