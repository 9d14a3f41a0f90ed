"""The fleet, built from the store's answers and a clock: pure, no I/O (the answers come in).

Per cluster, the first rule of CLUSTER_RULES that applies decides its state, in the order that
decides whether anything else can be trusted: a cluster whose stalewatch is not reporting, whose
answers the store could not give, or one of whose samples cannot be read (samples.py: NaN, Inf,
a time out of range, a wrong type) is *unknown* (never green); one whose stalewatch
reports but cannot reach its API server, or has not listed everything, is *stale*; then the most
severe root cause; *healthy* only when everything was asked, answered and clean.

The version matrix puts each Kustomization / HelmRelease / Terraform (kind/namespace/name)
against each cluster: the revision it applied (chart version for a HelmRelease) and the one its
source offers. A cell is marked when it differs from the row's majority (every cell of a row
whose revisions tie), or when it lags its own source. The same root cause in many clusters
(same type, object and controller-down reason) is one line listing the clusters.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from watcher.fleet.queries import LOOKBACK, MAX_ROWS, SEVERITY_WEIGHT, Answer, Filters
from watcher.fleet.samples import Unreadable, count, flag, labels, moment
from watcher.model.ingest.objects import format_age
from watcher.model.types import rfc3339

OBJECT = ("kind", "namespace", "name")
STATES = ("unknown", "stale", "critical", "warning", "info", "healthy")
"""Cluster states, worst first; only `healthy` is green."""


@dataclass(frozen=True, slots=True)
class ControllerDown:
    namespace: str
    name: str
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    state: str
    why: str
    url: str | None
    up: bool | None
    synced: bool | None
    last_sample: datetime | None
    roots: Mapping[str, int]
    """Root causes by severity, counted exactly (not bounded)."""
    controllers_down: Sequence[ControllerDown]
    unreadable: Mapping[str, str]
    """Query name -> why its sample for this cluster could not be read; any makes it unknown."""


@dataclass(frozen=True, slots=True)
class Where:
    cluster: str
    url: str | None
    severity: str
    blast_radius: int | None
    """None when its sample could not be read."""


@dataclass(frozen=True, slots=True)
class RootGroup:
    """One root cause, as many clusters have it: type, object, and the controller's down reason."""

    type: str
    severity: str
    kind: str
    namespace: str
    name: str
    reason: str
    clusters: Sequence[Where]


@dataclass(frozen=True, slots=True)
class Cell:
    applied_revision: str
    revision: str
    source: str
    off_majority: bool
    lags_source: bool


@dataclass(frozen=True, slots=True)
class Row:
    kind: str
    namespace: str
    name: str
    majority: str | None
    """The applied revision most clusters run; None when none has more clusters than another."""
    cells: Mapping[str, Cell]


@dataclass(frozen=True, slots=True)
class Fleet:
    now: datetime
    prometheus: str
    filters: Filters
    errors: Mapping[str, str]
    """Query name -> why the store gave no answer; every panel that needs one says so."""
    warnings: Sequence[str]
    clusters: Sequence[Cluster]
    roots: Sequence[RootGroup]
    columns: Sequence[str]
    rows: Sequence[Row]
    matrix_bounded: bool
    """True when the matrix holds queries.MAX_ROWS objects: more may match the filters."""
    healthy: bool = field(init=False)

    def __post_init__(self) -> None:
        clean = not self.errors and not self.warnings and bool(self.clusters)
        object.__setattr__(self, "healthy", clean and all(c.state == "healthy" for c in self.clusters))

    def to_dict(self) -> dict[str, Any]:
        """The /api/v1/fleet document (docs/operations.md#the-fleet-view describes it)."""
        document = asdict(self)
        document["now"] = rfc3339(self.now)
        for cluster in document["clusters"]:
            moment = cluster["last_sample"]
            cluster["last_sample"] = rfc3339(moment)
            cluster["age_seconds"] = None if moment is None else round((self.now - moment).total_seconds(), 3)
        return document


@dataclass(frozen=True, slots=True)
class Facts:
    """What the store said about one cluster, and which of its questions it could not answer."""

    up: bool | None
    synced: bool | None
    last_sample: datetime | None
    roots: Mapping[str, int]
    down: Sequence[ControllerDown]
    unreadable: Mapping[str, str]
    errors: Mapping[str, str]
    now: datetime
    stale_after: float


def _unasked(f: Facts) -> tuple[str, str] | None:
    for query in ("up", "last_sample"):
        if query in f.errors:
            return "unknown", f"the store did not answer ({f.errors[query]})"
    return None


def _unreadable(f: Facts) -> tuple[str, str] | None:
    if f.unreadable:
        said = "; ".join(f"{query} {why}" for query, why in f.unreadable.items())
        return "unknown", f"its samples cannot be read: {said}"
    return None


def _not_reporting(f: Facts) -> tuple[str, str] | None:
    if f.up is not None:
        return None
    if f.last_sample is None:
        return "unknown", f"not reporting: no sample in the last {LOOKBACK}"
    return "unknown", f"not reporting: last sample {format_age(f.last_sample, f.now)}"


def _too_old(f: Facts) -> tuple[str, str] | None:
    if f.last_sample is not None and (f.now - f.last_sample).total_seconds() > f.stale_after:
        return "unknown", f"last sample {format_age(f.last_sample, f.now)}, older than {f.stale_after:g}s"
    return None


def _api_unreachable(f: Facts) -> tuple[str, str] | None:
    if f.up is False:
        return "stale", "its stalewatch cannot reach the Kubernetes API server: last known state"
    return None


def _unsynced(f: Facts) -> tuple[str, str] | None:
    if "synced" in f.errors:
        return "unknown", f"whether it is synced is not known ({f.errors['synced']})"
    if not f.synced:
        return "stale", "its stalewatch has not finished listing the cluster"
    return None


def _unjudged(f: Facts) -> tuple[str, str] | None:
    for query, what in (("root_counts", "root causes"), ("controllers_down", "controllers")):
        if query in f.errors:
            return "unknown", f"its {what} could not be read ({f.errors[query]})"
    return None


def _worst_root(f: Facts) -> tuple[str, str] | None:
    for severity in SEVERITY_WEIGHT:
        if f.roots.get(severity):
            counts = ", ".join(f"{f.roots[s]} {s}" for s in SEVERITY_WEIGHT if f.roots.get(s))
            return severity, f"root causes: {counts}"
    return None


def _controllers_down(f: Facts) -> tuple[str, str] | None:
    if f.down:
        return "warning", "controllers down: " + ", ".join(f"{d.namespace}/{d.name}" for d in f.down)
    return None


CLUSTER_RULES: tuple[Callable[[Facts], tuple[str, str] | None], ...] = (
    _unasked,
    _unreadable,
    _not_reporting,
    _too_old,
    _api_unreachable,
    _unsynced,
    _unjudged,
    _worst_root,
    _controllers_down,
)
"""In order; the first that applies gives the cluster's state and why. None apply: healthy."""


def judge(facts: Facts) -> tuple[str, str]:
    for rule in CLUSTER_RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    return "healthy", "up, synced, no root cause"


def build(
    answers: Mapping[str, Answer],
    *,
    now: datetime,
    cluster_label: str,
    prometheus: str,
    filters: Filters,
    stale_after: float,
    urls: Mapping[str, str],
) -> Fleet:
    """The fleet from the answers to queries.queries() (by name). Clusters named in `urls` are
    listed even when the store has nothing of them (then unknown)."""
    errors = {name: a.error for name, a in answers.items() if a.error is not None}
    warnings = sorted({w for a in answers.values() for w in a.warnings})

    def of(name: str) -> Sequence[dict[str, Any]]:
        return answers[name].result if name in answers else ()

    up = read(of("up"), flag, cluster_label)
    synced = read(of("synced"), flag, cluster_label)
    last = read(of("last_sample"), lambda s: moment(s, now=now), cluster_label)
    counts = read(of("root_counts"), count, cluster_label, "severity")
    running = read(of("controllers_down"), flag, cluster_label, "namespace", "name")
    reasons = {
        labels(s, cluster_label, "namespace", "name"): labels(s, "reason")[0] for s in of("down_reasons")
    }
    kinds = {
        labels(s, cluster_label, "namespace", "name"): labels(s, "kind")[0] for s in of("controllers_down")
    }
    unreadable: dict[str, dict[str, str]] = defaultdict(dict)
    for query, readings in (("up", up), ("synced", synced), ("last_sample", last)):
        for (name,), reading in readings.items():
            if isinstance(reading, Unreadable):
                unreadable[name][query] = str(reading)
    roots: dict[str, dict[str, int]] = defaultdict(dict)
    for (name, severity), counted in counts.items():
        if isinstance(counted, Unreadable):
            unreadable[name].setdefault("root_counts", f"{severity or '(no severity)'} {counted}")
        else:
            roots[name][severity] = counted
    down: dict[str, list[ControllerDown]] = defaultdict(list)
    for key, available in running.items():
        if isinstance(available, Unreadable):
            unreadable[key[0]].setdefault("controllers_down", f"{key[1]}/{key[2]} {available}")
        elif not available:
            down[key[0]].append(ControllerDown(key[1], key[2], kinds[key], reasons.get(key, "")))
    named = {n for n in urls if _matches(filters.cluster, n)}
    seen = (key[0] for readings in (up, synced, last, counts, running) for key in readings)
    clusters = []
    for name in sorted({*seen, *named}):
        facts = Facts(
            up=_known(up.get((name,))),
            synced=_known(synced.get((name,))),
            last_sample=_known(last.get((name,))),
            roots=roots.get(name, {}),
            down=sorted(down.get(name, []), key=lambda d: (d.namespace, d.name)),
            unreadable=unreadable.get(name, {}),
            errors=errors,
            now=now,
            stale_after=stale_after,
        )
        state, why = judge(facts)
        clusters.append(
            Cluster(
                name,
                state,
                why,
                urls.get(name),
                facts.up,
                facts.synced,
                facts.last_sample,
                dict(facts.roots),
                facts.down,
                dict(facts.unreadable),
            )
        )
    clusters.sort(key=lambda c: (STATES.index(c.state), c.name))
    wanted = {labels(r, *OBJECT) for r in of("matrix_rows")}
    columns, rows = matrix(of("matrix"), cluster_label=cluster_label, wanted=wanted)
    return Fleet(
        now=now,
        prometheus=prometheus,
        filters=filters,
        errors=errors,
        warnings=warnings,
        clusters=clusters,
        roots=group_roots(of("roots"), of("blast_radius"), reasons, cluster_label=cluster_label, urls=urls),
        columns=columns,
        rows=rows,
        matrix_bounded=len(wanted) >= MAX_ROWS,
    )


Read = TypeVar("Read")


def read(
    samples: Iterable[dict[str, Any]], reader: Callable[[dict[str, Any]], Read | Unreadable], *key: str
) -> dict[tuple[str, ...], Read | Unreadable]:
    """Each sample's value by the labels `key` (the cluster's first), read by `reader`. A key the
    answer repeats is unreadable: the query gives one sample per key, so which one is true is not
    known."""
    readings: dict[tuple[str, ...], Read | Unreadable] = {}
    repeated: Counter[tuple[str, ...]] = Counter()
    for sample in samples:
        label = labels(sample, *key)
        repeated[label] += 1
        readings[label] = reader(sample)
    for label, times in repeated.items():
        if times > 1:
            readings[label] = Unreadable(f"{times} samples", "one sample")
    return readings


def _known(value: Read | Unreadable | None) -> Read | None:
    return None if isinstance(value, Unreadable) else value


def group_roots(
    roots: Sequence[dict[str, Any]],
    blast: Sequence[dict[str, Any]],
    reasons: Mapping[tuple[str, ...], str],
    *,
    cluster_label: str,
    urls: Mapping[str, str],
) -> list[RootGroup]:
    """Root findings grouped across clusters by (type, kind, namespace, name, down reason); the
    most severe first, then those in the most clusters."""
    radius = read(blast, count, cluster_label, "root_kind", "root_namespace", "root_name")
    groups: dict[tuple[str, ...], list[Where]] = defaultdict(list)
    for s in roots:
        cluster, kind, namespace, name, type_, severity = labels(
            s, cluster_label, *OBJECT, "type", "severity"
        )
        reason = reasons.get((cluster, namespace, name), "") if type_ == "ControllerDown" else ""
        blast_radius = _known(radius.get((cluster, kind, namespace, name), 0))
        where = Where(cluster, urls.get(cluster), severity, blast_radius)
        groups[(type_, kind, namespace, name, reason)].append(where)
    built = []
    for (type_, kind, namespace, name, reason), wheres in groups.items():
        wheres.sort(key=lambda w: w.cluster)
        severity = min((w.severity for w in wheres), key=_rank)
        built.append(RootGroup(type_, severity, kind, namespace, name, reason, wheres))
    built.sort(key=lambda g: (_rank(g.severity), -len(g.clusters), g.type, g.kind, g.namespace, g.name))
    return built


def matrix(
    series: Sequence[dict[str, Any]], *, cluster_label: str, wanted: set[tuple[str, ...]]
) -> tuple[list[str], list[Row]]:
    """(clusters, rows) of the `wanted` objects: skewed rows first, then rows with a cell lagging
    its source, then by name."""
    seen: dict[tuple[str, ...], dict[str, dict[str, str]]] = defaultdict(dict)
    for s in series:
        m, key = s["metric"], labels(s, *OBJECT)
        if key not in wanted:
            continue
        seen[key].setdefault(str(m.get(cluster_label, "")), m)  # the first wins, as on /metrics
    columns = sorted({c for cells in seen.values() for c in cells})
    rows = []
    for (kind, namespace, name), cells in seen.items():
        applied = Counter(m.get("applied_revision", "") for m in cells.values() if m.get("applied_revision"))
        ranked = applied.most_common(2)
        majority = ranked[0][0] if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
        built = {
            c: Cell(
                m.get("applied_revision", ""),
                m.get("revision", ""),
                m.get("source", ""),
                off_majority=len(applied) > 1 and m.get("applied_revision", "") != majority,
                lags_source=m.get("applied_revision", "") != m.get("revision", ""),
            )
            for c, m in sorted(cells.items())
        }
        rows.append(Row(kind, namespace, name, majority, built))
    rows.sort(
        key=lambda r: (
            not _skewed(r),
            not any(c.lags_source for c in r.cells.values()),
            r.kind,
            r.namespace,
            r.name,
        )
    )
    return columns, rows


def _matches(pattern: str, name: str) -> bool:
    """Whether a cluster named only by a flag passes the cluster filter the store applied to the
    others (Python's re standing in for RE2; a pattern it cannot read lets the name through)."""
    try:
        return not pattern or re.fullmatch(pattern, name) is not None
    except re.error:
        return True


def _skewed(row: Row) -> bool:
    return any(cell.off_majority for cell in row.cells.values())


def _rank(severity: str) -> int:
    return -SEVERITY_WEIGHT.get(severity, 0)
