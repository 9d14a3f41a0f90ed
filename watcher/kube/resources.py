"""Which kinds stalewatch watches, and where the API server serves them.

Built-in kinds are fixed (they exist on every supported cluster). Custom kinds are found
through the CustomResourceDefinitions themselves, which stalewatch watches like any other
kind: a CRD that appears is watched at its preferred served version, one that goes away
stops being watched. A custom kind is wanted when a configured controller reconciles it
(the built-in ControllerSpecs cover every Flux group and tofu-controller's Terraform), or when
it belongs to a policy engine (Gatekeeper constraints, policy reports, Kyverno policies), or
when it is named in conflict_watch_kinds (its objects are then watched for ConflictingWriters).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from watcher.model.ingest.kinds import CRD_GROUP, policy_kind
from watcher.model.ingest.objects import condition, dig, text
from watcher.model.rules.controllers import reconciles
from watcher.model.types import ControllerSpec


@dataclass(frozen=True, slots=True)
class Resource:
    """A kind as the API server serves it; watched cluster-wide, or in one `namespace` (namespace
    mode, kube/scoped.py), optionally field-selected."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    field_selector: str = ""
    namespace: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The collection URL path: cluster-wide, or of its namespace."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{self.namespace}" if self.namespace and self.namespaced else ""
        return f"{base}{where}/{self.plural}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.kind)

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


CRDS = Resource(CRD_GROUP, "v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False)

BUILT_IN: tuple[Resource, ...] = (
    Resource("", "v1", "Pod", "pods"),
    Resource("apps", "v1", "Deployment", "deployments"),
    Resource("apps", "v1", "StatefulSet", "statefulsets"),
    Resource("apps", "v1", "DaemonSet", "daemonsets"),
    Resource("apps", "v1", "ReplicaSet", "replicasets"),
    # Only Warning Events feed a rule (RetryLoop); Normal ones are most of the volume.
    Resource("", "v1", "Event", "events", field_selector="type=Warning"),
    # Node heartbeats renew a Lease per node every 10 s; controllers never use that namespace.
    Resource(
        "coordination.k8s.io", "v1", "Lease", "leases", field_selector="metadata.namespace!=kube-node-lease"
    ),
    CRDS,
)
"""Every built-in kind the model reads, CustomResourceDefinitions last (they start the rest)."""

ON_DEMAND: tuple[Resource, ...] = (
    Resource("", "v1", "Service", "services"),
    Resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    Resource("", "v1", "PersistentVolume", "persistentvolumes", namespaced=False),
    Resource("", "v1", "Namespace", "namespaces", namespaced=False),
    Resource("batch", "v1", "Job", "jobs"),
    Resource("batch", "v1", "CronJob", "cronjobs"),
    Resource("networking.k8s.io", "v1", "Ingress", "ingresses"),
    Resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    Resource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
    Resource("apiregistration.k8s.io", "v1", "APIService", "apiservices", namespaced=False),
)
"""Built-in kinds with a state to judge, watched only when an inventory lists them or watch_kinds
names them (custom kinds are found through their CRDs). A listed built-in kind outside this table
and without state by design (kinds.WITHOUT_STATUS) is not watched, and counted as not read."""

ON_DEMAND_BY_KEY: dict[tuple[str, str], Resource] = {r.key: r for r in ON_DEMAND}

_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")
_STABILITY = {None: 2, "beta": 1, "alpha": 0}


def version_priority(name: str) -> tuple[int, int, int, str]:
    """Kubernetes' version order: GA before beta before alpha, higher numbers first;
    anything else last, alphabetically. Larger tuples are preferred."""
    match = _VERSION.fullmatch(name)
    if match is None:
        return (-1, 0, 0, "".join(chr(0x10FFFF - ord(c)) for c in name))
    major, stability, minor = match.groups()
    return (_STABILITY[stability], int(major), int(minor or 0), "")


def wanted(
    controllers: Iterable[ControllerSpec], group: str, kind: str, extra: Collection[tuple[str, str]] = ()
) -> bool:
    """A custom kind is watched when a configured controller reconciles it, when it is a policy
    engine's (kinds.POLICY_FAMILIES: only where its CRD exists, like any custom kind), or when it
    is one of the `extra` (group, kind) pairs (conflict_watch_kinds: watched for ConflictingWriters)."""
    return (
        (group, kind) in extra
        or policy_kind(group, kind)
        or any(reconciles(spec, group, kind) for spec in controllers)
    )


def crd_resource(crd: Mapping[str, Any]) -> Resource | None:
    """Where an Established, not terminating, projected CRD serves its kind; None otherwise."""
    if text(crd, "metadata", "deletionTimestamp"):
        return None
    established = condition(crd, "Established")
    if established is None or established["status"] != "True":
        return None
    group, kind = text(crd, "spec", "group"), text(crd, "spec", "names", "kind")
    plural = text(crd, "spec", "names", "plural")
    served = [v["name"] for v in dig(crd, "spec", "versions") or () if v.get("served") and v.get("name")]
    if not (group and kind and plural and served):
        return None
    version = max(served, key=version_priority)
    return Resource(group, version, kind, plural, namespaced=text(crd, "spec", "scope") != "Cluster")
