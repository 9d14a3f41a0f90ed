"""`stalewatch impact`: what breaks if one object goes away or stops (a plan of its deletion).

Pure: a Store of projected objects, the configured controllers and what could be looked at in,
a typed tree out. The edges are the graph the health model already keeps: who installed what
(graph.claims: Helm labels and annotations, kustomize-controller's labels, inventories), which
controller reconciles which kind (controllers.reconciles), spec.dependsOn (flux.dependencies)
and sources (flux.source_key, the Store's "source" edge). From the target, each object reached
is followed once by the rules for what happened to it (`_RULES`, keyed by its Effect):

  * a CustomResourceDefinition gone: every object of its kind is DELETED by the API server,
    every controller reconciling its kind CANNOT WATCH it (controller-runtime fails to start);
  * a Kustomization or HelmRelease removed: what it installed is REMOVED with it (pruned,
    uninstalled), unless KEPT (`helm.sh/resource-policy: keep`, `kustomize.toolkit.fluxcd.io/prune:
    disabled`, a Kustomization's `spec.prune: false`); that is by design and breaks nothing by
    itself, but is followed;
  * a controller stopped, removed or unable to watch: every object of the kinds it reconciles is
    NOT RECONCILED (its status a cached report), unless another controller runs for that kind;
  * an applier or source gone or not progressing: what dependsOn it, or applies from it, is BLOCKED;
  * an object deleted with its CRD blocks the Kustomization or HelmRelease that applies it (its
    apply fails), one not reconciled blocks the Kustomization that waits for its health.

A kind the answer needs but that could not be looked at (not in the snapshot, forbidden) is
named in `blind`, and then "nothing depends on it" is never the outcome: UNKNOWN is.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from watcher.model.cluster.crd_risk import KEEP, KEEP_ANNOTATION
from watcher.model.ingest.flux import dependencies, inventory, source_key
from watcher.model.ingest.kinds import (
    APPLIERS,
    CONTROLLER_WORKLOADS,
    CRD_GROUP,
    CRD_KIND,
    FLUX_GROUPS,
    HELM_GROUP,
    KUSTOMIZE_GROUP,
    SOURCE_GROUP,
)
from watcher.model.ingest.objects import Key, annotations_of, describe, dig
from watcher.model.rules.controllers import match_spec, reconciles
from watcher.model.store.graph import Store, claims
from watcher.model.types import ControllerSpec
from watcher.model.views.impact_tree import Action, Effect, Impact, Node, Sight
from watcher.model.views.spelling import crd_kind, spellings

PRUNE_ANNOTATION = "kustomize.toolkit.fluxcd.io/prune"
PRUNE_DISABLED = "disabled"


_STATE = {
    Effect.TARGET: "is removed",
    Effect.REMOVED: "is removed",
    Effect.DELETED: "is deleted",
    Effect.CANNOT_WATCH: "cannot start",
    Effect.UNRECONCILED: "is not reconciled",
    Effect.BLOCKED: "is blocked",
}
"""How a why names what happened to its cause."""


def impact(target: Key, store: Store, *, controllers: Sequence[ControllerSpec], sight: Sight) -> Impact:
    """What removing `target` (stopping it, for a controller's workload) breaks."""
    walk = _Walk(store, tuple(controllers), sight)
    found: dict[Key, tuple[Effect, str, Key | None]] = {target: (Effect.TARGET, "", None)}
    below: dict[Key, list[Key]] = defaultdict(list)
    queue: deque[tuple[Key, Effect]] = deque([(target, Effect.TARGET)])
    while queue:
        key, effect = queue.popleft()
        for effects, rule in _RULES:
            if effect not in effects:
                continue
            for child, child_effect, why in rule(walk, key, effect):
                if child not in found:
                    found[child] = (child_effect, why, key)
                    below[key].append(child)
                    queue.append((child, child_effect))

    root = _tree(target, found, below, walk)
    obj = store.get(target)
    installers = tuple(dict.fromkeys(claims(store, obj))) if obj is not None else ()
    action = Action.STOPPING if walk.controller(target) is not None else Action.REMOVING
    blind = tuple(walk.blind)
    if store.namespaces:  # what depends on it elsewhere was not looked at: never "nothing"
        others = f"namespaces other than {', '.join(sorted(store.namespaces))}: not looked at"
        blind = (others, *blind)
    return Impact(root, action, installers, blind)


def _tree(
    target: Key,
    found: Mapping[Key, tuple[Effect, str, Key | None]],
    below: Mapping[Key, list[Key]],
    walk: _Walk,
) -> Node:
    """The nodes, without recursion: a dependsOn chain is as deep as a cluster makes it (a
    recursive build failed past ~1,000 levels). Each object's stack is read in tree order, as
    a reader walks it; the nodes are then built children first."""
    rank = {effect: index for index, effect in enumerate(Effect)}
    stacks: dict[Key, Key | None] = {}
    children: dict[Key, list[Key]] = {}
    pending = [target]
    while pending:
        key = pending.pop()
        stacks[key] = walk.stack(key, found[key][2])
        children[key] = sorted(below.get(key, ()), key=lambda k: (rank[found[k][0]], k))
        pending.extend(reversed(children[key]))
    nodes: dict[Key, Node] = {}
    for key in reversed(stacks):
        effect, why, _ = found[key]
        nodes[key] = Node(key, effect, why, stacks[key], tuple(nodes[c] for c in children[key]))
    return nodes[target]


Consequence = tuple[Key, Effect, str]


@dataclass
class _Walk:
    """The store and what the rules ask of it, indexed on first use."""

    store: Store
    controllers: tuple[ControllerSpec, ...]
    sight: Sight
    blind: list[str] = field(default_factory=list)
    _installed: dict[Key, list[Key]] | None = None
    _dependents: dict[Key, list[Key]] | None = None
    _workloads: list[tuple[ControllerSpec, Key]] | None = None

    def get(self, key: Key) -> Mapping[str, Any] | None:
        return self.store.get(key)

    def need(self, group: str, kind: str, *alternatives: tuple[str, str]) -> None:
        """Note a kind the answer reads (or any of its alternatives) that could not be looked at."""
        whys = [self.sight.unseen(g, k) for g, k in ((group, kind), *alternatives)]
        if all(whys):
            names = ", ".join(k for _, k in ((group, kind), *alternatives))
            note = f"{names}: {whys[0]}"
            if note not in self.blind:
                self.blind.append(note)

    def objects(self, group: str, kind: str) -> list[Key]:
        self.need(group, kind)
        return sorted(self.store.raw_of_kind(group, kind)) if self.store.visible(kind) else []

    def stack(self, key: Key, parent: Key | None) -> Key | None:
        if (key.group, key.kind) in _INSTALLERS:
            return key
        obj = self.get(key)
        if obj is None:
            return parent if parent is not None and (parent.group, parent.kind) in _INSTALLERS else None
        return next(claims(self.store, obj), None)

    def controller(self, key: Key) -> ControllerSpec | None:
        if key.group != "apps" or key.kind not in CONTROLLER_WORKLOADS:
            return None
        obj = self.get(key)
        return match_spec(self.controllers, obj) if obj is not None else None

    def workloads(self) -> list[tuple[ControllerSpec, Key]]:
        """Every visible workload of a configured controller."""
        if self._workloads is None:
            kinds = [("apps", kind) for kind in CONTROLLER_WORKLOADS]
            self.need(*kinds[0], *kinds[1:])
            self._workloads = []
            for group, kind in kinds:
                for key in sorted(self.store.raw_of_kind(group, kind)):
                    if (spec := self.controller(key)) is not None:
                        self._workloads.append((spec, key))
        return self._workloads

    def installed(self, installer: Key) -> list[Key]:
        """What claims to be installed by `installer` (objects a controller made, with a controller
        ownerReference, such as Pods and ReplicaSets, are its owner's, not installed)."""
        if self._installed is None:
            self.need(CRD_GROUP, CRD_KIND)
            self.workloads()
            self._installed = defaultdict(list)
            for group, kind in list(self.store.kinds()):
                for key in sorted(self.store.raw_of_kind(group, kind)):
                    obj = self.get(key)
                    if obj is not None and not _made_by_a_controller(obj):
                        for owner in dict.fromkeys(claims(self.store, obj)):
                            self._installed[owner].append(key)
        return self._installed.get(installer, [])

    def depending_on(self, key: Key) -> list[Key]:
        if self._dependents is None:
            self._dependents = defaultdict(list)
            for kind in APPLIERS:
                for group in {g for g, k in self.store.kinds() if k == kind}:
                    for dependent in sorted(self.store.raw_of_kind(group, kind)):
                        obj = self.get(dependent)
                        for dependency in dependencies(obj) if obj is not None else ():
                            self._dependents[dependency].append(dependent)
        self.need(key.group, key.kind)
        return self._dependents.get(key, [])

    def reconciled_kinds(self, spec: ControllerSpec) -> list[tuple[str, str]]:
        """Every kind known (by name, from a CRD, or with objects) that `spec` reconciles."""
        crds = [obj for k in self.store.raw_of_kind(CRD_GROUP, CRD_KIND) if (obj := self.get(k)) is not None]
        known = {(s.group, s.kind) for s in spellings(crds)} | set(self.store.kinds())
        known |= {(group, kind) for group in spec.groups for kind in spec.kinds}
        found = sorted(k for k in known if reconciles(spec, *k))
        if not found:
            self.blind.append(f"objects {spec.name} reconciles: no kind of {', '.join(spec.groups)} is known")
        return found


_INSTALLERS = frozenset({(KUSTOMIZE_GROUP, "Kustomization"), (HELM_GROUP, "HelmRelease")})
_CONSUMERS: Mapping[str, tuple[str, ...]] = {
    "GitRepository": ("Kustomization", "Terraform", "HelmChart"),
    "OCIRepository": ("Kustomization", "Terraform", "HelmRelease"),
    "Bucket": ("Kustomization", "Terraform", "HelmChart"),
    "HelmRepository": ("HelmChart",),
    "HelmChart": ("HelmRelease",),
}
"""Which kinds apply from (or build charts from) each source kind."""


def _made_by_a_controller(obj: Mapping[str, Any]) -> bool:
    return any(ref.get("controller") for ref in dig(obj, "metadata", "ownerReferences") or ())


def _crd(walk: _Walk, key: Key) -> tuple[str, str] | None:
    obj = walk.get(key) if key.kind == CRD_KIND and key.group == CRD_GROUP else None
    return crd_kind(obj) if obj is not None else None


def _crd_objects(walk: _Walk, key: Key, effect: Effect) -> list[Consequence]:
    served = _crd(walk, key)
    if served is None:
        return []
    why = "the API server deletes it with its CRD"
    return [(k, Effect.DELETED, why) for k in walk.objects(*served)]


def _crd_controllers(walk: _Walk, key: Key, effect: Effect) -> list[Consequence]:
    served = _crd(walk, key)
    if served is None:
        return []
    return [
        (workload, Effect.CANNOT_WATCH, f"{spec.name} reconciles {served[1]}, whose CRD {_STATE[effect]}")
        for spec, workload in walk.workloads()
        if reconciles(spec, *served)
    ]


def _contents(walk: _Walk, key: Key, effect: Effect) -> list[Consequence]:
    if (key.group, key.kind) not in _INSTALLERS:
        return []
    obj = walk.get(key)
    if key.kind == "Kustomization":  # its inventory is what it prunes
        found = set(inventory(obj, kinds=None)) if obj is not None else set()
    else:
        found = set(walk.installed(key))
    found.discard(key)
    verb = "pruned by" if key.kind == "Kustomization" else "uninstalled with"
    out: list[Consequence] = []
    for child in sorted(found):
        kept = _kept(walk.get(child), by=key, installer=obj)
        out.append((child, Effect.KEPT, kept) if kept else (child, Effect.REMOVED, f"{verb} {describe(key)}"))
    return out


def _kept(obj: Mapping[str, Any] | None, *, by: Key, installer: Mapping[str, Any] | None) -> str:
    """Why removing its installer `by` leaves the object in place ("" when it does not)."""
    if by.kind == "Kustomization" and installer is not None and dig(installer, "spec", "prune") is False:
        return f"{describe(by)} has spec.prune: false: kustomize-controller leaves what it applied in place"
    notes = annotations_of(obj) if obj is not None else {}
    if by.kind == "HelmRelease" and notes.get(KEEP_ANNOTATION) == KEEP:
        return f"{KEEP_ANNOTATION}: {KEEP}: Helm leaves it in place"
    if by.kind == "Kustomization" and notes.get(PRUNE_ANNOTATION) == PRUNE_DISABLED:
        return f"{PRUNE_ANNOTATION}: {PRUNE_DISABLED}: kustomize-controller leaves it in place"
    return ""


def _reconciled(walk: _Walk, key: Key, effect: Effect) -> list[Consequence]:
    spec = walk.controller(key)
    if spec is None:
        return []
    others = [(s, w) for s, w in walk.workloads() if w != key]
    out: list[Consequence] = []
    for group, kind in walk.reconciled_kinds(spec):
        if any(reconciles(s, group, kind) for s, _ in others):
            continue  # another controller's workload runs for it
        state = "is stopped" if effect is Effect.TARGET else _STATE[effect]
        why = f"reconciled by {spec.name} only, which {state}: its status is a cached report"
        out += [(k, Effect.UNRECONCILED, why) for k in walk.objects(group, kind)]
    return out


def _dependents(walk: _Walk, key: Key, effect: Effect) -> list[Consequence]:
    if key.kind not in APPLIERS:
        return []
    why = f"dependsOn {describe(key)}, which {_STATE[effect]}"
    return [(k, Effect.BLOCKED, why) for k in walk.depending_on(key)]


def _consumers(walk: _Walk, key: Key, effect: Effect) -> list[Consequence]:
    kinds = _CONSUMERS.get(key.kind, ()) if key.group == SOURCE_GROUP else ()
    for kind in kinds:
        walk.need(FLUX_GROUPS[kind], kind)
    found = set(walk.store.referrers("source", key)) if kinds else set()
    if "HelmChart" in kinds:
        for chart in walk.store.raw_of_kind(SOURCE_GROUP, "HelmChart"):
            obj = walk.get(chart)
            if obj is not None and source_key(obj) == key:
                found.add(chart)
    why = f"applies from {describe(key)}, which {_STATE[effect]}"
    return [(k, Effect.BLOCKED, why) for k in sorted(found)]


def _installer_blocked(walk: _Walk, key: Key, effect: Effect) -> list[Consequence]:
    obj = walk.get(key)
    if obj is None:
        return []
    if effect is Effect.DELETED:
        why = f"applies {describe(key)}, whose kind is no longer served: its apply fails"
        installers = _INSTALLERS
    else:
        why = f"waits for {describe(key)} to be healthy, which nothing reconciles"
        installers = _KUSTOMIZATIONS
    first = next((k for k in claims(walk.store, obj) if (k.group, k.kind) in installers), None)
    return [(first, Effect.BLOCKED, why)] if first is not None else []


_KUSTOMIZATIONS = frozenset({(KUSTOMIZE_GROUP, "Kustomization")})
_GONE = frozenset({Effect.TARGET, Effect.REMOVED, Effect.DELETED})
_STOPPED = frozenset({Effect.TARGET, Effect.REMOVED, Effect.CANNOT_WATCH})
_DOWN = frozenset({Effect.TARGET, Effect.REMOVED, Effect.DELETED, Effect.BLOCKED, Effect.UNRECONCILED})

Rule = Callable[[_Walk, Key, Effect], list[Consequence]]
_RULES: tuple[tuple[frozenset[Effect], Rule], ...] = (
    (_GONE, _crd_objects),
    (_GONE, _crd_controllers),
    (frozenset({Effect.TARGET, Effect.REMOVED}), _contents),
    (_STOPPED, _reconciled),
    (_DOWN, _dependents),
    (_DOWN, _consumers),
    (frozenset({Effect.DELETED, Effect.UNRECONCILED}), _installer_blocked),
)
"""For an object that went the way of its Effect, the rules saying what follows from it."""
