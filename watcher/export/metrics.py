"""Prometheus metrics rendered from the latest Evaluation at scrape time.

The model is computed when something changes; this collector only *renders* the
Evaluation it is handed, so a scrape does no I/O. There are no labelled Gauges to
keep in sync: every scrape is built from scratch, so the series of a deleted object,
a cleared finding or a removed controller vanish with it instead of lingering until
someone remembers to call remove().

Conventions follow kube-state-metrics: enumerations are StateSets rendered as gauges
with one series per state (1 for the current state, 0 for the rest), facts that are
strings go into an `_info` gauge whose value is 1, times are `_timestamp_seconds`,
and free text (messages) never goes into a label.

Root-cause labels: every finding series carries root_type/root_kind/root_namespace/
root_name naming the root cause it belongs to. A root finding names ITSELF there
(with root="true"), so Alertmanager can inhibit a symptom alert while its root alert
fires with a plain `equal: [cluster, root_kind, root_namespace, root_name]`.

Each family is declared once below (families.py writes its text and its samples from that); what
a family about findings or policy violations shows of them is read in finding_rows.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from watcher.export.families import Family, Gauge, Rendered, StateSet, Values, render_whole
from watcher.export.families import render as render  # what /metrics calls
from watcher.export.families import text_format as text_format
from watcher.export.finding_rows import (
    OBJECT_LABELS,
    Rooted,
    at_risk,
    denied,
    fights,
    orphaned,
    risked_objects,
    rooted,
    violation_labels,
    violations,
    where,
)
from watcher.export.itemized import Itemized
from watcher.model.cluster.compliance import StackViolations, Unread
from watcher.model.evaluation import Evaluation
from watcher.model.types import (
    CONTROLLER_DOWN_REASONS,
    ControllerHealth,
    HeartbeatState,
    ObjectHealth,
    RevisionInfo,
    Status,
    Subject,
)

EvaluationSource = Callable[[], Evaluation | None]
_Keyed = TypeVar("_Keyed", ObjectHealth, ControllerHealth, RevisionInfo)

STATUSES: tuple[str, ...] = tuple(str(s) for s in Status)

DOWN_REASONS: tuple[str, ...] = tuple(str(r) for r in CONTROLLER_DOWN_REASONS)
"""The fixed states of stalewatch_controller_down_reason; a fixed set keeps the series count bounded."""

HEARTBEAT_STATES: tuple[str, ...] = tuple(str(s) for s in HeartbeatState)

CONTROLLER_LABELS = ("namespace", "name", "kind")
FINDING_LABELS = (
    "type",
    "severity",
    *OBJECT_LABELS,
    "root",
    "root_type",
    "root_kind",
    "root_namespace",
    "root_name",
)


_controller: Callable[[Subject], Values] = itemgetter(*CONTROLLER_LABELS)


@dataclass(frozen=True, slots=True)
class _Group:
    """Families built from one of the model's lists. The model hands out the same list until
    something in it changes, so a group is rebuilt only then; `per_item` ones (an entry per
    GitOps object, the first with given labels winning) keep each unchanged block of entries'
    text too (itemized.py), and `prepare` does not apply to them."""

    name: str
    of: Callable[[Evaluation], Sequence[Any]]
    families: tuple[Family, ...]
    per_item: bool = False
    prepare: Callable[[Sequence[Any]], list[Any]] = list


def _where(item: _Keyed) -> Values:
    return where(item.subject)


def _beating(items: Iterable[ControllerHealth]) -> list[ControllerHealth]:
    """The controllers with a heartbeat: none while no reader feeds the model."""
    return _unique(c for c in items if c.heartbeat is not None)


def _last_reconcile(c: ControllerHealth) -> tuple[Values, float] | None:
    moved = c.heartbeat.last_reconciled if c.heartbeat is not None else None
    return None if moved is None else (_controller(c.subject)[:2], moved.timestamp())


def _overdue(c: ControllerHealth) -> tuple[Values, float] | None:
    beat = c.heartbeat
    if beat is None or beat.state is HeartbeatState.UNKNOWN:
        return None  # not known: never 0
    return _controller(c.subject)[:2], float(beat.overdue)


def _unique(items: Iterable[_Keyed]) -> list[_Keyed]:
    """First one wins: two series with the same labels would make Prometheus drop samples."""
    seen: set[Values] = set()
    kept: list[_Keyed] = []
    for item in items:
        key = _where(item)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


GROUPS: tuple[_Group, ...] = (
    _Group(
        "findings",
        lambda e: e.findings,
        (
            Gauge[Rooted](
                "stalewatch_finding",
                "1 per active finding. root_* name the root cause it belongs to; a root finding "
                '(root="true") names itself there.',
                FINDING_LABELS,
                of=lambda f: (f.values, 1.0),
            ),
            Gauge[Rooted](
                "stalewatch_finding_since_timestamp_seconds",
                "Unix time since when the finding's condition has held (omitted when unknown).",
                ("type", *OBJECT_LABELS),
                of=lambda f: None if f.since is None else ((f.values[0], *f.values[2:5]), f.since),
            ),
        ),
        prepare=rooted,
    ),
    _Group(
        "policies",
        lambda e: e.findings,
        (
            Gauge[Values](
                "stalewatch_policy_denied",
                "1 per policy that denies a write a controller keeps retrying (a PolicyDenied finding): "
                "engine is gatekeeper, kyverno or vap; kind/namespace/name is the object that keeps trying.",
                ("engine", "policy", *OBJECT_LABELS),
                of=lambda row: (row, 1.0),
            ),
        ),
        prepare=denied,
    ),
    _Group(
        "crd_risks",
        lambda e: e.findings,
        (
            Gauge[Values](
                "stalewatch_crd_ownership_risk",
                "1 per installer and foreign controller of each CRD at risk (a CRDOwnershipRisk finding): "
                "removing or upgrading installer deletes crd, which controller (installed by "
                "controller_installer) reconciles; controller is empty when two installers claim it.",
                ("crd", "installer", "controller", "controller_installer"),
                of=lambda row: (row, 1.0),
            ),
        ),
        prepare=at_risk,
    ),
    _Group(
        "crd_risk_objects",
        lambda e: e.findings,
        (
            Gauge[tuple[str, int]](
                "stalewatch_crd_ownership_risk_objects",
                "Custom resources that would be deleted with a CRD at risk (a CRDOwnershipRisk finding).",
                ("crd",),
                of=lambda row: ((row[0],), float(row[1])),
            ),
        ),
        prepare=risked_objects,
    ),
    _Group(
        "orphans",
        lambda e: e.findings,
        (
            Gauge[tuple[Values, float]](
                "stalewatch_prune_orphans",
                "Objects a Kustomization applied, no longer lists and did not prune (PruneOrphan findings),"
                " per Kustomization: reason is NotInInventory, PruneDisabled (spec.prune: false, by design)"
                " or KustomizationGone.",
                ("namespace", "name", "reason"),
                of=lambda row: row,
            ),
        ),
        prepare=orphaned,
    ),
    _Group(
        "compliance",
        violations,
        (
            Gauge[StackViolations](
                "stalewatch_policy_violations",
                "Violations an audit reports (Gatekeeper constraints' status, wgpolicyk8s.io policy "
                "reports), per policy and the stack owning the objects: engine gatekeeper, kyverno, vap or a "
                'report\'s source; result fail, warn or error; stack_kind="unattributed" when no stack '
                "owns them or the audit counts them without listing them.",
                (
                    "engine",
                    "policy_kind",
                    "policy",
                    "enforcement_action",
                    "result",
                    "stack_kind",
                    "stack_namespace",
                    "stack_name",
                ),
                of=lambda row: (violation_labels(row), float(row.count)),
            ),
        ),
    ),
    _Group(
        "policy_unread",
        lambda e: e.compliance.unread if e.compliance is not None else (),
        (
            Gauge[Unread](
                "stalewatch_policy_objects_not_judged",
                "1 per Gatekeeper constraint or policy report whose violation counts cannot be read (a"
                " totalViolations or summary count that is no integer, past int64 or negative): its"
                " violations are unknown, never none (analyze and the page say why).",
                ("group", "kind", "namespace", "name"),
                of=lambda u: ((u.obj.group, u.obj.kind, u.obj.namespace, u.obj.name), 1.0),
            ),
        ),
    ),
    _Group(
        "writers",
        lambda e: e.findings,
        (
            Gauge[tuple[Values, float]](
                "stalewatch_conflicting_writers",
                "Per field manager of each ConflictingWriters finding, how many of its turns flipped "
                "fields within the window (conflicting_writers_window); kind/namespace/name is the object.",
                ("manager", *OBJECT_LABELS),
                of=lambda row: row,
            ),
        ),
        prepare=fights,
    ),
    _Group(
        "objects",
        lambda e: e.objects,
        (
            StateSet[ObjectHealth](
                "stalewatch_object_status",
                "kstatus of a GitOps object as a StateSet: 1 for its current status, 0 for the others.",
                (*OBJECT_LABELS, "status"),
                states=STATUSES,
                of=lambda o: (where(o.subject), str(o.status)),
            ),
            Gauge[ObjectHealth](
                "stalewatch_object_stale",
                "1 when the object's controller is down, so its status is a cached report, not a live one.",
                OBJECT_LABELS,
                of=lambda o: (where(o.subject), float(o.stale)),
            ),
            Gauge[ObjectHealth](
                "stalewatch_object_last_transition_timestamp_seconds",
                "Unix time of the object's Ready condition lastTransitionTime.",
                OBJECT_LABELS,
                of=lambda o: (
                    None if o.last_transition is None else (where(o.subject), o.last_transition.timestamp())
                ),
            ),
        ),
        per_item=True,
    ),
    _Group(
        "controllers",
        lambda e: e.controllers,
        (
            Gauge[ControllerHealth](
                "stalewatch_controller_up",
                "1 when the controller workload is available and holds its leader Lease, else 0.",
                CONTROLLER_LABELS,
                of=lambda c: (_controller(c.subject), float(c.up)),
            ),
            StateSet[ControllerHealth](
                "stalewatch_controller_down_reason",
                "Why a controller is down, as a StateSet over a fixed set of reasons; all 0 while it is up.",
                ("namespace", "name", "reason"),
                states=DOWN_REASONS,
                of=lambda c: (_controller(c.subject)[:2], "" if c.up else c.reason),
            ),
            Gauge[ControllerHealth](
                "stalewatch_controller_info",
                "1 per known controller; groups is the comma-joined sorted list of API groups it reconciles.",
                (*CONTROLLER_LABELS, "groups"),
                of=lambda c: ((*_controller(c.subject), ",".join(sorted(c.groups))), 1.0),
            ),
        ),
        prepare=_unique,
    ),
    _Group(
        "heartbeats",
        lambda e: e.controllers,
        (
            StateSet[ControllerHealth](
                "stalewatch_controller_heartbeat",
                "What a controller's own metrics say of its reconciling, as a StateSet: Reconciling, Stuck "
                "(ControllerStuck) or Unknown (not read, unreadable, stale, or not known to be up). Only "
                "controllers whose heartbeat is read have series.",
                ("namespace", "name", "state"),
                states=HEARTBEAT_STATES,
                of=lambda c: (_controller(c.subject)[:2], str(c.heartbeat.state) if c.heartbeat else ""),
            ),
            Gauge[ControllerHealth](
                "stalewatch_controller_last_reconcile_timestamp_seconds",
                "Unix time of the last read at which one of the controller's reconcile counters moved; "
                "time() minus it is its heartbeat age (omitted when none moved since watching began).",
                ("namespace", "name"),
                of=_last_reconcile,
            ),
            Gauge[ControllerHealth](
                "stalewatch_controller_overdue_objects",
                "Objects the controller is up for but has not reconciled within their due window "
                "(NotReconciling findings); omitted while its heartbeat is Unknown (never 0 then).",
                ("namespace", "name"),
                of=_overdue,
            ),
        ),
        prepare=_beating,
    ),
    _Group(
        "revisions",
        lambda e: e.revisions,
        (
            Gauge[RevisionInfo](
                "stalewatch_revision_info",
                "1 per GitOps object with a source: the source's revision versus the revision it applied.",
                (*OBJECT_LABELS, "source", "revision", "applied_revision"),
                of=lambda r: ((*where(r.subject), r.source, r.revision, r.applied_revision), 1.0),
            ),
        ),
        per_item=True,
    ),
    _Group(
        "unjudged",
        lambda e: e.unjudged,
        (
            Gauge[tuple[str, str, int]](
                "stalewatch_objects_unjudged",
                "Objects read that no rule could judge (a custom resource that reports no status), by"
                " kind: never counted as healthy.",
                ("group", "kind"),
                of=lambda u: ((u[0], u[1]), float(u[2])),
            ),
        ),
    ),
    _Group(
        "unread",
        lambda e: e.unread,
        (
            Gauge[tuple[str, str, int]](
                "stalewatch_listed_objects_unread",
                "Objects Kustomizations' inventories list, of kinds stalewatch does not read (not"
                " watched, over watch_kinds_limit, 403 Forbidden, or not in the input), by kind: never"
                " counted as healthy.",
                ("group", "kind"),
                of=lambda u: ((u[0], u[1]), float(u[2])),
            ),
        ),
    ),
    _Group(
        "evaluation",
        lambda e: (e,),
        (
            Gauge[Evaluation](
                "stalewatch_evaluation_timestamp_seconds",
                "Unix time of the model evaluation these metrics were rendered from.",
                (),
                of=lambda e: ((), e.now.timestamp()),
            ),
        ),
    ),
)
"""In exposition order."""

FAMILIES: dict[str, Family] = {family.name: family for group in GROUPS for family in group.families}


class ModelCollector:
    """Renders whatever Evaluation `source` returns at scrape time; nothing before the first one.

    Each group of families is rebuilt only when its list is a new one, the per-object groups
    block by block (itemized.py), and a family's text is joined once, so a scrape of an
    unchanged 50k-object model costs little more than joining strings, and one after a churn
    pass renders the blocks the pass changed, not every object's entry.
    """

    def __init__(self, source: EvaluationSource) -> None:
        self._source = source
        self._groups: dict[str, tuple[Sequence[Any], list[Rendered]]] = {}
        self._itemized = {
            group.name: Itemized(group.families, key=_where) for group in GROUPS if group.per_item
        }

    def describe(self) -> Iterable[Metric]:
        """Names only, so registering does not call the source."""
        return [GaugeMetricFamily(f.name, f.help, labels=f.labels) for f in FAMILIES.values()]

    def collect(self) -> Iterable[Metric]:
        evaluation = self._source()
        if evaluation is None:
            return []
        families: list[Metric] = []
        for group in GROUPS:
            items = group.of(evaluation)
            cached = self._groups.get(group.name)
            if cached is None or cached[0] is not items:
                if group.per_item:
                    built = self._itemized[group.name].render(items)
                else:
                    unique = group.prepare(items)
                    built = [render_whole(family, unique) for family in group.families]
                cached = (items, built)
                self._groups[group.name] = cached
            families += cached[1]
        return families


def build_registry(source: EvaluationSource) -> CollectorRegistry:
    """A registry of our own (not the process-global one) holding the model collector.

    The watcher's self-metrics are registered into the same registry by their owner.
    """
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ModelCollector(source))
    return registry
