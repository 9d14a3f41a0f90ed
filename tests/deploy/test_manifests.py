"""deploy/: what `kubectl apply -k` would create, checked by the real API server and against
what stalewatch needs (its kinds, its port, its stop time, its config)."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import ControlPlane
from tests.deploy.conftest import DEPLOY, REPO, dockerfile_stages, granted, one, render
from watcher.app import STOP_TIMEOUT
from watcher.cli import main
from watcher.kube.resources import BUILT_IN, ON_DEMAND
from watcher.model.types import DEFAULT_CONTROLLERS

pytestmark = pytest.mark.cluster

READ_VERBS = {"get", "list", "watch"}
KUSTOMIZATIONS = [
    pytest.param(DEPLOY, id="deploy"),
    pytest.param(DEPLOY / "overlays" / "example", id="overlay-example"),
]
CONFIG_FILES = [
    pytest.param(DEPLOY / "base" / "config.yaml", id="base"),
    pytest.param(DEPLOY / "overlays" / "example" / "config.yaml", id="overlay-example"),
]


def assert_accepted_without_warnings(plane: ControlPlane, documents: list[dict[str, Any]]) -> None:
    done = plane.server_side_apply(documents, "--dry-run=server")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(documents), done.stdout
    assert done.stderr == ""


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result


def test_kubectl_kustomize_renders_one_of_each_object_stalewatch_needs(
    rendered: list[dict[str, Any]],
) -> None:
    assert sorted(o["kind"] for o in rendered) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Namespace",
        "PrometheusRule",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ]
    assert {o["metadata"].get("namespace", "stalewatch") for o in rendered} == {"stalewatch"}


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_rendered_object_passes_a_server_side_dry_run_without_warnings(
    plane: ControlPlane, rbac: list[dict[str, Any]], kustomization: Path
) -> None:
    """`rbac` created the namespace: dry-run objects in a missing namespace are refused."""
    assert_accepted_without_warnings(plane, render(plane, kustomization))


def test_the_rendered_prometheus_rule_is_the_generated_one_unchanged(rendered: list[dict[str, Any]]) -> None:
    generated = yaml.safe_load((REPO / "alerts" / "prometheusrule.yaml").read_text())
    assert one(rendered, "PrometheusRule")["spec"] == generated["spec"]


def pod_from_template(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    template = copy.deepcopy(one(rendered, "Deployment")["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": "stalewatch-pss", "namespace": "stalewatch"},
        "spec": template["spec"],
    }


def test_the_pod_passes_the_restricted_pod_security_standard_the_namespace_enforces(
    plane: ControlPlane, rbac: list[dict[str, Any]], rendered: list[dict[str, Any]]
) -> None:
    namespace = one(rendered, "Namespace")["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"
    assert_accepted_without_warnings(plane, [pod_from_template(rendered)])


def test_the_namespace_really_refuses_a_pod_without_the_security_context(
    plane: ControlPlane, rbac: list[dict[str, Any]], rendered: list[dict[str, Any]]
) -> None:
    """The other half of the test above: enforcement is on, so its pass means something."""
    pod = pod_from_template(rendered)
    del pod["spec"]["securityContext"], pod["spec"]["containers"][0]["securityContext"]
    done = plane.server_side_apply([pod], "--dry-run=server")
    assert done.returncode != 0
    assert 'violates PodSecurity "restricted' in done.stderr


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_cluster_role_only_reads_and_never_secrets_or_config_maps(
    plane: ControlPlane, kustomization: Path
) -> None:
    rules = one(render(plane, kustomization), "ClusterRole")["rules"]
    for rule in rules:
        assert set(rule["verbs"]) <= READ_VERBS, rule
        assert not {"secrets", "configmaps", "*"} & set(rule.get("resources", [])), rule
        assert "*" not in rule["apiGroups"], rule
        assert "nonResourceURLs" not in rule, rule


def test_the_cluster_role_grants_every_built_in_kind_the_watcher_reads(
    rendered: list[dict[str, Any]],
) -> None:
    assert {(r.group, r.plural) for r in (*BUILT_IN, *ON_DEMAND)} <= granted(rendered)


def test_the_cluster_role_reaches_no_group_the_watcher_does_not_read(rendered: list[dict[str, Any]]) -> None:
    read = {r.group for r in (*BUILT_IN, *ON_DEMAND)}
    read |= {g for spec in DEFAULT_CONTROLLERS for g in spec.groups}
    # The Prometheus Operator objects the install itself applies: a Flux-installed stalewatch's
    # Kustomization lists them, so it watches them (tests/lab/test_lab_install.py).
    read.add("monitoring.coreos.com")
    assert {group for group, _ in granted(rendered)} == read


def test_the_binding_gives_the_cluster_role_to_the_deployments_service_account(
    rendered: list[dict[str, Any]],
) -> None:
    binding = one(rendered, "ClusterRoleBinding")
    account = one(rendered, "ServiceAccount")["metadata"]
    pod = one(rendered, "Deployment")["spec"]["template"]["spec"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": one(rendered, "ClusterRole")["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    assert pod["serviceAccountName"] == account["name"]


def test_the_container_runs_as_the_image_user_unprivileged_on_a_read_only_root(
    rendered: list[dict[str, Any]],
) -> None:
    uid, _, gid = dockerfile_stages()[1].all("USER")[-1].args.partition(":")
    context = container(rendered)["securityContext"]
    assert context == {
        "runAsNonRoot": True,
        "runAsUser": int(uid),
        "runAsGroup": int(gid or uid),
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_the_probes_ask_healthz_and_readyz_on_the_port_the_image_exposes(
    rendered: list[dict[str, Any]],
) -> None:
    spec = container(rendered)
    exposed = [int(e.args) for e in dockerfile_stages()[1].all("EXPOSE")]
    assert spec["ports"] == [{"name": "http-metrics", "containerPort": exposed[0], "protocol": "TCP"}]
    assert spec["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert spec["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}


def test_the_grace_period_covers_the_prestop_sleep_and_stalewatchs_stop_timeout(
    rendered: list[dict[str, Any]],
) -> None:
    pod = one(rendered, "Deployment")["spec"]["template"]["spec"]
    sleep = container(rendered)["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert sleep > 0
    assert pod["terminationGracePeriodSeconds"] > sleep + STOP_TIMEOUT


def test_resources_request_cpu_and_memory_and_cap_memory(rendered: list[dict[str, Any]]) -> None:
    resources = container(rendered)["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"memory"}


def test_resources_cover_what_the_50k_object_benchmark_measured(rendered: list[dict[str, Any]]) -> None:
    measured = json.loads((REPO / "bench" / "results" / "size-50000.json").read_text())["stalewatch"]
    resources = container(rendered)["resources"]
    assert _bytes(resources["requests"]["memory"]) >= measured["rss_bytes_under_churn"]
    assert _bytes(resources["limits"]["memory"]) >= 2 * measured["rss_bytes_under_churn"]
    assert _millicores(resources["requests"]["cpu"]) >= 1000 * measured["cpu_cores_under_churn"]


def _bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    return int(quantity[:-2]) * units[quantity[-2:]] if quantity[-2:] in units else int(quantity)


def _millicores(quantity: str) -> float:
    return float(quantity[:-1]) if quantity.endswith("m") else 1000 * float(quantity)


def test_the_config_flag_names_the_file_the_config_map_mounts(rendered: list[dict[str, Any]]) -> None:
    spec = container(rendered)
    args = spec["args"]
    config_file = Path(args[args.index("--config") + 1])
    mount = next(m for m in spec["volumeMounts"] if m["mountPath"] == str(config_file.parent))
    pod = one(rendered, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == one(rendered, "ConfigMap")["metadata"]["name"]
    assert config_file.name in one(rendered, "ConfigMap")["data"]


@pytest.mark.parametrize("config_file", CONFIG_FILES)
def test_every_shipped_config_file_is_accepted_by_stalewatch(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "show", "--config", str(config_file)]) == 0, capsys.readouterr().err


def test_the_image_tag_is_the_project_version(rendered: list[dict[str, Any]]) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert container(rendered)["image"].rsplit(":", 1)[1] == version


def test_the_service_monitor_scrapes_metrics_from_the_service_port_of_the_pod(
    rendered: list[dict[str, Any]],
) -> None:
    service, monitor = one(rendered, "Service"), one(rendered, "ServiceMonitor")
    pod_labels = one(rendered, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["publishNotReadyAddresses"] is True, "an unready stalewatch must still be scraped"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http-metrics"]
    assert [e["path"] for e in monitor["spec"]["endpoints"]] == ["/metrics"]
    assert service["spec"]["ports"][0]["name"] == "http-metrics"
    assert service["spec"]["ports"][0]["targetPort"] == container(rendered)["ports"][0]["name"]


def test_the_scrape_job_is_named_as_the_stalewatch_down_alert_expects(rendered: list[dict[str, Any]]) -> None:
    """The Prometheus Operator names the job after the Service unless the ServiceMonitor sets
    jobLabel; StalewatchDown looks for `up{job="..."}`."""
    rules = (REPO / "alerts" / "stalewatch.rules.yaml").read_text()
    jobs = set(re.findall(r'up\{job="([^"]+)"\}', rules))
    assert jobs == {one(rendered, "Service")["metadata"]["name"]}
    assert "jobLabel" not in one(rendered, "ServiceMonitor")["spec"]
