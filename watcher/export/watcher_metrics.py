"""Prometheus metrics about stalewatch itself, rendered from its Telemetry at scrape time.

The names are fixed: alert rules, runbooks and dashboards query them (see docs/metrics.md).
Like the model collector this only renders: the watcher keeps plain counters and flags, and a
kind that stops being watched (its CRD was deleted) vanishes from every series with it.
The core API group is the empty string in the `group` label, as in Kubernetes itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric

from watcher.export.families import Gauge, render_whole
from watcher.telemetry import HEARTBEAT_RESULTS, KindStats, Telemetry

KIND = ("group", "kind")
LISTED_STATES = ("watched", "over_limit", "not_served")


@dataclass(frozen=True, slots=True)
class PerKind:
    """A family with one series per watched kind, or per kind and `label` value when `by` is set."""

    name: str
    counter: bool
    help: str
    value: Callable[[KindStats], float | Mapping[str, int] | None]
    by: str = ""


PER_KIND: tuple[PerKind, ...] = (
    PerKind(
        "stalewatch_kind_synced",
        False,
        "1 once this kind has finished its initial list.",
        lambda s: float(s.synced),
    ),
    PerKind(
        "stalewatch_kind_forbidden",
        False,
        "1 while the API server answers 403 Forbidden for this kind (RBAC).",
        lambda s: float(s.forbidden),
    ),
    PerKind("stalewatch_list_requests", True, "List calls, by result.", lambda s: s.list_requests, "result"),
    PerKind(
        "stalewatch_watch_requests", True, "Watch calls, by result.", lambda s: s.watch_requests, "result"
    ),
    PerKind("stalewatch_relists", True, "Full relists, by what forced them.", lambda s: s.relists, "reason"),
    PerKind(
        "stalewatch_watch_gone",
        True,
        "Watches that expired with 410 Gone (normal; each forces a relist).",
        lambda s: float(s.watch_gone),
    ),
    PerKind(
        "stalewatch_watch_errors",
        True,
        "Watches that failed for any other reason.",
        lambda s: s.watch_errors,
        "reason",
    ),
    PerKind(
        "stalewatch_events",
        True,
        "Watch events received (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).",
        lambda s: s.events,
        "type",
    ),
    PerKind(
        "stalewatch_last_event_timestamp_seconds",
        False,
        "Unix time of the last watch event of this kind (bookmarks included).",
        lambda s: s.last_event,
    ),
    PerKind(
        "stalewatch_malformed_objects",
        True,
        "Objects that could not be read (skipped, the rest goes on); once per object version.",
        lambda s: float(s.malformed),
    ),
    PerKind(
        "stalewatch_objects_rejected",
        False,
        "Objects set aside now, in whole or in part, by reason (listed under rejected in /api/v1/findings).",
        lambda s: s.rejected_now(),
        "reason",
    ),
    PerKind(
        "stalewatch_watched_objects",
        False,
        "Objects of this kind in stalewatch's cache.",
        lambda s: float(s.objects),
    ),
)
"""In exposition order. Counter names lack their `_total` suffix, which the exposition adds."""


class WatcherCollector:
    """Renders a Telemetry on every scrape; register it next to the model collector."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry

    def describe(self) -> Iterable[Metric]:
        return list(_families(Telemetry()))

    def collect(self) -> Iterable[Metric]:
        return list(_families(self._telemetry))


Row = tuple[tuple[str, ...], float]


def _row(row: Row) -> Row:
    return row


GAUGES: dict[str, Gauge[Row]] = {
    spec.name: Gauge(spec.name, spec.help, (*KIND, spec.by) if spec.by else KIND, of=_row)
    for spec in PER_KIND
    if not spec.counter
}
"""The per-kind gauges, written by the model's writer (families.py); counters stay the client's."""
UP = Gauge[Row](
    "stalewatch_up",
    "1 while the Kubernetes API server is reachable (a failed evaluation is"
    " stalewatch_evaluation_failures_total).",
    (),
    of=_row,
)
LISTED = Gauge[Row](
    "stalewatch_listed_kinds",
    "Kinds Kustomizations' inventories list beyond those always watched, by state: watched,"
    " over_limit (listed_kinds_limit) or not_served (no CRD Established); the objects of kinds not"
    " read are stalewatch_listed_objects_unread.",
    ("state",),
    of=_row,
)
SYNCED = Gauge[Row](
    "stalewatch_synced", "1 once every watched kind has finished its initial list.", (), of=_row
)
SCOPE = Gauge[Row](
    "stalewatch_scope_info",
    "1, labelled with where stalewatch looks: mode cluster (cluster-wide lists) or namespaces"
    " (namespace mode: only the namespaces of stalewatch_scope_namespaces; the rest unseen).",
    ("mode",),
    of=_row,
)
SCOPE_NAMESPACES = Gauge[Row](
    "stalewatch_scope_namespaces",
    "How many namespaces namespace mode watches (0: cluster-wide).",
    (),
    of=_row,
)
FORBIDDEN_IN = Gauge[Row](
    "stalewatch_kind_forbidden_namespaces",
    "Namespace mode: how many of its namespaces answer 403 Forbidden for this kind while others"
    " do not (all of them: stalewatch_kind_forbidden); 0 cluster-wide.",
    KIND,
    of=_row,
)
OUT_OF_SCOPE = Gauge[Row](
    "stalewatch_kind_out_of_scope",
    "Namespace mode: 1 for a cluster-scoped kind, read only where the account may; its 403"
    " (stalewatch_kind_forbidden) is the tenant's scope, named on the page, and not alerted.",
    KIND,
    of=_row,
)
HEARTBEAT_READ_SECONDS = Gauge[Row](
    "stalewatch_heartbeat_read_duration_seconds",
    "How long the last read of this controller's /metrics took (fetch and parse).",
    ("controller",),
    of=_row,
)


def _families(telemetry: Telemetry) -> Iterator[Metric]:
    kinds = sorted(telemetry.kinds.copy().items())
    yield render_whole(UP, [((), float(telemetry.up))])
    yield render_whole(SYNCED, [((), float(telemetry.synced))])
    listed = dict(telemetry.listed_kinds)
    yield render_whole(LISTED, [((state,), float(len(listed.get(state, ())))) for state in LISTED_STATES])
    scope = telemetry.scope
    yield render_whole(SCOPE, [((scope.mode,), 1.0)])
    yield render_whole(SCOPE_NAMESPACES, [((), float(len(scope.namespaces)))])
    forbidden_in = telemetry.forbidden_in.copy()
    yield render_whole(FORBIDDEN_IN, [(key, float(len(forbidden_in.get(key, ())))) for key, _ in kinds])
    scoped = telemetry.cluster_scoped.copy()
    yield render_whole(OUT_OF_SCOPE, [(key, 1.0) for key, _ in kinds if key in scoped])
    for spec in PER_KIND:
        rows: list[Row] = []
        for (group, kind), stats in kinds:
            value = spec.value(stats)
            if isinstance(value, Mapping):  # a copy first: the event loop may be counting
                rows += [((group, kind, label), float(count)) for label, count in sorted(dict(value).items())]
            elif value is not None:
                rows.append(((group, kind), value))
        if spec.counter:
            family = CounterMetricFamily(spec.name, spec.help, labels=(*KIND, spec.by) if spec.by else KIND)
            for labels, value in rows:
                family.add_metric(labels, value)
            yield family
        else:
            yield render_whole(GAUGES[spec.name], rows)
    reads = CounterMetricFamily(
        "stalewatch_heartbeat_reads",
        "Reads of each controller's /metrics, by result: ok, or why its heartbeat was unknown"
        f" ({', '.join(r for r in HEARTBEAT_RESULTS if r != 'ok')}).",
        labels=("controller", "result"),
    )
    for controller, results in sorted(telemetry.heartbeat_reads.copy().items()):
        for result, count in sorted(dict(results).items()):
            reads.add_metric((controller, result), float(count))
    yield reads
    yield render_whole(
        HEARTBEAT_READ_SECONDS,
        [((c,), s) for c, s in sorted(telemetry.heartbeat_read_seconds.copy().items())],
    )
    yield CounterMetricFamily(
        "stalewatch_evaluation_failures",
        "Evaluations that raised; while the last one did, the previous evaluation is served, stale.",
        value=float(telemetry.evaluation_failures),
    )
    histogram = telemetry.evaluation
    yield HistogramMetricFamily(
        "stalewatch_evaluation_duration_seconds",
        "Time one evaluation of the model takes.",
        buckets=[(bound, float(count)) for bound, count in histogram.cumulative()],
        sum_value=histogram.total,
    )
