"""Small builders for stalewatch's Grafana panels, on top of grafana-foundation-sdk.

They fix what every stalewatch panel shares: the `datasource` variable, the optional
`cluster` variable, instant tables with chosen columns, and thresholds that turn red on any
problem. The dashboards themselves are in watcher/export/gitops_dashboards.py and
self_dashboard.py; watcher/export/dashboards.py lists and renders them.
"""

from __future__ import annotations

from collections.abc import Mapping

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
CLUSTER = 'cluster=~"$cluster"'
RATE = "[$__rate_interval]"
SCOPE = f'{CLUSTER},namespace=~"$namespace"'
"""Label matchers every object panel applies: the chosen cluster(s) and namespace(s)."""

VARIABLE_DEFAULTS: Mapping[str, str] = {
    "cluster": ".*",
    "namespace": ".*",
    "source": ".*",
    "__rate_interval": "5m",
}
"""What each dashboard variable means when "All" is chosen, to run the queries outside Grafana."""


def variables(*extra: dashboard.QueryVariable) -> list[Builder[model.VariableModel]]:
    return [
        dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        label_variable("cluster", "stalewatch_evaluation_timestamp_seconds", "Cluster"),
        *extra,
    ]


def label_variable(name: str, metric: str, label: str) -> dashboard.QueryVariable:
    """A multi-select over a label's values; All is `.*`, so it also matches a missing label."""
    return (
        dashboard.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(f"label_values({metric}, {name})")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(model.VariableOption(selected=True, text="All", value="$__all"))
    )


def query(expr: str, *, legend: str = "", table_format: bool = False, ref: str = "A") -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    if table_format:
        return query.format(PromQueryFormat.TABLE).instant()
    return query.legend_format(legend).range()


def stat_panel(
    title: str, expr: str, *, description: str, red_from: float = 1, unit: str = "short"
) -> stat.Panel:
    steps = [model.Threshold(value=None, color="green"), model.Threshold(value=red_from, color="red")]
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .with_target(query(expr, table_format=False))
        .unit(unit)
        .thresholds(dashboard.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(steps))
        .height(4)
        .span(6)
    )


def table_panel(
    title: str, expr: str, *, description: str, rename: Mapping[str, str], width: int = 24
) -> table.Panel:
    """An instant table of the series' labels; `rename` picks and names the columns, in order."""
    organize = model.DataTransformerConfig(
        id_val="organize",
        options={
            "excludeByName": {"Time": True},
            "indexByName": {column: i for i, column in enumerate(rename)},
            "renameByName": dict(rename),
        },
    )
    keep = model.DataTransformerConfig(
        id_val="filterFieldsByName", options={"include": {"names": list(rename)}}
    )
    return (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .with_target(query(expr, table_format=True))
        .transformations([keep, organize])
        .height(9)
        .span(width)
    )


def timeseries_panel(
    title: str, expr: str, *, legend: str, description: str, unit: str = "short"
) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .with_target(query(expr, legend=legend))
        .unit(unit)
        .height(8)
        .span(12)
    )
