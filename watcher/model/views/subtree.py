"""The subtree a wait judges, and how far each object of it is: current, in progress, failed.

The subtree of a target is what it applied (a Kustomization's inventory: child Kustomizations,
HelmReleases, Terraforms, workloads, and every other kind with state: a Certificate, a migration
Job, an operator's resource), the workloads a HelmRelease installed (graph.release_of) and the
Pods of every workload, walked parents first. A kind that is neither a workload nor a GitOps
object is judged by kstatus, as Flux's `wait: true` would: most stacks run without it, and Flux
then says Ready whatever those objects do. An object is CURRENT when kstatus says
Current with its generation observed and, for Flux objects, Ready=True (kstatus calls an object
nobody has reconciled yet Current) at the revision asked of it. FAILED is what waiting will not
fix: Stalled, suspended, a failure at the revision asked (Flux retries it, and fails alike), a
Pod in a back-off or unschedulable for --grace, counted from the state's own start, and a
dependency (spec.dependsOn, outside the subtree) that is not Ready and failed so itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from watcher.model.ingest.flux import (
    PROGRESSING,
    RETRYING,
    applied_revision,
    dependencies,
    inventory,
    release_keys,
    source_key,
)
from watcher.model.ingest.kinds import APPLIERS, FLUX_GROUPS, KUSTOMIZE_GROUP, WITHOUT_STATUS
from watcher.model.ingest.objects import (
    Key,
    condition,
    describe,
    dig,
    group_of,
    integer,
    is_deleting,
    key_of,
    text,
    transition,
)
from watcher.model.ingest.revisions import same_revision, short
from watcher.model.rules.gitops_rules import WAITING_REASONS
from watcher.model.rules.kstatus import compute_status
from watcher.model.rules.workload_words import describe_state
from watcher.model.rules.workloads import BACK_OFF, owner_workload, pod_state, replaced
from watcher.model.store.graph import View, release_of
from watcher.model.types import POD_FAILURES, HealthReason, ObjectHealth, Status, Subject


class State(StrEnum):
    CURRENT = "current"
    IN_PROGRESS = "in_progress"
    FAILED = "failed"
    STALE = "stale"
    MISSING = "missing"
    UNKNOWN = "unknown"
    """Not judged: the object could not be read in full (rejected), or its kind is not served."""


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
FAIL_FAST: frozenset[HealthReason] = frozenset(POD_FAILURES)
"""A Pod state that waiting will not fix once it has lasted --grace (from the state's own start)."""


class Tree(View, Protocol):
    """What judging reads besides the evaluation: graph.Store satisfies it."""

    def in_namespace(self, group: str, kind: str, namespace: str) -> Iterable[Mapping[str, Any]]: ...

    def sees(self, key: Key) -> bool:
        """Whether `key` would be here if it existed (its kind visible, its namespace read)."""
        ...


@dataclass(frozen=True, slots=True)
class ObjectState:
    key: Key
    state: State
    reason: str
    """Why it is not current, in one line naming what it waits for ("" when current)."""
    since: datetime | None = None
    parent: Key | None = None
    """The object whose subtree it is in (None for a target)."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What a walk is asked: where to look, when, and the revisions wanted."""

    view: Tree
    now: datetime
    grace: timedelta
    wanted: Mapping[Key, str]
    """Revision asked of each target and of each source a target applies from."""
    served: Collection[tuple[str, str]] | None = None
    """The (group, kind)s the API server serves and the watcher lists; None: every kind."""
    forbidden: Collection[tuple[str, str]] = ()
    """Served kinds the watcher may not list (403): an object of one is never "not created yet"."""
    pods: dict[str, dict[Key, list[Key]]] = field(default_factory=dict)
    """Per namespace, its Pods by owning workload (filled as the walk needs them)."""


def walk(
    roots: Sequence[Key], ctx: Asked, *, health: Mapping[Key, ObjectHealth], rejected: Mapping[Key, str]
) -> tuple[list[ObjectState], set[Key]]:
    """Every object under `roots`, parents first, each once, judged; and the sources they apply.
    `health`: the model's verdict per GitOps object (a stale one is a cached report); `rejected`:
    objects it could not judge in full, and why (never counted current)."""
    queue: deque[tuple[Key, Key | None]] = deque((key, None) for key in roots)
    seen: set[Key] = set()
    states: list[ObjectState] = []
    sources: set[Key] = set()
    while queue:
        key, parent = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        obj = ctx.view.get(key)
        if key in rejected:
            states.append(ObjectState(key, State.UNKNOWN, f"not judged: {rejected[key]}", parent=parent))
            continue
        if obj is None:
            states.append(_absent(key, ctx, parent))
            continue
        if obj["kind"] == "Pod" and (is_deleting(obj) or _replaced_and_done(obj)):
            continue
        judged = _STATES.get(obj["kind"], _gitops if _is_gitops(obj) else _other)(obj, ctx)
        owner = health.get(key)
        if owner is not None and owner.stale:
            judged = (State.STALE, cached(owner.controller))
        states.append(ObjectState(key, judged[0], judged[1], _since(obj, judged[0]), parent))
        if obj["kind"] in APPLIERS and (source := source_key(obj)) is not None:
            sources.add(source)
        if obj["kind"] in APPLIERS:
            for dependency in dependencies(obj):
                blocking = None if dependency in seen else _blocking(dependency, key, ctx, health)
                if blocking is not None:
                    seen.add(dependency)
                    states.append(blocking)
        queue.extend((child, key) for child in _CHILDREN.get(obj["kind"], _none)(obj, ctx))
    return states, sources


def _absent(key: Key, ctx: Asked, parent: Key | None) -> ObjectState:
    """Not there: not created yet, or of a kind nobody can see here (never taken as fine)."""
    if (key.group, key.kind) in ctx.forbidden:
        why = f"not judged: stalewatch may not list {key.kind}.{key.group} here (403 Forbidden)"
        return ObjectState(key, State.UNKNOWN, why, parent=parent)
    if not ctx.view.sees(key):
        why = f"not judged: stalewatch does not watch namespace {key.namespace}"
        return ObjectState(key, State.UNKNOWN, why, parent=parent)
    if ctx.served is None or (key.group, key.kind) in ctx.served:
        return ObjectState(key, State.MISSING, "not created yet", parent=parent)
    why = f"not judged: {key.kind}.{key.group} is not served by this API server (is its CRD installed?)"
    return ObjectState(key, State.UNKNOWN, why, parent=parent)


def _blocking(key: Key, parent: Key, ctx: Asked, health: Mapping[Key, ObjectHealth]) -> ObjectState | None:
    """A dependency (spec.dependsOn) that failed or whose controller is down: Flux waits for it
    (DependencyNotReady) in vain. One that is Ready, or on its way, or not there, is Flux's to wait for."""
    obj = ctx.view.get(key)
    if obj is None or _ready(obj):
        return None
    owner = health.get(key)
    state, reason = (State.STALE, cached(owner.controller)) if owner and owner.stale else _gitops(obj, ctx)
    if state is not State.FAILED and state is not State.STALE:
        return None
    why = f"holds up {describe(parent)}, which depends on it: {reason}"
    return ObjectState(key, state, why, _since(obj, state), parent)


def _ready(obj: Mapping[str, Any]) -> bool:
    ready = condition(obj, "Ready")
    return ready is not None and ready["status"] == "True"


def _none(obj: Mapping[str, Any], ctx: Asked) -> list[Key]:
    return []


def _applied(obj: Mapping[str, Any], ctx: Asked) -> list[Key]:
    """Every entry with a state to judge (not a ConfigMap, a Secret, RBAC: kinds.WITHOUT_STATUS)."""
    if not obj["apiVersion"].startswith(f"{KUSTOMIZE_GROUP}/"):
        return []
    return [key for key in inventory(obj, kinds=None) if (key.group, key.kind) not in WITHOUT_STATUS]


def _installed(obj: Mapping[str, Any], ctx: Asked) -> list[Key]:
    """The workloads a HelmRelease installed, in the namespaces its releases live in."""
    key = key_of(obj)
    namespaces = sorted({r.namespace for r in release_keys(obj)} | {key.namespace})
    return [
        key_of(workload)
        for namespace in namespaces
        for kind in WORKLOAD_KINDS
        for workload in ctx.view.in_namespace("apps", kind, namespace)
        if release_of(ctx.view, workload) == key
    ]


def _pods(obj: Mapping[str, Any], ctx: Asked) -> list[Key]:
    """The workload's Pods, from an index of its namespace's Pods by owner built once a walk."""
    key = key_of(obj)
    owners = ctx.pods.get(key.namespace)
    if owners is None:
        owners = ctx.pods[key.namespace] = {}
        for pod in ctx.view.in_namespace("", "Pod", key.namespace):
            owner = owner_workload(pod, ctx.view.get)
            if owner is not None:
                owners.setdefault(owner, []).append(key_of(pod))
    return sorted(owners.get(key, ()))


_CHILDREN: Mapping[str, Callable[[Mapping[str, Any], Asked], list[Key]]] = {
    "Kustomization": _applied,
    "HelmRelease": _installed,
    **dict.fromkeys(WORKLOAD_KINDS, _pods),
}


def _replaced_and_done(pod: Mapping[str, Any]) -> bool:
    """A finished Pod its workload replaces (an old ReplicaSet's, a crashed one): not part of the rollout."""
    return text(pod, "status", "phase") in ("Succeeded", "Failed") and replaced(pod)


# -- One object -------------------------------------------------------------------------------------

Judged = tuple[State, str]


def _gitops(obj: Mapping[str, Any], ctx: Asked) -> Judged:
    """A Flux object or Terraform: Ready=True for its generation, at its revision."""
    if dig(obj, "spec", "suspend") is True:
        return State.FAILED, "suspended (spec.suspend: true): nothing reconciles it until it is resumed"
    status = compute_status(obj, now=ctx.now)
    wanted = _wanted_of(obj, ctx)
    if status.status is Status.FAILED:
        return State.FAILED, f"Stalled: {_said(status.reason, status.message)}"
    ready = condition(obj, "Ready")
    if status.status is Status.IN_PROGRESS and ready is not None and ready["status"] == "False":
        attempted = text(obj, "status", "lastAttemptedRevision")
        if not _still_trying(obj, ready) and wanted and same_revision(attempted, wanted):
            return (
                State.FAILED,
                f"failed at {short(wanted)}: {_said(ready.get('reason'), ready.get('message'))}",
            )
    if status.status is not Status.CURRENT:
        return State.IN_PROGRESS, f"{status.status}: {_said(status.reason, status.message)}"
    generation, observed = (
        integer(obj, "metadata", "generation"),
        integer(obj, "status", "observedGeneration"),
    )
    if observed is None or (generation is not None and observed != generation):
        return State.IN_PROGRESS, f"generation {generation} not observed yet (observed {observed})"
    if ready is None or ready["status"] != "True":
        return State.IN_PROGRESS, "no Ready=True condition yet: not reconciled"
    return _at_revision(obj, wanted)


def _still_trying(obj: Mapping[str, Any], ready: Mapping[str, Any]) -> bool:
    """Ready=False that is not (yet) a failure: waiting on other objects (its dependencies, the
    objects it applied) or a first attempt in progress; a retry after a failure is no progress."""
    reconciling = condition(obj, "Reconciling")
    if ready.get("reason", "") in WAITING_REASONS or ready.get("reason") == PROGRESSING:
        return True
    return (
        reconciling is not None and reconciling["status"] == "True" and reconciling.get("reason") != RETRYING
    )


def _wanted_of(obj: Mapping[str, Any], ctx: Asked) -> str:
    """The revision asked of this object: a target's, else that of its source when a target
    applies from the same source, else its source's artifact now."""
    key = key_of(obj)
    if key in ctx.wanted:
        return ctx.wanted[key]
    source = source_key(obj) if obj["kind"] in APPLIERS else None
    if source is None:
        return ""
    if ctx.wanted.get(source):
        return ctx.wanted[source]
    found = ctx.view.get(source)
    return text(found, "status", "artifact", "revision") if found is not None else ""


def _at_revision(obj: Mapping[str, Any], wanted: str) -> Judged:
    kind = obj["kind"]
    if kind not in APPLIERS:
        artifact = text(obj, "status", "artifact", "revision")
        if not wanted or same_revision(artifact, wanted):
            return State.CURRENT, ""
        return State.IN_PROGRESS, f"has artifact {short(artifact) or 'none'}, waiting for {short(wanted)}"
    if not wanted:
        return State.IN_PROGRESS, "its source has no artifact revision yet"
    applied = applied_revision(obj)
    have = [applied, text(obj, "status", "lastAttemptedRevision")] if kind == "HelmRelease" else [applied]
    if all(same_revision(h, wanted) for h in have):
        return State.CURRENT, ""
    return State.IN_PROGRESS, f"at {short(applied) or 'no revision'}, waiting for {short(wanted)}"


def _workload(obj: Mapping[str, Any], ctx: Asked) -> Judged:
    status = compute_status(obj, now=ctx.now)
    if status.status is Status.CURRENT:
        return State.CURRENT, ""
    state = State.FAILED if status.status is Status.FAILED else State.IN_PROGRESS
    return state, _said(status.reason, status.message)


def _pod(obj: Mapping[str, Any], ctx: Asked) -> Judged:
    state = pod_state(obj)
    if state.failing in FAIL_FAST:
        lasted = state.detail in BACK_OFF if state.since is None else ctx.now - state.since >= ctx.grace
        if lasted:
            return State.FAILED, describe_state(state)
        return State.IN_PROGRESS, describe_state(state)
    status = compute_status(obj, now=ctx.now)
    if status.status is Status.CURRENT:
        return State.CURRENT, ""
    return State.IN_PROGRESS, describe_state(state) if state.failing else _said(status.reason, status.message)


_STATES: Mapping[str, Callable[[Mapping[str, Any], Asked], Judged]] = {
    "Pod": _pod,
    **dict.fromkeys(WORKLOAD_KINDS, _workload),
}
"""How each built-in kind is judged; a GitOps object by _gitops, every other kind by _other."""


def _is_gitops(obj: Mapping[str, Any]) -> bool:
    """A Flux (or tofu-controller) kind, judged at the revision asked (_gitops)."""
    return FLUX_GROUPS.get(obj["kind"]) == group_of(obj["apiVersion"])


def _other(obj: Mapping[str, Any], ctx: Asked) -> Judged:
    """Any other kind a stack applies: kstatus' verdict (Current; Failed is what waiting will not
    fix: Stalled, a Job's Failed, a refused CRD). A slower failure (a Certificate whose order
    keeps failing) becomes ObjectFailing in the model, a root the wait fails on."""
    status = compute_status(obj, now=ctx.now)
    if status.status is Status.CURRENT:
        return State.CURRENT, ""
    state = State.FAILED if status.status is Status.FAILED else State.IN_PROGRESS
    return state, _said(status.reason, status.message)


def _said(reason: str | None, message: str | None) -> str:
    return ": ".join(p for p in (reason or "", (message or "").rstrip(". ")) if p) or "no reason given"


def _since(obj: Mapping[str, Any], state: State) -> datetime | None:
    """How long it has been like this: its Reconciling, else Ready condition's transition; a
    Pod's failing state's own start."""
    if state is State.CURRENT:
        return None
    if obj["kind"] == "Pod":
        return pod_state(obj).since
    for kind in ("Stalled", "Reconciling", "Ready", "Available", "Progressing"):
        found = condition(obj, kind)
        if found is not None and (kind in ("Ready", "Available", "Progressing") or found["status"] == "True"):
            return transition(found)
    return None


def subject_key(subject: Subject) -> Key:
    return Key(group_of(subject["apiVersion"]), subject["kind"], subject["namespace"], subject["name"])


def cached(controller: str | None) -> str:
    return f"its controller {controller} is down: this status is a cached report"
