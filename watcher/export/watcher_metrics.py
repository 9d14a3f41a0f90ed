"""Prometheus metrics about stalewatch itself, rendered from its Telemetry at scrape time.

The names are fixed: alert rules, runbooks and dashboards query them (see docs/metrics.md).
Like the model collector this only renders: the watcher keeps plain counters and flags, and a
kind that stops being watched (its CRD was deleted) vanishes from every series with it.
The core API group is the empty string in the `group` label, as in Kubernetes itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from watcher.telemetry import KindKey, KindStats, Telemetry

KIND = ("group", "kind")
_F = TypeVar("_F", GaugeMetricFamily, CounterMetricFamily)

NAMES = (
    "stalewatch_up",
    "stalewatch_synced",
    "stalewatch_kind_synced",
    "stalewatch_kind_forbidden",
    "stalewatch_list_requests",
    "stalewatch_watch_requests",
    "stalewatch_relists",
    "stalewatch_watch_gone",
    "stalewatch_watch_errors",
    "stalewatch_events",
    "stalewatch_last_event_timestamp_seconds",
    "stalewatch_malformed_objects",
    "stalewatch_watched_objects",
    "stalewatch_evaluation_duration_seconds",
)
"""Counters without their `_total` suffix, which the exposition adds."""


class WatcherCollector:
    """Renders a Telemetry on every scrape; register it next to the model collector."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry

    def describe(self) -> Iterable[Metric]:
        return list(_families(Telemetry()))

    def collect(self) -> Iterable[Metric]:
        return list(_families(self._telemetry))


def _families(telemetry: Telemetry) -> Iterator[Metric]:
    kinds = sorted(telemetry.kinds.copy().items())
    yield GaugeMetricFamily(
        "stalewatch_up", "1 while the Kubernetes API server is reachable.", value=float(telemetry.up)
    )
    yield GaugeMetricFamily(
        "stalewatch_synced",
        "1 once every watched kind has finished its initial list.",
        value=float(telemetry.synced),
    )
    yield _per_kind(
        GaugeMetricFamily(
            "stalewatch_kind_synced", "1 once this kind has finished its initial list.", labels=KIND
        ),
        kinds,
        lambda s: float(s.synced),
    )
    yield _per_kind(
        GaugeMetricFamily(
            "stalewatch_kind_forbidden",
            "1 while the API server answers 403 Forbidden for this kind (RBAC).",
            labels=KIND,
        ),
        kinds,
        lambda s: float(s.forbidden),
    )
    yield _by_label(
        CounterMetricFamily(
            "stalewatch_list_requests", "List calls, by result.", labels=(*KIND, "result")
        ),
        kinds,
        lambda s: s.list_requests,
    )
    yield _by_label(
        CounterMetricFamily(
            "stalewatch_watch_requests", "Watch calls, by result.", labels=(*KIND, "result")
        ),
        kinds,
        lambda s: s.watch_requests,
    )
    yield _by_label(
        CounterMetricFamily(
            "stalewatch_relists", "Full relists, by what forced them.", labels=(*KIND, "reason")
        ),
        kinds,
        lambda s: s.relists,
    )
    yield _per_kind(
        CounterMetricFamily(
            "stalewatch_watch_gone",
            "Watches that expired with 410 Gone (normal; each forces a relist).",
            labels=KIND,
        ),
        kinds,
        lambda s: float(s.watch_gone),
    )
    yield _by_label(
        CounterMetricFamily(
            "stalewatch_watch_errors",
            "Watches that failed for any other reason.",
            labels=(*KIND, "reason"),
        ),
        kinds,
        lambda s: s.watch_errors,
    )
    yield _by_label(
        CounterMetricFamily(
            "stalewatch_events",
            "Watch events received (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).",
            labels=(*KIND, "type"),
        ),
        kinds,
        lambda s: s.events,
    )
    last = GaugeMetricFamily(
        "stalewatch_last_event_timestamp_seconds",
        "Unix time of the last watch event of this kind (bookmarks included).",
        labels=KIND,
    )
    for (group, kind), stats in kinds:
        if stats.last_event is not None:
            last.add_metric([group, kind], stats.last_event)
    yield last
    yield _per_kind(
        CounterMetricFamily(
            "stalewatch_malformed_objects",
            "Objects that could not be read (skipped, the rest goes on); once per object version.",
            labels=KIND,
        ),
        kinds,
        lambda s: float(s.malformed),
    )
    yield _per_kind(
        GaugeMetricFamily(
            "stalewatch_watched_objects", "Objects of this kind in stalewatch's cache.", labels=KIND
        ),
        kinds,
        lambda s: float(s.objects),
    )
    histogram = telemetry.evaluation
    yield HistogramMetricFamily(
        "stalewatch_evaluation_duration_seconds",
        "Time one evaluation of the model takes.",
        buckets=[(bound, float(count)) for bound, count in histogram.cumulative()],
        sum_value=histogram.total,
    )


def _per_kind(family: _F, kinds: list[tuple[KindKey, KindStats]], value: Callable[[KindStats], float]) -> _F:
    for (group, kind), stats in kinds:
        family.add_metric([group, kind], value(stats))
    return family


def _by_label(
    family: CounterMetricFamily,
    kinds: list[tuple[KindKey, KindStats]],
    counts: Callable[[KindStats], Mapping[str, int]],
) -> CounterMetricFamily:
    """One series per label value seen (a copy first: the event loop may be counting)."""
    for (group, kind), stats in kinds:
        for label, count in sorted(dict(counts(stats)).items()):
            family.add_metric([group, kind, label], float(count))
    return family
