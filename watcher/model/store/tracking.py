"""Controller tracking: which workloads are configured controllers, the Pods each owns, and
their verdicts, recomputed only when one of their inputs changed or a threshold fell due.

A verdict's inputs are its workload, the Pods it owns (kept per controller, so a Pod event
touches only the controllers of its namespace), the ReplicaSets that link those Pods to it and
the Leases of its lease namespace. The engine says what changed; `refresh()` judges again the
controllers marked, and says which GitOps kinds' claims changed (their objects must be judged
again: StatusStale or not).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from watcher.model.ingest.kinds import Track, key_of_kind
from watcher.model.ingest.objects import Key, key_of, subject_of
from watcher.model.ingest.quarantine import rule_failed
from watcher.model.rules.controllers import (
    Claims,
    ControllerState,
    controller_state,
    find_lease,
    match_spec,
    owns_pod,
)
from watcher.model.rules.metrics_targets import MetricsTarget, metrics_target
from watcher.model.rules.shards import beat_name
from watcher.model.store.deadlines import Deadlines
from watcher.model.store.graph import Store
from watcher.model.types import ControllerSpec, ModelConfig, Rejection

POD = key_of_kind(Track.POD)
LEASE = key_of_kind(Track.LEASE)

Reject = Callable[[Key, list[Rejection]], None]
"""Records what judging a controller set aside of it (nothing: it was judged)."""


class ControllerTracker:
    """The configured controllers found among the workloads, and their current verdicts."""

    def __init__(self, config: ModelConfig, store: Store) -> None:
        self._config = config
        self._store = store
        self._specs: dict[Key, ControllerSpec] = {}
        self._by_namespace: dict[str, set[Key]] = defaultdict(set)
        self._pods: dict[Key, set[Key]] = defaultdict(set)
        self._states: dict[Key, ControllerState] = {}
        self._visible: tuple[frozenset[str], list[ControllerState]] | None = None
        """visible()'s answer and the blindness it was made for, until a verdict changes."""
        self._dirty: set[Key] = set()
        self._stale: frozenset[str] = frozenset()
        self.due = Deadlines()
        self.claims = Claims(config.controllers, ())
        """Which controller claims each GitOps kind, and whether it is down."""

    def in_namespace(self, namespace: str) -> bool:
        """Whether a controller workload lives in `namespace` (its Pods may be owned by one)."""
        return bool(self._by_namespace.get(namespace))

    def running(self) -> set[str]:
        """The names of the configured controllers found running as a workload."""
        return {spec.name for spec in self._specs.values()}

    def specs_of(self, beat: str) -> set[str]:
        """The ControllerSpec names of the workloads with this heartbeat key."""
        return {state.spec.name for state in self._states.values() if beat_name(state) == beat}

    def judge_all_again(self) -> None:
        self._dirty.update(self._specs)

    def set_stale(self, kinds: frozenset[str]) -> bool:
        """See HealthModel.set_stale; False when nothing changed."""
        if kinds == self._stale:
            return False
        self._stale = kinds
        self.judge_all_again()
        return True

    def pop_due(self, now: datetime) -> bool:
        due = self.due.pop_due(now)
        self._dirty.update(due)
        return bool(due)

    # -- What changed --------------------------------------------------------------------------

    def workload_changed(self, key: Key, workload: Mapping[str, Any] | None) -> None:
        spec = match_spec(self._config.controllers, workload) if workload is not None else None
        previous = self._specs.get(key)
        self._dirty.add(key)
        if spec is None:
            if previous is not None:
                del self._specs[key]
                self._by_namespace[key.namespace].discard(key)
                self._pods.pop(key, None)
            return
        self._specs[key] = spec
        self._by_namespace[key.namespace].add(key)
        self._rescan_pods(key)

    def replicaset_changed(self, namespace: str) -> None:
        """A ReplicaSet may link Pods to a controller of its namespace."""
        for workload_key in self._by_namespace.get(namespace, ()):
            self._rescan_pods(workload_key)

    def lease_changed(self, namespace: str) -> None:
        self._dirty.update(
            k for k, spec in self._specs.items() if (spec.lease_namespace or k.namespace) == namespace
        )

    def _rescan_pods(self, key: Key) -> None:
        """The Pods a controller workload owns, looked for among every Pod of its namespace."""
        workload = self._store.raw(key)
        self._dirty.add(key)
        pods = self._pods[key]
        pods.clear()
        if workload is None:
            return
        for pod in self._store.in_namespace(*POD, key.namespace):
            if owns_pod(workload, pod, self._store.raw):
                pods.add(key_of(pod))

    def pod_changed(self, key: Key, pod: Mapping[str, Any] | None) -> None:
        for workload_key in self._by_namespace.get(key.namespace, ()):
            members = self._pods[workload_key]
            workload = self._store.raw(workload_key)
            owned = pod is not None and workload is not None and owns_pod(workload, pod, self._store.raw)
            if owned or key in members:
                self._dirty.add(workload_key)
            if owned:
                members.add(key)
            else:
                members.discard(key)

    # -- Verdicts ------------------------------------------------------------------------------

    def visible(self) -> list[ControllerState]:
        """The verdicts, in key order, of the controllers whose workload kind is visible (read on
        every evaluation: kept until a verdict or the blindness changes; not to be changed)."""
        blind, kept = self._store.blind, self._visible
        if kept is None or kept[0] is not blind:
            states = [state for key, state in sorted(self._states.items()) if key.kind not in blind]
            kept = self._visible = (blind, states)
        return kept[1]

    def refresh(self, now: datetime, *, reject: Reject) -> tuple[bool, list[tuple[str, str]]]:
        """Judge the marked controllers again: whether a verdict changed in a way correlation
        must see, and the GitOps kinds whose claim (controller, or how it is down) changed."""
        if not self._dirty:
            return False, []
        significant = False
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            spec = self._specs.get(key)
            workload = self._store.get(key)
            held = not self._stale.isdisjoint((key.kind, POD[1], LEASE[1]))
            if held and spec is not None and workload is not None:
                self._dirty.add(key)  # judged again once its inputs are live (set_stale)
                continue
            state, failed = None, []
            if spec is not None and workload is not None:
                try:
                    state = self._state(key, spec, workload, now)
                except Exception as error:  # no verdict on this controller; the others stand
                    failed = [rule_failed(subject_of(workload), error, what="its controller verdict")]
            reject(key, failed)
            if state is None:
                if self._states.pop(key, None) is not None:
                    significant = True
                    self._visible = None
                self.due.schedule(key, None)
                continue
            if _significant(self._states.get(key), state):
                significant = True
            self._states[key] = state
            self._visible = None
            self.due.schedule(key, state.deadline)
        claims = Claims(self._config.controllers, self.visible())
        changed = [
            (group, kind)
            for group, kind in self._store.kinds()
            if claims.is_gitops(group, kind)
            and self.claims.signature(group, kind) != claims.signature(group, kind)
        ]
        self.claims = claims
        return significant, changed

    def metrics_targets(self) -> list[MetricsTarget]:
        """Where to read each tracked controller workload's /metrics, one per heartbeat key (the
        workload's name, shards.beat_name: each shard is read on its own); of several workloads
        of one name (in several namespaces), the first up one in key order."""
        chosen: dict[str, Key] = {}
        for key, state in sorted(self._states.items()):
            name = beat_name(state)
            if name not in chosen or (state.health.up and not self._states[chosen[name]].health.up):
                chosen[name] = key
        targets = []
        for _, key in sorted(chosen.items()):
            workload = self._store.get(key)
            if workload is None:
                continue
            spec = self._states[key].spec
            pods = [p for p in (self._store.get(k) for k in sorted(self._pods[key])) if p is not None]
            leases = sorted(
                self._store.in_namespace(*LEASE, spec.lease_namespace or key.namespace), key=key_of
            )
            lease = find_lease(spec, workload, leases)
            targets.append(metrics_target(spec, workload, pods, lease, name=beat_name(self._states[key])))
        return targets

    def _state(
        self, key: Key, spec: ControllerSpec, workload: Mapping[str, Any], now: datetime
    ) -> ControllerState:
        pods = [p for p in (self._store.get(k) for k in sorted(self._pods[key])) if p is not None]
        namespace = spec.lease_namespace or key.namespace
        # in name order: which Lease find_lease() takes must not depend on set order
        leases = sorted(self._store.in_namespace(*LEASE, namespace), key=key_of)
        lease = find_lease(spec, workload, leases)
        return controller_state(spec, workload, pods, lease, now=now, thresholds=self._config.thresholds)


def _significant(old: ControllerState | None, new: ControllerState) -> bool:
    """A change correlation must see: the verdict, the Pods it owns, or, while down, its proof.

    A healthy controller renews its Lease every few seconds; that alone changes nothing.
    """
    if old is None or old.health != new.health or old.pods != new.pods:
        return True
    return not new.health.up and (old.detail != new.detail or old.evidence != new.evidence)
