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

from grafana_foundation_sdk.builders import dashboard
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model

from watcher.export.grafana import (
    CLUSTER,
    RATE,
    SCOPE,
    VARIABLE_DEFAULTS,
    label_variable,
    stat_panel,
    table_panel,
    timeseries_panel,
    variables,
)

NAMESPACE = label_variable("namespace", f"stalewatch_object_status{{{CLUSTER}}}", "Namespace")


OBJECT_COLUMNS = {"kind": "Kind", "namespace": "Namespace", "name": "Name"}
ROOT_COLUMNS = {
    "root_type": "Root cause",
    "root_kind": "Kind",
    "root_namespace": "Namespace",
    "root_name": "Name",
}


def overview() -> dashboard.Dashboard:
    """What is broken now, and why: root causes with their blast radius, controllers, staleness."""
    return (
        dashboard.Dashboard("stalewatch / Overview")
        .uid("stalewatch-overview")
        .tags(["stalewatch", "gitops"])
        .refresh("30s")
        .time("now-6h", "now")
        .variables(variables(NAMESPACE))
        .with_row(dashboard.Row("Now"))
        .with_panel(
            stat_panel(
                "Root causes",
                f'count(stalewatch_finding{{root="true",{SCOPE}}}) or vector(0)',
                description="Findings that nothing else explains. Fix these; their symptoms follow.",
            )
        )
        .with_panel(
            stat_panel(
                "Controllers down",
                f"count(stalewatch_controller_up{{{CLUSTER}}} == 0) or vector(0)",
                description="GitOps controllers that are not available or do not hold their Lease.",
            )
        )
        .with_panel(
            stat_panel(
                "Stale objects",
                f"sum(stalewatch_object_stale{{{SCOPE}}}) or vector(0)",
                description="Objects whose controller is down: their Ready condition is a cached report.",
            )
        )
        .with_panel(
            stat_panel(
                "Revision skew",
                f'count(stalewatch_finding{{type="RevisionSkew",{SCOPE}}}) or vector(0)',
                description="Objects that have not applied their source's latest revision in time.",
            )
        )
        .with_panel(
            table_panel(
                "Root causes and their blast radius",
                f"count by (root_type, root_kind, root_namespace, root_name) "
                f'(stalewatch_finding{{root_kind!="",{CLUSTER}}}) - 1',
                description="Each root cause and how many other findings are its symptoms.",
                rename={**ROOT_COLUMNS, "Value": "Symptoms"},
            )
        )
        .with_panel(
            table_panel(
                "Symptoms and the root they point at",
                f'stalewatch_finding{{root="false",{SCOPE}}}',
                description="Findings explained by a root cause; they clear when it is fixed.",
                rename={
                    "type": "Finding",
                    **OBJECT_COLUMNS,
                    "root_type": "Root cause",
                    "root_kind": "Root kind",
                    "root_namespace": "Root namespace",
                    "root_name": "Root name",
                },
            )
        )
        .with_row(dashboard.Row("Controllers"))
        .with_panel(
            table_panel(
                "Controllers down and why",
                f"stalewatch_controller_down_reason{{{CLUSTER}}} == 1",
                description="From a fixed set: ImagePullBackOff, CrashLoopBackOff, LeaseExpired, ...",
                rename={"namespace": "Namespace", "name": "Controller", "reason": "Reason"},
                width=12,
            )
        )
        .with_panel(
            timeseries_panel(
                "Controllers up",
                f"stalewatch_controller_up{{{CLUSTER}}}",
                legend="{{namespace}}/{{name}}",
                description="1 while the controller is available and leading.",
            )
        )
        .with_row(dashboard.Row("Objects"))
        .with_panel(
            table_panel(
                "Objects with a stale status",
                f"stalewatch_object_stale{{{SCOPE}}} == 1",
                description="Their status is not being updated: do not trust their Ready condition.",
                rename=OBJECT_COLUMNS,
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "Revision skew: source revision vs applied",
                f"stalewatch_revision_info{{{SCOPE}}} and on (cluster, kind, namespace, name) "
                f'stalewatch_finding{{type="RevisionSkew"}}',
                description="What the source has versus what the object last applied.",
                rename={
                    **OBJECT_COLUMNS,
                    "revision": "Source revision",
                    "applied_revision": "Applied revision",
                },
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "Failing to reconcile, longest first",
                "sort_desc(time() - stalewatch_finding_since_timestamp_seconds"
                f'{{type="ReconcileFailed",{SCOPE}}})',
                description="Objects whose controller keeps reporting Ready=False (ReconcileFailed)."
                " A source among them is usually the root of the others.",
                rename={**OBJECT_COLUMNS, "Value": "Seconds failing"},
            )
        )
        .with_panel(
            table_panel(
                "Time since last change",
                f"sort(time() - stalewatch_object_last_transition_timestamp_seconds{{{SCOPE}}})",
                description="Since each object's Ready condition last changed, most recent first.",
                rename={**OBJECT_COLUMNS, "Value": "Seconds since Ready changed"},
            )
        )
    )


def stack() -> dashboard.Dashboard:
    """One stack: every object built from one source, what it should run versus what it applied."""
    in_source = 'on (cluster, kind, namespace, name) stalewatch_revision_info{source=~"$source"}'
    source = label_variable("source", f"stalewatch_revision_info{{{CLUSTER}}}", "Source")
    return (
        dashboard.Dashboard("stalewatch / Stack")
        .uid("stalewatch-stack")
        .tags(["stalewatch", "gitops"])
        .refresh("30s")
        .time("now-6h", "now")
        .variables(variables(source, NAMESPACE))
        .with_panel(
            table_panel(
                "Source revision vs applied revision",
                f'stalewatch_revision_info{{source=~"$source",{SCOPE}}}',
                description="Every Kustomization/HelmRelease/Terraform built from the chosen source(s).",
                rename={
                    "source": "Source",
                    **OBJECT_COLUMNS,
                    "revision": "Source revision",
                    "applied_revision": "Applied revision",
                },
            )
        )
        .with_panel(
            table_panel(
                "Status",
                f"stalewatch_object_status{{{SCOPE}}} == 1 and {in_source}",
                description="kstatus of each object in the stack.",
                rename={**OBJECT_COLUMNS, "status": "Status"},
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "Findings in this stack",
                f"stalewatch_finding{{{SCOPE}}} and {in_source}",
                description="What is wrong with objects of this stack, and the root cause it belongs to.",
                rename={
                    "type": "Finding",
                    **OBJECT_COLUMNS,
                    "root_type": "Root cause",
                    "root_name": "Root name",
                },
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "HelmRelease chart versions",
                f'stalewatch_revision_info{{kind="HelmRelease",{SCOPE}}}',
                description="The chart version the HelmChart offers versus the one the release runs.",
                rename={
                    "namespace": "Namespace",
                    "name": "HelmRelease",
                    "revision": "Chart version available",
                    "applied_revision": "Chart version applied",
                },
            )
        )
        .with_panel(
            timeseries_panel(
                "Controller liveness",
                f"stalewatch_controller_up{{{CLUSTER}}}",
                legend="{{namespace}}/{{name}}",
                description="1 while the controller is available and leading.",
            )
        )
        .with_panel(
            timeseries_panel(
                "Stale objects in this stack",
                f"sum(stalewatch_object_stale{{{SCOPE}}} and {in_source})",
                legend="stale",
                description="Objects of this stack whose controller is down.",
            )
        )
    )


def self_health() -> dashboard.Dashboard:
    """Is stalewatch itself seeing the cluster: reachability, sync, watch health, evaluation cost."""
    by_kind = "{{kind}}.{{group}}"
    return (
        dashboard.Dashboard("stalewatch / Self")
        .uid("stalewatch-self")
        .tags(["stalewatch"])
        .refresh("30s")
        .time("now-6h", "now")
        .variables(variables())
        .with_panel(
            stat_panel(
                "API server unreachable",
                f"count(stalewatch_up{{{CLUSTER}}} == 0) or vector(0)",
                description="stalewatch instances that cannot reach the API server.",
            )
        )
        .with_panel(
            stat_panel(
                "Not synced",
                f"count(stalewatch_synced{{{CLUSTER}}} == 0) or vector(0)",
                description="stalewatch instances that have not finished listing every kind.",
            )
        )
        .with_panel(
            stat_panel(
                "Kinds forbidden",
                f"count(stalewatch_kind_forbidden{{{CLUSTER}}} == 1) or vector(0)",
                description="Kinds the API server refuses to list (RBAC).",
            )
        )
        .with_panel(
            stat_panel(
                "Evaluation age",
                f"max(time() - stalewatch_evaluation_timestamp_seconds{{{CLUSTER}}})",
                description="Seconds since the model last evaluated.",
                red_from=300,
                unit="s",
            )
        )
        .with_panel(
            table_panel(
                "Watched kinds",
                f"stalewatch_watched_objects{{{CLUSTER}}}",
                description="Objects in stalewatch's cache, per kind.",
                rename={"group": "Group", "kind": "Kind", "Value": "Objects"},
            )
        )
        .with_panel(
            timeseries_panel(
                "Watch events",
                f"sum by (group, kind, type) (rate(stalewatch_events_total{{{CLUSTER}}}{RATE}))",
                legend=by_kind + " {{type}}",
                description="ADDED/MODIFIED/DELETED events per second.",
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Watch errors",
                f"sum by (group, kind, reason) (rate(stalewatch_watch_errors_total{{{CLUSTER}}}{RATE}))",
                legend=by_kind + " {{reason}}",
                description="Failed watches per second, by reason.",
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Relists",
                f"sum by (group, kind, reason) (increase(stalewatch_relists_total{{{CLUSTER}}}[1h]))",
                legend=by_kind + " {{reason}}",
                description="Full relists per hour, by what forced them.",
            )
        )
        .with_panel(
            timeseries_panel(
                "List requests",
                f"sum by (group, kind, result) (rate(stalewatch_list_requests_total{{{CLUSTER}}}{RATE}))",
                legend=by_kind + " {{result}}",
                description="List calls per second, by result.",
                unit="reqps",
            )
        )
        .with_panel(
            timeseries_panel(
                "Time since last event",
                f"time() - stalewatch_last_event_timestamp_seconds{{{CLUSTER}}}",
                legend=by_kind,
                description="A kind that never changes is fine; one that stops while others move is not.",
                unit="s",
            )
        )
        .with_panel(
            timeseries_panel(
                "Malformed objects",
                f"sum by (group, kind) (increase(stalewatch_malformed_objects_total{{{CLUSTER}}}[1h]))",
                legend=by_kind,
                description="Objects stalewatch could not read, per hour.",
            )
        )
        .with_panel(
            timeseries_panel(
                "Rejected objects",
                f"sum by (reason) (max without (instance, pod) (stalewatch_objects_rejected{{{CLUSTER}}}))",
                legend="{{reason}}",
                description="Objects set aside now, in whole or in part (the findings API lists them).",
            )
        )
        .with_panel(
            timeseries_panel(
                "Evaluation failures",
                f"sum by (instance) (rate(stalewatch_evaluation_failures_total{{{CLUSTER}}}{RATE}))",
                legend="{{instance}}",
                description="Failed evaluations per second; meanwhile the last good one is served, stale.",
                unit="ops",
            )
        )
        .with_panel(
            timeseries_panel(
                "Evaluation duration (p99)",
                "histogram_quantile(0.99, sum by (le) "
                f"(rate(stalewatch_evaluation_duration_seconds_bucket{{{CLUSTER}}}{RATE})))",
                legend="p99",
                description="How long one model evaluation takes.",
                unit="s",
            )
        )
    )


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
