"""docs/operations.md stays true to the files it points at and the alerts it explains."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.controlplane.harness import ControlPlane
from tests.deploy.conftest import DEPLOY, REPO, render
from watcher.model.types import DEFAULT_SEVERITIES, FindingType

DOC = REPO / "docs" / "operations.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
ALERT_ROW = re.compile(r"^\| \[(\w+)\]\(runbooks/(\w+)\.md\) \| (\w+) \|", re.MULTILINE)


def rules() -> dict[str, dict[str, str]]:
    """Alert name -> its labels, from the generated rule file."""
    groups = yaml.safe_load((REPO / "alerts" / "stalewatch.rules.yaml").read_text())["groups"]
    return {rule["alert"]: rule.get("labels", {}) for group in groups for rule in group["rules"]}


def default_severity(alert: str, labels: dict[str, str]) -> str:
    """A finding alert takes the finding's severity; stalewatch's own alerts carry a label."""
    finding = alert.removeprefix("Stalewatch")
    if finding in {t.value for t in FindingType}:
        return str(DEFAULT_SEVERITIES[FindingType(finding)])
    return labels["severity"]


RELATIVE_LINKS = sorted({t for t in LINK.findall(DOC.read_text()) if "://" not in t})


@pytest.mark.parametrize("target", RELATIVE_LINKS)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(target: str) -> None:
    path, _, anchor = target.partition("#")
    resolved = (DOC.parent / path).resolve()
    assert resolved.is_file(), f"{target} does not exist"
    if anchor:
        headings = re.findall(r"^#+ (.+)$", resolved.read_text(), re.MULTILINE)
        assert anchor in {re.sub(r"[^\w -]", "", h).strip().lower().replace(" ", "-") for h in headings}


def test_every_alert_is_explained_with_its_runbook_and_default_severity() -> None:
    rows = {name: (runbook, severity) for name, runbook, severity in ALERT_ROW.findall(DOC.read_text())}
    expected = {name: (name, default_severity(name, labels)) for name, labels in rules().items()}
    assert rows == expected


@pytest.mark.cluster
def test_the_overlay_patch_for_clusters_without_the_prometheus_operator_drops_only_its_kinds(
    plane: ControlPlane, tmp_path: Path
) -> None:
    section = DOC.read_text().split("**No Prometheus Operator?**", 1)[1]
    snippet = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert snippet, "the section shows no YAML"
    patches = yaml.safe_load(snippet[1])["patches"]
    shutil.copytree(DEPLOY / "base", tmp_path / "deploy" / "base")
    shutil.copytree(DEPLOY.parent / "alerts", tmp_path / "alerts")
    overlay = tmp_path / "deploy" / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["../base"], "patches": patches})
    )
    kinds = sorted(o["kind"] for o in render(plane, overlay))
    operator_kinds = {"ServiceMonitor", "PrometheusRule"}
    assert kinds == sorted(o["kind"] for o in render(plane, DEPLOY) if o["kind"] not in operator_kinds)
