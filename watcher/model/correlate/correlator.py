"""Correlation: turn candidate findings into ONE root per cause, with its blast radius.

Runs over findings, not objects, so its cost follows the number of problems. Steps:
  1. ControllerDown for every down controller workload; the GitOps objects it reconciles
     arrive as StatusStale candidates (the engine computes those per object, instead of
     their status-based ones: a cached report proves nothing) and point at it. Findings
     about the controller's own Pods and their Events fold into it as evidence.
  2. A failing workload whose HelmRelease/Kustomization says Ready=True yields
     ReleaseReadyWorkloadFailing on that release; Pod -> workload -> release links
     (releases.py).
  3. Per subject, the most explanatory finding is primary; the others point at it.
  4. A ReconcileFailed object whose source (GitRepository, HelmChart, ...) has a finding
     points at it: a source that cannot fetch fails everything built from it.
  5. DependencyBlocked follows dependsOn to the first dependency with a finding (which,
     followed in turn, reaches the deepest cause); unexplained ones wait their threshold.
  6. A controller that went down after its CRD was removed points at CRDRemoved. Every
     NotReconciling of a controller that is ControllerStuck (store/beats.py) points at it.
     A PruneOrphan names the findings on its object (precedence made them its symptoms).
  7. Every finding gets root_cause = the end of its chain; each root lists, in
     `affected`, every subject it explains (roots.py).

A pass works on copies of the candidates (store/working.py); `Correlator` keeps, from one pass to the
next, the answers that are read off objects which rarely change under churn (the owners of a
failing Pod, a release's finding), each until one of the objects it was read from changes, and
each root's blast radius until what it was made of changes (roots.py). `Correlator(keep=False)`
keeps nothing: HealthModel.reference(), the pass the kept answers must equal.

A pass may be given a scope: the subjects of the components a change reaches, and the hubs
(store/components.py, `Correlator.hubs`). Every step then sees only their candidates, each
finding's step records what it read (working.Reads) and asks about other subjects through
`Pass.primary`, which stops the pass (working.Escaped) when one outside the scope holds
findings; the engine takes that subject's component in and runs it again. The findings outside
the scope are kept; a hub's blast radius and message count what it explains among them.

During an incident most findings are StatusStale candidates alone on their subject, each
only pointing at its ControllerDown. The engine passes those as `satellites`: the pass
admits one only when something asks about its subject (it is then *promoted*, exactly as
if it had been a candidate), and otherwise only counts it into its root's message and
`affected`. Its output is then the candidate with root_cause set and its ControllerDown's since
(store/satellites.py places those outputs), so a change to one costs the engine a replaced
output, not a pass over every finding. Events' attempts are settled into RetryLoops before the
pass (loops.py): it is given the loops, not the attempts.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watcher.model.cluster.prune import acted_on
from watcher.model.correlate.appliers import link_appliers
from watcher.model.correlate.policies import PolicyObjects, link_policies, link_stacks, merge
from watcher.model.correlate.releases import ReleaseMemo, link_releases
from watcher.model.correlate.roots import BlastRadii, finish
from watcher.model.ingest.flux import applied_revision, dependencies, inventory, source_key
from watcher.model.ingest.kinds import APPLIERS, CONTROLLER_WORKLOADS, FLUX_GROUPS
from watcher.model.ingest.objects import Key, after, describe, finding_id
from watcher.model.ingest.revisions import same_revision
from watcher.model.rules.context import new_finding
from watcher.model.rules.controllers import ControllerState
from watcher.model.store.components import Components
from watcher.model.store.graph import Edge, Listing
from watcher.model.store.owners import OwnerCache
from watcher.model.store.satellites import Group
from watcher.model.store.working import Correlation, Pass, Scope, key_of_subject
from watcher.model.types import Finding, FindingType, ModelConfig, rfc3339

__all__ = ["Correlation", "Correlator"]


class Correlator:
    """Correlation passes over one model's objects, and what they keep from one pass to the
    next: the owners of failing objects (store/owners.py) and the release findings (releases.py),
    each kept until what it was read from changes."""

    def __init__(self, *, keep: bool = True) -> None:
        """`keep=False`: a pass from scratch every time (the reference the kept answers must equal)."""
        self._owners = OwnerCache()
        self._releases = ReleaseMemo()
        self._radii = BlastRadii(keep=keep)
        self._keep = keep
        self._components = Components()
        self._ran = False
        self._whole = True
        """Whether the next pass must correlate every subject: no components were kept (see `run`)."""

    def forget(self, keys: Collection[Key], edges: Collection[Edge]) -> set[Key]:
        """These objects and reverse edges changed: the subjects whose kept answers read one."""
        return self._owners.forget(keys, edges)

    def reads(self, key: Key) -> bool:
        """Whether the last passes, or an answer kept from them, read this object."""
        return not self._ran or self._owners.reads(key) or self._components.reads(key)

    def holds(self, key: Key) -> bool:
        """Whether a finding kept from the last passes is (or was) about this subject."""
        return self._components.holds(key)

    def reached(
        self, changed: Collection[Key], touched: Iterable[Key | Edge], *, view: Listing
    ) -> set[Key] | None:
        """The subjects the next pass must correlate (store/components.py): None for all of them.

        A subject new to the components comes with its workload and release: a failing Pod's
        step asks about theirs, and taking them in now spares a pass stopped and run again."""
        if not self._ran:
            return None
        related = []
        for key in changed:
            owners = self._owners.of(key, view) if not self._components.holds(key) else None
            if owners is not None:
                related += [k for k in (owners.workload, owners.release) if k is not None]
        return self._components.reached([*changed, *related], touched)

    @property
    def scoped(self) -> bool:
        """Whether the next pass may be given a scope: the last one kept its components."""
        return not self._whole

    @staticmethod
    def hubs(
        *,
        controllers: Sequence[ControllerState],
        stuck: Sequence[Finding],
        unserved: Sequence[Finding],
        removals: Sequence[Finding],
        loops: Sequence[tuple[Finding, bool]],
    ) -> set[Key]:
        """The subjects every pass correlates, in no component (store/components.py): each
        controller's workload and Pods (a down one's ControllerDown takes their findings and
        Events as its evidence), the gone Pods its Events still name, and the subjects of the
        findings that explain subjects anywhere (ControllerStuck, ShardNotServed, CRDRemoved)."""
        own: dict[Key, ControllerState] = {}
        for state in controllers:
            own[key_of_subject(state.health.subject)] = state
            own.update(dict.fromkeys(state.pods, state))
        hubs = set(own)
        hubs.update(key_of_subject(f.subject) for f in (*stuck, *unserved))
        hubs.update(key_of_subject(f.subject) for f in removals if f.type is FindingType.CRD_REMOVED)
        former = _controller_workloads(own)
        for loop, _ in loops:
            key = key_of_subject(loop.subject)
            if key not in hubs and _former_pod_of(key, former) is not None:
                hubs.add(key)
        return hubs

    def clear(self) -> None:
        """Forget everything (blindness changed what every object looks like)."""
        self._owners.clear()
        self._releases.clear()
        self._radii.clear()
        self._ran, self._whole = False, True

    def run(
        self,
        candidates: Iterable[Finding],
        *,
        view: Listing,
        controllers: Sequence[ControllerState],
        removals: Sequence[Finding] = (),
        config: ModelConfig,
        now: datetime,
        satellites: Mapping[Key, Finding] | None = None,
        policies: PolicyObjects | None = None,
        stuck: Sequence[Finding] = (),
        unserved: Sequence[Finding] = (),
        loops: Sequence[tuple[Finding, bool]] = (),
        groups: Mapping[str, Group] | None = None,
        scope: Scope | None = None,
    ) -> Correlation:
        """Root-attributed, deterministically ordered findings (roots first, critical first).

        `satellites`: StatusStale candidates, by subject, that are the only candidate on it and
        are not among `candidates` (see the module docstring). `policies`: the objects a denial's
        policy may be (compliance.Compliance.policy_objects). `stuck`: the ControllerStuck
        findings (never of a controller that is down: that one is ControllerDown's). `unserved`:
        the ShardNotServed findings, which their objects' StatusStale point at. `loops`: the
        RetryLoops the Events' attempts settled as (correlate/loops.py), each with whether its
        object is gone; `candidates` hold no attempt. `groups`: the satellites by the root they
        point at (Satellites.groups). `scope`: correlate only these subjects, keeping the other
        findings of the last passes (store/components.py); raises working.Escaped when a subject
        outside it must be taken in (`scoped` says when a scope may be given).
        """
        assert scope is None or self.scoped, "a scope is given only when `scoped`"
        if scope is not None:  # the cluster rules' findings (removals, CRD risks) are roots of their own
            removals = [r for r in removals if key_of_subject(r.subject) in scope.keys]
        hubs = self.hubs(
            controllers=controllers, stuck=stuck, unserved=unserved, removals=removals, loops=loops
        )
        assert scope is None or all(h in scope.keys for h in hubs), "every pass correlates the hubs"
        run = Pass(
            view,
            config,
            now,
            satellites or {},
            self._owners,
            groups if groups is not None else {},
            scope=scope,
            promoted=self._components.promoted - set(scope.keys) if scope is not None else (),
        )
        own_pods = _controllers(run, controllers)
        former = _controller_workloads(own_pods)
        for removal in removals:
            run.add(removal)
            run.extra[removal.id] = list(removal.affected)
        for root in (*stuck, *unserved):
            run.add(root)
        keyed = [(key_of_subject(c.subject), c) for c in candidates]
        stale = {key for key, c in keyed if c.type is FindingType.STATUS_STALE}
        for key, candidate in keyed:
            _admit(run, key, candidate, stale, own_pods, former)
        for loop, gone in loops:
            _admit(run, key_of_subject(loop.subject), loop, stale, own_pods, former, gone=gone)
        link_releases(run, own_pods, self._releases)
        within = scope.keys if scope is not None else None
        self._owners.end_pass(within)
        self._releases.end_pass(within)
        link_appliers(run)
        _sources(run)
        _dependencies(run)
        _crd_links(run)
        _stuck_links(run)
        _skew_siblings(run)
        link_stacks(run)
        acted_on(run)
        if policies is not None:
            link_policies(run, policies)
        components = self._components
        elsewhere = functools.partial(components.explained, outside=within) if within is not None else None
        result = finish(run, self._radii, elsewhere=elsewhere)
        self._radii.end_pass(run.groups.keys(), within)
        self._ran, self._whole = True, not self._keep
        if self._keep:
            components.replace(run, within, hubs=hubs)
            result.findings, result.order = components.findings(), components.order()
            result.changes = components.changes if within is not None else None
        return result


def _controllers(run: Pass, controllers: Sequence[ControllerState]) -> dict[Key, ControllerState]:
    """ControllerDown per down workload; returns the controllers' own workloads and Pods."""
    own: dict[Key, ControllerState] = {}
    for state in controllers:
        subject = state.health.subject
        own[key := key_of_subject(subject)] = state
        own.update(dict.fromkeys(state.pods, state))
        if state.health.up:
            continue
        evidence = {
            "controller": state.spec.name,
            "reason": state.health.reason,
            "groups": list(state.spec.groups),
            **state.evidence,
        }
        message = f"{state.spec.name} in {subject['namespace']} is down: {state.detail}."
        down = run.add(
            new_finding(
                run.config, FindingType.CONTROLLER_DOWN, subject, message, state.health.since, evidence
            ),
            key=key,
        )
        run.advice[down.id] = state.advice
    return own


_NOT_FROM_STATUS = (FindingType.RETRY_LOOP, FindingType.NOT_RECONCILING)
"""Not read off the object's status: they stand beside its StatusStale (a NotReconciling only
does for an object no workload serves; a down controller's are ControllerDown's alone)."""


def _admit(
    run: Pass,
    key: Key,
    candidate: Finding,
    stale: set[Key],
    own_pods: Mapping[Key, ControllerState],
    former: Mapping[str, Sequence[tuple[str, ControllerState]]],
    *,
    gone: bool = False,
) -> None:
    """`gone`: the candidate is about an object known to be deleted (loops.py)."""
    if candidate.type is FindingType.STATUS_STALE:
        run.add(candidate, link=candidate.evidence["controller_workload"], key=key)
        return
    if (key in stale or key in run.satellites) and candidate.type not in _NOT_FROM_STATUS:
        return  # a cached status proves nothing while its controller is down
    controller = own_pods.get(key) or _former_pod_of(key, former)
    if controller is not None and not controller.health.up:
        down = run.found[finding_id(FindingType.CONTROLLER_DOWN, controller.health.subject)]
        if candidate.type is FindingType.RETRY_LOOP:
            evidence = candidate.evidence
            down.evidence.setdefault("events", []).append(
                f"{evidence['reason']} x{evidence['count']}: {evidence['message']}"
            )
        return  # the controller's own Pods and Events are its ControllerDown evidence
    if gone:
        return
    existing = run.found.get(candidate.id)
    if existing is not None and candidate.type is FindingType.POLICY_DENIED:
        merge(existing, candidate)
        return
    run.add(candidate, key=key)


def _controller_workloads(own: Mapping[Key, ControllerState]) -> dict[str, list[tuple[str, ControllerState]]]:
    """(name, state) of each controller workload, by namespace."""
    found: dict[str, list[tuple[str, ControllerState]]] = defaultdict(list)
    for workload, state in own.items():
        if workload.kind in CONTROLLER_WORKLOADS:
            found[workload.namespace].append((workload.name, state))
    return found


def _former_pod_of(
    key: Key, workloads: Mapping[str, Sequence[tuple[str, ControllerState]]]
) -> ControllerState | None:
    """The controller a Pod that is gone belonged to, by its generated name ("<workload>-..."),
    so Events about a replaced controller Pod stay with the controller."""
    for name, state in workloads.get(key.namespace, ()) if key.kind == "Pod" else ():
        if key.name.startswith(f"{name}-"):
            return state
    return None


def _sources(run: Pass) -> None:
    """An object whose primary finding is ReconcileFailed and whose source (spec.sourceRef,
    chartRef, its HelmChart) has a finding is a symptom of that source: ten Kustomizations
    failing on one GitRepository that cannot clone are one root, not eleven."""
    for finding in run.each(FindingType.RECONCILE_FAILED):
        key = run.keys[finding.id]
        obj = run.store.get(key)
        source = source_key(obj) if obj is not None and run.primary(key) == finding.id else None
        cause = run.primary(source) if source is not None and source != key else None
        if cause is not None:
            run.links[finding.id] = cause
            blocker = run.found[cause]
            finding.message += f" Its source {describe(blocker.subject)} has {blocker.type}: fix that first."


def _waited_on(run: Pass, obj: Mapping[str, Any], waits_on: str) -> list[Key]:
    """What a blocked object waits for: its dependsOn entries, or the objects in its inventory.

    A dependsOn entry without a kind whose same-kind target does not exist resolves to a
    Kustomization, HelmRelease or Terraform of that namespace/name (hand-written snapshots
    and non-Flux controllers name other kinds that way).
    """
    if waits_on == "inventory":
        return inventory(obj)
    keys = []
    for key in dependencies(obj):
        if run.store.get(key) is None:
            key = next(
                (
                    k
                    for k in (Key(FLUX_GROUPS[kind], kind, key.namespace, key.name) for kind in APPLIERS)
                    if run.store.get(k) is not None
                ),
                key,
            )
        keys.append(key)
    return keys


def _dependencies(run: Pass) -> None:
    """Link each primary DependencyBlocked to the first object it waits on that has a finding.

    Followed in turn, that link reaches the deepest cause (a stale, stuck or stalled
    dependency, or the controller behind it). One that nothing explains is a root only
    after its threshold: until then dependencies are normally just still reconciling.
    """
    blocked = FindingType.DEPENDENCY_BLOCKED  # any other primary settles as itself, when asked
    chains = _Chains(run)
    for key in sorted(k for k, ids in run.by_subject.items() if ids and run.found[ids[0]].type is blocked):
        run.view.reading(key)
        chains.settle(key)
    run.view.reading(None)


class _Chains:
    """What each object a DependencyBlocked waits on settles as, found once per pass.

    Without recursion: a dependsOn chain is as long as a cluster makes it, and one of a few
    hundred blocked objects raised RecursionError, which failed every evaluation. Nor a closure
    that calls itself: such a closure is a reference cycle, which kept the whole pass (every
    working copy) alive until a garbage collection found it.
    """

    def __init__(self, run: Pass) -> None:
        self.run = run
        self.threshold = run.config.thresholds.dependency_blocked
        self.settled: dict[Key, str | None] = {}
        self.visiting: set[Key] = set()
        self.cycles: dict[Key, tuple[str, list[Key]]] = {}
        """Each object found on a cycle of objects waiting on each other: what they wait by
        ("dependsOn", or "dependsOn and inventory" when one waits on what it applied) and the
        cycle, starting and ending at it."""

    def settle(self, key: Key) -> str | None:
        """The primary finding the object at `key` settles as (None: none, or a cycle): for a
        DependencyBlocked, what the first object it waits on that settles as a finding settles
        as, the objects after that one not asked at all."""
        frames: list[_Blocked] = []
        value = self._enter(key, frames)
        while frames:
            frame = frames[-1]
            if frame.asked and value is not None:
                value = self._leave(frames.pop(), value)
            elif frame.asked < len(frame.waited):
                frame.asked += 1
                value = self._enter(frame.waited[frame.asked - 1], frames)
            else:
                value = self._leave(frames.pop(), None)
        return value

    def _enter(self, key: Key, frames: list[_Blocked]) -> str | None:
        """What `key` settles as, unless it is a DependencyBlocked to follow: then a frame for it."""
        if key in self.settled:
            self.run.view.note(key)  # what it settled as was read for this one too
            return self.settled[key]
        if key in self.visiting:  # a cycle: reported by its threshold, naming it
            on = frames[[frame.key for frame in frames].index(key) :]
            edges = {frame.finding.evidence.get("waits_on") for frame in on}
            by = "dependsOn" if edges == {"dependsOn"} else "dependsOn and inventory"
            keys = [frame.key for frame in on]
            for index, member in enumerate(keys):
                self.cycles.setdefault(member, (by, [*keys[index:], *keys[:index], member]))
            return None
        run = self.run
        self.visiting.add(key)
        primary = run.primary(key)
        finding = run.found[primary] if primary is not None else None
        if finding is None or finding.type is not FindingType.DEPENDENCY_BLOCKED:
            return self._settled(key, primary)
        obj = run.store.get(key) or {}
        waited = _waited_on(run, obj, finding.evidence.get("waits_on", "dependsOn")) if obj else []
        frames.append(_Blocked(key, finding, waited))
        return None

    def _leave(self, frame: _Blocked, target: str | None) -> str | None:
        """A DependencyBlocked whose waited-on objects were asked: `target`, what explains it."""
        run, finding = self.run, frame.finding
        primary: str | None = finding.id
        if target is not None:
            run.links[finding.id] = target
            blocker = run.found[target]
            finding.message += f" It waits on {describe(blocker.subject)}, which has {blocker.type}."
        elif finding.since is None or after(finding.since, self.threshold) > run.now:
            run.drop(finding.id)
            primary = run.primary(frame.key)
        else:
            _unexplained_block(run, finding, frame.waited, cycle=self.cycles.get(frame.key))
        return self._settled(frame.key, primary)

    def _settled(self, key: Key, primary: str | None) -> str | None:
        self.visiting.discard(key)
        self.settled[key] = primary
        return primary


@dataclass(slots=True)
class _Blocked:
    """A DependencyBlocked being settled: what it waits on, and how many of those were asked."""

    key: Key
    finding: Finding
    waited: list[Key]
    asked: int = 0


def _unexplained_block(
    run: Pass, finding: Finding, waited: Sequence[Key], *, cycle: tuple[str, list[Key]] | None
) -> None:
    on_dependencies = finding.evidence.get("waits_on") == "dependsOn"  # an inventory's entries: no "missing"
    missing = [k for k in waited if run.store.get(k) is None] if on_dependencies else []
    if cycle is not None:  # each waits for the next to be ready: none ever is
        by, keys = cycle
        finding.message += f" It waits on itself: {by} cycle: {' -> '.join(map(describe, keys))}."
        finding.evidence = {**finding.evidence, "cycle": [f"{k.kind}/{k.namespace}/{k.name}" for k in keys]}
    elif missing:
        finding.message += " Missing: " + ", ".join(describe(k) for k in missing) + " (not found)."
        finding.evidence = {
            **finding.evidence,
            "missing": [f"{k.kind}/{k.namespace}/{k.name}" for k in missing],
        }
    else:
        finding.message += (
            f" Nothing it waits on shows a problem, yet it has waited since {rfc3339(finding.since)}."
        )


SIBLINGS_SHOWN = 3


def _skew_siblings(run: Pass) -> None:
    """Name objects on the same source that already run the revision a lagging one does not.

    The objects on one source, in order, and what each applied are read once per pass (a source
    with a thousand objects and a few hundred lagging behind it), and noted as read for each
    lagging object that reads them."""
    on_source: dict[Key, list[Key]] = {}
    applied: dict[Key, str | None] = {}
    for finding in run.each(FindingType.REVISION_SKEW):
        key = run.keys[finding.id]
        obj = run.store.get(key)
        source = source_key(obj) if obj is not None else None
        target = finding.evidence.get("source_revision") or finding.evidence.get("attempted_revision", "")
        if source is None or not target:
            continue
        siblings = on_source.get(source)
        if siblings is None:
            siblings = on_source[source] = sorted(run.store.referrers("source", source))
        else:
            run.view.note(("source", source))
        ahead = []
        for sibling in siblings:
            if sibling == key:
                continue
            if sibling in applied:
                run.view.note(sibling)
                revision = applied[sibling]
            else:
                other = run.store.get(sibling)
                revision = applied[sibling] = applied_revision(other) if other is not None else None
            if revision is not None and same_revision(revision, target):
                ahead.append(sibling)
                if len(ahead) == SIBLINGS_SHOWN:
                    break
        if ahead:
            named = [f"{k.kind}/{k.namespace}/{k.name}" for k in ahead]
            finding.evidence = {**finding.evidence, "siblings_on_revision": named}
            finding.message += (
                f" Already on it from the same source: {', '.join(describe(k) for k in ahead)}."
            )


def _stuck_links(run: Pass) -> None:
    """An object its controller does not reconcile, while that controller is stuck, is its symptom."""
    stuck = {
        f.evidence["controller"]: f.id for f in run.found.values() if f.type is FindingType.CONTROLLER_STUCK
    }
    if not stuck:
        return
    for finding in run.found.values():
        cause = (
            stuck.get(finding.evidence.get("controller", ""))
            if finding.type is FindingType.NOT_RECONCILING
            else None
        )
        if cause is not None:
            run.links[finding.id] = cause


def _crd_links(run: Pass) -> None:
    """A controller that went down after its CRD was removed is explained by the removal."""
    removals = [f for f in run.found.values() if f.type is FindingType.CRD_REMOVED]
    for down in (f for f in run.found.values() if f.type is FindingType.CONTROLLER_DOWN):
        groups = set(down.evidence.get("groups", ()))
        for removal in removals:
            if removal.evidence.get("group") in groups and (
                down.since is None or removal.since is None or down.since >= removal.since
            ):
                run.links[down.id] = removal.id
                break
