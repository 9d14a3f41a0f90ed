"""The dashboard about stalewatch itself: can it reach the API server, is every watch healthy,
what does an evaluation cost. Its panels are per instance and kind, not per GitOps object.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from watcher.export.grafana import CLUSTER, RATE, stat_panel, table_panel, timeseries_panel, variables


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
