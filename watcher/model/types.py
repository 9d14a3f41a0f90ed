"""The model's vocabulary, shared by every layer that reads or renders it.

These are the contract between the pure model (which produces them) and the
watcher, exporters, web view and CLI (which consume them). Objects going *in* are
plain dicts shaped like Kubernetes JSON; what comes *out* is defined here, and gathered
per evaluation in evaluation.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypedDict


class Subject(TypedDict):
    """Names one object the way kubectl would; namespace is "" for cluster-scoped."""

    apiVersion: str
    kind: str
    namespace: str
    name: str


class Status(StrEnum):
    """kstatus' computed status values (sigs.k8s.io/cli-utils pkg/kstatus/status)."""

    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    TERMINATING = "Terminating"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class StatusResult:
    status: Status
    reason: str
    message: str


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


class FindingType(StrEnum):
    CONTROLLER_DOWN = "ControllerDown"
    CRD_REMOVED = "CRDRemoved"
    STATUS_STALE = "StatusStale"
    STUCK_RECONCILING = "StuckReconciling"
    GENERATION_NOT_OBSERVED = "GenerationNotObserved"
    RECONCILE_REQUEST_IGNORED = "ReconcileRequestIgnored"
    REVISION_SKEW = "RevisionSkew"
    DEPENDENCY_BLOCKED = "DependencyBlocked"
    RELEASE_READY_WORKLOAD_FAILING = "ReleaseReadyWorkloadFailing"
    STALLED = "Stalled"
    RECONCILE_FAILED = "ReconcileFailed"
    RETRY_LOOP = "RetryLoop"
    WORKLOAD_UNHEALTHY = "WorkloadUnhealthy"
    POLICY_DENIED = "PolicyDenied"
    CRD_OWNERSHIP_RISK = "CRDOwnershipRisk"
    PRUNE_ORPHAN = "PruneOrphan"
    CONFLICTING_WRITERS = "ConflictingWriters"
    OBJECT_FAILING = "ObjectFailing"
    CONTROLLER_STUCK = "ControllerStuck"
    NOT_RECONCILING = "NotReconciling"
    SHARD_NOT_SERVED = "ShardNotServed"


DEFAULT_SEVERITIES: Mapping[FindingType, Severity] = {
    FindingType.CONTROLLER_DOWN: Severity.CRITICAL,
    FindingType.CONTROLLER_STUCK: Severity.CRITICAL,
    FindingType.SHARD_NOT_SERVED: Severity.CRITICAL,
    FindingType.CRD_REMOVED: Severity.CRITICAL,
    FindingType.STATUS_STALE: Severity.INFO,
    **{
        t: Severity.WARNING
        for t in FindingType
        if t
        not in (
            FindingType.CONTROLLER_DOWN,
            FindingType.CONTROLLER_STUCK,
            FindingType.SHARD_NOT_SERVED,
            FindingType.CRD_REMOVED,
            FindingType.STATUS_STALE,
        )
    },
}
"""ControllerStuck and ShardNotServed are critical like ControllerDown: nothing they explain is
reconciled either."""


def rfc3339(moment: datetime | None) -> str | None:
    """Kubernetes' own timestamp spelling (UTC, seconds, trailing Z)."""
    if moment is None:
        return None
    utc = moment.astimezone(UTC)
    if utc.year < 1000:  # strftime writes such a year unpadded; kept as it always was spelled
        return utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{utc.replace(microsecond=0, tzinfo=None).isoformat()}Z"  # strftime's spelling, 5x cheaper


@dataclass(slots=True)
class Finding:
    """One thing that is wrong, with the proof and, for symptoms, the root that explains it."""

    id: str
    type: FindingType
    severity: Severity
    subject: Subject
    message: str
    since: datetime | None
    evidence: dict[str, Any]
    root_cause: str | None = None
    affected: list[Subject] = field(default_factory=list)

    @property
    def is_root(self) -> bool:
        return self.root_cause is None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `analyze --output json` and `/api/v1/findings`."""
        return {
            "id": self.id,
            "type": str(self.type),
            "severity": str(self.severity),
            "subject": dict(self.subject),
            "message": self.message,
            "since": rfc3339(self.since),
            "evidence": self.evidence,
            "root_cause": self.root_cause,
            "affected": [dict(s) for s in self.affected] if self.is_root else [],
        }


class HealthReason(StrEnum):
    """Why a workload or controller is unhealthy, from a FIXED set (these become metric labels).

    Kubelet's many waiting reasons are folded into these buckets; the exact reason stays in
    the finding's evidence. AVAILABLE and RESTARTING are the two "up" reasons of a controller.
    """

    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    ERR_IMAGE_PULL = "ErrImagePull"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
    UNSCHEDULABLE = "Unschedulable"
    OOM_KILLED = "OOMKilled"
    NOT_READY = "NotReady"
    NO_AVAILABLE_REPLICAS = "NoAvailableReplicas"
    LEASE_EXPIRED = "LeaseExpired"
    SCALED_TO_ZERO = "ScaledToZero"
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
    UNAVAILABLE = "Unavailable"
    GENERATION_NOT_OBSERVED = "GenerationNotObserved"
    FAILED = "Failed"
    """A Pod in phase Failed that no workload replaces (never a controller's reason)."""
    AVAILABLE = "Available"
    RESTARTING = "Restarting"


POD_FAILURES: tuple[HealthReason, ...] = (
    HealthReason.IMAGE_PULL_BACK_OFF,
    HealthReason.ERR_IMAGE_PULL,
    HealthReason.CRASH_LOOP_BACK_OFF,
    HealthReason.CREATE_CONTAINER_CONFIG_ERROR,
    HealthReason.UNSCHEDULABLE,
    HealthReason.OOM_KILLED,
)
"""A Pod's own failing states: none passes by waiting alone (`wait` fails fast on them)."""
CONTROLLER_DOWN_REASONS: tuple[HealthReason, ...] = (
    *POD_FAILURES,
    HealthReason.NOT_READY,
    HealthReason.NO_AVAILABLE_REPLICAS,
    HealthReason.LEASE_EXPIRED,
    HealthReason.SCALED_TO_ZERO,
)
"""Every reason a ControllerHealth with up=False can carry; nothing else is ever used."""


@dataclass(frozen=True, slots=True)
class ControllerSpec:
    """A workload that reconciles some API groups (and optionally only some kinds).

    Matched by Deployment/StatefulSet name (in `namespace`, or any namespace when None),
    or by `selector` labels on the workload when given. `lease` names its leader-election
    Lease (in the workload's namespace unless `lease_namespace` is set).
    """

    name: str
    groups: tuple[str, ...]
    kinds: tuple[str, ...] = ()
    namespace: str | None = None
    selector: Mapping[str, str] | None = None
    lease: str | None = None
    lease_namespace: str | None = None
    metrics_port: int | None = None
    """Where its Pods serve /metrics, when neither a container port named `http-prom` nor a
    `prometheus.io/port` annotation on its pod template says (the heartbeat reader)."""


DEFAULT_CONTROLLERS: tuple[ControllerSpec, ...] = (
    ControllerSpec(name="source-controller", groups=("source.toolkit.fluxcd.io",)),
    ControllerSpec(name="kustomize-controller", groups=("kustomize.toolkit.fluxcd.io",)),
    ControllerSpec(name="helm-controller", groups=("helm.toolkit.fluxcd.io",)),
    ControllerSpec(name="notification-controller", groups=("notification.toolkit.fluxcd.io",)),
    ControllerSpec(
        name="image-reflector-controller",
        groups=("image.toolkit.fluxcd.io",),
        kinds=("ImageRepository", "ImagePolicy"),
    ),
    ControllerSpec(
        name="image-automation-controller",
        groups=("image.toolkit.fluxcd.io",),
        kinds=("ImageUpdateAutomation",),
    ),
    ControllerSpec(name="tofu-controller", groups=("infra.contrib.fluxcd.io",)),
    ControllerSpec(name="tf-controller", groups=("infra.contrib.fluxcd.io",)),
)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """How long a state may last before it is a finding; a normal reconcile is transient."""

    stuck_reconciling_min: timedelta = timedelta(minutes=10)
    stuck_reconciling_interval_factor: float = 3.0
    reconcile_failed: timedelta = timedelta(minutes=10)
    """How long Ready=False (or Unknown, with nothing reconciling) may last; a retry can fix it."""
    reconcile_failed_interval_factor: float = 2.0
    """...or this many of the object's retry period, when that is longer (spec.retryInterval, else
    an applier's spec.interval; a source retries on backoff, so the floor alone)."""
    generation_not_observed: timedelta = timedelta(minutes=5)
    reconcile_request_ignored: timedelta = timedelta(minutes=5)
    revision_skew: timedelta = timedelta(minutes=10)
    retry_loop: timedelta = timedelta(minutes=10)
    workload_unhealthy: timedelta = timedelta(minutes=5)
    controller_down: timedelta = timedelta(seconds=0)
    crd_removed_retention: timedelta = timedelta(hours=1)
    dependency_blocked: timedelta = timedelta(minutes=10)
    """A DependencyNotReady wait that no failing dependency explains is normal ordering until then."""
    retry_loop_recent: timedelta = timedelta(minutes=30)
    """A Warning Event last seen longer ago than this is history, not a loop still running."""
    policy_denied_count: int = 3
    """A policy denial is PolicyDenied once seen this many times (an Event's count, or attempts
    a Flux object's interval allows while its Ready=False held)..."""
    policy_denied_window: timedelta = timedelta(minutes=5)
    """...from its first to its last for at least this long (and last seen within retry_loop_recent)."""
    prune_orphan: timedelta = timedelta(minutes=10)
    """How long an object may outlive its removal from its Kustomization's inventory: prune deletes
    it in the same reconcile, so past this (a watch or a snapshot that saw one before the other)
    it was not pruned."""
    conflicting_writers_flips: int = 4
    """Field managers fight over an object once their turns flipped fields this many times (one
    took fields another owned, or took back its own)..."""
    conflicting_writers_window: timedelta = timedelta(minutes=30)
    """...within this long (an older flip is forgotten; a single handover never adds up)."""
    object_failing: timedelta = timedelta(minutes=10)
    """How long an object of any other kind (a Certificate, an ExternalSecret, a custom resource)
    may say Ready=False before it is ObjectFailing; a verdict of failure (Stalled=True, a Job's
    Failed=True, a CRD whose names were refused) is one at once."""
    object_deleting: timedelta = timedelta(minutes=30)
    """How long an object of such a kind may stay deleted but present (a finalizer nobody removes:
    a Namespace whose content keeps finalizers, a custom resource whose operator is gone) before
    it is ObjectFailing. Deleting a Namespace full of objects takes minutes, not half an hour."""
    heartbeat_slack: timedelta = timedelta(minutes=1)
    """Added to every object's due window (NotReconciling): time between reads, scheduling, skew."""
    heartbeat_jitter_fraction: float = 0.10
    """Of the interval, added to the due window too: Flux jitters intervals by ±5%."""
    heartbeat_retry_backoff_cap: timedelta = timedelta(minutes=15)
    """The gap of an object that is not Ready: Flux retries it on back-off up to --max-retry-delay."""
    heartbeat_stale_after: timedelta = timedelta(seconds=90)
    """A controller's heartbeat whose last good read is older than this is unknown (3 missed reads)."""
    queue_not_draining: timedelta = timedelta(minutes=5)
    """Work queued this long with no reconcile completed is ControllerStuck."""
    processor_floor: timedelta = timedelta(minutes=10)
    """One reconcile may run at least this long (or its objects' longest due window) before the
    controller is ControllerStuck."""


@dataclass(frozen=True, slots=True)
class ModelConfig:
    thresholds: Thresholds = field(default_factory=Thresholds)
    severities: Mapping[FindingType, Severity] = field(default_factory=lambda: dict(DEFAULT_SEVERITIES))
    controllers: tuple[ControllerSpec, ...] = DEFAULT_CONTROLLERS
    namespaces: tuple[str, ...] = ()
    """The only namespaces the watcher reads (namespace mode); (): every one. An object in
    another is never seen, so its absence is not judged (never "missing")."""


@dataclass(frozen=True, slots=True)
class ObjectHealth:
    """kstatus of one GitOps object, and whether that status is a cached report (controller down)."""

    subject: Subject
    status: Status
    reason: str
    stale: bool
    controller: str | None
    last_transition: datetime | None


@dataclass(frozen=True, slots=True)
class ControllerHealth:
    """A controller workload: up, or down with a reason from a fixed set."""

    subject: Subject
    up: bool
    reason: str
    groups: tuple[str, ...]
    since: datetime | None
    name: str = ""
    """The ControllerSpec name this workload matched (e.g. "tofu-controller")."""
    heartbeat: Heartbeat | None = None
    """What its own metrics say of its reconciling (HealthModel.heartbeat); None while no
    heartbeat is read at all (no reader feeds the model), never "reconciling" by default."""
    scope: str = ""
    """Why its --watch-label-selector cannot be read ("" when it can, or it has none): which
    objects it reconciles is then unknown, and those it may reconcile are not judged served."""


class HeartbeatState(StrEnum):
    """A controller's heartbeat, from a FIXED set (a metric label)."""

    RECONCILING = "Reconciling"
    STUCK = "Stuck"
    UNKNOWN = "Unknown"
    """Not read, unreadable, stale, or it is not known whether the controller is up."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One controller's heartbeat as the page and /metrics show it."""

    state: HeartbeatState
    detail: str
    """Why it is unknown, or what is stuck; "" while it reconciles."""
    last_reconciled: datetime | None
    """The last read at which one of its counters moved (None: not since watching began)."""
    since: datetime | None = None
    """When it became stuck (ControllerStuck's since)."""
    overdue: int = 0
    """Its objects that are NotReconciling."""


@dataclass(frozen=True, slots=True)
class RevisionInfo:
    """What a GitOps object should run (its source's revision) versus what it applied."""

    subject: Subject
    source: str
    revision: str
    applied_revision: str


class RejectReason(StrEnum):
    """Why an object was set aside, in whole or in part, from a FIXED set (a metric label).

    The value itself (which can be anything a cluster user wrote) is in the Rejection, never in
    a label.
    """

    TIME_OUT_OF_RANGE = "TimeOutOfRange"
    """A timestamp that is valid RFC3339 but is not a moment in years 1-9999 once in UTC."""
    INTEGER_OUT_OF_RANGE = "IntegerOutOfRange"
    """An integer past int64, or a number too large for one (a decoder's float)."""
    NOT_AN_INTEGER = "NotAnInteger"
    """A fraction where a count is expected."""
    DURATION_OUT_OF_RANGE = "DurationOutOfRange"
    """A number of seconds longer than any interval anyone means (100 years)."""
    WRONG_TYPE = "WrongType"
    """A value of another type than the field's: a string where an object belongs, a list where
    a string does, a label whose value is a number, a `status` that is no object."""
    TIME_UNPARSEABLE = "TimeUnparseable"
    """A string where a timestamp belongs that is no RFC3339 time ("yesterday")."""
    RULE_ERROR = "RuleError"
    """A rule raised on this object: nothing was concluded from it."""
    MALFORMED = "Malformed"
    """Not read at all (projection.MalformedObject): counted by the watcher, not by the model."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """An object stalewatch could not judge in full, and what it did about it.

    `evaluated`: only `field` was dropped and the rest of the object was judged (a projection
    rejection); otherwise nothing was concluded from the object (a rule raised on it).
    """

    subject: Subject
    reason: RejectReason
    field: str
    """The field path (e.g. status.conditions[0].lastTransitionTime); "" for the whole object."""
    value: str
    """The value as written (cut), or the error a rule raised."""
    evaluated: bool
    message: str
    """One line naming the object, the field and the value (see model.quarantine)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `rejected` in `analyze --output json` and `/api/v1/findings`."""
        return {
            "subject": dict(self.subject),
            "reason": str(self.reason),
            "field": self.field,
            "value": self.value,
            "evaluated": self.evaluated,
            "message": self.message,
        }
