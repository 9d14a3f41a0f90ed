"""The engine: `evaluate()` for a snapshot, `HealthModel` for the live watcher.

The flow, one room of watcher/model/ each; a room imports only the rooms listed before it:
  1. ingest/    an object enters projected (`project()`, or the fast path's decoded Structs and
                packed Pods); what could not be read is set aside (quarantine.py), not dropped;
  2. rules/     its per-object rules (dispatch.py's table) give candidate findings and its row;
  3. store/     the object store and its graph, the controllers tracked with their Pods, the
                deadlines at which a cached answer may flip;
  4. cluster/   the rules no single object shows (prune, CRD risks, CRD removal, compliance,
                conflicting writers), fed through cluster/rules.py;
  5. correlate/ candidates become one root per cause with its blast radius;
  6. evaluation.py, made here; views/ (stacks, impact, `wait`, the timeline) read it.

`evaluate()` is a HealthModel fed every (projected) object once, so both give the same findings by
construction; the live model only remembers more (a CRD or Kustomization gone, an object's earlier
versions: `evaluate()` reads those too when given several versions of one object, oldest first).

Incremental design (an event must not cost O(cluster)):
  * per object, its local candidates, ObjectHealth and RevisionInfo are cached and
    recomputed only when it, or its source, changes (reverse "source" index);
  * controller verdicts are recomputed only when their workload, one of their Pods
    (tracked per controller), a ReplicaSet in their namespace or a Lease changes;
  * a controller's heartbeat read (`heartbeat()`) judges again only the objects whose own
    counter's record it changed, or all of that controller's when what they all read changed
    (store/beats.py);
  * every cached answer carries the next moment a threshold could flip it; its owner's heap
    of those deadlines (store/deadlines.py) makes `evaluate(later_now)` re-check exactly what is due;
  * an Event's RetryLoop attempt is settled with the others about its object and reason
    (correlate/loops.py) only when one of them or that object changes; correlation sees the
    settled loops alone, and runs again only when one of them changed;
  * correlation (correlate/correlator.py's Correlator) then runs over findings only, and only
    when a candidate, a verdict, a loop or something the last pass read changed, and then over
    the *components* that change reaches (store/components.py: the subjects a pass related, a
    failing Pod with its workload and release, a blocked object with what it waits on, and what
    each read) and the hubs (the controllers, stuck or unserved, removed CRDs, whose findings
    explain subjects anywhere), keeping every other finding as it came out;
    which workload and release each failing object belongs to, each release's finding and each
    root's blast radius are kept from pass to pass until what they were made of changes;
  * during an incident most candidates are StatusStale alone on their subject (satellites,
    see store/satellites.py): they stay out of the pass, and a change to one only replaces its
    output in place, unless the last correlation pass asked about its subject (promoted it); a
    down controller's verdict moving in time re-places only its satellites' outputs (their
    `since` is its ControllerDown's, working.stale_since), judging none of its objects again.

How a pass's cost grows (BENCHMARKS.md, "Correlation in proportion to what changed"): an event
costs its object's judgement (and its dependents', by the source index) plus, when a candidate
changed, a correlation pass in proportion to the components the change reaches (a Pod flip:
its workload's and release's findings; a Kustomization behind a source: every object lagging
behind that source that read it), plus the hubs, each counting what it explains in the
components left out from their kept findings (a down controller: the non-satellite findings it
explains), whatever the number of findings elsewhere; placing the outputs costs a bisection
each. Satellites, settled Events and kept blast radii cost nothing per pass. A pass over every
subject runs only when something read for no subject, a controller's verdict or the cluster
rules' findings changed (the hubs' findings moved: what copied from them must follow), or
blindness changed; a down controller's verdict moving in time also re-places its satellites'
outputs. `reference()` is the pass over every subject from scratch that all of it must equal.

Each object is judged inside one guard (intake, rules, controller verdict): one that makes a rule
raise is set aside and reported (ingest/quarantine.py), never the whole evaluation.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watcher.model.cluster.rules import ClusterRules
from watcher.model.correlate.correlator import Correlation, Correlator
from watcher.model.correlate.loops import RetryLoops
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.controller_metrics import ControllerMetrics, ObjectRef, Unreadable
from watcher.model.ingest.kinds import OWNED_KINDS, TRACKED, Track, key_of_kind
from watcher.model.ingest.objects import Key, dig, key_of, labels_of, subject_of
from watcher.model.ingest.packed import Packed
from watcher.model.ingest.quarantine import SetAside, Step, rule_failed
from watcher.model.rules.context import Ctx
from watcher.model.rules.controllers import Claim, ControllerState
from watcher.model.rules.metrics_targets import MetricsTarget
from watcher.model.rules.rows import judge, unjudged
from watcher.model.rules.shards import beat_name
from watcher.model.rules.workloads import timed_by
from watcher.model.store.beats import HeartbeatTracker
from watcher.model.store.components import Filers
from watcher.model.store.deadlines import Deadlines
from watcher.model.store.graph import Edge, Listing, Snapshot, Store
from watcher.model.store.listed import KindKey, Listed, lists
from watcher.model.store.satellites import Filed, Satellites
from watcher.model.store.table import SortedTable
from watcher.model.store.tracking import ControllerTracker
from watcher.model.store.unserved import UnservedShards
from watcher.model.store.working import Escaped, Scope, key_of_subject
from watcher.model.types import (
    ControllerHealth,
    Finding,
    FindingType,
    ModelConfig,
    ObjectHealth,
    RevisionInfo,
)

_POD = key_of_kind(Track.POD)


@dataclass(slots=True)
class _Local:
    findings: list[Finding]
    deadline: datetime | None
    """The earliest of the rules' deadline and the heartbeat's recheck."""
    rules_deadline: datetime | None
    """The rules' own (ctx.pending): a heartbeat-only refresh keeps it and judges the rest."""


def evaluate(objects: Iterable[Mapping[str, Any]], *, now: datetime, config: ModelConfig) -> Evaluation:
    """Findings and health for a snapshot of projected objects (the last of duplicates wins)."""
    model = HealthModel(config)
    for obj in objects:
        model.upsert(obj, now=now)
    return model.evaluate(now)


class HealthModel:
    """The incremental model the live watcher feeds with projected objects."""

    def __init__(self, config: ModelConfig | None = None) -> None:
        self._config = config or ModelConfig()
        self._store = Store()
        self._store.namespaces = frozenset(self._config.namespaces)
        self._local: dict[Key, _Local] = {}
        self._with_findings: set[Key] = set()
        """Keys whose findings are correlation candidates (all but the satellites)."""
        self._satellites = Satellites()
        self._loops = RetryLoops()
        self._correlation = Correlation([])
        self._dirty: set[Key] = set()
        self._beat_dirty: set[Key] = set()
        """Objects only a heartbeat read changed: their heartbeat judged again, not their rules
        (a controller's first read or restart touches every object it reconciles)."""
        self._controllers = ControllerTracker(self._config, self._store)
        self._rules = ClusterRules(self._config, self._store, running=self._controllers.running)
        self._objects_due = Deadlines()
        self._beats = HeartbeatTracker(self._config)
        self._shards = UnservedShards(self._config)
        self._health: SortedTable[Key, ObjectHealth] = SortedTable()
        self._revisions: SortedTable[Key, RevisionInfo] = SortedTable()
        self._changed = True
        self._last: Evaluation | None = None
        self._recheck = True
        """Correlate again regardless of what changed (controllers, removals, time, blindness)."""
        self._filers = Filers()
        self._changed_subjects: set[Key] = set()
        """Subjects whose candidates changed (or whose RetryLoops, or fell due) since the last pass."""
        self._touched: set[Key] = set()
        self._touched_edges: set[Edge] = set()
        self._correlator = Correlator()
        self._pods = functools.partial(self._store.in_namespace, *_POD)
        self._set_aside = SetAside()
        self._unjudged: dict[Key, tuple[str, str]] = {}
        """The (group, kind) of each object no rule could judge (rules/rows.unjudged)."""
        self._listed = Listed()
        self._watched: frozenset[KindKey] | None = None
        """The kinds the input reads (set_watched); None: those it holds objects of (a snapshot)."""
        self.generation = 0
        """Counts the evaluations that changed something: a reader of the objects (a page's
        stacks) keeps what it built from them until it moves."""

    # -- Events ------------------------------------------------------------------------------

    def upsert(self, obj: Mapping[str, Any], *, now: datetime) -> None:
        """An object was added or changed: a projection (see project()), kept as given, not copied
        (its managedFields' field sets are replaced by their hashes: rules/writers.py reads them once)."""
        if type(obj) is Packed:
            if self._put_packed(obj):
                return
            obj = obj.unpacked()
        key = key_of(obj)
        try:
            old, edges = self._store.put(obj, key=key)
            if obj["metadata"].get("managedFields"):  # the field sets are replaced by their hashes here
                self._rules.observe(key, obj, old, now=now)
            self._touch(key, old, obj, edges, now=now)
        except Exception as error:  # the bookkeeping of one object must not stop the others'
            failed = rule_failed(subject_of(obj), error, what="taking it in")
            self._set_aside.record(key, Step.INTAKE, [failed])
            self._dirty.add(key)
            return
        if self._set_aside:
            self._set_aside.record(key, Step.INTAKE, [])

    def stored(self, key: Key) -> Mapping[str, Any] | None:
        """The version of an object the model holds, blind or not: what an upsert replaces
        (the timeline compares the two, views/transitions.py)."""
        return self._store.raw(key)

    def _put_packed(self, packed: Packed) -> bool:
        """Keep what the decoder packed (see fastpath) without judging it: a healthy Pod has no
        finding and nothing to wait for, nor a ReplicaSet that fails nothing. Not when that answer
        would replace findings or a deadline it had, nor when a controller in its namespace may
        own it (controller tracking reads Pods' owner chains): those take upsert()'s general
        path. Nothing is marked when nothing the last evaluation found read the object: the
        next evaluation is then the last one, as most Pod status writes of a healthy cluster
        change nothing stalewatch says."""
        key = packed.key
        if (
            key in self._local
            or self._controllers.in_namespace(key.namespace)
            or self._controllers.claims.is_gitops(key.group, key.kind)
        ):
            return False
        self._store.put_packed(packed)
        if self._read(key):
            self._mark(key, set())
        return True

    def _read(self, key: Key) -> bool:
        """Whether what the last evaluation found may have read this object (an object packed
        has no edges): the correlation pass, an answer it kept, a rule across objects, or an
        object built from it."""
        return (
            self._correlator.reads(key)
            or self._loops.reads(key)
            or bool(self._store.referrers("source", key))
            or self._rules.reads(key)
        )

    def delete(self, obj: Mapping[str, Any], *, now: datetime) -> None:
        """An object was deleted; only its apiVersion, kind and metadata are read."""
        key = key_of(obj)
        old, edges = self._store.remove(key)
        self._rules.deleted(key, old, gitops=self._controllers.claims.is_gitops(key.group, key.kind), now=now)
        if old is not None:
            self._touch(key, old, None, edges, now=now)

    def replace(
        self, api_version: str, kind: str, objs: Iterable[Mapping[str, Any]], *, now: datetime
    ) -> None:
        """A relist: these are now ALL the objects of this kind. A successful list also ends blindness."""
        listed = []
        for obj in objs:
            self.upsert(obj, now=now)
            listed.append(key_of(obj))
        self.retain(api_version, kind, {(key.namespace, key.name) for key in listed}, now=now)

    def retain(
        self, api_version: str, kind: str, names: Collection[tuple[str, str]], *, now: datetime
    ) -> None:
        """The end of a relist whose objects were upserted page by page: of this kind, only
        these (namespace, name) remain; the rest is gone. A successful list also ends blindness."""
        group = api_version.rpartition("/")[0]
        for key in self._store.raw_of_kind(group, kind):
            if (key.namespace, key.name) not in names:
                gone = self._store.raw(key)
                if gone is not None:
                    self.delete(gone, now=now)
        if kind in self._store.blind:
            self.set_blind(self._store.blind - {kind})

    def set_stale(self, kinds: Iterable[str]) -> None:
        """Kinds whose watch is down or relisting, by `kind` name. Their last known objects stay
        and are judged, but a controller judged from them (its workload, Pods or Lease) keeps its
        last verdict until they are live again: a Lease not seen renewed while its watch was down
        is no hung leader, and one seen down stays down."""
        if self._controllers.set_stale(frozenset(kinds)):
            self._changed = True

    def set_blind(self, kinds: Iterable[str]) -> None:
        """Kinds the watcher cannot see (403, or not listed yet), by `kind` name. A kind whose
        watch broke after a list is not blind: its last known objects stay until a relist.

        Their objects are treated as absent: no finding is drawn from last-known data, and a
        controller whose Deployment/Pods/Lease are blind is judged only on what is visible
        (or is unknown, never invented down).
        """
        blind = frozenset(kinds)
        changed = blind ^ self._store.blind
        if not changed:
            return
        self._store.blind = blind
        self._correlator.clear()
        self._loops.touch_all()
        for group, kind in self._store.kinds():
            if kind in changed:
                self._dirty.update(self._store.raw_of_kind(group, kind))
        self._controllers.judge_all_again()
        self._rules.blindness_changed()
        self._changed = self._recheck = True

    def _touch(
        self,
        key: Key,
        old: Mapping[str, Any] | None,
        new: Mapping[str, Any] | None,
        edges: set[Edge],
        *,
        now: datetime,
    ) -> None:
        """Mark what this change can affect: the object, its dependents, its controllers."""
        self._dirty.add(key)
        self._mark(key, edges)
        if lists(key):
            self._listed.update(key, new)  # counted at evaluation (unread); the watcher reads listed_kinds()
        track = TRACKED.get((key.group, key.kind))
        if track is None:
            return
        if track is Track.CONTROLLER:
            self._controllers.workload_changed(key, new)
        elif track is Track.POD:
            self._controllers.pod_changed(key, new)
            # a StatefulSet's or DaemonSet's `since` is read off its Pods (workloads.workload_state)
            self._dirty.update(k for k in timed_by(old, new) if self._store.raw(k) is not None)
        elif track is Track.REPLICASET:
            self._controllers.replicaset_changed(key.namespace)
        elif track is Track.LEASE:
            self._controllers.lease_changed(key.namespace)
        else:
            crd = new if new is not None else old
            if crd is not None and self._rules.crd_changed(key, crd, deleted=new is None, now=now):
                self._recheck = True

    def _mark(self, key: Key, edges: set[Edge]) -> None:
        """What any change of `key` marks, judged again or not: its dependents are dirty, and it
        and its `edges` (the reverse-index entries it changed) are touched for correlation."""
        self._changed = True
        self._touched.add(key)
        if edges:
            self._touched_edges |= edges
        sourced = self._store.referrers("source", key)
        if sourced:
            self._dirty.update(sourced)

    def heartbeat(self, controller: str, *, at: datetime, read: ControllerMetrics | Unreadable) -> None:
        """One read of a controller's own /metrics (ingest/controller_metrics.py parsed it, or
        says why it could not be read): the one entry point of the heartbeat reader.

        `controller` is the heartbeat key of the workload read (MetricsTarget.controller: its
        name; `kustomize-controller`, a shard `kustomize-controller-shard1`): only the objects
        that workload serves are judged against it (rules/shards.py); `at` is the moment of the
        read, which dates every movement it shows (reads of one controller come in time order;
        an older one is ignored). From the first read of
        any controller on, every tracked controller's heartbeat is judged: one never read is
        unknown, never healthy. An `Unreadable` read makes its heartbeat unknown (no alarm);
        the next good read still sees every counter's movement in between. Findings:
        NotReconciling on each object overdue, ControllerStuck on the controller
        (docs/design/heartbeats.md).
        """
        if not self._beats.read(controller, at=at, read=read):
            return
        whole, refs = self._beats.changes(controller)
        self._beat_changed(controller, whole=whole, refs=refs)

    def metrics_targets(self) -> list[MetricsTarget]:
        """Where the heartbeat reader reads each tracked controller's /metrics (or why it cannot)."""
        return self._controllers.metrics_targets()

    def _beat_changed(self, controller: str, *, whole: bool, refs: Collection[ObjectRef] = ()) -> None:
        """Mark the objects a heartbeat change of workload `controller` can affect: all (`whole`)
        or `refs`, of every kind its ControllerSpec claims (a superset: judging again is idempotent)."""
        self._changed = True
        claims = self._controllers.claims
        specs = self._controllers.specs_of(controller)
        for group, kind in self._store.kinds():
            if not claims.is_gitops(group, kind) or claims.claim(group, kind).name not in specs:
                continue
            if whole:
                self._beat_dirty.update(self._store.raw_of_kind(group, kind))
                continue
            for ref in refs:
                key = Key(group, kind, ref[1], ref[2])
                if ref[0] == kind and self._store.raw(key) is not None:
                    self._beat_dirty.add(key)

    # -- Time ----------------------------------------------------------------------------------

    def _pop_due(self, now: datetime) -> None:
        objects = self._objects_due.pop_due(now)
        controllers = self._controllers.pop_due(now)
        stale, beats_due = self._beats.pop_due(now)
        for controller in stale:
            self._beat_changed(controller, whole=True)
        if objects:  # judged again, and correlated again (a DependencyBlocked past its threshold)
            self._changed = True
            self._dirty.update(objects)
            self._changed_subjects.update(objects)
        if self._rules.pop_due(now) or controllers:
            self._changed = self._recheck = True
        elif beats_due:
            self._changed = True

    # -- Evaluation ----------------------------------------------------------------------------

    def evaluate(self, now: datetime) -> Evaluation:
        """Everything the renderers need at `now`; cheap when nothing changed or fell due.

        Correlation runs again only when a candidate finding or a controller verdict changed,
        time made something due, or an event touched an object (or an edge) the previous
        correlation read; otherwise its findings still hold.
        """
        self._pop_due(now)
        if not self._changed and self._last is not None:
            return self._last.at(now)
        self._refresh_controllers(now)
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            self._refresh_object(key, now)
            self._store.pack(key)
        beat_dirty, self._beat_dirty = self._beat_dirty, set()
        for key in beat_dirty:
            if key not in dirty:
                self._refresh_beat(key, now)
        if self._beats.refresh(now) or self._shards.changed:
            self._recheck = True
        controllers = self._controllers.visible()
        touched, edges = self._touched, self._touched_edges
        changed = self._changed_subjects
        changed |= self._loops.settle(self._store, touched, self._config)
        if self._rules.refresh(touched, edges, controllers=controllers, everything=self._recheck, now=now):
            self._recheck = True
        changed |= self._correlator.forget(touched, edges)
        reached = self._correlator.reached
        scope = None if self._recheck else reached(changed, (*touched, *edges), view=self._store)
        if self._last is None or scope is None or scope:
            self._correlation = self._correlate_scope(scope, now=now)
            findings = self._satellites.merged(self._correlation)
        elif self._satellites.moved:
            findings = self._satellites.merged(self._correlation)
        else:
            findings = self._last.findings
        self._recheck = False
        self._changed_subjects, self._touched, self._touched_edges = set(), set(), set()
        self.generation += 1
        self._last = Evaluation(
            now=now,
            findings=findings,
            objects=self._health.values(),
            controllers=self._controller_health(controllers),
            revisions=self._revisions.values(),
            rejected=self._set_aside.listed(),
            compliance=self._rules.report,
            blind=self._store.blind,
            unjudged=tuple(sorted((*kind, n) for kind, n in Counter(self._unjudged.values()).items())),
            unread=self._unread(),
        )
        self._changed = False
        return self._last

    def _correlate_scope(self, scope: set[Key] | None, *, now: datetime) -> Correlation:
        """Correlate the subjects in `scope` (None: all), taking in the component of each subject
        outside it that a step asks about (store/components.py)."""
        if scope is not None and not self._correlator.scoped:
            scope = None
        if scope is not None:
            scope |= self._correlator.hubs(
                controllers=self._controllers.visible(),
                stuck=self._beats.findings(),
                unserved=self._shards.findings(),
                removals=self._rules.findings(),
                loops=self._loops.loops(),
            )
        while True:
            if scope is None:
                keys: Iterable[Key] = sorted(self._with_findings)
                loops = self._loops.loops()
            else:
                keys = sorted(self._filers.of(scope) & self._with_findings)
                loops = [(f, gone) for f, gone in self._loops.loops() if key_of_subject(f.subject) in scope]
            candidates = [f for key in keys for f in self._local[key].findings]
            try:
                return self._correlate(
                    self._correlator,
                    candidates,
                    self._satellites,
                    loops,
                    view=self._store,
                    now=now,
                    scope=Scope(scope, self._foreign) if scope is not None else None,
                )
            except Escaped as escaped:
                assert scope is not None
                more = self._correlator.reached({escaped.key}, (), view=self._store)
                scope = None if more is None else scope | more

    def _foreign(self, key: Key) -> bool:
        """Whether findings are (or may be) about this subject: a candidate, an Event's, or a kept one."""
        return (
            key in self._with_findings
            or self._filers.files(key)
            or self._loops.reads(key)
            or self._correlator.holds(key)
        )

    def _correlate(
        self,
        correlator: Correlator,
        candidates: list[Finding],
        satellites: Satellites,
        loops: Sequence[tuple[Finding, bool]],
        *,
        view: Listing,
        now: datetime,
        scope: Scope | None = None,
    ) -> Correlation:
        return correlator.run(
            candidates,
            view=view,
            controllers=self._controllers.visible(),
            removals=self._rules.findings(),
            config=self._config,
            now=now,
            satellites=satellites.candidates,
            policies=self._rules.policy_objects,
            stuck=self._beats.findings(),
            unserved=self._shards.findings(),
            loops=loops,
            groups=satellites.groups,
            scope=scope,
        )

    def reference(self, now: datetime) -> list[Finding]:
        """The findings a correlation pass from scratch gives over the candidates the model holds
        now (call it right after `evaluate(now)`): no answer kept from an earlier pass, no pass
        skipped, no satellite merged in place. What `evaluate(now).findings` must equal: the
        differential test checks it after every step of random churn and incidents."""
        loops, satellites, candidates = RetryLoops(), Satellites(), []
        for key in sorted(self._local):
            findings = self._local[key].findings
            if loops.file(key, findings):
                continue
            if satellites.file(key, findings, promoted=set()) is Filed.CANDIDATES:
                candidates += findings
        loops.settle(self._store, (), self._config)
        correlation = self._correlate(
            Correlator(keep=False), candidates, satellites, loops.loops(), view=self._store, now=now
        )
        return satellites.merged(correlation)

    def _controller_health(self, states: Iterable[ControllerState]) -> list[ControllerHealth]:
        """Each controller workload's verdict, with its heartbeat once heartbeats are read."""
        beats = self._beats
        if not beats.on:
            return [s.health for s in states]
        return [dataclasses.replace(s.health, heartbeat=beats.heartbeat(beat_name(s))) for s in states]

    def listed_kinds(self) -> frozenset[KindKey]:
        """Every kind with state to read that a Kustomization's inventory lists (store/listed.py),
        and the kinds those make (kinds.OWNED_KINDS): the live watcher watches them."""
        listed = self._listed.kinds()
        return frozenset(listed).union(*(OWNED_KINDS.get(kind, ()) for kind in listed))

    def set_watched(self, kinds: Iterable[KindKey]) -> None:
        """The (group, kind) of every kind the watcher watches, listed or not yet: a listed kind
        outside them, or blind, is not read, and its listed objects are counted so (unread)."""
        watched = frozenset(kinds)
        if watched != self._watched:
            self._watched, self._changed = watched, True

    def _unread(self) -> tuple[tuple[str, str, int], ...]:
        watched, store = self._watched, self._store
        return tuple(
            sorted(
                (group, kind, n)
                for (group, kind), n in self._listed.kinds().items()
                if (
                    not store.holds(group, kind)
                    if watched is None
                    else (group, kind) not in watched or kind in store.blind
                )
            )
        )

    def snapshot(self, kinds: Iterable[tuple[str, str]], *, namespace: str | None = None) -> Snapshot:
        """The visible objects of these kinds now, to read off the event loop (Store.snapshot)."""
        return self._store.snapshot(kinds, namespace=namespace)

    def _refresh_controllers(self, now: datetime) -> None:
        significant, kinds = self._controllers.refresh(now, reject=self._set_aside.verdict)
        if significant:
            self._recheck = True
            for controller in self._beats.set_controllers(self._controllers.visible()):
                self._beat_changed(controller, whole=True)
        for group, kind in kinds:
            self._dirty.update(self._store.raw_of_kind(group, kind))

    def _refresh_object(self, key: Key, now: datetime) -> None:
        obj = self._store.get(key)
        gitops = self._controllers.claims.is_gitops(key.group, key.kind)
        if obj is None:
            if self._satellites.remove(key) or key in self._with_findings:
                gone = self._local.get(key)
                self._changed_subjects |= self._filers.filed(key, gone.findings if gone else [], [])
            self._loops.file(key, [])
            self._local.pop(key, None)
            self._unjudged.pop(key, None)
            self._with_findings.discard(key)
            self._objects_due.schedule(key, None)
            self._beats.forget(key)
            self._shards.file(key, None)
            self._health.set(key, None)
            self._revisions.set(key, None)
            self._set_aside.record(key, Step.RULES, [])
            return
        ctx = Ctx(now, self._config, self._store.get, self._pods)
        claim = self._controllers.claims.claim(key.group, key.kind, labels_of(obj)) if gitops else None
        findings, health, revision, rejected = judge(obj, ctx, claim=claim)
        suspended = dig(obj, "spec", "suspend") is True  # not reconciled on purpose: it waits for none
        self._shards.file(key, claim.unserved if claim is not None and not suspended else None)
        self._set_aside.record(key, Step.RULES, rejected)
        if unjudged(obj, gitops=gitops):
            self._unjudged[key] = (key.group, key.kind)
        else:
            self._unjudged.pop(key, None)
        rules_deadline = min(ctx.pending, default=None)
        if gitops:
            self._health.set(key, health)
            self._revisions.set(key, revision)
        self._file_local(key, obj, findings, rules_deadline, claim=claim, now=now)

    def _refresh_beat(self, key: Key, now: datetime) -> None:
        """Judge again only the object's heartbeat: its rules' findings and deadline are kept."""
        obj = self._store.get(key)
        if obj is None:
            return
        previous = self._local.get(key)
        kept = previous.findings if previous is not None else []
        findings = [f for f in kept if f.type is not FindingType.NOT_RECONCILING]
        claim = self._controllers.claims.claim(key.group, key.kind, labels_of(obj))
        self._file_local(
            key, obj, findings, previous.rules_deadline if previous else None, claim=claim, now=now
        )

    def _file_local(
        self,
        key: Key,
        obj: Mapping[str, Any],
        findings: list[Finding],
        rules_deadline: datetime | None,
        *,
        claim: Claim | None,
        now: datetime,
    ) -> None:
        """The object's local candidates: its rules' `findings`, then its heartbeat's (GitOps
        kinds, by `claim`); filed for correlation and scheduled for their earliest deadline."""
        deadline = rules_deadline
        if claim is not None:
            own = claim.unserved is None
            overdue, recheck = self._beats.judge(key, obj, claim.beat, own=own, now=now)
            if overdue is not None:
                findings = [*findings, overdue]
            if recheck is not None and (deadline is None or recheck < deadline):
                deadline = recheck
        previous = self._local.get(key)
        if findings != (old := previous.findings if previous is not None else []):
            self._candidate_changed(key, old, findings)
        if findings or deadline is not None:
            self._local[key] = _Local(findings, deadline, rules_deadline)
        else:
            self._local.pop(key, None)
        self._objects_due.schedule(key, deadline)

    def _candidate_changed(self, key: Key, old: list[Finding], findings: list[Finding]) -> None:
        """File the key's new candidates as a satellite or for correlation; a satellite that
        stays one, on the same controller and unpromoted, only moves in the output; an Event's
        attempt is filed with the RetryLoops, which tell correlation when a loop changed."""
        if self._loops.file(key, findings):  # RetryLoops.settle says which loops changed
            if key in self._with_findings:
                self._with_findings.discard(key)
                self._changed_subjects |= self._filers.filed(key, old, [])
            return
        filed = self._satellites.file(key, findings, promoted=self._correlation.promoted)
        if filed is Filed.CANDIDATES:
            (self._with_findings.add if findings else self._with_findings.discard)(key)
        else:
            self._with_findings.discard(key)
            if filed is Filed.MOVED:  # only its output moves (Satellites.moved, in this evaluation)
                return
        self._changed_subjects |= self._filers.filed(key, old, findings)
