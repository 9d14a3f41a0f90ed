"""Correlation: turn candidate findings into ONE root per cause, with its blast radius.

Runs over findings, not objects, so its cost follows the number of problems. Steps:
  1. ControllerDown for every down controller workload; the GitOps objects it reconciles
     arrive as StatusStale candidates (the engine computes those per object, instead of
     their status-based ones: a cached report proves nothing) and point at it. Findings
     about the controller's own Pods and their Events fold into it as evidence.
  2. A failing workload whose HelmRelease/Kustomization says Ready=True yields
     ReleaseReadyWorkloadFailing on that release; Pod -> workload -> release links.
  3. Per subject, the most explanatory finding is primary; the others point at it.
  4. A ReconcileFailed object whose source (GitRepository, HelmChart, ...) has a finding
     points at it: a source that cannot fetch fails everything built from it.
  5. DependencyBlocked follows dependsOn to the first dependency with a finding (which,
     followed in turn, reaches the deepest cause); unexplained ones wait their threshold.
  6. A controller that went down after its CRD was removed points at CRDRemoved.
  7. Every finding gets root_cause = the end of its chain; each root lists, in
     `affected`, every subject it explains.

During an incident most findings are StatusStale candidates alone on their subject, each
only pointing at its ControllerDown. The engine passes those as `satellites`: the pass
admits one only when something asks about its subject (it is then *promoted*, exactly as
if it had been a candidate), and otherwise only counts it into its root's message and
`affected`. Its output is then the candidate with root_cause set (satellites.py merges those
outputs in), so a change to one costs the engine a list merge, not a pass over every finding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from watcher.model.context import new_finding
from watcher.model.controllers import ControllerState
from watcher.model.flux import applied_revision, dependencies, inventory, source_key
from watcher.model.graph import View
from watcher.model.kinds import APPLIERS, CONTROLLER_WORKLOADS, FLUX_GROUPS
from watcher.model.objects import (
    Key,
    after,
    condition,
    condition_evidence,
    describe,
    finding_id,
    group_of,
    is_true,
    subject_of,
)
from watcher.model.owners import OwnerCache
from watcher.model.revisions import same_revision
from watcher.model.types import Finding, FindingType, ModelConfig, Severity, Subject, rfc3339
from watcher.model.workloads import WorkloadState, describe_state, state_of

PRECEDENCE: Sequence[FindingType] = (
    FindingType.CRD_REMOVED,
    FindingType.CONTROLLER_DOWN,
    FindingType.STATUS_STALE,
    FindingType.STALLED,
    FindingType.DEPENDENCY_BLOCKED,
    FindingType.REVISION_SKEW,
    FindingType.RELEASE_READY_WORKLOAD_FAILING,
    FindingType.RECONCILE_REQUEST_IGNORED,
    FindingType.GENERATION_NOT_OBSERVED,
    FindingType.RECONCILE_FAILED,
    FindingType.STUCK_RECONCILING,
    FindingType.WORKLOAD_UNHEALTHY,
    FindingType.RETRY_LOOP,
)
"""Within one subject, the earlier type explains the later ones (a blocked object also lags).

ReconcileFailed comes after the findings that say more about the same Ready=False (the
revision it could not apply, an unseen spec or request: the verdict predates it) and
before a Reconciling=True left beside it, whose retries it explains."""

_RANK = {kind: rank for rank, kind in enumerate(PRECEDENCE)}
_CHAINED = (FindingType.DEPENDENCY_BLOCKED, FindingType.RECONCILE_FAILED)
"""Types linked to another object's finding, whose message names the end of the chain too."""
_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


def key_of_subject(subject: Subject) -> Key:
    return Key(group_of(subject["apiVersion"]), subject["kind"], subject["namespace"], subject["name"])


def _order(subject: Subject) -> tuple[str, str, str]:
    return (subject["namespace"], subject["kind"], subject["name"])


OrderKey = tuple[bool, int, str, str, str, str, str]


def order_key(f: Finding) -> OrderKey:
    """Where a finding goes in the output: roots first, critical first, then by subject."""
    return (not f.is_root, _SEVERITY_RANK.get(f.severity, 3), *_order(f.subject), f.type, f.id)


@dataclass(slots=True)
class Correlation:
    findings: list[Finding]
    """Every finding but the unpromoted satellites, in output order (see order_key)."""
    promoted: set[Key] = field(default_factory=set)
    """Satellites admitted as candidates because the pass asked about their subject."""
    roots: dict[str, str] = field(default_factory=dict)
    """Root cause of the unpromoted satellites, by the ControllerDown id they point at."""


class _Pass:
    """The working state of one correlation pass."""

    def __init__(
        self,
        store: View,
        config: ModelConfig,
        now: datetime,
        satellites: Mapping[Key, Finding],
        owners: OwnerCache,
    ) -> None:
        self.store, self.config, self.now = store, config, now
        self.satellites, self.owners = satellites, owners
        self.promoted: set[Key] = set()
        self.found: dict[str, Finding] = {}
        self.keys: dict[str, Key] = {}
        self.links: dict[str, str] = {}
        self.extra: dict[str, list[Subject]] = defaultdict(list)
        self.by_subject: dict[Key, list[str]] = defaultdict(list)
        self.advice: dict[str, str] = {}

    def add(self, finding: Finding, *, link: str | None = None, key: Key | None = None) -> Finding:
        """A working copy: candidates are cached by the engine and must stay as they are, so
        root_cause/affected/message are set on the copy and evidence is replaced, never mutated."""
        f = finding
        copy = Finding(f.id, f.type, f.severity, f.subject, f.message, f.since, f.evidence)
        key = key or key_of_subject(copy.subject)
        self.promote(key)
        self.found[copy.id] = copy
        self.keys[copy.id] = key
        ids = self.by_subject[key]
        ids.append(copy.id)
        if len(ids) > 1:
            ids.sort(key=lambda i: (_RANK[self.found[i].type], i))
        if link is not None:
            self.links[copy.id] = link
        return copy

    def promote(self, key: Key) -> None:
        """Admit the satellite on this subject (if any), as if it had been a candidate."""
        satellite = self.satellites.get(key)
        if satellite is not None and key not in self.promoted:
            self.promoted.add(key)
            self.add(satellite, link=satellite.evidence["controller_workload"], key=key)

    def primary(self, key: Key) -> str | None:
        self.promote(key)
        ids = self.by_subject.get(key)
        return ids[0] if ids else None

    def drop(self, finding_id_: str) -> None:
        del self.found[finding_id_]
        self.by_subject[self.keys.pop(finding_id_)].remove(finding_id_)
        self.links.pop(finding_id_, None)


def correlate(
    candidates: Iterable[Finding],
    *,
    view: View,
    controllers: Sequence[ControllerState],
    removals: Sequence[Finding] = (),
    config: ModelConfig,
    now: datetime,
    satellites: Mapping[Key, Finding] | None = None,
    owners: OwnerCache | None = None,
) -> Correlation:
    """Root-attributed, deterministically ordered findings (roots first, critical first).

    `satellites`: StatusStale candidates, by subject, that are the only candidate on it and
    are not among `candidates` (see the module docstring). `owners`: the answers of earlier
    passes on the same view, kept by the caller (see owners.py); a fresh cache without one.
    """
    run = _Pass(view, config, now, satellites or {}, owners or OwnerCache())
    own_pods = _controllers(run, controllers)
    former = _controller_workloads(own_pods)
    for removal in removals:
        run.add(removal)
        run.extra[removal.id] = list(removal.affected)
    keyed = [(key_of_subject(c.subject), c) for c in candidates]
    stale = {key for key, c in keyed if c.type is FindingType.STATUS_STALE}
    for key, candidate in keyed:
        _admit(run, key, candidate, stale, own_pods, former)
    _releases(run, own_pods)
    run.owners.end_pass()
    _sources(run)
    _dependencies(run)
    _crd_links(run)
    _skew_siblings(run)
    return _finish(run)


def _controllers(run: _Pass, controllers: Sequence[ControllerState]) -> dict[Key, ControllerState]:
    """ControllerDown per down workload; returns the controllers' own workloads and Pods."""
    own: dict[Key, ControllerState] = {}
    for state in controllers:
        own[key_of_subject(state.health.subject)] = state
        own.update(dict.fromkeys(state.pods, state))
        if state.health.up:
            continue
        subject = state.health.subject
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
            )
        )
        run.advice[down.id] = state.advice
    return own


def _admit(
    run: _Pass,
    key: Key,
    candidate: Finding,
    stale: set[Key],
    own_pods: Mapping[Key, ControllerState],
    former: Mapping[str, Sequence[tuple[str, ControllerState]]],
) -> None:
    if candidate.type is FindingType.STATUS_STALE:
        run.add(candidate, link=candidate.evidence["controller_workload"], key=key)
        return
    if (key in stale or key in run.satellites) and candidate.type is not FindingType.RETRY_LOOP:
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
    existing = run.found.get(candidate.id)
    if existing is not None:  # several Events with one reason about one object: one loop
        existing.evidence = {
            **existing.evidence,
            "count": existing.evidence["count"] + candidate.evidence["count"],
        }
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


def _releases(run: _Pass, own_pods: Mapping[Key, ControllerState]) -> None:
    """Pod -> workload links, and ReleaseReadyWorkloadFailing for releases that say Ready=True."""
    failing = [f for f in run.found.values() if f.type is FindingType.WORKLOAD_UNHEALTHY]
    explained: set[str] = set()
    for finding in sorted(failing, key=lambda f: (f.subject["kind"] != "Pod", f.id)):  # Pods say most
        key = run.keys[finding.id]
        owners = run.owners.of(key, run.store)
        if owners is None or key in own_pods:
            continue
        workload_key = owners.workload
        owner_finding = (
            run.primary(workload_key) if workload_key is not None and workload_key != key else None
        )
        if owner_finding is not None and owner_finding not in explained:
            explained.add(owner_finding)
            owner = run.found[owner_finding]
            owner.message += f" {describe(finding.subject)} {describe_state(_state(run, key))}."
        release = run.store.get(owners.release) if owners.release is not None else None
        link = owner_finding
        if release is not None and owners.release not in own_pods and is_true(release, "Ready"):
            rrwf = _release_finding(run, release, workload_key or key, finding)
            if owner_finding is not None:
                run.links.setdefault(owner_finding, rrwf.id)
            else:
                link = rrwf.id
        if link is not None:
            run.links[finding.id] = link


def _state(run: _Pass, key: Key) -> WorkloadState:
    """The failing state of an object that has a finding (it exists: owners said so)."""
    obj = run.store.get(key)
    assert obj is not None
    return state_of(obj)


def _release_finding(run: _Pass, release: Mapping[str, Any], installed: Key, failing: Finding) -> Finding:
    """ReleaseReadyWorkloadFailing for `release`, which installed `installed`; `failing` is what fails."""
    subject = subject_of(release)
    rid = finding_id(FindingType.RELEASE_READY_WORKLOAD_FAILING, subject)
    existing = run.found.get(rid)
    if existing is not None:
        existing.evidence["failing"].append(describe(failing.subject))
        if failing.since is not None and (existing.since is None or failing.since < existing.since):
            existing.since = failing.since
        return existing
    state = _state(run, run.keys[failing.id])
    ready = condition(release, "Ready") or {}
    what = f"{describe(installed)} it installed"
    if installed != run.keys[failing.id]:
        what += f" is failing: {describe(failing.subject)}"
    message = (
        f"{describe(subject)} says Ready=True ({ready.get('message', '')}) but {what} "
        f"{describe_state(state)} since {rfc3339(failing.since)}. The release status does not reflect the "
        "running workload: fix or roll back the release (values, image, chart version)."
    )
    evidence = {
        **condition_evidence(release, "Ready"),
        "workload": f"{installed.kind}/{installed.namespace}/{installed.name}",
        "failing": [describe(failing.subject)],
        "reason": failing.evidence.get("reason", ""),
        "image": failing.evidence.get("image", ""),
    }
    return run.add(
        new_finding(
            run.config, FindingType.RELEASE_READY_WORKLOAD_FAILING, subject, message, failing.since, evidence
        )
    )


def _sources(run: _Pass) -> None:
    """An object whose primary finding is ReconcileFailed and whose source (spec.sourceRef,
    chartRef, its HelmChart) has a finding is a symptom of that source: ten Kustomizations
    failing on one GitRepository that cannot clone are one root, not eleven."""
    for finding in [f for f in run.found.values() if f.type is FindingType.RECONCILE_FAILED]:
        key = run.keys[finding.id]
        obj = run.store.get(key)
        source = source_key(obj) if obj is not None and run.primary(key) == finding.id else None
        cause = run.primary(source) if source is not None and source != key else None
        if cause is not None:
            run.links[finding.id] = cause
            blocker = run.found[cause]
            finding.message += f" Its source {describe(blocker.subject)} has {blocker.type}: fix that first."


def _waited_on(run: _Pass, obj: Mapping[str, Any], waits_on: str) -> list[Key]:
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


def _dependencies(run: _Pass) -> None:
    """Link each primary DependencyBlocked to the first object it waits on that has a finding.

    Followed in turn, that link reaches the deepest cause (a stale, stuck or stalled
    dependency, or the controller behind it). One that nothing explains is a root only
    after its threshold: until then dependencies are normally just still reconciling.
    """
    settled: dict[Key, str | None] = {}
    visiting: set[Key] = set()
    threshold = run.config.thresholds.dependency_blocked

    def settle(key: Key) -> str | None:
        if key in settled:
            return settled[key]
        if key in visiting:
            return None  # a dependsOn cycle: reported by its threshold
        visiting.add(key)
        primary = run.primary(key)
        finding = run.found[primary] if primary is not None else None
        if finding is not None and finding.type is FindingType.DEPENDENCY_BLOCKED:
            obj = run.store.get(key) or {}
            waited = _waited_on(run, obj, finding.evidence.get("waits_on", "dependsOn")) if obj else []
            target = next((t for t in (settle(k) for k in waited) if t is not None), None)
            if target is not None:
                run.links[finding.id] = target
                blocker = run.found[target]
                finding.message += f" It waits on {describe(blocker.subject)}, which has {blocker.type}."
            elif finding.since is None or after(finding.since, threshold) > run.now:
                run.drop(finding.id)
                primary = run.primary(key)
            else:
                _unexplained_block(run, finding, waited)
        visiting.discard(key)
        settled[key] = primary
        return primary

    for key in sorted(k for k, ids in run.by_subject.items() if ids):
        settle(key)


def _unexplained_block(run: _Pass, finding: Finding, waited: Sequence[Key]) -> None:
    missing = [k for k in waited if run.store.get(k) is None]
    if missing and finding.evidence.get("waits_on") == "dependsOn":
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


def _skew_siblings(run: _Pass) -> None:
    """Name objects on the same source that already run the revision a lagging one does not."""
    for finding in [f for f in run.found.values() if f.type is FindingType.REVISION_SKEW]:
        obj = run.store.get(run.keys[finding.id])
        source = source_key(obj) if obj is not None else None
        target = finding.evidence.get("source_revision") or finding.evidence.get("attempted_revision", "")
        if source is None or not target:
            continue
        ahead = []
        for sibling in sorted(run.store.referrers("source", source) - {run.keys[finding.id]}):
            other = run.store.get(sibling)
            if other is not None and same_revision(applied_revision(other), target):
                ahead.append(sibling)
                if len(ahead) == SIBLINGS_SHOWN:
                    break
        if ahead:
            siblings = [f"{k.kind}/{k.namespace}/{k.name}" for k in ahead]
            finding.evidence = {**finding.evidence, "siblings_on_revision": siblings}
            finding.message += (
                f" Already on it from the same source: {', '.join(describe(k) for k in ahead)}."
            )


def _crd_links(run: _Pass) -> None:
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


def _finish(run: _Pass) -> Correlation:
    parent: dict[str, str | None] = {}
    for ids in run.by_subject.values():
        for index, fid in enumerate(ids):
            parent[fid] = run.links.get(fid) if index == 0 else ids[0]
    roots: dict[str, str] = {}
    members: dict[str, list[str]] = defaultdict(list)
    for fid in sorted(run.found):
        root = _root(fid, parent, roots)
        if root != fid:
            run.found[fid].root_cause = root
            members[root].append(fid)
    for fid, root in roots.items():
        finding = run.found[fid]
        if finding.type in _CHAINED and root != run.links.get(fid) and run.keys[root] != run.keys[fid]:
            cause = run.found[root]
            finding.message += f" Root cause: {cause.type} of {describe(cause.subject)}."
    satellites: dict[str, list[tuple[Key, Finding]]] = defaultdict(list)
    result = Correlation([], run.promoted)
    for key, satellite in run.satellites.items():
        if key not in run.promoted:
            link = satellite.evidence["controller_workload"]
            root = result.roots[link] = roots.get(link, link)
            satellites[root].append((key, satellite))
    for root in [*members, *(r for r in satellites if r not in members)]:
        explained = members.get(root, [])
        own = run.keys[root]
        named = [(f, run.keys[f], run.found[f].subject) for f in explained]
        if root in satellites:  # listed as if they had been members: by id
            named += [(s.id, key, s.subject) for key, s in satellites[root]]
            named.sort(key=lambda entry: entry[0])
        subjects = {key: subject for _, key, subject in named if key != own}
        for subject in run.extra.pop(root, ()):
            subjects.setdefault(key_of_subject(subject), subject)
        run.found[root].affected = sorted(subjects.values(), key=_order)
        if run.found[root].type is FindingType.CONTROLLER_DOWN:
            _controller_message(run, run.found[root], explained, stale=len(satellites.get(root, ())))
    for root, extra in run.extra.items():
        run.found[root].affected = sorted(extra, key=_order)
    explaining = members.keys() | satellites.keys()
    for finding in run.found.values():
        if finding.type is FindingType.CONTROLLER_DOWN and finding.id not in explaining:
            _controller_message(run, finding, [])
    result.findings = sorted(run.found.values(), key=order_key)
    return result


def _root(fid: str, parent: Mapping[str, str | None], roots: dict[str, str]) -> str:
    """Follow parents to the end; a cycle is broken at its smallest id."""
    path: list[str] = []
    current: str | None = fid
    while current is not None and current not in roots and current not in path:
        path.append(current)
        current = parent.get(current)
    if current is None:
        root = path[-1]
    elif current in roots:
        root = roots[current]
    else:
        root = min(path[path.index(current) :])
    for member in path:
        roots[member] = root
    return root


def _controller_message(run: _Pass, finding: Finding, explained: Sequence[str], *, stale: int = 0) -> None:
    """`stale`: unpromoted satellites it explains, besides `explained`."""
    stale += sum(1 for f in explained if run.found[f].type is FindingType.STATUS_STALE)
    others = len({run.keys[f] for f in explained if run.found[f].type is not FindingType.STATUS_STALE})
    if stale:
        finding.message += (
            f" {stale} object it reconciles reports a cached status"
            if stale == 1
            else f" {stale} objects it reconciles report a cached status"
        )
        blocked = f" and {others} more {'is' if others == 1 else 'are'} blocked behind them"
        finding.message += (blocked if others else "") + "."
    if run.advice.get(finding.id):
        finding.message += f" {run.advice[finding.id]}"
