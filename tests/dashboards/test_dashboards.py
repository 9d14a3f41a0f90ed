"""Grafana dashboards: committed JSON up to date, well-formed for provisioning, every query runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.export.dashboards import DASHBOARDS, PanelQuery, panel_queries
from watcher.export.metrics import build_registry

from ..export import evaluations as ev
from ..export.promstack import StackFactory, serve_registry

REPO = Path(__file__).resolve().parents[2]
QUERIES = panel_queries()


def load(stem: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((REPO / "dashboards" / f"{stem}.json").read_text())
    return loaded


def test_committed_dashboards_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, "dashboards/generate.py", "--check"], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0, f"run `python dashboards/generate.py`:\n{result.stderr}"


def test_each_dashboard_has_its_own_uid_and_unique_panel_ids() -> None:
    uids = [load(stem)["uid"] for stem in DASHBOARDS]
    assert len(set(uids)) == len(uids)
    for stem in DASHBOARDS:
        ids = [p["id"] for p in load(stem)["panels"]]
        assert len(set(ids)) == len(ids), stem


@pytest.mark.parametrize(
    ("stem", "variables"),
    [
        pytest.param("overview", ["datasource", "cluster", "namespace"], id="overview"),
        pytest.param("stack", ["datasource", "cluster", "source", "namespace"], id="stack"),
        pytest.param("self", ["datasource", "cluster"], id="self"),
    ],
)
def test_datasource_and_cluster_are_template_variables(stem: str, variables: list[str]) -> None:
    templating = {v["name"]: v for v in load(stem)["templating"]["list"]}
    assert list(templating) == variables
    assert templating["datasource"]["type"] == "datasource"
    assert templating["datasource"]["query"] == "prometheus"
    # All is `.*`, which also matches series without a cluster label: the variable is optional.
    assert templating["cluster"]["includeAll"]
    assert templating["cluster"]["allValue"] == ".*"


def test_every_panel_queries_the_chosen_datasource_and_cluster() -> None:
    for stem in DASHBOARDS:
        for panel in load(stem)["panels"]:
            if panel["type"] == "row":
                continue
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            [target] = panel["targets"]
            assert '$cluster"' in target["expr"], panel["title"]


def test_every_metric_in_panels_and_alerts_is_documented() -> None:
    documented = set(re.findall(r"`(stalewatch_\w+)", (REPO / "docs" / "metrics.md").read_text()))
    rules = (REPO / "alerts" / "stalewatch.rules.yaml").read_text()
    used = set(re.findall(r"stalewatch_\w+", " ".join(q.expr for q in QUERIES) + rules))
    used = {re.sub(r"_bucket$", "", name) for name in used}
    assert used - documented == set()


def test_provisioning_example_points_a_file_provider_at_the_dashboards() -> None:
    config = yaml.safe_load((REPO / "dashboards" / "provisioning.yaml").read_text())
    [provider] = config["providers"]
    assert config["apiVersion"] == 1
    assert provider["type"] == "file"
    assert provider["options"]["path"]


def test_every_panel_query_runs_on_a_real_prometheus(prom_stack: StackFactory) -> None:
    with serve_registry(build_registry(ev.controller_down)) as target:
        stack = prom_stack(targets=[target])
        stack.wait_for(lambda: stack.query("stalewatch_finding"), what="a scrape of the collector")
        failures: dict[str, str] = {}
        for query in QUERIES:
            try:
                stack.query(query.resolved())
            except urllib.error.HTTPError as error:  # a bad query: 400 with Prometheus' message
                failures[f"{query.dashboard}/{query.panel}"] = error.read().decode()
        assert failures == {}

        blast = next(q for q in QUERIES if q.panel == "Root causes and their blast radius")
        by_root = {r["metric"]["root_name"]: r["value"][1] for r in stack.query(blast.resolved())}
        assert by_root == {"kustomize-controller": "2", "podinfo": "0"}


def test_queries_resolve_every_dashboard_variable() -> None:
    for query in QUERIES:
        assert "$" not in query.resolved(), query
    assert PanelQuery("d", "p", 'x{a=~"$cluster"}').resolved({"cluster": "prod"}) == 'x{a=~"prod"}'
