"""The watcher's self-metrics: fixed names (alerts and dashboards query them), golden exposition."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from watcher.export.watcher_metrics import WatcherCollector
from watcher.telemetry import Telemetry

GOLDEN = Path(__file__).parent / "golden"
DOCS = Path(__file__).parents[2] / "docs" / "metrics.md"


def telemetry() -> Telemetry:
    """Two kinds, one of them in the core group (label group=""), one forbidden."""
    state = Telemetry(up=True, started=True)
    pods = state.kind("", "Pod")
    pods.synced = pods.live = True
    pods.objects, pods.malformed, pods.malformed_now = 42, 1, 1
    pods.rejected.update(TimeOutOfRange=2)
    pods.last_event = 1796040000.5
    pods.list_requests.update(ok=2, throttled=1)
    pods.watch_requests.update(ok=5, connection_error=2)
    pods.relists.update(initial=1, gone=1)
    pods.watch_gone = 1
    pods.watch_errors.update(timeout=1)
    pods.events.update(ADDED=42, MODIFIED=7, BOOKMARK=3)
    terraforms = state.kind("infra.contrib.fluxcd.io", "Terraform")
    terraforms.forbidden = True
    terraforms.list_requests.update(forbidden=3)
    crds = state.kind("apiextensions.k8s.io", "CustomResourceDefinition")  # a tenant may not list them
    crds.forbidden = True
    state.cluster_scoped.add(("apiextensions.k8s.io", "CustomResourceDefinition"))
    for seconds in (0.0004, 0.003, 0.02, 0.02, 1.5):
        state.evaluation.observe(seconds)
    state.evaluation_failures = 3
    state.listed_kinds = {
        "watched": frozenset({("a.io", "A"), ("b.io", "B"), ("c.io", "C")}),
        "over_limit": frozenset({("d.io", "D")}),
        "not_served": frozenset({("e.io", "E"), ("f.io", "F")}),
    }
    state.heartbeat_read("kustomize-controller", "ok", 0.25)
    state.heartbeat_read("kustomize-controller", "timeout", 10.0)
    return state


def exposition(state: Telemetry) -> str:
    registry = CollectorRegistry()
    registry.register(WatcherCollector(state))
    return generate_latest(registry).decode()


def test_the_watcher_metrics_render_as_the_golden_exposition() -> None:
    assert exposition(telemetry()) == (GOLDEN / "watcher.prom").read_text()


def test_every_watcher_metric_in_the_docs_is_served_with_the_documented_type_and_labels() -> None:
    """docs/metrics.md is what alert rules, runbooks and dashboards were written against."""
    table = DOCS.read_text().split("## Watcher metrics", 1)[1].split("\n## ", 1)[0]
    documented = {
        name: (
            kind,
            tuple(label.strip(" `") for label in labels.split(",") if label.strip(" `") not in ("", "—")),
        )
        for name, kind, labels in re.findall(
            r"^\| `(stalewatch_\w+)` \| (\w+) \| ([^|]*) \|", table, re.MULTILINE
        )
    }
    text = exposition(telemetry())
    served = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    assert len(documented) == 23
    for name, (kind, labels) in documented.items():
        assert served.get(name) == kind, name
        series = name + "_bucket" if kind == "histogram" else name
        sample = next(line for line in text.splitlines() if re.match(rf"{series}[{{ ]", line))
        found = tuple(re.findall(r'(\w+)="', sample.split("{", 1)[1])) if "{" in sample else ()
        assert tuple(label for label in found if label != "le") == labels, name


def test_a_kind_no_longer_watched_disappears_from_every_series() -> None:
    state = telemetry()
    state.forget("infra.contrib.fluxcd.io", "Terraform")
    assert "Terraform" not in exposition(state)


def test_a_kind_without_errors_already_has_its_error_series_at_zero() -> None:
    """rate() needs two samples: a series born at its first error would hide that error."""
    state = Telemetry(up=True, started=True)
    state.kind("", "Pod")
    text = exposition(state)
    for reason in ("connection", "timeout", "server_error"):
        assert f'stalewatch_watch_errors_total{{group="",kind="Pod",reason="{reason}"}} 0.0' in text
    assert 'stalewatch_list_requests_total{group="",kind="Pod",result="forbidden"} 0.0' in text
    assert 'stalewatch_relists_total{group="",kind="Pod",reason="gone"} 0.0' in text
