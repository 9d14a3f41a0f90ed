"""The chart rendered by the real helm: generated files current, lint clean, every optional part
renders, the values schema refuses what stalewatch would refuse, and deploy/ is the chart."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import ALL_ON, CHART, REPO, helm, kinds, one, template
from tests.controlplane.harness import binaries_dir
from watcher.cli import main
from watcher.export.alerts import rule_groups
from watcher.export.dashboards import DASHBOARDS

DEFAULT_KINDS = [
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "Deployment",
    "PrometheusRule",
    "Service",
    "ServiceAccount",
    "ServiceMonitor",
]
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


def test_regenerating_the_chart_and_deploy_changes_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "charts/generate.py", "--check"], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, f"run `python charts/generate.py`:\n{done.stderr}"


def test_the_chart_version_is_the_projects() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (version, version)


@pytest.mark.parametrize(
    "values", [pytest.param([], id="defaults"), pytest.param(["-f", ALL_ON], id="all-on")]
)
def test_helm_lint_passes_strict(values: list[Any]) -> None:
    done = helm("lint", "--strict", CHART, *values)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_default_values_render_what_deploy_has_but_its_namespace() -> None:
    assert kinds(template()) == DEFAULT_KINDS


def test_every_optional_part_on_renders_its_objects() -> None:
    rendered = template("-f", ALL_ON)
    assert kinds(rendered) == sorted(
        [*DEFAULT_KINDS, "PodMonitor", "NetworkPolicy", *["ConfigMap"] * len(DASHBOARDS)]
    )


def test_the_prometheus_rule_holds_the_alert_rules_of_alerts() -> None:
    assert one(template(), "PrometheusRule")["spec"] == {"groups": rule_groups()}


def test_each_dashboard_is_a_config_map_the_grafana_sidecar_picks_up() -> None:
    maps = [o for o in template("-f", ALL_ON) if o["metadata"]["name"].startswith("stalewatch-dashboard-")]
    assert {o["metadata"]["labels"]["grafana_dashboard"] for o in maps} == {"1"}
    assert {o["metadata"]["annotations"]["grafana_folder"] for o in maps} == {"GitOps"}
    by_file = {name: json.loads(text) for o in maps for name, text in o["data"].items()}
    expected = {
        f"stalewatch-{stem}.json": json.loads((REPO / "dashboards" / f"{stem}.json").read_text())
        for stem in DASHBOARDS
    }
    assert by_file == expected


def test_the_size_preset_sets_the_resources_and_resources_replace_it() -> None:
    def resources(*args: str) -> dict[str, Any]:
        return one(template(*args), "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"]

    small, large = resources("--set", "size=small"), resources("--set", "size=large")
    assert small["requests"]["memory"] != large["requests"]["memory"]
    assert resources("--set", "resources.requests.cpu=1") == {"requests": {"cpu": 1}}


def test_the_settings_reach_the_config_file_with_the_charts_port() -> None:
    config_map = one(template("--set", "port=9090", "--set", "settings.log_level=debug"), "ConfigMap")
    assert yaml.safe_load(config_map["data"]["config.yaml"]) == {
        "listen": ":9090",
        "log_format": "json",
        "log_level": "debug",
    }


@pytest.mark.parametrize(
    "values", [pytest.param([], id="defaults"), pytest.param(["-f", ALL_ON], id="all-on")]
)
def test_the_rendered_config_file_is_accepted_by_stalewatch(
    values: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_map = next(o for o in template(*values) if o["kind"] == "ConfigMap")
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    assert main(["config", "show", "--config", str(config)]) == 0, capsys.readouterr().err


def test_a_changed_setting_rolls_the_pod() -> None:
    def checksum(*args: str) -> str:
        annotations = one(template(*args), "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/config"])

    assert checksum() != checksum("--set", "settings.log_level=debug")


def refused(*args: str) -> str:
    done = helm("template", "stalewatch", CHART, *args)
    assert done.returncode != 0, "helm accepted it"
    return done.stderr


def test_the_schema_refuses_a_threshold_that_is_no_duration_naming_it() -> None:
    error = refused("--set", "settings.thresholds.controller_down=banana")
    assert "/settings/thresholds/controller_down" in error
    assert "'banana'" in error


@pytest.mark.parametrize("value", ["90s", "1h30m", "250ms", "0", "45"])
def test_the_schema_takes_every_duration_stalewatch_takes(value: str) -> None:
    template("--set-string", f"settings.thresholds.controller_down={value}")


def test_the_schema_refuses_an_unknown_setting_naming_it() -> None:
    assert "revison_skew" in refused("--set", "settings.thresholds.revison_skew=5m")


def test_the_schema_refuses_a_rule_reading_secrets() -> None:
    error = refused(
        "--set",
        "rbac.extraRules[0].apiGroups[0]=",
        "--set",
        "rbac.extraRules[0].resources[0]=secrets",
        "--set",
        "rbac.extraRules[0].verbs[0]=get",
    )
    assert "/rbac/extraRules/0/resources/0" in error


def without_helm(obj: dict[str, Any]) -> dict[str, Any]:
    """A chart object as deploy/ has it: without Helm's own labels and its config checksum
    (kustomize rolls the pod by the ConfigMap's hashed name instead); settings as data."""
    obj = copy.deepcopy(obj)
    for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
        for label in HELM_LABELS:
            meta.get("labels", {}).pop(label, None)
        meta.get("annotations", {}).pop("checksum/config", None)
        if meta.get("annotations") == {}:
            del meta["annotations"]
    if obj["kind"] == "ConfigMap":
        obj["data"] = {name: yaml.safe_load(text) for name, text in obj["data"].items()}
    return obj


def unhashed(obj: dict[str, Any], config_map: str) -> dict[str, Any]:
    """A deploy/ object with the ConfigMap's hashed name back to the name it is generated as (and
    its settings as data: the file's header comment is no setting)."""
    obj = copy.deepcopy(obj)
    if obj["kind"] == "ConfigMap":
        obj["metadata"]["name"] = config_map
        obj["data"] = {name: yaml.safe_load(text) for name, text in obj["data"].items()}
    if obj["kind"] == "Deployment":
        obj["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] = config_map
    return obj


@pytest.fixture(scope="module")
def kustomized() -> list[dict[str, Any]]:
    """`kubectl kustomize deploy/`, as `kubectl apply -k deploy/` renders it."""
    kubectl = binaries_dir() / "kubectl"
    done = subprocess.run([str(kubectl), "kustomize", str(REPO / "deploy")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def test_deploy_creates_what_the_chart_installs(kustomized: list[dict[str, Any]]) -> None:
    """All but deploy's Namespace (the chart installs into one) and the PrometheusRule (alerts/',
    its rules from the same declaration: compared above and in tests/deploy)."""
    chart = {
        (o["kind"], o["metadata"]["name"]): without_helm(o)
        for o in template()
        if o["kind"] != "PrometheusRule"
    }
    config_map = one(template(), "ConfigMap")["metadata"]["name"]
    deploy = {
        (o["kind"], o["metadata"]["name"]): o
        for o in (unhashed(o, config_map) for o in kustomized)
        if o["kind"] not in ("Namespace", "PrometheusRule")
    }
    assert deploy == chart


def test_make_chart_packages_the_chart_with_its_generated_files_and_without_its_test_values(
    tmp_path: Path,
) -> None:
    """What `make chart` runs; the package is what `helm push oci://…` uploads."""
    done = helm("package", CHART, "-d", tmp_path)
    assert done.returncode == 0, done.stderr
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    with tarfile.open(tmp_path / f"stalewatch-{version}.tgz") as package:
        names = set(package.getnames())
    assert {"stalewatch/values.schema.json", "stalewatch/files/prometheusrule-spec.yaml"} <= names
    assert {f"stalewatch/files/dashboards/{stem}.json" for stem in DASHBOARDS} <= names
    assert not {name for name in names if name.startswith("stalewatch/ci/")}
