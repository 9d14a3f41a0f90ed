"""Flux vocabulary: the references and revisions Flux objects record.

Readers only (what a Kustomization/HelmRelease/Terraform points at and what it applied);
the rules that judge them live in rules/gitops_rules.py, the graph that indexes them in store/graph.py.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import msgspec

from watcher.model.ingest.kinds import FLUX_GROUPS, INVENTORY_KINDS, KUSTOMIZE_GROUP, SOURCE_GROUP
from watcher.model.ingest.objects import Key, Lookup, dig, group_of, text, time_at

REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
PROGRESSING, RETRYING = "Progressing", "ProgressingWithRetry"
"""Reconciling=True's reasons (fluxcd/pkg/apis/meta): an attempt after a success (also Ready's
reason while one runs), and one after a failure: the controller retries the same revision, which
fails the same way until something changes."""

HELM_RELEASE = Key("helm.sh", "Release", "", "")
"""Pseudo group/kind naming a Helm release (namespace, release name) in the release index."""


def release_key(namespace: str, name: str) -> Key:
    return Key(HELM_RELEASE.group, HELM_RELEASE.kind, namespace, name)


def dependencies(obj: Mapping[str, Any]) -> list[Key]:
    """spec.dependsOn as keys. Flux's entries name the same kind; an entry may also carry
    kind (and apiVersion) to name another kind, e.g. a Terraform."""
    namespace = obj["metadata"].get("namespace", "")
    keys = []
    for dep in dig(obj, "spec", "dependsOn") or ():
        kind = dep.get("kind") or obj["kind"]
        if dep.get("apiVersion"):
            group = group_of(dep["apiVersion"])
        elif kind == obj["kind"]:
            group = group_of(obj["apiVersion"])
        else:
            group = FLUX_GROUPS.get(kind, "")
        keys.append(Key(group, kind, dep.get("namespace") or namespace, dep["name"]))
    return keys


def inventory(obj: Mapping[str, Any], *, kinds: Collection[str] | None = INVENTORY_KINDS) -> list[Key]:
    """Kustomization status.inventory.entries ids ("<ns>_<name>_<group>_<Kind>") of `kinds`
    (None: of every kind) as keys."""
    keys = []
    for entry in dig(obj, "status", "inventory", "entries") or ():
        parts = entry["id"].split("_")
        if len(parts) == 4 and (kinds is None or parts[3] in kinds):
            keys.append(Key(parts[2], parts[3], parts[0], parts[1]))
    return keys


def release_keys(obj: Mapping[str, Any]) -> set[Key]:
    """The Helm release(s) a HelmRelease manages, as written in meta.helm.sh/* annotations.

    Flux names the release spec.releaseName, else "<targetNamespace>-<name>" with a
    targetNamespace, else the object's name; history[0] records it once installed.
    """
    meta = obj["metadata"]
    target = text(obj, "spec", "targetNamespace")
    namespace = target or meta.get("namespace", "")
    name = text(obj, "spec", "releaseName") or (f"{target}-{meta['name']}" if target else meta["name"])
    keys = {release_key(namespace, name)}
    latest = (dig(obj, "status", "history") or [{}])[0]
    if latest.get("name"):
        keys.add(release_key(latest.get("namespace") or namespace, latest["name"]))
    return keys


def source_key(obj: Mapping[str, Any]) -> Key | None:
    """The object whose artifact this one applies.

    Kustomization/Terraform: spec.sourceRef. HelmRelease: spec.chartRef, else the HelmChart
    named in status.helmChart (its HelmRepository's revision is an index, not the chart).
    """
    namespace = obj["metadata"].get("namespace", "")
    ref = dig(obj, "spec", "chartRef") if obj["kind"] == "HelmRelease" else dig(obj, "spec", "sourceRef")
    if isinstance(ref, Mapping) and ref.get("kind") and ref.get("name"):
        group = (
            group_of(ref["apiVersion"])
            if ref.get("apiVersion")
            else FLUX_GROUPS.get(ref["kind"], SOURCE_GROUP)
        )
        return Key(group, ref["kind"], ref.get("namespace") or namespace, ref["name"])
    chart = text(obj, "status", "helmChart")
    if obj["kind"] == "HelmRelease" and chart:
        chart_ns, _, chart_name = chart.rpartition("/")
        return Key(SOURCE_GROUP, "HelmChart", chart_ns or namespace, chart_name)
    return None


def applied_revision(obj: Mapping[str, Any]) -> str:
    """What the object last applied; for helm.toolkit v2 the newest history entry's chart."""
    latest = (dig(obj, "status", "history") or [{}])[0]
    if obj["kind"] == "HelmRelease" and latest.get("chartVersion"):
        digest = latest.get("ociDigest", "")
        return f"{latest['chartVersion']}@{digest}" if digest else str(latest["chartVersion"])
    return text(obj, "status", "lastAppliedRevision")


class Revisions(msgspec.Struct, frozen=True, gc=False):
    """What an applier and its source record, read once per judgement of the applier (a
    Struct: built for every applier re-judged, where a frozen dataclass's __init__ cost ~1 us)."""

    source: Key | None
    revision: str
    """The source's artifact revision ("" when the source is not visible)."""
    applied: str
    attempted: str
    updated: datetime | None
    """When the source got that revision (artifact.lastUpdateTime)."""


def revisions(obj: Mapping[str, Any], lookup: Lookup) -> Revisions:
    source = source_key(obj)
    found = lookup(source) if source is not None else None
    return Revisions(
        source=source,
        revision=text(found, "status", "artifact", "revision") if found else "",
        applied=applied_revision(obj),
        attempted=text(obj, "status", "lastAttemptedRevision"),
        updated=time_at(found, "status", "artifact", "lastUpdateTime") if found else None,
    )


def kustomized_by(obj: Mapping[str, Any]) -> Key | None:
    """The Kustomization whose kustomize-controller applied this object, as its
    kustomize.toolkit.fluxcd.io/name and /namespace labels say."""
    return kustomization_labelled(obj["metadata"].get("labels"))


def kustomization_labelled(labels: Mapping[str, str] | None) -> Key | None:
    """kustomized_by() of an object with these metadata.labels (the decoder asks before it
    packs an object, which then gets no edge: see fastpath)."""
    if not labels:
        return None
    name, namespace = labels.get(f"{KUSTOMIZE_GROUP}/name"), labels.get(f"{KUSTOMIZE_GROUP}/namespace")
    return Key(KUSTOMIZE_GROUP, "Kustomization", namespace, name) if name and namespace else None
