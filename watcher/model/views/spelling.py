"""What kubectl users type for a kind, and the object `stalewatch impact` is asked about.

`KIND/NAMESPACE/NAME` (or `KIND/NAME` for a cluster-scoped kind), where KIND is a kind, its
plural or a short name, alone or as `NAME.GROUP` (`deploy`, `deployments.apps`,
`crd/imagepolicies.image.toolkit.fluxcd.io`), matched case-insensitively, as kubectl resolves
it. The kinds known by name are the built-in and Flux kinds below (their short names as their
CRDs declare them) and every CustomResourceDefinition in the objects looked at (its kind and
plural; the projection keeps no short names). User input: every way it can be wrong is one
`SpellingError` naming the part that is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from watcher.model.ingest.kinds import (
    CRD_GROUP,
    CRD_KIND,
    HELM_GROUP,
    IMAGE_GROUP,
    KUSTOMIZE_GROUP,
    SOURCE_GROUP,
    TERRAFORM_GROUP,
)
from watcher.model.ingest.objects import Key, text

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.:]*[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class Spelling:
    """A kind and the names kubectl answers to for it."""

    group: str
    kind: str
    plural: str
    short: tuple[str, ...] = ()
    namespaced: bool = True

    def names(self) -> tuple[str, ...]:
        return (self.kind.lower(), self.plural, *self.short)


KNOWN: tuple[Spelling, ...] = (
    Spelling("", "Pod", "pods", ("po",)),
    Spelling("", "Service", "services", ("svc",)),
    Spelling("", "ConfigMap", "configmaps", ("cm",)),
    Spelling("", "Secret", "secrets"),
    Spelling("", "ServiceAccount", "serviceaccounts", ("sa",)),
    Spelling("", "Namespace", "namespaces", ("ns",), namespaced=False),
    Spelling("apps", "Deployment", "deployments", ("deploy",)),
    Spelling("apps", "StatefulSet", "statefulsets", ("sts",)),
    Spelling("apps", "DaemonSet", "daemonsets", ("ds",)),
    Spelling("apps", "ReplicaSet", "replicasets", ("rs",)),
    Spelling("coordination.k8s.io", "Lease", "leases"),
    Spelling(CRD_GROUP, CRD_KIND, "customresourcedefinitions", ("crd", "crds"), namespaced=False),
    Spelling(KUSTOMIZE_GROUP, "Kustomization", "kustomizations", ("ks",)),
    Spelling(HELM_GROUP, "HelmRelease", "helmreleases", ("hr",)),
    Spelling(TERRAFORM_GROUP, "Terraform", "terraforms", ("tf",)),
    Spelling(SOURCE_GROUP, "GitRepository", "gitrepositories", ("gitrepo",)),
    Spelling(SOURCE_GROUP, "OCIRepository", "ocirepositories", ("ocirepo",)),
    Spelling(SOURCE_GROUP, "HelmRepository", "helmrepositories", ("helmrepo",)),
    Spelling(SOURCE_GROUP, "HelmChart", "helmcharts", ("hc",)),
    Spelling(SOURCE_GROUP, "Bucket", "buckets"),
    Spelling(IMAGE_GROUP, "ImageRepository", "imagerepositories", ("imgrepo", "imagerepo")),
    Spelling(IMAGE_GROUP, "ImagePolicy", "imagepolicies", ("imgpol", "imagepol")),
    Spelling(IMAGE_GROUP, "ImageUpdateAutomation", "imageupdateautomations"),
)
"""Kinds known by name without their CRD (short names from upstream's kubebuilder markers)."""


class SpellingError(ValueError):
    """Bad input; str() is one line naming what was given."""


def spellings(crds: Iterable[Mapping[str, Any]]) -> list[Spelling]:
    """KNOWN, then every CRD's kind (one KNOWN already names keeps KNOWN's short names)."""
    found = {(s.group, s.kind): s for s in KNOWN}
    for crd in crds:
        group, kind = text(crd, "spec", "group"), text(crd, "spec", "names", "kind")
        plural = text(crd, "spec", "names", "plural")
        if group and kind and plural and (group, kind) not in found:
            namespaced = text(crd, "spec", "scope") != "Cluster"
            found[group, kind] = Spelling(group, kind, plural.lower(), (), namespaced)
    return list(found.values())


def resolve_kind(typed: str, known: Iterable[Spelling]) -> Spelling:
    """The one kind `typed` names: `name` or `name.group` (kubectl also takes `name.version.group`)."""
    wanted = typed.lower()
    matches = []
    for spelling in known:
        for name in spelling.names():
            if wanted == name or _qualified(wanted, name, spelling.group):
                matches.append(spelling)
                break
    if not matches:
        raise SpellingError(
            f"unknown kind {typed!r}: expected a kind, plural or short name (deploy, ks, hr, crd, ...) "
            "or NAME.GROUP of a CustomResourceDefinition looked at"
        )
    if len(matches) > 1:
        named = ", ".join(sorted(f"{m.kind}.{m.group}" if m.group else m.kind for m in matches))
        raise SpellingError(f"kind {typed!r} is ambiguous ({named}): name one as KIND.GROUP")
    return matches[0]


def _qualified(wanted: str, name: str, group: str) -> bool:
    if not group or not wanted.startswith(name + "."):
        return False
    rest = wanted[len(name) + 1 :]
    return rest == group or (rest.endswith("." + group) and "." not in rest[: -len(group) - 1])


def parse_target(typed: str, known: Iterable[Spelling]) -> Key:
    """`crd/imagepolicies.image.toolkit.fluxcd.io` or `hr/team-platform/platform-base` as a Key."""
    parts = typed.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise SpellingError(f"{typed!r}: expected KIND/NAMESPACE/NAME (KIND/NAME for a cluster-scoped kind)")
    spelling = resolve_kind(parts[0], known)
    if spelling.namespaced and len(parts) == 2:
        raise SpellingError(f"{typed!r}: {spelling.kind} is namespaced: give {parts[0]}/NAMESPACE/{parts[1]}")
    if not spelling.namespaced and len(parts) == 3:
        raise SpellingError(f"{typed!r}: {spelling.kind} is cluster-scoped: give {parts[0]}/NAME")
    namespace, name = (parts[1], parts[2]) if len(parts) == 3 else ("", parts[1])
    for what, value in (("namespace", namespace), ("name", name)):
        if value and (len(value) > 253 or not _NAME.fullmatch(value)):
            raise SpellingError(f"{typed!r}: {what} {value!r} is not a Kubernetes object name")
    return Key(spelling.group, spelling.kind, namespace, name)


def crd_kind(crd: Mapping[str, Any]) -> tuple[str, str]:
    """The (group, kind) a CRD serves."""
    return text(crd, "spec", "group"), text(crd, "spec", "names", "kind")
