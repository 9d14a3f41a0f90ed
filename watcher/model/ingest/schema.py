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
The model of this is config.py, which builds its settings from the Thresholds dataclass. The
node types and the blocks every kind shares (conditions, metadata) are in schema_nodes.py, the
policy engines' kinds in policy_schema.py; kind_schema() below finds every kind's.
"""

from __future__ import annotations

from collections.abc import Mapping

from watcher.model.ingest.kinds import SOURCE_GROUP
from watcher.model.ingest.policy_schema import GROUP_KINDS, POLICY_KINDS
from watcher.model.ingest.schema_nodes import (
    CONDITION,
    CONDITIONS,
    GENERATION,
    MESSAGE,
    METADATA,
    METADATA_WITHOUT_FIELDS,
    METADATA_WITHOUT_HISTORY,
    NAME,
    REF,
    SECONDS,
    TOKEN,
    Bool,
    Field,
    Flags,
    I,
    Kind,
    Labels,
    List,
    Obj,
    S,
    Str,
    Time,
)

_CONTAINERS = List(Obj({"name": TOKEN, "image": Str(1024)}), limit=64)
WATCH_LABEL_SELECTOR = "--watch-label-selector"
"""The flag a Flux controller (a shard) is told which objects to reconcile with (rules/shards.py)."""
_TEMPLATE_CONTAINERS = List(
    Obj(
        {
            "name": TOKEN,
            "image": Str(1024),
            "ports": List(Obj({"name": TOKEN, "containerPort": I}), limit=16),
            "args": Flags((WATCH_LABEL_SELECTOR,)),
        }
    ),
    limit=64,
)
"""A workload's containers, with their ports: the heartbeat reader finds a controller's metrics
port (named `http-prom`) there, not on each Pod (a Pod keeps only its IP: see _POD). Of their
args only the watch label selector is kept: every Deployment is projected, and most have none."""
METRICS_PORT_ANNOTATION = "prometheus.io/port"

# -- Flux and tofu-controller kinds: every kind not named below -------------------------------

CUSTOM = Kind(
    METADATA,
    {
        "spec": Obj(
            {
                "interval": TOKEN,
                "retryInterval": TOKEN,
                # The heartbeat rules' due window (spec.timeout) and an OCI HelmRepository, not
                # reconciled on an interval (spec.type): dropped, both made false NotReconciling.
                "timeout": TOKEN,
                "type": TOKEN,
                "suspend": Bool(),
                "prune": Bool(),
                "wait": Bool(),
                "healthChecks": List(REF, limit=256),
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
                "phase": TOKEN,
                "message": MESSAGE,  # beside a phase, why (Argo Rollouts): ObjectFailing quotes it
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

ROLLOUT = Kind(
    METADATA,
    {
        **CUSTOM.sections,
        "status": Obj(
            {k: v for k, v in CUSTOM.sections["status"].fields.items() if k != "observedGeneration"}
        ),
    },
)
"""An Argo Rollout writes status.observedGeneration as a string (its generation, "7"; a pod template
hash before Rollouts v0.10): not read, so a real Rollout is not malformed for it. Its phase and
conditions say how it goes."""

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
                "template": Obj(
                    {
                        "metadata": Obj({"annotations": Labels(8, keep=(METRICS_PORT_ANNOTATION,))}),
                        "spec": Obj({"containers": _TEMPLATE_CONTAINERS, "initContainers": _CONTAINERS}),
                    }
                ),
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
                # Where the heartbeat reader finds a controller's /metrics (about 12 bytes packed).
                "podIP": Str(45),
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
    ("argoproj.io", "Rollout"): ROLLOUT,
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
    ("batch", "CronJob"): _built_in(
        {"suspend": Bool(), "schedule": S},
        Obj(
            {
                **_GENERIC_STATUS.fields,
                "lastScheduleTime": Time(),
                "lastSuccessfulTime": Time(),
                "active": List(REF, limit=64, truncate=True),
            }
        ),
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
(PodDisruptionBudget) read only the generic fields, which the GitOps fields hold. A CronJob keeps
the times of its last schedule and last success (ObjectFailing reads them)."""


def kind_schema(group: str, kind: str) -> Kind:
    """What is read of one kind (CUSTOM for any kind not built in, nor a policy engine's)."""
    found = KINDS.get((group, kind)) or POLICY_KINDS.get((group, kind))
    return found if found is not None else GROUP_KINDS.get(group, CUSTOM)
