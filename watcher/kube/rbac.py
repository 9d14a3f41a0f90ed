"""What stalewatch's account is granted in namespace mode, derived from the cluster mode's.

Cluster mode's read-only ClusterRole (deploy/base/rbac.yaml) declares every kind stalewatch
reads. Namespace mode (the `namespaces` setting) needs its namespaced part only, as a Role in
each watched namespace bound to the account: a Role cannot grant cluster-scoped kinds, and
stalewatch reads those only where allowed (a 403 is said, never fatal). So the Role's rules are
the ClusterRole's with the cluster-scoped resources (resources.py's tables say which) left out,
never a second list kept by hand: the tenant overlay (deploy/overlays/tenant/generate.py) and
the Helm chart render them from here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from watcher.kube.resources import BUILT_IN, ON_DEMAND

CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset(
    (r.group, r.plural) for r in (*BUILT_IN, *ON_DEMAND) if not r.namespaced
)
"""(API group, resource) of the cluster-scoped kinds stalewatch reads: no Role grants them."""


def namespaced_rules(rules: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A ClusterRole's rules as a Role's: every resource of them that lives in a namespace."""
    kept = []
    for rule in rules:
        groups = list(rule["apiGroups"])
        resources = [r for r in rule["resources"] if not any((g, r) in CLUSTER_SCOPED for g in groups)]
        if resources:
            kept.append({"apiGroups": groups, "resources": resources, "verbs": list(rule["verbs"])})
    return kept


def tenant_rbac(
    cluster_role: Mapping[str, Any], *, namespaces: Sequence[str], account: str, account_namespace: str
) -> list[dict[str, Any]]:
    """A Role and a RoleBinding (to `account` in `account_namespace`) in each of `namespaces`."""
    name = cluster_role["metadata"]["name"]
    rules = namespaced_rules(cluster_role["rules"])
    objects: list[dict[str, Any]] = []
    for namespace in namespaces:
        meta = {"name": name, "namespace": namespace}
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta,
                "rules": copy.deepcopy(rules),
            }
        )
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": dict(meta),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": account_namespace}],
            }
        )
    return objects
