"""ShardNotServed: the objects no workload of their controller selects, one root per shard.

The engine files each GitOps object's claim as it judges it (`file`): an object whose
controller's workloads all leave it out (rules/shards.py) is kept here by key. One ShardNotServed
per (controller, shard key value) says the value, the selectors that exist and how many objects
wait; each of those objects carries a StatusStale pointing at it (rules/dispatch.py), so they,
their NotReconciling and what is blocked behind them are its blast radius. Memory: one entry per
unserved object; findings are made again only when one changed.
"""

from __future__ import annotations

from collections import Counter

from watcher.model.ingest.objects import Key
from watcher.model.rules.context import new_finding
from watcher.model.rules.shards import SHARD_KEY, Unserved
from watcher.model.types import Finding, FindingType, ModelConfig


class UnservedShards:
    """The unserved objects, and their ShardNotServed roots."""

    def __init__(self, config: ModelConfig) -> None:
        self._config = config
        self._of: dict[Key, Unserved] = {}
        self._findings: list[Finding] | None = []
        """None: to be made again (an object was filed differently)."""

    def file(self, key: Key, unserved: Unserved | None) -> None:
        """The object's claim: unserved, or not (served, unknown, gone, suspended)."""
        if self._of.get(key) == unserved:
            return
        if unserved is None:
            del self._of[key]
        else:
            self._of[key] = unserved
        self._findings = None

    @property
    def changed(self) -> bool:
        """Whether the findings changed since `findings()` was last asked."""
        return self._findings is None

    def findings(self) -> list[Finding]:
        """One ShardNotServed per shard with unserved objects, in subject order."""
        if self._findings is None:
            counts = Counter(self._of.values())
            self._findings = sorted(
                (self._finding(shard, n) for shard, n in counts.items()), key=lambda f: f.id
            )
        return self._findings

    def _finding(self, shard: Unserved, waiting: int) -> Finding:
        objects = f"{waiting} object{'s' if waiting != 1 else ''}"
        label = f"labelled {SHARD_KEY}={shard.key}" if shard.key else f"without a {SHARD_KEY} label"
        message = (
            f"No {shard.controller} workload selects the objects {label}: {objects}"
            f" {'wait' if waiting != 1 else 'waits'}, and nothing reconciles them (its workloads:"
            f" {'; '.join(shard.selectors)}). Start the shard that selects them, or change their label."
        )
        evidence = {
            "controller": shard.controller,
            "shard_label": SHARD_KEY,
            "shard": shard.key,
            "selectors": list(shard.selectors),
            "objects": waiting,
        }
        return new_finding(
            self._config, FindingType.SHARD_NOT_SERVED, shard.subject(), message, None, evidence
        )
