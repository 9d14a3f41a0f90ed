"""Every kind a stack applies, counted off the Kustomizations' inventories.

A Kustomization's status.inventory names each object it applied, of any kind: Certificates,
ExternalSecrets, Jobs, a third party's custom resources. The live watcher watches each such kind
(kube/cluster.py) so that those objects are judged too; and while a listed kind is not read (not
watched yet, forbidden, or absent from a snapshot) its listed objects are counted as not read,
by kind, so that nothing is called healthy that nobody looked at. Kinds with no state by design
(kinds.WITHOUT_STATUS: ConfigMaps, Secrets, RBAC, ...) are not counted: there is nothing to read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from watcher.model.ingest.flux import inventory
from watcher.model.ingest.kinds import KUSTOMIZE_GROUP, WITHOUT_STATUS
from watcher.model.ingest.objects import Key, dig

KindKey = tuple[str, str]


def lists(key: Key) -> bool:
    """Whether objects of this key's kind carry an inventory read here."""
    return key.kind == "Kustomization" and key.group == KUSTOMIZE_GROUP


class Listed:
    """The listed objects per kind, kept per Kustomization so that a change costs its inventory."""

    def __init__(self) -> None:
        self._by_applier: dict[Key, tuple[object, Counter[KindKey]]] = {}
        self._total: Counter[KindKey] = Counter()

    def update(self, key: Key, obj: Mapping[str, Any] | None) -> None:
        """A Kustomization changed (`obj`) or went away (None)."""
        entries = dig(obj, "status", "inventory", "entries") if obj is not None else None
        old = self._by_applier.pop(key, None)
        if old is not None and old[0] == entries:  # most writes are Ready's heartbeat
            self._by_applier[key] = old
            return
        counts = _kinds(obj) if obj is not None and entries else Counter()
        if counts:
            self._by_applier[key] = (entries, counts)
        if old is not None:
            self._total.subtract(old[1])
        self._total.update(counts)
        for kind in [kind for kind, n in self._total.items() if n <= 0]:
            del self._total[kind]

    def kinds(self) -> Mapping[KindKey, int]:
        """Each listed kind with state to read, and how many inventory entries name it."""
        return self._total


def _kinds(obj: Mapping[str, Any]) -> Counter[KindKey]:
    return Counter(
        kind
        for kind in ((key.group, key.kind) for key in inventory(obj, kinds=None))
        if kind not in WITHOUT_STATUS
    )
