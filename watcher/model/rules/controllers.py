"""Is the controller that writes a status alive? Workload, its Pods and its leader Lease.

A status is only as true as the controller that writes it is alive. A controller is
DOWN when it has no available replica (and its leader Lease, if we can see one, has run
out: a restart within the lease duration is not an outage), or when its Pod is Running
but the Lease has expired (a hung leader). Reasons come from the fixed set
CONTROLLER_DOWN_REASONS because they become metric labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from watcher.model.ingest.kinds import CONTROLLER_WORKLOADS
from watcher.model.ingest.objects import (
    Key,
    after,
    condition,
    dig,
    integer,
    is_deleting,
    key_of,
    labels_of,
    spec_written_at,
    subject_of,
    text,
    time_at,
    transition,
)
from watcher.model.rules.shards import (
    EVERYTHING,
    Scope,
    Unserved,
    beat_name,
    is_shard_of,
    lease_name,
    serving,
    watch_scope,
)
from watcher.model.rules.workload_words import particulars, termination_evidence
from watcher.model.rules.workloads import (
    WorkloadState,
    available_replicas,
    desired_replicas,
    owner_workload,
    pod_state,
)
from watcher.model.types import ControllerHealth, ControllerSpec, HealthReason, Thresholds

_TICK = timedelta(microseconds=1)
"""Re-check just after a boundary that is strict ("expired" means renewTime + duration < now)."""

_ADVICE: Mapping[HealthReason, str] = {
    HealthReason.IMAGE_PULL_BACK_OFF: (
        "Fix the image or roll back the Deployment; suspend/resume will not help while no controller runs."
    ),
    HealthReason.ERR_IMAGE_PULL: (
        "Fix the image or roll back the Deployment; suspend/resume will not help while no controller runs."
    ),
    HealthReason.CRASH_LOOP_BACK_OFF: (
        "Read its logs (kubectl logs --previous) and fix or roll back; nothing is reconciled meanwhile."
    ),
    HealthReason.OOM_KILLED: "Raise its memory limit or roll back; nothing is reconciled meanwhile.",
    HealthReason.CREATE_CONTAINER_CONFIG_ERROR: (
        "A ConfigMap/Secret it mounts or reads is missing or wrong; restore it."
    ),
    HealthReason.UNSCHEDULABLE: "No node can run it; free capacity or fix its node selector/tolerations.",
    HealthReason.NOT_READY: "Check its readiness probe and logs.",
    HealthReason.NO_AVAILABLE_REPLICAS: "Check its ReplicaSet and Events for why no Pod runs.",
    HealthReason.LEASE_EXPIRED: (
        "Its Pod runs but the leader stopped renewing the Lease (hung); restart it (kubectl rollout restart)."
    ),
    HealthReason.SCALED_TO_ZERO: "Scale it back up; nothing is reconciled while it has no replicas.",
}


@dataclass(frozen=True, slots=True)
class ControllerState:
    """One controller workload's verdict, with the proof and when to look again."""

    health: ControllerHealth
    spec: ControllerSpec
    pods: tuple[Key, ...]
    detail: str
    """What is wrong, naming objects ("pod x is in ImagePullBackOff (image y)"); "" when up."""
    advice: str
    evidence: dict[str, Any] = field(default_factory=dict)
    deadline: datetime | None = None
    scope: Scope = EVERYTHING
    """The objects it reconciles (its --watch-label-selector: rules/shards.py)."""


def matches(spec: ControllerSpec, workload: Mapping[str, Any]) -> bool:
    """A Deployment/StatefulSet is this controller by name (or is a shard of it, `<name>-shardN`
    with a watch label selector), or by selector labels when given."""
    if workload["kind"] not in CONTROLLER_WORKLOADS:
        return False
    meta = workload["metadata"]
    if spec.namespace is not None and meta.get("namespace", "") != spec.namespace:
        return False
    if spec.selector:
        own = labels_of(workload)
        return all(own.get(k) == v for k, v in spec.selector.items())
    return bool(meta["name"] == spec.name) or is_shard_of(spec.name, workload)


def match_spec(specs: Iterable[ControllerSpec], workload: Mapping[str, Any]) -> ControllerSpec | None:
    return next((spec for spec in specs if matches(spec, workload)), None)


def reconciles(spec: ControllerSpec, group: str, kind: str) -> bool:
    """Whether it reconciles a kind: what a CRD removal breaks (CRDRemoved, CRDOwnershipRisk)."""
    return group in spec.groups and (not spec.kinds or kind in spec.kinds)


def owns_pod(
    workload: Mapping[str, Any], pod: Mapping[str, Any], lookup: Callable[[Key], Mapping[str, Any] | None]
) -> bool:
    """The workload's selector matches the Pod and its ownerReferences (if any) lead back to it
    (through its ReplicaSet, found with `lookup`; see owner_workload)."""
    selector = dig(workload, "spec", "selector", "matchLabels") or {}
    own = labels_of(pod)
    if not selector or any(own.get(k) != v for k, v in selector.items()):
        return False
    owner = owner_workload(pod, lookup)
    return owner is None or owner == key_of(workload)


def find_lease(
    spec: ControllerSpec, workload: Mapping[str, Any], leases: Iterable[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The leader Lease: the configured name, else Flux's "<name>-leader-election" (suffixed by
    its watch label selector's hash: shards.lease_name), else one held by a Pod of this workload
    (holderIdentity starts with "<workload name>-")."""
    namespace = spec.lease_namespace or workload["metadata"].get("namespace", "")
    candidates = [lease for lease in leases if lease["metadata"].get("namespace", "") == namespace]
    wanted = spec.lease or lease_name(spec.name, watch_scope(workload))
    for lease in candidates:
        if lease["metadata"]["name"] == wanted:
            return lease
    if spec.lease:
        return None
    prefix = workload["metadata"]["name"] + "-"
    return next((le for le in candidates if text(le, "spec", "holderIdentity").startswith(prefix)), None)


def _holds(holder: str, pod: Mapping[str, Any]) -> bool:
    """controller-runtime's holderIdentity is "<pod name>_<uuid>"."""
    name: str = pod["metadata"]["name"]
    return holder == name or holder.startswith(name + "_")


def lease_expiry(lease: Mapping[str, Any] | None) -> datetime | None:
    if lease is None:
        return None
    renewed = time_at(lease, "spec", "renewTime")
    duration = integer(lease, "spec", "leaseDurationSeconds")
    if renewed is None or duration is None:
        return None
    return after(renewed, timedelta(seconds=duration))


def _lease_evidence(lease: Mapping[str, Any] | None) -> dict[str, Any]:
    if lease is None:
        return {}
    return {
        "lease": lease["metadata"]["name"],
        "lease_holder": text(lease, "spec", "holderIdentity"),
        "lease_renew_time": text(lease, "spec", "renewTime"),
        "lease_duration_seconds": integer(lease, "spec", "leaseDurationSeconds"),
    }


_PRIORITY = {reason: rank for rank, reason in enumerate(HealthReason)}


def _worst(
    pods: Sequence[tuple[Mapping[str, Any], WorkloadState]],
) -> tuple[Mapping[str, Any], WorkloadState] | None:
    """The failing Pod that explains most: a concrete kubelet reason before a bare NotReady."""
    failing = [(pod, state) for pod, state in pods if state.failing is not None]
    if not failing:
        return None
    return min(
        failing,
        key=lambda ps: (_PRIORITY[ps[1].failing or HealthReason.NOT_READY], ps[0]["metadata"]["name"]),
    )


def controller_state(
    spec: ControllerSpec,
    workload: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    lease: Mapping[str, Any] | None,
    *,
    now: datetime,
    thresholds: Thresholds,
) -> ControllerState:
    """Judge one controller workload. `pods` are the Pods it owns (see owns_pod).

    With no Pods (none visible, e.g. the watcher may not list them) only the workload's
    own status counts, so no Pod-level reason is ever invented.
    """
    meta = workload["metadata"]
    states = [(pod, pod_state(pod)) for pod in pods if not is_deleting(pod)]
    expiry = lease_expiry(lease)
    scope = watch_scope(workload)
    evidence: dict[str, Any] = {
        "workload": f"{workload['kind']}/{meta.get('namespace', '')}/{meta['name']}",
        "desired_replicas": desired_replicas(workload),
        "available_replicas": available_replicas(workload),
        **_lease_evidence(lease),
    }
    pod_keys = tuple(key_of(p) for p in pods)

    def verdict(
        up: bool,
        reason: HealthReason,
        since: datetime | None,
        detail: str = "",
        deadline: datetime | None = None,
        advice: str = "",
    ) -> ControllerState:
        health = ControllerHealth(
            subject_of(workload), up, str(reason), spec.groups, since, name=spec.name, scope=scope.problem
        )
        advice = "" if up else advice or _ADVICE[reason]
        return ControllerState(health, spec, pod_keys, detail, advice, evidence, deadline, scope)

    if desired_replicas(workload) == 0:
        detail = f"{workload['kind']} {meta['name']} is scaled to 0 replicas"
        return verdict(False, HealthReason.SCALED_TO_ZERO, spec_written_at(workload), detail)

    has_ready = any(state.ready for _, state in states) if states else available_replicas(workload) > 0
    if has_ready:
        holder = text(lease or {}, "spec", "holderIdentity")
        leader = next((pod for pod, state in states if state.ready and _holds(holder, pod)), None)
        if expiry is None or expiry >= now or leader is None:
            # A Lease held by no running Pod of ours is history (e.g. leader election turned off).
            deadline = after(expiry, _TICK) if expiry is not None and expiry >= now else None
            return verdict(True, HealthReason.AVAILABLE, None, deadline=deadline)
        if now - expiry < thresholds.controller_down:
            return verdict(
                True, HealthReason.AVAILABLE, None, deadline=after(expiry, thresholds.controller_down)
            )
        renewed = text(lease or {}, "spec", "renewTime")
        detail = (
            f"pod {leader['metadata']['name']} is Running and Ready but stopped renewing leader Lease "
            f"{lease['metadata']['name'] if lease else ''} (last renewed {renewed})"
        )
        evidence.update(pod=leader["metadata"]["name"])
        return verdict(False, HealthReason.LEASE_EXPIRED, expiry, detail)

    if expiry is not None and expiry >= now:
        return verdict(True, HealthReason.RESTARTING, None, deadline=after(expiry, _TICK))
    worst = _worst(states)
    advice = ""
    if worst is not None:
        pod, state = worst
        reason = state.failing or HealthReason.NOT_READY
        shown = state.detail if reason is HealthReason.NOT_READY else reason
        detail = f"pod {pod['metadata']['name']} is in {shown}"
        if reason is HealthReason.NOT_READY and state.restarted_after_exit:
            detail = f"pod {pod['metadata']['name']} is not ready: its container exits and is restarted"
            advice = _ADVICE[HealthReason.CRASH_LOOP_BACK_OFF]
        detail += particulars(state, container=False)
        evidence.update(
            pod=pod["metadata"]["name"],
            waiting_reason=state.detail,
            container=state.container,
            image=state.image,
            restarts=state.restarts,
            **termination_evidence(state),
            message=state.message,
        )
        since = expiry or state.since
    else:
        reason = HealthReason.NO_AVAILABLE_REPLICAS
        available = condition(workload, "Available")
        detail = f"{workload['kind']} {meta['name']} has 0/{desired_replicas(workload)} available replicas"
        since = expiry or (transition(available) if available and available["status"] == "False" else None)
    if since is not None and now - since < thresholds.controller_down:
        return verdict(True, HealthReason.RESTARTING, None, deadline=after(since, thresholds.controller_down))
    return verdict(False, reason, since, detail, advice=advice)


@dataclass(frozen=True, slots=True)
class Claim:
    """Which configured controller reconciles an object, and through which of its workloads.

    `name` is None when no ControllerSpec claims the kind. Of the spec's visible workloads
    (several: shards, rules/shards.py), the one serving the object: `beat` names an up one (its
    heartbeat key), `down` is set when the workloads selecting it are all down, `unserved` when
    none selects it; none of the three when that is not known (a selector that cannot be read).
    A controller with no visible workload is unknown (we cannot see it), never down.
    """

    name: str | None
    down: ControllerState | None = None
    beat: str | None = None
    unserved: Unserved | None = None


class Claims:
    """Answers "who reconciles this object and is it alive?" from the current states."""

    def __init__(self, specs: Sequence[ControllerSpec], states: Iterable[ControllerState]) -> None:
        self._specs = specs
        self._states: dict[int, list[ControllerState]] = {}
        for state in states:
            index = next(i for i, spec in enumerate(specs) if spec is state.spec)
            self._states.setdefault(index, []).append(state)
        self._cache: dict[tuple[str, str], tuple[Claim | None, list[ControllerState]]] = {}
        self._gitops: dict[tuple[str, str], bool] = {}

    def claim(self, group: str, kind: str, labels: Mapping[str, str] | None = None) -> Claim:
        """The claim on an object of this kind with these labels (none: the kind's, as if it had
        no label)."""
        found = self._cache.get((group, kind))
        if found is None:
            found = self._cache[group, kind] = self._claim(group, kind)
        claim, states = found
        if claim is not None:
            return claim
        return _served(self._specs_name(states), states, labels or {})

    def signature(self, group: str, kind: str) -> tuple[Any, ...]:
        """What every claim on the kind is made of: when it changes, its objects are judged again.
        Not when a verdict moves in time alone (`since`): no object's judgement reads it (a
        StatusStale's comes from its ControllerDown in correlation), and a down controller's
        Lease written again while still expired must not judge thousands of objects again."""
        self.claim(group, kind)
        claim, states = self._cache[group, kind]
        name = claim.name if claim is not None else self._specs_name(states)
        return name, tuple((dataclasses.replace(s.health, since=None), s.scope) for s in states)

    @staticmethod
    def _specs_name(states: Sequence[ControllerState]) -> str:
        return states[0].spec.name

    def _claim(self, group: str, kind: str) -> tuple[Claim | None, list[ControllerState]]:
        """The kind's claim when every object gets the same (None: judged per object's labels),
        and the workloads of the spec that claims it."""
        claimers = [i for i, spec in enumerate(self._specs) if reconciles(spec, group, kind)]
        for index in claimers:
            states = self._states.get(index)
            if states:
                if all(state.scope is EVERYTHING for state in states):
                    return _served(self._specs[index].name, states, {}), states
                return None, states
        return Claim(self._specs[claimers[0]].name if claimers else None), []

    def is_gitops(self, group: str, kind: str) -> bool:
        found = self._gitops.get((group, kind))
        if found is None:
            found = self._gitops[group, kind] = is_gitops(self._specs, group, kind)
        return found


def _served(name: str, states: Sequence[ControllerState], labels: Mapping[str, str]) -> Claim:
    up, down, unserved = serving(states, labels)
    if up is not None:
        return Claim(name, beat=beat_name(up))
    if down is not None:
        return Claim(name, down, beat_name(down))
    if unserved is not None:  # judged against an up workload's read, which has no series of it
        first = next((s for s in states if s.health.up), states[0])
        return Claim(name, beat=beat_name(first), unserved=unserved)
    return Claim(name)


def is_gitops(specs: Iterable[ControllerSpec], group: str, kind: str) -> bool:
    """Flux kinds, and the kinds configured controllers reconcile."""
    return group.endswith(".toolkit.fluxcd.io") or any(reconciles(s, group, kind) for s in specs)
