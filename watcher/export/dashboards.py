"""Grafana dashboards built in code with grafana-foundation-sdk, committed as JSON.

`python dashboards/generate.py` writes dashboards/*.json; a test fails when they are out of
date. `panel_queries()` lists every panel's PromQL so a test can run each one against a
real Prometheus, and the dashboards cannot quietly drift away from the metrics.

Every dashboard has a datasource variable and a `cluster` variable. stalewatch does not add
a cluster label itself (Prometheus does, through external labels or relabelling), so the
cluster variable matches with `=~` and defaults to All (`.*`), which also matches series that
have no cluster label at all: the dashboards work unchanged on a single-cluster Prometheus.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model

from watcher.export.gitops_dashboards import overview, stack
from watcher.export.grafana import VARIABLE_DEFAULTS
from watcher.export.self_dashboard import self_health

DASHBOARDS = {"overview": overview, "stack": stack, "self": self_health}
"""File stem -> builder; dashboards/<stem>.json."""


def build(stem: str) -> model.Dashboard:
    """The dashboard model with panel ids numbered in order (Grafana needs them unique)."""
    built = DASHBOARDS[stem]().build()
    for number, panel in enumerate(built.panels or [], start=1):
        panel.id_val = number
    return built


def render(stem: str) -> str:
    return json.dumps(build(stem), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True, slots=True)
class PanelQuery:
    dashboard: str
    panel: str
    expr: str

    def resolved(self, values: Mapping[str, str] = VARIABLE_DEFAULTS) -> str:
        """The expression with dashboard variables replaced, ready for Prometheus' query API."""
        expr = self.expr
        for name in sorted(values, key=len, reverse=True):
            expr = expr.replace(f"${name}", values[name])
        return expr


def panel_queries() -> list[PanelQuery]:
    """Every panel's PromQL, read back from the built dashboards so it cannot drift from them."""
    return [q for stem in DASHBOARDS for q in _queries(stem, build(stem).panels or [])]


def _queries(stem: str, panels: Sequence[object]) -> Iterator[PanelQuery]:
    for panel in panels:
        for target in getattr(panel, "targets", None) or []:
            expr = getattr(target, "expr", None)
            if isinstance(expr, str):
                yield PanelQuery(stem, str(getattr(panel, "title", "")), expr)
