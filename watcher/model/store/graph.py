"""The object store and its graph: who sources, applies and installs whom.

Edges are derived from each object alone (sourceRef/chartRef, inventory entries, Helm
release names); the store keeps a reverse index per edge kind so that an event touches
only its neighbours and a question such as "which Kustomizations use this
GitRepository?" costs O(answer), never O(cluster). Forward edges (dependsOn,
ownerReferences) are read from the object itself when needed.

Kinds the watcher currently cannot see (RBAC 403, API server down) are *blind*: the
store answers as if they did not exist, so no rule reasons from last-known data.

Pods and workloads, most of a cluster's objects and read again only when they change or a
finding names them, are kept packed (msgpack) once the engine has judged them: about 650
bytes for a Pod instead of 2.5 KB of small dicts (some 15 of them for the garbage collector
to walk), for about 5 us to unpack on a read.
A healthy Pod arrives packed already (`Packed`, from the decoder's fast path) and is never
built as dicts unless something reads it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from typing import Any, Protocol

from watcher.model.ingest.flux import (
    HELM_RELEASE,
    inventory,
    kustomized_by,
    release_key,
    release_keys,
    source_key,
)
from watcher.model.ingest.kinds import (
    APPLIERS,
    CRD_KIND,
    HELM_GROUP,
    INVENTORY_KINDS,
    KUSTOMIZE_GROUP,
    PACKED_KINDS,
)
from watcher.model.ingest.objects import Key, annotations_of, describe, dig, group_of, key_of, labels_of
from watcher.model.ingest.packed import Packed, pack, unpack, unpacked
from watcher.model.rules.workloads import owner_workload

Links = dict[str, set[Key]]
Edge = tuple[str, Key]
Read = Key | Edge
"""What a correlation step read: an object (present or not) or a reverse edge."""

_FOLLOWED = INVENTORY_KINDS | {CRD_KIND}
"""The inventory entries with an edge: "inventory" (children) and "crds" (the CRDs it installs)."""

_NONE: frozenset[Key] = frozenset()

KUSTOMIZED = "kustomized"
"""The edge from any object to the Kustomization its kustomize-controller labels name (cluster/prune.py)."""


def _links(obj: Mapping[str, Any], old: Mapping[str, Any] | None, old_links: Links) -> Links:
    """Forward edges of one object, by edge kind. An inventory (thousands of entries) equal
    to the one of `old`, the previous version, is not parsed again: its edges are `old_links`'."""
    owner = kustomized_by(obj)
    links: Links = {KUSTOMIZED: {owner}} if owner is not None else {}
    kind = obj["kind"]
    if kind not in APPLIERS:
        return links
    group = group_of(obj["apiVersion"])
    source = source_key(obj)
    if source is not None:
        links["source"] = {source}
    if kind == "Kustomization" and group == KUSTOMIZE_GROUP:
        entries = dig(obj, "status", "inventory", "entries")
        unchanged = old is not None and entries == dig(old, "status", "inventory", "entries")
        known = old_links.get("inventory")
        if unchanged and known is not None:
            links["inventory"], crds = known, old_links.get("crds")
        else:
            found = inventory(obj, kinds=_FOLLOWED)
            links["inventory"] = {k for k in found if k.kind != CRD_KIND}
            crds = {k for k in found if k.kind == CRD_KIND}
        if crds:
            links["crds"] = crds
    if kind == "HelmRelease" and group == HELM_GROUP:
        links["release"] = release_keys(obj)
    return links


class Store:
    """Projected objects by key, with per-kind, per-namespace and reverse-edge indexes."""

    def __init__(self) -> None:
        self._objects: dict[Key, Mapping[str, Any] | bytes] = {}
        self._by_kind: dict[tuple[str, str], set[Key]] = defaultdict(set)
        self._by_namespace: dict[tuple[str, str, str], set[Key]] = defaultdict(set)
        self._reverse: dict[str, dict[Key, set[Key]]] = defaultdict(lambda: defaultdict(set))
        self._links: dict[Key, Links] = {}
        self.blind: frozenset[str] = frozenset()
        self.namespaces: frozenset[str] = frozenset()
        """The only namespaces the watcher reads (ModelConfig.namespaces); empty: every one."""

    def visible(self, kind: str) -> bool:
        return kind not in self.blind

    def sees(self, key: Key) -> bool:
        """Whether `key` would be here if it existed: its kind visible, its namespace read."""
        return _sees(key, self.blind, self.namespaces)

    def get(self, key: Key) -> Mapping[str, Any] | None:
        return unpacked(self._objects.get(key)) if key.kind not in self.blind else None

    def raw(self, key: Key) -> Mapping[str, Any] | None:
        """Ignoring blindness: for bookkeeping (deletes, relists), never for judging."""
        return unpacked(self._objects.get(key))

    def pack(self, key: Key) -> None:
        """Keep a judged object of a PACKED_KINDS kind as bytes until it is read again."""
        value = self._objects.get(key)
        if type(value) is dict and (key.group, key.kind) in PACKED_KINDS:
            self._objects[key] = pack(value)

    def put_packed(self, obj: Packed) -> None:
        """Insert or replace an object of a kind without edges (a Pod, a ReplicaSet), as it arrived packed."""
        key = obj.key
        if self._objects.get(key) is None:
            self._by_kind[key.group, key.kind].add(key)
            self._by_namespace[key.group, key.kind, key.namespace].add(key)
        self._objects[key] = obj.data

    def put(
        self, obj: Mapping[str, Any], *, key: Key | None = None
    ) -> tuple[Mapping[str, Any] | None, set[Edge]]:
        """Insert or replace; returns the previous version and the edges that came or went.
        `key`: the object's key, when the caller has it already."""
        key = key_of(obj) if key is None else key
        old = unpacked(self._objects.get(key))
        self._objects[key] = obj
        if old is None:
            self._by_kind[key.group, key.kind].add(key)
            self._by_namespace[key.group, key.kind, key.namespace].add(key)
        return old, self._relink(key, _links(obj, old, self._links.get(key, {})))

    def remove(self, key: Key) -> tuple[Mapping[str, Any] | None, set[Edge]]:
        old = unpacked(self._objects.pop(key, None))
        if old is None:
            return None, set()
        self._discard(self._by_kind, (key.group, key.kind), key)
        self._discard(self._by_namespace, (key.group, key.kind, key.namespace), key)
        return old, self._relink(key, {})

    @staticmethod
    def _discard(index: dict[Any, set[Key]], bucket: Any, key: Key) -> None:
        members = index.get(bucket)
        if members is not None:
            members.discard(key)
            if not members:
                del index[bucket]

    def _relink(self, key: Key, after: Links) -> set[Edge]:
        before = self._links.pop(key, None)
        if before is None:
            if not after:
                return set()  # most kinds have no edges
            before = {}
        if after:
            self._links[key] = after
        changed: set[Edge] = set()
        for edge in before.keys() | after.keys():
            gone, came = before.get(edge, set()), after.get(edge, set())
            if gone is came or gone == came:
                continue
            reverse = self._reverse[edge]
            for target in gone - came:
                self._discard(reverse, target, key)
                changed.add((edge, target))
            for target in came - gone:
                reverse[target].add(key)
                changed.add((edge, target))
        return changed

    def kinds(self) -> Iterator[tuple[str, str]]:
        return iter(list(self._by_kind))

    def raw_of_kind(self, group: str, kind: str) -> set[Key]:
        return set(self._by_kind.get((group, kind), set()))

    def holds(self, group: str, kind: str) -> bool:
        """Whether objects of this kind are here and visible: it is watched (or was given)."""
        return kind not in self.blind and bool(self._by_kind.get((group, kind)))

    def in_namespace(self, group: str, kind: str, namespace: str) -> Iterable[Mapping[str, Any]]:
        if kind in self.blind:
            return []
        found = (unpacked(self._objects[k]) for k in self._by_namespace.get((group, kind, namespace), ()))
        return [obj for obj in found if obj is not None]

    def links(self, edge: str, key: Key) -> Set[Key]:
        """The forward `edge`s of one object (blindness not applied; nothing is unpacked; not to
        be changed)."""
        found = self._links.get(key)
        return found.get(edge, _NONE) if found else _NONE

    def targets(self, edge: str) -> list[Key]:
        """Every object some object has an `edge` to (blindness not applied)."""
        return list(self._reverse[edge])

    def referrers(self, edge: str, target: Key) -> Set[Key]:
        """Objects with an `edge` ("source", "inventory", "crds", "release", "kustomized") to `target`
        (asked on every change of every object: most have none, answered without a new set)."""
        found = self._reverse[edge].get(target)
        if not found:
            return _NONE
        return {k for k in found if k.kind not in self.blind}

    def snapshot(self, kinds: Iterable[tuple[str, str]], *, namespace: str | None = None) -> Snapshot:
        """The visible objects of these (group, kind)s (in `namespace`, when given) as they are
        now, for a reader off the event loop (a page): the Store replaces its entries on a
        change, never the snapshot's."""
        held: dict[Key, Mapping[str, Any] | bytes] = {}
        for group, kind in kinds:
            if kind not in self.blind:
                keys = (
                    self._by_kind.get((group, kind), ())
                    if namespace is None
                    else self._by_namespace.get((group, kind, namespace), ())
                )
                for key in keys:
                    held[key] = self._objects[key]
        return Snapshot(held, self.blind, self.namespaces)


def _sees(key: Key, blind: frozenset[str], namespaces: frozenset[str]) -> bool:
    return key.kind not in blind and (not namespaces or not key.namespace or key.namespace in namespaces)


class Snapshot:
    """Objects copied by reference out of a Store (see Store.snapshot), unpacked when read."""

    def __init__(
        self,
        objects: dict[Key, Mapping[str, Any] | bytes],
        blind: frozenset[str],
        namespaces: frozenset[str] = frozenset(),
    ) -> None:
        self._objects = objects
        self._blind = blind
        self._namespaces = namespaces
        self._by_kind: dict[tuple[str, str], list[Key]] = defaultdict(list)
        for key in sorted(objects):
            self._by_kind[key.group, key.kind].append(key)

    def get(self, key: Key) -> Mapping[str, Any] | None:
        value = self._objects.get(key)
        if isinstance(value, bytes):
            value = self._objects[key] = unpack(value)
        return value

    def keys(self, group: str, kind: str) -> Sequence[Key]:
        return self._by_kind.get((group, kind), [])

    def holds(self, group: str, kind: str) -> bool:
        return self.visible(kind) and bool(self._by_kind.get((group, kind)))

    def visible(self, kind: str) -> bool:
        return kind not in self._blind

    def sees(self, key: Key) -> bool:
        return _sees(key, self._blind, self._namespaces)


class View(Protocol):
    """What correlation may read: objects by key and reverse edges (blindness applied)."""

    def get(self, key: Key) -> Mapping[str, Any] | None: ...

    def referrers(self, edge: str, target: Key) -> Set[Key]: ...


class Listing(View, Protocol):
    """A View that also knows which kinds it holds: correlation tells a deleted object from one
    whose kind was never given (correlate/loops.py)."""

    def holds(self, group: str, kind: str) -> bool: ...


class Recorder:
    """A View that remembers what it was asked, so a later change can tell whether it matters.

    Misses are recorded too: an object appearing where one was looked for is a change. Every
    read goes through `note`, which files it here by kind (keys, edges); a correlation pass
    files it by the subject it was read for instead (store/working.Reads).
    """

    def __init__(self, store: Listing) -> None:
        self._store = store
        self.keys: set[Key] = set()
        self.edges: set[Edge] = set()

    def note(self, read: Read) -> None:
        if isinstance(read, Key):
            self.keys.add(read)
        else:
            self.edges.add(read)

    def get(self, key: Key) -> Mapping[str, Any] | None:
        self.note(key)
        return self._store.get(key)

    def referrers(self, edge: str, target: Key) -> Set[Key]:
        self.note((edge, target))
        return self._store.referrers(edge, target)

    def holds(self, group: str, kind: str) -> bool:
        """Not recorded: it flips only when a kind's first object comes or its last goes; until
        something else makes correlation run again, the answer read before stands."""
        return self._store.holds(group, kind)


# -- Ownership ----------------------------------------------------------------------------------


def release_of(view: View, workload: Mapping[str, Any]) -> Key | None:
    """The HelmRelease or Kustomization that installed a workload: the first of its `claims`
    that is one (a Helm release no HelmRelease manages is skipped)."""
    return next((k for k in claims(view, workload) if k.group != HELM_RELEASE.group), None)


def installer_or_owner(view: View, obj: Mapping[str, Any]) -> Key | None:
    """Who installed `obj`, or else the workload that owns it (a ReplicaSet or Pod belongs to its
    Deployment's stack); None at the top (Flux's own Kustomization applies itself)."""
    found = release_of(view, obj) or owner_workload(obj, view.get)
    return None if found == key_of(obj) else found


def installer_name(key: Key) -> str:
    """How messages name an installer from `claims`: `HelmRelease ns/name`, `Helm release ns/name`."""
    return f"Helm release {key.namespace}/{key.name}" if key.group == HELM_RELEASE.group else describe(key)


def claims(view: View, obj: Mapping[str, Any]) -> Iterator[Key]:
    """Every installer that claims an object, most telling first (each may repeat).

    Helm ownership first (helm.toolkit.fluxcd.io/name+namespace labels, then the
    meta.helm.sh/release-name+namespace annotations: the HelmRelease managing that release, or
    the Helm release itself, `release_key`, when none does), then kustomize-controller's
    kustomize.toolkit.fluxcd.io/name+namespace labels, then Kustomization inventories.
    Lazy: release_of reads no further than its answer.
    """
    own, notes = labels_of(obj), annotations_of(obj)
    name, namespace = own.get(f"{HELM_GROUP}/name"), own.get(f"{HELM_GROUP}/namespace")
    helm = bool(name and namespace)
    if name and namespace:
        yield Key(HELM_GROUP, "HelmRelease", namespace, name)
    release, release_ns = notes.get("meta.helm.sh/release-name"), notes.get("meta.helm.sh/release-namespace")
    if release and release_ns:
        owners = view.referrers("release", release_key(release_ns, release))
        yield from sorted(owners)
        if not owners and not helm:
            yield release_key(release_ns, release)
    applied_by = kustomized_by(obj)
    if applied_by is not None:
        yield applied_by
    yield from sorted(view.referrers("crds" if obj["kind"] == CRD_KIND else "inventory", key_of(obj)))
