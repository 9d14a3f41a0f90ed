"""The fleet's PromQL: one instant query per thing shown, each bounded, over the `stalewatch_*`
series (docs/metrics.md) and the cluster label the store adds (an external label or relabelling).

The bounds: the per-cluster queries return one series per cluster; roots are `topk` by severity
(critical first, so a bound never hides a critical root behind an info one) with their exact
counts per cluster and severity beside them; the version matrix keeps `topk` objects, those with
the most distinct applied revisions across clusters first (`matrix_rows`), whose cells a second,
narrow query then reads (`matrix_query`). The filters are regular expressions in label matchers,
so the store does the filtering.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.export.alerts import HA_LABELS

MAX_ROOTS = 500
"""Root findings fetched, across the fleet, most severe first."""
MAX_ROWS = 300
"""Objects (kind/namespace/name) in the version matrix, skewed first."""
WINDOWS = (("5m", "1s"), ("1h", "15s"))
"""Subqueries (span, resolution) that find the time of a cluster's last sample once it stopped
reporting: to the second for five minutes, to 15 s for an hour (cheaper). While it reports, the
time is its current sample's."""
LOOKBACK = WINDOWS[-1][0]
"""How far back a cluster that stopped reporting is still listed (as unknown)."""

SEVERITY_WEIGHT: Mapping[str, int] = {"critical": 3, "warning": 2, "info": 1}


@dataclass(frozen=True, slots=True)
class Answer:
    """One instant query's answer: its vector (each `{"metric": {...}, "value": [t, "v"]}`), or
    why there is none (prom.py says it in words), and the store's warnings."""

    result: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Filters:
    """Regular expressions (RE2, fully anchored, as PromQL matches them) from the query string;
    empty means all. `cluster` applies to everything; `namespace` and `name` to the objects
    listed (roots, matrix), never to a cluster's state, which no filter may turn healthy."""

    name: str = ""
    namespace: str = ""
    cluster: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "namespace": self.namespace, "cluster": self.cluster}


def quote(text: str) -> str:
    """A PromQL string literal holding `text` exactly."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


ROOT, SYMPTOM = 'root="true"', 'root="false"'


_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")
"""What RE2 gives a meaning to; escaped, a name matches itself (RE2 refuses some of Python's
re.escape escapes, such as of a space)."""
_ESCAPED = r"\\\1"


def _matchers(*parts: str) -> str:
    return "{" + ",".join(part for part in parts if part) + "}"


def _in_clusters(cluster_label: str, filters: Filters) -> str:
    return f"{cluster_label}=~{quote(filters.cluster)}" if filters.cluster else ""


def queries(*, cluster_label: str, filters: Filters) -> dict[str, str]:
    """Query name -> PromQL. `cluster_label` must be a legacy label name (checked by the CLI)."""
    c = _in_clusters(cluster_label, filters)
    ns = f"namespace=~{quote(filters.namespace)}" if filters.namespace else ""
    name = f"name=~{quote(filters.name)}" if filters.name else ""
    one = f"max without ({HA_LABELS})"
    by = f"by ({cluster_label})"
    root = f"{cluster_label}, root_kind, root_namespace, root_name"
    up = f"stalewatch_up{_matchers(c)}"

    def roots_of(severity: str) -> str:
        matchers = _matchers(ROOT, f'severity="{severity}"', c, ns, name)
        return f"{SEVERITY_WEIGHT[severity]} * {one} (stalewatch_finding{matchers})"

    revision = f"stalewatch_revision_info{_matchers(c, ns, name)}"  # a replica's twin: the builder keeps one
    distinct = (
        f"count by (kind, namespace, name) (count by (kind, namespace, name, applied_revision) ({revision}))"
    )
    return {
        "up": f"max {by} ({up})",
        "synced": f"max {by} (stalewatch_synced{_matchers(c)})",
        "last_sample": " or ".join(
            [
                f"max {by} (timestamp({up}))",
                *(f"max {by} (max_over_time(timestamp({up})[{span}:{step}]))" for span, step in WINDOWS),
            ]
        ),
        "roots": f"topk({MAX_ROOTS}, {' or '.join(roots_of(s) for s in SEVERITY_WEIGHT)})",
        "root_counts": (
            f"count by ({cluster_label}, severity) ({one} (stalewatch_finding{_matchers(ROOT, c)}))"
        ),
        "blast_radius": (
            f"topk({MAX_ROOTS}, count by ({root}) (count by ({root}, kind, namespace, name) "
            f"(stalewatch_finding{_matchers(SYMPTOM, c)})))"
        ),
        # != 1, not == 0: a controller neither up nor down (NaN) comes back, read as unreadable
        "controllers_down": f"{one} (stalewatch_controller_up{_matchers(c)}) != 1",
        "down_reasons": f"{one} (stalewatch_controller_down_reason{_matchers(c)}) == 1",
        "matrix_rows": f"topk({MAX_ROWS}, {distinct})",
    }


def matrix_query(rows: Sequence[dict[str, Any]], *, cluster_label: str, filters: Filters) -> str:
    """The cells of the matrix rows `matrix_rows` answered: a selection narrowed by their names
    and namespaces (index lookups), instead of a second pass over every object's series. It may
    also select an object of one row's name in another row's namespace; the builder drops it."""

    def alternatives(label: str) -> str:
        values = sorted({str(row["metric"].get(label, "")) for row in rows})
        return f"{label}=~{quote('|'.join(_RE2_SPECIAL.sub(_ESCAPED, v) for v in values))}"

    c = _in_clusters(cluster_label, filters)
    return f"stalewatch_revision_info{_matchers(c, alternatives('namespace'), alternatives('name'))}"
