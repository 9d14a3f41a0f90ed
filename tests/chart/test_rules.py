"""The chart's PrometheusRule passes the same promtool unit tests as alerts/ (tests/alerts)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.chart.conftest import REPO, one, template

PROMTOOL_TESTS = sorted((REPO / "tests" / "alerts").glob("*.test.yaml"))


@pytest.fixture(scope="module")
def chart_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rendered PrometheusRule's spec, as the rules file the Prometheus Operator makes of it."""
    path = tmp_path_factory.mktemp("chart-rules") / "stalewatch.rules.yaml"
    path.write_text(yaml.safe_dump(one(template(), "PrometheusRule")["spec"]))
    return path


@pytest.mark.parametrize("test_file", [pytest.param(p, id=p.stem) for p in PROMTOOL_TESTS])
def test_the_chart_rules_pass_the_promtool_tests_of_alerts(test_file: Path, chart_rules: Path) -> None:
    tests = yaml.safe_load(test_file.read_text())
    assert tests["rule_files"] == ["../../alerts/stalewatch.rules.yaml"], "a test of alerts/' rules file"
    tests["rule_files"] = [str(chart_rules)]
    test_copy = chart_rules.parent / test_file.name
    test_copy.write_text(yaml.safe_dump(tests))
    done = subprocess.run(["promtool", "test", "rules", str(test_copy)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
