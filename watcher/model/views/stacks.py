"""Stacks: every root Kustomization as the tree of what it applied, each row judged by stalewatch.

A root is a Kustomization no other Kustomization applied (no inventory lists it). Its tree is
what it applied (its inventory: child Kustomizations, HelmReleases, Terraforms, workloads), what
it applied and left behind (PruneOrphan findings: under their former Kustomization, marked
`orphaned`), and the workloads each HelmRelease installed (graph.release_of), walked parents
first, each object once per stack. Every row says what stalewatch makes of it, not what it says of itself: an
object whose controller is down is *stale*, whatever its cached Ready; one with a finding is
failing; one stalewatch could not read in full or cannot see is *not judged*, never current.

Pure, and built on demand (a page view, once per evaluation generation), never in the
evaluation's hot path: a snapshot of the objects and an Evaluation in, a Forest out.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from watcher.model.cluster.compliance import ComplianceReport, StackViolations, Unread
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.flux import inventory, release_keys
from watcher.model.ingest.kinds import HELM_GROUP, KINDS, KUSTOMIZE_GROUP
from watcher.model.ingest.objects import Key, condition, dig, text, transition
from watcher.model.ingest.revisions import same_revision
from watcher.model.rules.kstatus import compute_status
from watcher.model.store.graph import release_of
from watcher.model.types import (
    ControllerHealth,
    Finding,
    FindingType,
    ObjectHealth,
    RevisionInfo,
    Status,
    Subject,
)
from watcher.model.views.row_verdicts import RANK, Facts, Verdict, judge_row

WORKLOADS: tuple[tuple[str, str], ...] = tuple(k.key for k in KINDS if k.inventory and not k.applier)
"""The workloads a stack shows (Deployments, StatefulSets, DaemonSets): what inventories follow."""
APPLIERS: tuple[tuple[str, str], ...] = tuple(k.key for k in KINDS if k.applier)
STACK_KINDS: tuple[tuple[str, str], ...] = tuple(k.key for k in KINDS if k.inventory or k.referable)
"""What a forest reads: appliers, the sources they apply from, workloads."""


class Objects(Protocol):
    """The objects a forest is built from (graph.Snapshot), blindness applied."""

    def get(self, key: Key) -> Mapping[str, Any] | None: ...

    def keys(self, group: str, kind: str) -> Sequence[Key]:
        """Every visible object of this kind, sorted."""
        ...

    def visible(self, kind: str) -> bool: ...

    def sees(self, key: Key) -> bool:
        """Whether `key` would be among them if it existed (kind visible, namespace read)."""
        ...


@dataclass(frozen=True, slots=True)
class Reconciler:
    """The controller that reconciles a row's kind, and whether it runs."""

    name: str
    alive: bool | None
    """None: no workload of it is visible, so nobody can say (never taken as alive)."""
    reason: str
    since: datetime | None
    workload: Subject | None


@dataclass(frozen=True, slots=True)
class Row:
    key: Key
    depth: int
    parent: Key | None
    verdict: Verdict
    reason: str
    """Why the verdict: the object's reason, or what stalewatch found."""
    status: str = ""
    """kstatus' status of the object itself ("" when absent)."""
    since: datetime | None = None
    revision: str = ""
    """The source's artifact revision ("" when unknown)."""
    applied: str = ""
    """What the object last applied (a HelmRelease: the chart version deployed)."""
    skew: bool = False
    attempted: str = ""
    """The revision last attempted (a HelmRelease: the chart version attempted)."""
    reconciler: Reconciler | None = None
    findings: tuple[Finding, ...] = ()
    orphaned: bool = False
    """Not in its parent's inventory any more: prune left it behind (PruneOrphan)."""
    violations: tuple[StackViolations, ...] = ()
    """The policy violations of the objects this Kustomization or HelmRelease owns (cluster/compliance.py)."""


@dataclass(frozen=True, slots=True)
class Stack:
    root: Key
    rows: tuple[Row, ...]
    """Parents first; rows[0] is the root Kustomization."""
    worst: Verdict
    counts: Mapping[Verdict, int]

    @property
    def stale(self) -> int:
        return self.counts.get(Verdict.STALE, 0)

    @property
    def failing(self) -> int:
        return self.counts.get(Verdict.FAILING, 0)


@dataclass(frozen=True, slots=True)
class Forest:
    stacks: tuple[Stack, ...]
    """Worst first, then by root key."""
    placed: Mapping[Key, tuple[tuple[int, int], ...]]
    """Where each object appears: (stack index, row index), for its owner chain."""
    policies_blind: tuple[str, ...] = ()
    """Policy kinds stalewatch cannot list: no row's violations can be told (cluster/compliance.py)."""
    policies_unread: tuple[Unread, ...] = ()
    """Constraints and reports whose counts cannot be read: their violations are unknown."""

    def stack(self, root: Key) -> Stack | None:
        places = self.placed.get(root, ())
        return next((self.stacks[i] for i, at in places if at == 0), None)

    def chain(self, key: Key) -> list[Row]:
        """The object's row and its parents up to its stack's root (its first placement)."""
        places = self.placed.get(key)
        if not places:
            return []
        index, at = places[0]
        rows = {row.key: row for row in self.stacks[index].rows}
        found = [self.stacks[index].rows[at]]
        while found[-1].parent is not None:
            found.append(rows[found[-1].parent])
        return found


class _Releases:
    """graph.View over a snapshot, for release_of: the Helm releases each HelmRelease manages."""

    def __init__(self, snapshot: Objects) -> None:
        self._snapshot = snapshot
        self._index: dict[Key, set[Key]] = defaultdict(set)
        for key in snapshot.keys(HELM_GROUP, "HelmRelease"):
            obj = snapshot.get(key)
            if obj is not None:
                for release in release_keys(obj):
                    self._index[release].add(key)

    def get(self, key: Key) -> Mapping[str, Any] | None:
        return self._snapshot.get(key)

    def referrers(self, edge: str, target: Key) -> set[Key]:
        return set(self._index.get(target, ())) if edge == "release" else set()


def build_forest(snapshot: Objects, evaluation: Evaluation) -> Forest:
    """Every root Kustomization's stack, judged against `evaluation` (its now, its findings).

    A Kustomization listing itself (Flux's own flux-system, which applies its own manifest) is
    still a root; Kustomizations that only apply each other (a cycle, which no root reaches)
    get a stack too, rooted at the first of them, rather than vanish from the page."""
    kustomizations = snapshot.keys(KUSTOMIZE_GROUP, "Kustomization")
    children: dict[Key, list[Key]] = {}
    applied: set[Key] = set()
    for key in kustomizations:
        obj = snapshot.get(key)
        entries = [entry for entry in inventory(obj) if entry != key] if obj is not None else []
        children[key] = entries
        applied.update(entries)
    for parent, left in _left_behind(evaluation.findings).items():
        if parent in children:
            children[parent] += [key for key in left if key not in children[parent]]
    installed = _installed(snapshot)
    judge = _Judge(snapshot, evaluation)
    stacks = [_stack(root, children, installed, judge) for root in kustomizations if root not in applied]
    placed_once = {row.key for stack in stacks for row in stack.rows}
    for key in kustomizations:
        if key not in placed_once:
            stacks.append(_stack(key, children, installed, judge))
            placed_once.update(row.key for row in stacks[-1].rows)
    stacks.sort(key=lambda s: (RANK[s.worst], s.root))
    placed: dict[Key, list[tuple[int, int]]] = defaultdict(list)
    for index, stack in enumerate(stacks):
        for at, row in enumerate(stack.rows):
            placed[row.key].append((index, at))
    compliance = evaluation.compliance or ComplianceReport()
    return Forest(
        tuple(stacks),
        {key: tuple(places) for key, places in placed.items()},
        compliance.blind,
        compliance.unread,
    )


def _left_behind(findings: Iterable[Finding]) -> dict[Key, list[Key]]:
    """The objects each Kustomization applied, no longer lists and did not prune (PruneOrphan)."""
    found: dict[Key, list[Key]] = defaultdict(list)
    for finding in findings:
        if finding.type is FindingType.PRUNE_ORPHAN:
            _, namespace, name = finding.evidence["kustomization"].split("/", 2)
            found[Key(KUSTOMIZE_GROUP, "Kustomization", namespace, name)].append(_key(finding.subject))
    return found


def _installed(snapshot: Objects) -> dict[Key, list[Key]]:
    """The workloads each HelmRelease installed, looked for in the namespaces its releases live in."""
    view = _Releases(snapshot)
    namespaces: set[str] = set()
    for key in snapshot.keys(HELM_GROUP, "HelmRelease"):
        obj = snapshot.get(key)
        if obj is not None:
            namespaces |= {r.namespace for r in release_keys(obj)} | {key.namespace}
    found: dict[Key, list[Key]] = defaultdict(list)
    for group, kind in WORKLOADS:
        for key in snapshot.keys(group, kind):
            if key.namespace in namespaces and (workload := snapshot.get(key)) is not None:
                owner = release_of(view, workload)
                if owner is not None and owner.kind == "HelmRelease":
                    found[owner].append(key)
    return found


def _stack(
    root: Key, children: Mapping[Key, list[Key]], installed: Mapping[Key, list[Key]], judge: _Judge
) -> Stack:
    queue: deque[tuple[Key, Key | None, int]] = deque([(root, None, 0)])
    seen: set[Key] = set()
    rows: list[Row] = []
    while queue:
        key, parent, depth = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        rows.append(judge.row(key, parent, depth))
        below = children.get(key) if key.kind == "Kustomization" else installed.get(key)
        queue.extend((child, key, depth + 1) for child in below or ())
    rows = _parents_first_depth_first(rows)
    counts: dict[Verdict, int] = defaultdict(int)
    for row in rows:
        counts[row.verdict] += 1
    worst = min((row.verdict for row in rows), key=RANK.__getitem__)
    return Stack(root, tuple(rows), worst, dict(counts))


def _parents_first_depth_first(rows: list[Row]) -> list[Row]:
    """The walk's rows (breadth first, so each object sits under its shallowest parent) in tree
    order: every row right under its parent, children by kind then name."""
    below: dict[Key | None, list[Row]] = defaultdict(list)
    for row in rows:
        below[row.parent].append(row)
    ordered: list[Row] = []
    pending = [rows[0]]
    while pending:
        row = pending.pop()
        ordered.append(row)
        pending.extend(
            sorted(
                below.get(row.key, ()), key=lambda r: (_KIND_ORDER.get(r.key.kind, 9), r.key), reverse=True
            )
        )
    return ordered


_KIND_ORDER = {"Kustomization": 0, "Terraform": 1, "HelmRelease": 2}


class _Judge:
    """One row per object: the model's verdicts (health, findings, rejections, controllers)
    indexed once per forest."""

    def __init__(self, snapshot: Objects, evaluation: Evaluation) -> None:
        self._snapshot = snapshot
        self._now = evaluation.now
        self._health: dict[Key, ObjectHealth] = {_key(o.subject): o for o in evaluation.objects}
        self._findings: dict[Key, list[Finding]] = defaultdict(list)
        for finding in evaluation.findings:
            self._findings[_key(finding.subject)].append(finding)
        self._rejected: dict[Key, str] = {}
        for rejection in evaluation.rejected:
            if not rejection.evaluated:
                self._rejected.setdefault(_key(rejection.subject), rejection.message)
        self._controllers = _reconcilers(evaluation.controllers)
        self._revisions: dict[Key, RevisionInfo] = {_key(r.subject): r for r in evaluation.revisions}
        found = evaluation.compliance.by_stack() if evaluation.compliance is not None else {}
        self._violations = {stack: tuple(rows) for stack, rows in found.items() if stack is not None}

    def row(self, key: Key, parent: Key | None, depth: int) -> Row:
        obj = self._snapshot.get(key)
        findings = tuple(self._findings.get(key, ()))
        orphaned = any(f.type is FindingType.PRUNE_ORPHAN for f in findings)
        health = self._health.get(key)
        reconciler = self._reconciler(health.controller if health else None)
        if obj is None and orphaned:  # a kind a stack does not read: its findings are what is known
            verdict, reason = judge_row(Facts(Status.UNKNOWN, "", None, findings, None))
            return Row(key, depth, parent, verdict, reason, findings=findings, orphaned=True)
        if obj is None:
            verdict, reason = _absent(key, self._snapshot, parent)
            return Row(key, depth, parent, verdict, reason, reconciler=reconciler, findings=findings)
        # a GitOps object's kstatus and revisions are the model's own (rules/rows.py);
        # a workload's is read here
        status, why = (health.status, health.reason) if health else _kstatus(obj, self._now)
        verdict, reason = judge_row(Facts(status, why, health, findings, self._rejected.get(key)))
        revs = self._revisions.get(key)
        revision, applied = (revs.revision, revs.applied_revision) if revs else ("", "")
        if key.kind == "HelmRelease":
            applied = deployed_chart(obj)
        attempted = text(obj, "status", "lastAttemptedRevision") if revs else ""
        return Row(
            key,
            depth,
            parent,
            verdict,
            reason,
            status=str(status),
            since=health.last_transition if health else transition(condition(obj, "Available")),
            revision=revision,
            applied=applied,
            skew=bool(revision and applied and not same_revision(revision, applied)),
            attempted=attempted,
            reconciler=reconciler,
            findings=findings,
            orphaned=orphaned,
            violations=self._violations.get(key, ()),
        )

    def _reconciler(self, name: str | None) -> Reconciler | None:
        if name is None:
            return None
        found = self._controllers.get(name)
        return found or Reconciler(name, None, "no workload of it is visible", None, None)


def _kstatus(obj: Mapping[str, Any], now: datetime) -> tuple[Status, str]:
    found = compute_status(obj, now=now)
    return found.status, found.reason


def _absent(key: Key, snapshot: Objects, parent: Key | None) -> tuple[Verdict, str]:
    if not snapshot.visible(key.kind):
        return (
            Verdict.NOT_JUDGED,
            f"not judged: stalewatch cannot see {key.kind} (forbidden or not listed yet)",
        )
    if not snapshot.sees(key):
        return Verdict.NOT_JUDGED, f"not judged: stalewatch does not watch namespace {key.namespace}"
    where = f"applied by {parent.kind} {parent.namespace}/{parent.name}" if parent else "a root"
    return Verdict.MISSING, f"{where} but not in the cluster"


def deployed_chart(obj: Mapping[str, Any]) -> str:
    """The chart version of the newest release Helm reports deployed (status.history, newest
    first); an upgrade that failed leaves the previous one deployed."""
    for snapshot in dig(obj, "status", "history") or ():
        if snapshot.get("status") == "deployed" and snapshot.get("chartVersion"):
            digest = snapshot.get("ociDigest", "")
            return f"{snapshot['chartVersion']}@{digest}" if digest else str(snapshot["chartVersion"])
    return ""


def _reconcilers(controllers: Iterable[ControllerHealth]) -> dict[str, Reconciler]:
    """Per controller name, the workload to show: an up one if any (it reconciles), else the
    first down one, as the model's claims decide (controllers.Claims)."""
    by_name: dict[str, list[ControllerHealth]] = defaultdict(list)
    for c in controllers:
        by_name[c.name].append(c)
    found = {}
    for name, states in by_name.items():
        states.sort(key=lambda c: (not c.up, c.subject["namespace"], c.subject["name"]))
        first = states[0]
        found[name] = Reconciler(name, first.up, first.reason, first.since, first.subject)
    return found


def _key(subject: Subject) -> Key:
    return Key(
        subject["apiVersion"].rpartition("/")[0], subject["kind"], subject["namespace"], subject["name"]
    )
