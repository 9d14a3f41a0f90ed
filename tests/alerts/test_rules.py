"""The alert rules: generated files up to date, valid for promtool and amtool, each alert unit-tested."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from watcher.export.alerts import ALERTS, FINDING_TEXTS, RUNBOOK_BASE, Alert
from watcher.model.types import FindingType

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "stalewatch.rules.yaml"
PROMTOOL_TESTS = sorted(Path(__file__).parent.glob("*.test.yaml"))
ALERTMANAGER_EXAMPLE = REPO / "alerts" / "alertmanager.example.yaml"


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=REPO)


def test_generated_rule_files_are_up_to_date() -> None:
    result = run(sys.executable, "alerts/generate.py", "--check")
    assert result.returncode == 0, f"run `python alerts/generate.py`:\n{result.stderr}"


def test_rules_file_passes_promtool_check() -> None:
    result = run("promtool", "check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheusrule_carries_the_same_groups_as_the_rules_file() -> None:
    rules = yaml.safe_load(RULES.read_text())
    manifest = yaml.safe_load((REPO / "alerts" / "prometheusrule.yaml").read_text())
    assert (manifest["apiVersion"], manifest["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert manifest["spec"]["groups"] == rules["groups"]


@pytest.mark.parametrize("test_file", [pytest.param(p, id=p.stem) for p in PROMTOOL_TESTS])
def test_promtool_unit_tests_pass(test_file: Path) -> None:
    result = run("promtool", "test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr


def promtool_expectations() -> tuple[set[str], set[str]]:
    """Alert names with a firing expectation, and those with a not-firing one, across all test files."""
    firing: set[str] = set()
    silent: set[str] = set()
    for path in PROMTOOL_TESTS:
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    return firing, silent


def test_every_alert_has_a_firing_and_a_not_firing_promtool_test() -> None:
    firing, silent = promtool_expectations()
    names = {a.name for a in ALERTS}
    assert names - firing == set(), "alerts never tested firing"
    assert names - silent == set(), "alerts never tested staying silent"


def test_every_finding_type_has_an_alert_with_its_own_words() -> None:
    assert set(FINDING_TEXTS) == set(FindingType)
    assert {f"Stalewatch{t}" for t in FindingType} <= {a.name for a in ALERTS}


@pytest.mark.parametrize("alert", [pytest.param(a, id=a.name) for a in ALERTS])
def test_every_alert_links_a_runbook_that_exists(alert: Alert) -> None:
    assert alert.rule()["annotations"]["runbook_url"] == f"{RUNBOOK_BASE}{alert.name}.md"
    assert (REPO / "docs" / "runbooks" / f"{alert.name}.md").is_file()


def test_no_runbook_without_an_alert() -> None:
    runbooks = {p.stem for p in (REPO / "docs" / "runbooks").glob("*.md")} - {"README"}
    assert runbooks == {a.name for a in ALERTS}


def test_every_alert_has_severity_from_its_series_or_its_rule() -> None:
    finding_alerts = {f"Stalewatch{t}" for t in FindingType}
    for alert in ALERTS:
        assert alert.name in finding_alerts or alert.labels.get("severity") in {"critical", "warning", "info"}


def test_alertmanager_example_passes_amtool_check_config() -> None:
    result = run("amtool", "check-config", ALERTMANAGER_EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        pytest.param(["alertname=StalewatchCRDRemoved", "severity=critical"], "pager", id="critical_pages"),
        pytest.param(["alertname=StalewatchStatusStale", "severity=info"], "chat-low", id="info_never_pages"),
        pytest.param(["alertname=StalewatchStalled", "severity=warning"], "chat", id="warning_goes_to_chat"),
    ],
)
def test_alertmanager_example_routes_by_severity(labels: list[str], receiver: str) -> None:
    result = run("amtool", "config", "routes", "test", f"--config.file={ALERTMANAGER_EXAMPLE}", *labels)
    assert result.stdout.strip() == receiver, result.stdout + result.stderr


def test_alertmanager_example_inhibits_names_that_exist() -> None:
    config = yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text())
    names = {a.name for a in ALERTS}
    for rule in config["inhibit_rules"]:
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            if matcher.startswith("alertname"):
                value = matcher.split("=", 1)[1].lstrip("~").strip('"')
                assert set(value.split("|")) <= names, matcher
