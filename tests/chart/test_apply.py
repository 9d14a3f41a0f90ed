"""The rendered chart applied for real (server-side apply, stored) to the real kube-apiserver,
with the Prometheus Operator's published CRDs validating the ServiceMonitor, PodMonitor and
PrometheusRule: what `helm install` would send is what the cluster accepts, warning-free."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.chart.conftest import ALL_ON, NAMESPACE, kinds, template
from tests.controlplane.harness import ControlPlane
from watcher.kube.rbac import CLUSTER_SCOPED, namespaced_rules

pytestmark = pytest.mark.cluster

TENANTS = ("team-a", "team-b")


def create_namespaces(plane: ControlPlane, *names: str) -> None:
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names]
    plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(namespaces))


def stored(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    namespace = obj["metadata"].get("namespace")
    where = [f"--namespace={namespace}"] if namespace else []
    kind = f"{obj['kind']}.{obj['apiVersion'].split('/')[0]}" if "/" in obj["apiVersion"] else obj["kind"]
    found: dict[str, Any] = yaml.safe_load(
        plane.kubectl("get", kind, obj["metadata"]["name"], *where, "-o", "yaml")
    )
    return found


def assert_applied_and_stored(plane: ControlPlane, objects: list[dict[str, Any]]) -> None:
    done = plane.server_side_apply(objects, "--field-manager=helm")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", "the API server warned"
    assert done.stdout.count("serverside-applied") == len(objects), done.stdout
    for obj in objects:
        back = stored(plane, obj)
        assert back["metadata"].get("labels") == obj["metadata"].get("labels"), obj["metadata"]["name"]
        if "spec" in obj and obj["kind"] not in (
            "Deployment",
            "Service",
        ):  # the server adds defaults to those
            assert back["spec"] == obj["spec"], f"{obj['kind']} {obj['metadata']['name']} lost fields"


@pytest.fixture(scope="module", autouse=True)
def namespaces(plane: ControlPlane) -> None:
    create_namespaces(plane, NAMESPACE, *TENANTS)


def test_the_operator_crds_are_the_published_ones_with_their_schemas(plane: ControlPlane) -> None:
    """Not permissive stand-ins: a ServiceMonitor field the operator does not know is refused."""
    monitor = next(o for o in template() if o["kind"] == "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["no_such_field"] = True
    done = plane.server_side_apply([monitor], "--field-manager=helm")
    assert done.returncode != 0
    assert ".spec.endpoints[0].no_such_field: field not declared in schema" in done.stderr


def test_the_default_chart_is_accepted_and_stored_by_the_api_server(plane: ControlPlane) -> None:
    assert_applied_and_stored(plane, template())


def test_every_optional_part_on_is_accepted_and_stored_by_the_api_server(plane: ControlPlane) -> None:
    assert_applied_and_stored(plane, template("-f", ALL_ON, release="stalewatch-all-on"))


def test_namespace_mode_renders_a_role_and_binding_per_namespace_and_nothing_cluster_wide(
    plane: ControlPlane,
) -> None:
    """Each Role holds what watcher/kube/rbac.py (the tenant overlay's generator) derives from
    the ClusterRole: the chart's template and the program agree on the namespaced rules."""
    objects = template("--set", f"settings.namespaces={{{','.join(TENANTS)}}}", release="tenant")
    assert "ClusterRole" not in kinds(objects)
    assert "ClusterRoleBinding" not in kinds(objects)
    roles = [o for o in objects if o["kind"] == "Role"]
    assert sorted(o["metadata"]["namespace"] for o in roles) == sorted(TENANTS)
    cluster_role = next(o for o in template() if o["kind"] == "ClusterRole")
    granted = {(g, r) for rule in roles[0]["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    cluster_wide = {
        (g, r) for rule in cluster_role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert granted == cluster_wide - CLUSTER_SCOPED
    assert all(role["rules"] == namespaced_rules(cluster_role["rules"]) for role in roles)
    assert_applied_and_stored(plane, objects)
