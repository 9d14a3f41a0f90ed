"""CRDOwnershipRisk: a CustomResourceDefinition whose installer is not the stack that needs it.

Helm deletes a CRD it rendered from a chart's templates when the release is uninstalled or the
chart stops rendering it (a subchart removed), and kustomize-controller prunes one its
Kustomization no longer builds; the API server then deletes every object of its kind. When the
controller reconciling that kind was deployed by *another* release or Kustomization (or two
installers claim the CRD, so either one's removal takes it from the other), that deletion breaks
another team's stack, typically hours later when its controller restarts and cannot watch the
kind. This is the same edge CRDRemoved names after the fact (installers: graph.claims; consumers:
controllers.reconciles), reported while it can still be avoided. Helm's
`helm.sh/resource-policy: keep` makes Helm leave the CRD in place, so such a CRD is no risk.
A CRD being deleted is no longer a risk: it is a CRDRemoved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.model.ingest.kinds import Track, key_of_kind
from watcher.model.ingest.objects import Key, annotations_of, describe, is_deleting, subject_of, text
from watcher.model.rules.context import new_finding
from watcher.model.rules.controllers import ControllerState, reconciles
from watcher.model.store.graph import Edge, Recorder, Store, claims, installer_name
from watcher.model.store.working import key_of_subject
from watcher.model.types import Finding, FindingType, ModelConfig, Subject

KEEP_ANNOTATION = "helm.sh/resource-policy"
KEEP = "keep"


@dataclass(frozen=True, slots=True)
class Consumer:
    """A controller workload that reconciles the CRD's kind, and who deployed it (None: nobody known)."""

    controller: str
    workload: Subject
    installer: Key | None


@dataclass(frozen=True, slots=True)
class Instances:
    """The objects of the CRD's kind and, per stack (the installer of each), how many; None: not visible."""

    subjects: list[Subject]
    stacks: Mapping[str, int]


_EXEMPT: Mapping[str, Callable[[Mapping[str, Any]], bool]] = {
    "being deleted: CRDRemoved reports it": is_deleting,
    "kept by helm.sh/resource-policy: keep": lambda crd: annotations_of(crd).get(KEEP_ANNOTATION) == KEEP,
}
"""CRDs no installer's removal can take away, each with why."""


def exempt(crd: Mapping[str, Any]) -> str | None:
    """Why this CRD cannot be a risk whoever installed it, or None."""
    return next((why for why, applies in _EXEMPT.items() if applies(crd)), None)


def dependents(installers: Sequence[Key], consumers: Sequence[Consumer]) -> list[Consumer]:
    """The consumers another installer's removal breaks: with one installer, those deployed by
    another release or Kustomization; with two or more, every consumer (whichever installer is
    removed takes the CRD from the others)."""
    if len(installers) > 1:
        return list(consumers)
    return [c for c in consumers if c.installer is not None and c.installer not in installers]


def crd_ownership_risk(
    crd: Mapping[str, Any],
    *,
    installers: Sequence[Key],
    consumers: Sequence[Consumer],
    instances: Callable[[], Instances | None],
    config: ModelConfig,
) -> Finding | None:
    """CRDOwnershipRisk for a CRD claimed by `installers` (graph.claims, deduplicated) whose kind
    `consumers` reconcile; `instances` reads the objects of its kind (None: that kind is not
    visible), only for a CRD at risk."""
    if not installers or exempt(crd) is not None:
        return None
    at_risk = dependents(installers, consumers)
    if len(installers) < 2 and not at_risk:
        return None
    objects = instances()
    kind, name = text(crd, "spec", "names", "kind"), crd["metadata"]["name"]
    names = [installer_name(k) for k in installers]
    if len(names) == 1:
        message = f"Removing or upgrading {names[0]} deletes CustomResourceDefinition {name}"
    else:
        message = (
            f"{' and '.join(names)} each install CustomResourceDefinition {name}: removing or upgrading"
            " any of them deletes it"
        )
    if at_risk:
        message += ", which " + ", ".join(_consumer(c) for c in at_risk) + " reconciles"
    message += "; " + _objects(kind, objects) + " would be deleted with it."
    message += (
        f" Annotate the CRD {KEEP_ANNOTATION}: {KEEP}, or install it once, with the release that runs"
        " its controller."
    )
    evidence = {
        "group": text(crd, "spec", "group"),
        "kind": kind,
        "installed_by": names,
        "controllers": [
            {
                "name": c.controller,
                "workload": describe(c.workload),
                "deployed_by": installer_name(c.installer) if c.installer else None,
            }
            for c in at_risk
        ],
        "objects": len(objects.subjects) if objects is not None else None,
        "stacks": dict(objects.stacks) if objects is not None else {},
    }
    # No since: the risk began when the later of the CRD and its foreign controller came, which
    # no object records (a CRD's creationTimestamp would date only the first of them).
    found = new_finding(config, FindingType.CRD_OWNERSHIP_RISK, subject_of(crd), message, None, evidence)
    found.affected = [c.workload for c in at_risk] + (objects.subjects if objects is not None else [])
    return found


def _consumer(consumer: Consumer) -> str:
    by = installer_name(consumer.installer) if consumer.installer else "no release or Kustomization"
    return f"{consumer.controller} ({describe(consumer.workload)}, deployed by {by})"


def _objects(kind: str, instances: Instances | None) -> str:
    if instances is None:
        return f"its {kind} objects (not visible to stalewatch)"
    if not instances.stacks:
        return f"no {kind} object exists yet, but any created"
    stacks = ", ".join(f"{stack} ({count})" for stack, count in instances.stacks.items())
    return f"{len(instances.subjects)} {kind} objects, in {stacks},"


_UNOWNED = "no stack"

_CRD = key_of_kind(Track.CRD)


class CRDRisks:
    """The CRDOwnershipRisk findings of every visible CRD, judged again when a CRD, an object of
    an at-risk CRD's kind (both listed whole), or an object or reverse edge the last judgement
    read changes (installers, controller workloads and their edges: read through a Recorder)."""

    def __init__(self, config: ModelConfig, store: Store) -> None:
        self._config, self._store = config, store
        self._findings: dict[Key, Finding] = {}
        self._kinds: set[tuple[str, str]] = {_CRD}
        """The kinds listed whole: CRDs, and those of the CRDs at risk (counted in the findings)."""
        self._reads: Recorder | None = None
        """What the last judgement read; None: judge at the next refresh."""

    def refresh(
        self,
        touched: Collection[Key],
        edges: Collection[Edge],
        *,
        controllers: Sequence[ControllerState],
        everything: bool,
    ) -> bool:
        """Judge every CRD again if a touched object or edge is one a risk reads: whether the
        findings changed. `everything`: the controllers or what is visible changed."""
        if not everything and self._unaffected(touched, edges):
            return False
        view = self._reads = Recorder(self._store)
        found: dict[Key, Finding] = {}
        for key in sorted(self._store.raw_of_kind(*_CRD)):
            crd = view.get(key)
            if crd is not None and (risk := self._judge(view, crd, controllers)) is not None:
                found[key] = risk
        self._kinds = {_CRD} | {(f.evidence["group"], f.evidence["kind"]) for f in found.values()}
        changed = found != self._findings
        self._findings = found
        return changed

    def reads(self, key: Key) -> bool:
        """Whether a change of `key` alone would have the next refresh judge again: the last
        judgement read it or counts its kind (asked of every packed Pod, so built of lookups)."""
        reads = self._reads
        return reads is None or key in reads.keys or (key.group, key.kind) in self._kinds

    def _unaffected(self, touched: Collection[Key], edges: Collection[Edge]) -> bool:
        """None of these is read by the last judgement, nor of a kind it counts."""
        reads = self._reads
        return reads is not None and reads.edges.isdisjoint(edges) and not any(map(self.reads, touched))

    def findings(self) -> list[Finding]:
        return list(self._findings.values())

    def _judge(
        self, view: Recorder, crd: Mapping[str, Any], controllers: Sequence[ControllerState]
    ) -> Finding | None:
        installers = list(dict.fromkeys(claims(view, crd)))
        if not installers:
            return None
        group, kind = text(crd, "spec", "group"), text(crd, "spec", "names", "kind")
        consumers = [self._consumer(view, c) for c in controllers if reconciles(c.spec, group, kind)]
        return crd_ownership_risk(
            crd,
            installers=installers,
            consumers=consumers,
            instances=lambda: self._instances(view, group, kind),
            config=self._config,
        )

    def _consumer(self, view: Recorder, state: ControllerState) -> Consumer:
        subject = state.health.subject
        workload = view.get(key_of_subject(subject))
        installer = next(claims(view, workload), None) if workload is not None else None
        return Consumer(state.spec.name, subject, installer)

    def _instances(self, view: Recorder, group: str, kind: str) -> Instances | None:
        if not self._store.visible(kind):
            return None
        subjects: list[Subject] = []
        stacks: Counter[str] = Counter()
        for key in sorted(self._store.raw_of_kind(group, kind)):
            obj = view.get(key)
            if obj is None:
                continue
            subjects.append(subject_of(obj))
            installer = next(claims(view, obj), None)
            stacks[installer_name(installer) if installer is not None else _UNOWNED] += 1
        return Instances(subjects, dict(sorted(stacks.items())))
