"""What stalewatch reads of each kind, declared once, as data.

Every field a rule reads is named here with its type and what bounds it: a length limit, an
entry count, whether it is interned, required in its entry, cut when long, or strict (a
wrong value makes the whole object malformed instead of dropping the field). Two things are
generated from this table, so neither can miss a field the other keeps:
  * projection.py compiles it into the strict validating projection (`project()`), used on
    snapshots and whenever the fast path steps aside;
  * fastpath/shapes.py turns it into msgspec Structs that decode exactly these fields (the
    limits become the types' constraints) plus the few steps a type cannot say (interning,
    timestamps parsed, lists cut or kept by type, annotations kept by prefix).
The model of this is config.py, which builds its settings from the Thresholds dataclass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from watcher.model.kinds import GATEKEEPER_GROUP, KYVERNO_GROUP, POLICY_REPORT_GROUP, SOURCE_GROUP
from watcher.model.objects import MAX_DURATION_SECONDS
from watcher.model.types import RejectReason

MESSAGE_LIMIT = 1024
"""Condition and Event messages beyond this are cut (Flux messages can be tens of KiB)."""
INT64 = 2**63


@dataclass(frozen=True, eq=False)
class Str:
    """A string; "" reads as absent unless strict. Longer than `limit` is cut (malformed if strict)."""

    limit: int | None = None
    strict: bool = False
    intern: bool = False


@dataclass(frozen=True, eq=False)
class Int:
    """An integer in [-limit, limit); beyond is rejected (the field dropped, the object marked)."""

    strict: bool = False
    limit: int = INT64
    reason: RejectReason = RejectReason.INTEGER_OUT_OF_RANGE


@dataclass(frozen=True, eq=False)
class Bool:
    """A boolean (an integer is not one)."""


@dataclass(frozen=True, eq=False)
class Time:
    """An RFC3339 timestamp, kept as written; unparseable is dropped, out of UTC range rejected."""


@dataclass(frozen=True, eq=False)
class Labels:
    """A str->str map; entries with other values are dropped; more than `limit` kept is malformed.
    `keep`: only keys with one of these prefixes; `value_limit`: values cut (and not interned)."""

    limit: int
    keep: tuple[str, ...] = ()
    value_limit: int | None = None


@dataclass(frozen=True, eq=False)
class Obj:
    """A mapping of known fields (others ignored). `strict`: a non-mapping is malformed (else
    dropped). `required`: an entry without these is dropped; so is an empty one unless `keep_empty`
    (an empty mapping can be a marker, e.g. state.running)."""

    fields: Mapping[str, Field]
    strict: bool = False
    required: tuple[str, ...] = ()
    keep_empty: bool = True


@dataclass(frozen=True, eq=False)
class List:
    """A list of entries. More than `limit` is malformed, or cut when `truncate`. `types`: only
    entries whose "type" is one of these are read at all (Pod conditions); `unless` (field,
    value): entries with that value there are not read at all (managedFields entries written
    through the status subresource)."""

    item: Obj
    limit: int
    strict: bool = False
    truncate: bool = False
    types: frozenset[str] | None = None
    unless: tuple[str, str] | None = None


@dataclass(frozen=True, eq=False)
class FieldSet:
    """A managedFields entry's fieldsV1 trie, kept as the sorted field paths it names, one a line
    in one string, bounded (fieldsets.py): what ConflictingWriters compares between versions."""


Field = Str | Int | Bool | Time | Labels | Obj | List | FieldSet


@dataclass(frozen=True, eq=False)
class Kind:
    """One kind's metadata and sections; the section named "" is read at the top level (Events)."""

    metadata: Obj
    sections: Mapping[str, Obj] = field(default_factory=dict)


S = Str()
NAME = Str(253)
TOKEN = Str(316, intern=True)
MESSAGE = Str(MESSAGE_LIMIT)
I = Int()  # noqa: E741 (a type name, as in the tables)
SECONDS = Int(limit=int(MAX_DURATION_SECONDS), reason=RejectReason.DURATION_OUT_OF_RANGE)
"""A number of seconds that becomes a timedelta (a Lease's duration, a progress deadline)."""
GENERATION = Int(strict=True)
REF = Obj({"apiVersion": TOKEN, "kind": TOKEN, "name": NAME, "namespace": NAME})

KEPT_ANNOTATIONS = (
    "reconcile.fluxcd.io/",
    "meta.helm.sh/",
    "helm.toolkit.fluxcd.io/",
    "kustomize.toolkit.fluxcd.io/",
    "deployment.kubernetes.io/revision",
    "helm.sh/resource-policy",
)
"""Annotation prefixes kept; the rest is dropped. A ReplicaSet's revision (its Deployment's rollout
number) dates and orders image changes (transitions.py); helm.sh/resource-policy: keep spares a CRD
from its release's removal (crd_risk.py)."""

CONDITION = Obj(
    {
        "type": TOKEN,
        "status": TOKEN,
        "reason": TOKEN,
        "message": MESSAGE,
        "lastTransitionTime": Time(),
        "lastUpdateTime": Time(),
        "observedGeneration": I,
    },
    strict=True,
    required=("type", "status"),
)
CONDITIONS = List(CONDITION, limit=64, strict=True)

_METADATA_FIELDS: dict[str, Field] = {
    "name": Str(253, strict=True),
    "namespace": Str(63, strict=True, intern=True),
    "generation": GENERATION,
    "creationTimestamp": Time(),
    "deletionTimestamp": Time(),
    "labels": Labels(256),
    "annotations": Labels(64, keep=KEPT_ANNOTATIONS, value_limit=MESSAGE_LIMIT),
    "ownerReferences": List(
        Obj({"apiVersion": TOKEN, "kind": TOKEN, "name": NAME, "controller": Bool()}), limit=32
    ),
}
_WRITE: dict[str, Field] = {"manager": TOKEN, "operation": TOKEN, "subresource": TOKEN, "time": Time()}


def _writes(entry: Obj) -> List:
    """managedFields, but for the entries written through the status subresource: no rule reads
    those (a spec write is what spec_written_at dates and what ConflictingWriters compares), and
    every object a controller reports on has one, which the model would keep."""
    return List(entry, limit=32, truncate=True, unless=("subresource", "status"))


METADATA = Obj(
    {**_METADATA_FIELDS, "managedFields": _writes(Obj({**_WRITE, "fieldsV1": FieldSet()}))}, strict=True
)
"""Who wrote when (spec_written_at) and which fields each writer owns (ConflictingWriters: the
engine hands the field sets to writers.py and keeps the object without them)."""
METADATA_WITHOUT_FIELDS = Obj({**_METADATA_FIELDS, "managedFields": _writes(Obj(_WRITE))}, strict=True)
"""Who wrote when, without the field sets: ReplicaSets (written by their Deployment's controller
alone, and packed by the fast path) and Leases (renewed every few seconds by their holder)."""
METADATA_WITHOUT_HISTORY = Obj(_METADATA_FIELDS, strict=True)
"""Pods and Events change constantly and no rule dates their spec writes: no managedFields."""

_CONTAINERS = List(Obj({"name": TOKEN, "image": Str(1024)}), limit=64)

# -- Flux and tofu-controller kinds: every kind not named below -------------------------------

CUSTOM = Kind(
    METADATA,
    {
        "spec": Obj(
            {
                "interval": TOKEN,
                "retryInterval": TOKEN,
                "suspend": Bool(),
                "prune": Bool(),
                "sourceRef": REF,
                "dependsOn": List(
                    Obj(
                        {"name": NAME, "namespace": NAME, "kind": TOKEN, "apiVersion": TOKEN},
                        required=("name",),
                    ),
                    limit=256,
                ),
                "chart": Obj({"spec": Obj({"chart": S, "version": S, "sourceRef": REF})}),
                "chartRef": REF,
                "releaseName": NAME,
                "targetNamespace": NAME,
                "storageNamespace": NAME,
                "approvePlan": S,
            }
        ),
        "status": Obj(
            {
                "conditions": CONDITIONS,
                "observedGeneration": GENERATION,
                "lastAppliedRevision": S,
                "lastAttemptedRevision": S,
                "lastHandledReconcileAt": S,
                "helmChart": S,
                "artifact": Obj({"revision": S, "digest": S, "lastUpdateTime": Time()}),
                "inventory": Obj(
                    {"entries": List(Obj({"id": S, "v": TOKEN}, required=("id",)), limit=100_000)}
                ),
                "history": List(
                    Obj(
                        {
                            "name": NAME,
                            "namespace": NAME,
                            "version": I,
                            "status": TOKEN,
                            **dict.fromkeys(
                                ("chartName", "chartVersion", "appVersion", "digest", "ociDigest"), S
                            ),
                            # a Kustomization's history: which build it applied, first when, how it went
                            "firstReconciled": Time(),
                            "lastReconciled": Time(),
                            "lastReconciledStatus": TOKEN,
                            "metadata": Obj({"revision": S}),
                        }
                    ),
                    limit=5,
                    truncate=True,
                ),
                "plan": Obj({"pending": S}),
            }
        ),
    },
)

HELM_CHART = Kind(
    METADATA,
    {**CUSTOM.sections, "spec": Obj({**CUSTOM.sections["spec"].fields, "chart": S})},
)
"""A HelmChart's spec.chart is the chart's name, a HelmRelease's the template of its HelmChart."""

# -- Built-in kinds -----------------------------------------------------------------------------

_WORKLOAD = Kind(
    METADATA,
    {
        "spec": Obj(
            {
                "replicas": I,
                "selector": Obj({"matchLabels": Labels(64)}),
                "progressDeadlineSeconds": SECONDS,
                "updateStrategy": Obj({"type": TOKEN, "rollingUpdate": Obj({"partition": I})}),
                "template": Obj({"spec": Obj({"containers": _CONTAINERS, "initContainers": _CONTAINERS})}),
            }
        ),
        "status": Obj(
            {
                "conditions": CONDITIONS,
                "observedGeneration": GENERATION,
                **dict.fromkeys(
                    (
                        "replicas",
                        "readyReplicas",
                        "availableReplicas",
                        "updatedReplicas",
                        "currentReplicas",
                        "unavailableReplicas",
                        "fullyLabeledReplicas",
                        "desiredNumberScheduled",
                        "currentNumberScheduled",
                        "updatedNumberScheduled",
                        "numberAvailable",
                        "numberReady",
                    ),
                    I,
                ),
                "currentRevision": S,
                "updateRevision": S,
            }
        ),
    },
)

_TERMINATED = Obj({"reason": TOKEN, "exitCode": I})
_CONTAINER_STATUSES = List(
    Obj(
        {
            "name": TOKEN,
            "image": Str(1024, intern=True),
            "ready": Bool(),
            "restartCount": I,
            # Which state a container is in (running is kept as a marker) and why; no times: none is read.
            "state": Obj(
                {
                    "waiting": Obj({"reason": TOKEN, "message": MESSAGE}),
                    "running": Obj({}),
                    "terminated": _TERMINATED,
                }
            ),
            "lastState": Obj({"terminated": _TERMINATED}, keep_empty=False),
        },
        required=("name",),
    ),
    limit=64,
)
POD_CONDITIONS = frozenset({"Ready", "PodScheduled", "Reconciling", "Stalled"})
"""The only Pod conditions any rule reads (kstatus' generic checks and Pod rule, and ours); the
rest is dropped."""

_POD = Kind(
    METADATA_WITHOUT_HISTORY,
    {
        # No spec: a Pod's images are read from its containerStatuses (kubelet reports the spec image there).
        "status": Obj(
            {
                "observedGeneration": GENERATION,
                "phase": TOKEN,
                "reason": TOKEN,
                "message": MESSAGE,
                "startTime": Time(),
                "conditions": List(CONDITION, limit=64, strict=True, types=POD_CONDITIONS),
                "containerStatuses": _CONTAINER_STATUSES,
                "initContainerStatuses": _CONTAINER_STATUSES,
            }
        ),
    },
)

_GENERIC_STATUS = Obj({"conditions": CONDITIONS, "observedGeneration": GENERATION})
"""What kstatus' generic checks read on every kind (its Reconciling/Stalled conditions and
observedGeneration), kept on the built-ins whose own fields say nothing of them."""


def _built_in(spec: Mapping[str, Field] | None = None, status: Obj = _GENERIC_STATUS) -> Kind:
    return Kind(METADATA, {"spec": Obj(spec or {}), "status": status})


_EVENT = Kind(
    METADATA_WITHOUT_HISTORY,
    {
        "": Obj(
            {
                "type": TOKEN,
                "reason": TOKEN,
                "message": MESSAGE,
                "count": I,
                "firstTimestamp": Time(),
                "lastTimestamp": Time(),
                "eventTime": Time(),
                "series": Obj({"count": I, "lastObservedTime": Time()}),
                "involvedObject": Obj(REF.fields, required=("kind", "name")),
                "reportingController": TOKEN,
                "reportingComponent": TOKEN,
                "source": Obj({"component": TOKEN}),
            }
        )
    },
)
EVENTS_V1_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedCount": "count",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
}
"""events.k8s.io/v1 spells the core/v1 fields differently; projections use the core/v1 names."""
EVENT_KINDS: dict[tuple[str, str], Mapping[str, str]] = {
    ("", "Event"): {},
    ("events.k8s.io", "Event"): EVENTS_V1_RENAMES,
}
"""Each Event kind, with the renames from the spelling the API server writes it in."""

KINDS: dict[tuple[str, str], Kind] = {
    **dict.fromkeys(
        [("apps", k) for k in ("Deployment", "StatefulSet", "DaemonSet")]
        + [("extensions", k) for k in ("Deployment", "DaemonSet")],
        _WORKLOAD,
    ),
    **dict.fromkeys(
        [("apps", "ReplicaSet"), ("extensions", "ReplicaSet")],
        Kind(METADATA_WITHOUT_FIELDS, _WORKLOAD.sections),
    ),
    ("", "Pod"): _POD,
    ("coordination.k8s.io", "Lease"): Kind(
        METADATA_WITHOUT_FIELDS,
        {
            "spec": Obj(
                {
                    "holderIdentity": S,
                    "leaseDurationSeconds": SECONDS,
                    "renewTime": Time(),
                    "acquireTime": Time(),
                    "leaseTransitions": I,
                }
            )
        },
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _built_in(
        {
            "group": TOKEN,
            "scope": TOKEN,
            "names": Obj({"kind": TOKEN, "plural": TOKEN}),
            "versions": List(Obj({"name": TOKEN, "served": Bool(), "storage": Bool()}), limit=64),
        }
    ),
    ("batch", "Job"): _built_in(
        {"parallelism": I, "completions": I, "suspend": Bool()},
        Obj({**_GENERIC_STATUS.fields, "succeeded": I, "active": I, "failed": I, "startTime": Time()}),
    ),
    ("", "Service"): _built_in({"type": TOKEN, "clusterIP": S}),
    ("", "PersistentVolumeClaim"): _built_in(status=Obj({**_GENERIC_STATUS.fields, "phase": TOKEN})),
    ("", "Secret"): _built_in(),
    ("", "ConfigMap"): _built_in(),
    **dict.fromkeys(EVENT_KINDS, _EVENT),
    (SOURCE_GROUP, "HelmChart"): HELM_CHART,
}
"""Built-in kinds (and the one Flux kind whose fields differ from CUSTOM's); anything else is
treated as a custom resource (CUSTOM, the GitOps fields). Each
keeps every field kstatus reads on it (its generic checks and its rule in core.go's table, the
extensions/ twins of the workloads included); kinds kstatus has a rule for but no row here
(CronJob, PodDisruptionBudget) read only the generic fields, which the GitOps fields hold."""


# -- Policy engines' kinds (kinds.POLICY_FAMILIES), read by compliance.py ------------------------

VIOLATIONS_KEPT = 500
"""Per constraint. Gatekeeper lists at most --constraint-violations-limit violations (20 unless
set) and counts them all in totalViolations; what is not listed (here or there) is counted as
unattributed, never dropped."""
RESULTS_KEPT = 2000
"""Per policy report (Kyverno writes one per resource since 1.10; older ones, one per namespace,
can be long): results beyond this are counted from its summary, unattributed."""
RESOURCES_KEPT = 16
_SUBJECT = Obj(
    {"apiVersion": TOKEN, "kind": TOKEN, "namespace": NAME, "name": NAME}, required=("kind", "name")
)

_CONSTRAINT = Kind(
    METADATA,
    {
        "spec": Obj({"enforcementAction": TOKEN}),
        "status": Obj(
            {
                "auditTimestamp": Time(),
                "totalViolations": I,
                "violations": List(
                    Obj(
                        {
                            "group": TOKEN,
                            "version": TOKEN,
                            "kind": TOKEN,
                            "namespace": NAME,
                            "name": NAME,
                            "enforcementAction": TOKEN,
                        },
                        required=("kind", "name"),
                    ),
                    limit=VIOLATIONS_KEPT,
                    truncate=True,
                ),
            }
        ),
    },
)
"""A Gatekeeper constraint, whatever its kind (one per ConstraintTemplate): its action and its
last audit; no messages (they would be most of its size, and no label or rule reads them)."""

_POLICY_REPORT = Kind(
    METADATA_WITHOUT_HISTORY,
    {
        "": Obj(
            {
                "scope": _SUBJECT,
                "summary": Obj(dict.fromkeys(("pass", "fail", "warn", "error", "skip"), I)),
                "results": List(
                    Obj(
                        {
                            "source": TOKEN,
                            "policy": Str(317),  # a namespaced Kyverno Policy: "<namespace>/<name>"
                            "rule": TOKEN,
                            "result": TOKEN,
                            "severity": TOKEN,
                            "resources": List(_SUBJECT, limit=RESOURCES_KEPT, truncate=True),
                        },
                        required=("policy",),
                    ),
                    limit=RESULTS_KEPT,
                    truncate=True,
                ),
            }
        )
    },
)
"""A wgpolicyk8s.io/v1alpha2 PolicyReport or ClusterPolicyReport: its fields at the top level.
Rewritten on every background scan, so no managedFields."""

_KYVERNO_POLICY = Kind(
    METADATA,
    {
        "spec": Obj(
            {
                "validationFailureAction": TOKEN,
                "rules": List(
                    Obj({"name": TOKEN, "validate": Obj({"failureAction": TOKEN})}), limit=256, truncate=True
                ),
            }
        )
    },
)
"""A Kyverno ClusterPolicy or Policy: what its rules do when they fail (Audit or Enforce, per
policy before Kyverno 1.13, per rule's validate.failureAction since)."""

POLICY_KINDS: dict[tuple[str, str], Kind] = {
    (POLICY_REPORT_GROUP, "PolicyReport"): _POLICY_REPORT,
    (POLICY_REPORT_GROUP, "ClusterPolicyReport"): _POLICY_REPORT,
    (KYVERNO_GROUP, "ClusterPolicy"): _KYVERNO_POLICY,
    (KYVERNO_GROUP, "Policy"): _KYVERNO_POLICY,
}
GROUP_KINDS: dict[str, Kind] = {GATEKEEPER_GROUP: _CONSTRAINT}
"""Groups whose every kind is read alike (their kinds known only at runtime)."""


def kind_schema(group: str, kind: str) -> Kind:
    """What is read of one kind (CUSTOM for any kind not built in, nor a policy engine's)."""
    found = KINDS.get((group, kind)) or POLICY_KINDS.get((group, kind))
    return found if found is not None else GROUP_KINDS.get(group, CUSTOM)
