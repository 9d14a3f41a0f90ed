"""The whole alerting path with the real programs: collector -> Prometheus -> rules -> Alertmanager.

The collector serves a hand-made Evaluation (kustomize-controller down, two Kustomizations
stale because of it, an unrelated HelmRelease stuck). Prometheus scrapes it, evaluates the
generated rules, and Alertmanager — configured by alerts/alertmanager.example.yaml — must
page for the root cause and suppress its symptoms.

The rules' `for:` durations are set to 0s here (promtool's unit tests cover them), so the
test does not wait a minute per alert.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from watcher.export.metrics import build_registry

from . import evaluations as ev
from .promstack import StackFactory, serve_registry

REPO = Path(__file__).resolve().parents[2]


def rules_firing_at_once(tmp_path: Path) -> Path:
    rules = yaml.safe_load((REPO / "alerts" / "stalewatch.rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    return path


def test_root_cause_pages_and_its_symptoms_are_inhibited(prom_stack: StackFactory, tmp_path: Path) -> None:
    registry = build_registry(ev.controller_down)
    with serve_registry(registry) as target:
        stack = prom_stack(
            targets=[target],
            rule_files=[rules_firing_at_once(tmp_path)],
            alertmanager_config=yaml.safe_load((REPO / "alerts" / "alertmanager.example.yaml").read_text()),
            external_labels={"cluster": "test"},
        )
        scraped = stack.wait_for(lambda: stack.query("stalewatch_finding"), what="a scrape of the collector")
        assert len(scraped) == 4

        def inhibited_stale() -> list[dict[str, Any]]:
            alerts = stack.alertmanager_alerts("StalewatchStatusStale")
            return [a for a in alerts if a["status"]["inhibitedBy"]]

        stale = stack.wait_for(inhibited_stale, what="StatusStale alerts inhibited in Alertmanager")
        assert sorted(a["labels"]["name"] for a in stale) == ["apps", "infra"]
        assert all(a["status"]["state"] == "suppressed" for a in stale)

        stack.wait_for(
            lambda: "StalewatchControllerDown" in stack.webhook.alertnames("pager"),
            what="the root cause paging",
        )
        stack.wait_for(
            lambda: "StalewatchStuckReconciling" in stack.webhook.alertnames("chat"),
            what="the unrelated warning reaching chat",
        )
        [root] = stack.alertmanager_alerts("StalewatchControllerDown")
        assert root["status"]["state"] == "active"
        summary, description = root["annotations"]["summary"], root["annotations"]["description"]
        assert summary == "Deployment flux-system/kustomize-controller is down (ImagePullBackOff)"
        assert description.endswith("Symptoms it explains (suppressed while it fires): 2.")
        assert "StalewatchStatusStale" not in stack.webhook.alertnames()


def test_prometheus_stores_hostile_label_values_as_the_model_gave_them(prom_stack: StackFactory) -> None:
    """Prometheus asks for OpenMetrics; one revision string it could not parse would fail the
    whole scrape (up=0, every stalewatch series gone), so each family is checked in its store."""
    registry = build_registry(ev.hostile)
    served = {m.name: m.samples for m in registry.collect()}
    with serve_registry(registry) as target:
        stack = prom_stack(targets=[target])
        stack.wait_for(lambda: stack.query("stalewatch_revision_info"), what="a scrape of the hostile values")
        assert [float(s["value"][1]) for s in stack.query(f'up{{instance="{target}"}}')] == [1.0]
        for name, samples in served.items():
            stored = {labels_of(s["metric"]) for s in stack.query(name)}
            assert stored == {labels_of(s.labels) for s in samples}, name


def labels_of(series: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """A series' own labels, without the ones Prometheus adds (an empty label is no label to it)."""
    return tuple(sorted((k, v) for k, v in series.items() if v and k not in ("instance", "job", "__name__")))
