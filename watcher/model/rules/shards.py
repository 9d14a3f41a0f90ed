"""Flux sharding: which workload of a controller serves an object.

A ControllerSpec (kustomize-controller) may run as several workloads: the main one and its shards,
each started with `--watch-label-selector` (the projection keeps that one flag, schema.py). Flux's
convention: the main controller excludes keyed objects (`!sharding.fluxcd.io/key`), shard N
(Deployment `<name>-shardN`) takes `sharding.fluxcd.io/key in (shardN)`. So an object is served by
the workloads whose selector matches its labels (no flag: every object), and:

- by an up one: that workload is its controller (its liveness, its heartbeat);
- else, when a workload's selector cannot be read: which one serves it is unknown (that
  workload's ControllerHealth.scope says why), never "everything" and never "nobody";
- else by a down one: that workload's ControllerDown is its root;
- else by none: ShardNotServed, a root naming the shard key value (`Unserved`).

Pure: the verdicts (ControllerState) and the object's labels in, a Claim out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watcher.model.ingest.objects import dig
from watcher.model.ingest.schema import WATCH_LABEL_SELECTOR
from watcher.model.ingest.selectors import Selector, SelectorError, parse_selector
from watcher.model.types import Subject

if TYPE_CHECKING:
    from watcher.model.rules.controllers import ControllerState

SHARD_KEY = "sharding.fluxcd.io/key"
"""The label Flux shards by: its value names the shard (ShardNotServed groups by it)."""
SHARD_API_VERSION = "stalewatch.io/v1"
"""ShardNotServed's subject is no Kubernetes object: a shard, kind `Shard`, of this apiVersion."""


@dataclass(frozen=True, slots=True)
class Scope:
    """The objects a controller workload reconciles, from its `--watch-label-selector`."""

    text: str | None = None
    """The flag's value as written; None: no flag (every object)."""
    selector: Selector | None = None
    problem: str = ""
    """Why the selector cannot be read ("" when it can, or there is none)."""

    def selects(self, labels: Mapping[str, str]) -> bool | None:
        """Whether it reconciles an object with these labels; None: not known."""
        if self.problem:
            return None
        return self.selector is None or self.selector.matches(labels)

    def said(self) -> str:
        return "every object" if self.text is None else f"{WATCH_LABEL_SELECTOR}={self.text}"


EVERYTHING = Scope()


def watch_scope(workload: Mapping[str, Any]) -> Scope:
    """The scope its containers' args give (the first container with the flag)."""
    for container in dig(workload, "spec", "template", "spec", "containers") or ():
        for arg in container.get("args") or ():
            name, equals, value = arg.partition("=")
            if name != WATCH_LABEL_SELECTOR:
                continue
            if not equals:
                return Scope("", None, f"its {WATCH_LABEL_SELECTOR} has no value stalewatch could keep")
            if not value:
                return EVERYTHING  # an empty selector: the controller reconciles every object
            try:
                return Scope(value, parse_selector(value))
            except SelectorError as error:
                return Scope(value, None, f"its {WATCH_LABEL_SELECTOR}={value!r} cannot be read: {error}")
    return EVERYTHING


def lease_name(controller: str, scope: Scope) -> str:
    """The leader Lease a Flux controller takes: `<name>-leader-election`, and with a watch label
    selector that name suffixed with the first 8 hex digits of the selector's SHA-256
    (fluxcd/pkg runtime/leaderelection.GenerateID), so shards do not share one Lease."""
    base = f"{controller}-leader-election"
    if not scope.text:
        return base
    return f"{base}-{hashlib.sha256(scope.text.encode()).hexdigest()[:8]}"


def is_shard_of(name: str, workload: Mapping[str, Any]) -> bool:
    """A workload `<name>-<suffix>` started with a watch label selector is a shard of `name`
    (Flux's sharding guide names them `<name>-shard1`, ...)."""
    meta_name: str = workload["metadata"]["name"]
    return meta_name.startswith(name + "-") and watch_scope(workload) is not EVERYTHING


@dataclass(frozen=True, slots=True)
class Unserved:
    """An object no workload of its controller selects: what ShardNotServed says of it."""

    controller: str
    """The ControllerSpec name."""
    key: str
    """The object's sharding.fluxcd.io/key value; "" when it has none."""
    namespace: str
    """Where the controller's workloads run (the shard would)."""
    selectors: tuple[str, ...]
    """Each workload of the controller, and what it selects (`<name>: <scope>`)."""

    def subject(self) -> Subject:
        shard = self.key or "unkeyed"
        return Subject(
            apiVersion=SHARD_API_VERSION,
            kind="Shard",
            namespace=self.namespace,
            name=f"{self.controller}-{shard}",
        )


def beat_name(state: ControllerState) -> str:
    """A workload's heartbeat key: its name (a Flux controller's main Deployment is named like its
    ControllerSpec, a shard `<name>-shardN`): what HealthModel.heartbeat and MetricsTarget name."""
    name: str = state.health.subject["name"]
    return name


def serving(
    states: Sequence[ControllerState], labels: Mapping[str, str]
) -> tuple[ControllerState | None, ControllerState | None, Unserved | None]:
    """Of one controller's workload verdicts (in key order, at least one), what serves an object
    with `labels`: (an up one, else a down one, else unserved); all None: not known (a workload
    whose selector cannot be read may select it; its ControllerHealth.scope says why)."""
    selects = [(state, state.scope.selects(labels)) for state in states]
    up = next((s for s, yes in selects if yes and s.health.up), None)
    if up is not None:
        return up, None, None
    if any(yes is None for _, yes in selects):
        return None, None, None
    down = next((s for s, yes in selects if yes), None)
    if down is not None:
        return None, down, None
    first = states[0]
    unserved = Unserved(
        first.spec.name,
        labels.get(SHARD_KEY, ""),
        first.health.subject["namespace"],
        tuple(f"{beat_name(s)}: {s.scope.said()}" for s in states),
    )
    return None, None, unserved
