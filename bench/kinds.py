"""Shared by the benchmark's builders: API versions per kind, stable fake hashes, timestamps."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

FLUX_NS = "flux-system"
CONTROLLERS = (
    "source-controller",
    "kustomize-controller",
    "helm-controller",
    "notification-controller",
    "tofu-controller",
)
"""Controller workloads in flux-system, each with a Deployment, ReplicaSet, Pod and leader Lease."""

API_VERSIONS: dict[str, str] = {
    "Namespace": "v1",
    "Pod": "v1",
    "Event": "v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Lease": "coordination.k8s.io/v1",
    "GitRepository": "source.toolkit.fluxcd.io/v1",
    "OCIRepository": "source.toolkit.fluxcd.io/v1",
    "HelmRepository": "source.toolkit.fluxcd.io/v1",
    "Bucket": "source.toolkit.fluxcd.io/v1",
    "HelmChart": "source.toolkit.fluxcd.io/v1",
    "Kustomization": "kustomize.toolkit.fluxcd.io/v1",
    "HelmRelease": "helm.toolkit.fluxcd.io/v2",
    "Terraform": "infra.contrib.fluxcd.io/v1alpha2",
    "Certificate": "certs.bench.example/v1",
    "Job": "batch/v1",
}

STACK_KINDS = ("Certificate", "Job")
"""What the stacks apply besides workloads and Flux objects (bench/stack.py), listed in the
Kustomizations' inventories: a third-party custom kind served by bench/crds/, and built-in Jobs.
stalewatch watches them because an inventory lists them."""


FAILING_GITOPS = 100
"""In a cluster built with `failing`, one object in N of each kind that can fail is failing: the
GitOps kinds in gitops.FAILURES, the Certificates and Jobs of stack.py."""


class Placed:
    """What the builders mixed into workload.Cluster read of it: how many of each kind, when,
    whether some fail, and each index's namespace."""

    count: dict[str, int]
    now: datetime
    failing: bool

    def ago(self, **delta: float) -> str:
        raise NotImplementedError

    def ns(self, index: int) -> str:
        raise NotImplementedError

    def failing_at(self, index: int) -> bool:
        """Whether the index-th object of a kind that can fail is failing: the middle one in
        every FAILING_GITOPS."""
        return self.failing and index % FAILING_GITOPS == FAILING_GITOPS // 2


def sha(*parts: object) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
