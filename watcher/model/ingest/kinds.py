"""Every kind the model knows by name, declared once: what judges it and how the model keeps it.

The tables other modules dispatch on (which rule judges a built-in kind, which kinds the Store
packs, which workloads a controller runs as, which Flux kinds apply a revision, what the engine
tracks) are all derived from `KINDS`, so adding a kind is one line here. kstatus keeps its own
table: it mirrors upstream's status readers kind for kind.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from watcher.model.ingest.objects import Condition, conditions

SOURCE_GROUP = "source.toolkit.fluxcd.io"
KUSTOMIZE_GROUP = "kustomize.toolkit.fluxcd.io"
HELM_GROUP = "helm.toolkit.fluxcd.io"
TERRAFORM_GROUP = "infra.contrib.fluxcd.io"
IMAGE_GROUP = "image.toolkit.fluxcd.io"
CRD_GROUP = "apiextensions.k8s.io"
GATEKEEPER_GROUP = "constraints.gatekeeper.sh"
POLICY_REPORT_GROUP = "wgpolicyk8s.io"
KYVERNO_GROUP = "kyverno.io"


class Judge(enum.Enum):
    """The rule a built-in kind is judged by (rules/dispatch.py maps each to its function)."""

    WORKLOAD = "workload_unhealthy"
    EVENT = "judge_event"


class Track(enum.Enum):
    """What the engine follows when an object of this kind changes (see engine._touch)."""

    CONTROLLER = "a workload a configured controller may run as"
    POD = "a Pod a controller may own"
    REPLICASET = "a link from Pods to a controller workload"
    LEASE = "a controller's leader election"
    CRD = "a kind that may go away (CRDRemoved) or be taken away (CRDOwnershipRisk)"


@dataclass(frozen=True, slots=True)
class KnownKind:
    group: str
    kind: str
    judge: Judge | None = None
    """The rule judging a built-in kind; GitOps kinds are judged by the controller claiming them."""
    packed: bool = False
    """Kept as bytes in the Store once judged (the bulk of a cluster: Pods and their owners)."""
    track: Track | None = None
    inventory: bool = False
    """A Kustomization inventory entry of this kind is followed (GitOps children, workloads)."""
    applier: bool = False
    """Applies a source's revision and records what it applied (Flux appliers, lookup order)."""
    referable: bool = False
    """A Flux reference may name it by kind alone, without an apiVersion."""
    timed_by_pods: bool = False
    """A workload whose controller writes no time: how long it lacks replicas is read off its Pods."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.kind)


KINDS: tuple[KnownKind, ...] = (
    KnownKind("", "Pod", judge=Judge.WORKLOAD, packed=True, track=Track.POD),
    KnownKind(
        "apps", "Deployment", judge=Judge.WORKLOAD, packed=True, track=Track.CONTROLLER, inventory=True
    ),
    KnownKind(
        "apps",
        "StatefulSet",
        judge=Judge.WORKLOAD,
        packed=True,
        track=Track.CONTROLLER,
        inventory=True,
        timed_by_pods=True,
    ),
    KnownKind("apps", "DaemonSet", judge=Judge.WORKLOAD, packed=True, inventory=True, timed_by_pods=True),
    KnownKind("apps", "ReplicaSet", packed=True, track=Track.REPLICASET),
    KnownKind("", "Event", judge=Judge.EVENT),
    KnownKind("events.k8s.io", "Event", judge=Judge.EVENT),
    KnownKind("coordination.k8s.io", "Lease", track=Track.LEASE),
    KnownKind(CRD_GROUP, "CustomResourceDefinition", track=Track.CRD),
    KnownKind(KUSTOMIZE_GROUP, "Kustomization", inventory=True, applier=True, referable=True),
    KnownKind(HELM_GROUP, "HelmRelease", inventory=True, applier=True, referable=True),
    KnownKind(TERRAFORM_GROUP, "Terraform", inventory=True, applier=True, referable=True),
    KnownKind(SOURCE_GROUP, "GitRepository", referable=True),
    KnownKind(SOURCE_GROUP, "OCIRepository", referable=True),
    KnownKind(SOURCE_GROUP, "Bucket", referable=True),
    KnownKind(SOURCE_GROUP, "HelmRepository", referable=True),
    KnownKind(SOURCE_GROUP, "HelmChart", referable=True),
)

JUDGED: Mapping[tuple[str, str], Judge] = {k.key: k.judge for k in KINDS if k.judge is not None}
PACKED_KINDS = frozenset(k.key for k in KINDS if k.packed)
TRACKED: Mapping[tuple[str, str], Track] = {k.key: k.track for k in KINDS if k.track is not None}
CONTROLLER_WORKLOADS = tuple(k.kind for k in KINDS if k.track is Track.CONTROLLER)
"""Kinds (all in apps) a configured controller may run as."""
TIMED_BY_PODS = tuple(k.kind for k in KINDS if k.timed_by_pods)
INVENTORY_KINDS = frozenset(k.kind for k in KINDS if k.inventory)
APPLIERS = tuple(k.kind for k in KINDS if k.applier)
CRD_KIND = "CustomResourceDefinition"
"""Followed in a Kustomization's inventory on an edge of its own ("crds": who installs it), not
as a child: `wait` and dependency links read the inventory's workloads and GitOps objects."""
FLUX_GROUPS: Mapping[str, str] = {k.kind: k.group for k in KINDS if k.referable}
"""The API group of the kinds a reference may name without an apiVersion."""


FAILURE_CONDITIONS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("apps", "ReplicaSet"): ("ReplicaFailure",),
    ("extensions", "ReplicaSet"): ("ReplicaFailure",),
    (CRD_GROUP, "CustomResourceDefinition"): ("NonStructuralSchema",),
    ("keda.sh", "ScaledObject"): ("Fallback",),
    ("", "Namespace"): (
        "NamespaceDeletionDiscoveryFailure",
        "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure",
    ),
}
"""Condition types that, True, say a kind fails where kstatus does not (rules/resources.py): a
ReplicaSet whose Pods an admission webhook or a quota refuses (its Deployment never gets them), a
CRD whose schema is not structural (its objects are neither pruned nor validated as expected), a
KEDA ScaledObject whose triggers fail (Fallback: its target held at spec.fallback.replicas while
Ready stays True), a Namespace whose deletion cannot finish (an API group it cannot list, content
it cannot delete).
The fast path packs a ReplicaSet unjudged only when none of these holds."""

UNMET_CONDITIONS: Mapping[tuple[str, str], Mapping[str, frozenset[str]]] = {
    ("apiregistration.k8s.io", "APIService"): {"Available": frozenset()},
    ("autoscaling", "HorizontalPodAutoscaler"): {
        "AbleToScale": frozenset(),
        "ScalingActive": frozenset({"ScalingDisabled"}),
    },
}
"""Condition types that, False, say a kind fails where kstatus sees no Ready to read, with the
reasons that mean it is off on purpose: an APIService its aggregator cannot reach (its group's
clients and namespace deletion fail with it), a HorizontalPodAutoscaler that cannot read its
target or compute a replica count (not one whose target was scaled to zero: ScalingDisabled)."""


def failure_conditions(key: tuple[str, str], obj: Mapping[str, Any]) -> list[Condition]:
    """The kind's FAILURE_CONDITIONS that are True, and its UNMET_CONDITIONS that are False for a
    reason other than on purpose, on this (projected) object."""
    types, unmet = FAILURE_CONDITIONS.get(key, ()), UNMET_CONDITIONS.get(key, {})
    if not types and not unmet:
        return []
    return [c for c in conditions(obj) if _says_failing(c, types, unmet)]


def _says_failing(cond: Condition, types: tuple[str, ...], unmet: Mapping[str, frozenset[str]]) -> bool:
    if cond.get("status") == "True":
        return cond.get("type") in types
    on_purpose = unmet.get(cond.get("type", ""))
    return cond.get("status") == "False" and on_purpose is not None and cond.get("reason") not in on_purpose


WITHOUT_STATUS: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "ServiceAccount"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "LimitRange"),
        ("", "ResourceQuota"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("networking.k8s.io", "NetworkPolicy"),
        ("networking.k8s.io", "IngressClass"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "StorageClass"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("coordination.k8s.io", "Lease"),
    }
)
"""Built-in kinds that have no state to fail by design (configuration, RBAC): nothing to judge, so
never counted as "not judged", and never watched because an inventory lists them (store/listed.py:
stalewatch reads no Secret). A Lease is read for its controller's liveness."""


OWNED_KINDS: Mapping[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("batch", "CronJob"): (("batch", "Job"),),
}
"""Kinds another kind makes (its objects' controlling ownerReference): read wherever that kind is
listed (store/listed.py), as a CronJob's failed Job says why the CronJob fails."""


def key_of_kind(track: Track) -> tuple[str, str]:
    """The (group, kind) of the one kind tracked as `track` (Pod, Lease, ...)."""
    (found,) = (k.key for k in KINDS if k.track is track)
    return found


POLICY_FAMILIES: Mapping[str, frozenset[str] | None] = {
    GATEKEEPER_GROUP: None,
    POLICY_REPORT_GROUP: frozenset({"PolicyReport", "ClusterPolicyReport"}),
    KYVERNO_GROUP: frozenset({"ClusterPolicy", "Policy"}),
}
"""Policy engines' kinds, by group, watched wherever their CRDs exist (no controller claims them;
cluster/compliance.py reads them). None: every kind of the group, as Gatekeeper serves one constraint
kind per ConstraintTemplate (K8sRequiredLabels, ...), known only at runtime."""


def policy_kind(group: str, kind: str) -> bool:
    """A policy engine's kind (POLICY_FAMILIES): a constraint, a policy report, a Kyverno policy."""
    if group not in POLICY_FAMILIES:
        return False
    kinds = POLICY_FAMILIES[group]
    return kinds is None or kind in kinds
