"""Policy compliance per stack: each violation an audit reports (audits.py), attributed to the
stack that owns its object.

A violation's stack is the nearest Kustomization or HelmRelease above its object: the one that
installed it (graph.claims: Helm and kustomize-controller labels and annotations, inventories),
or that installed its owning workload (a Pod's Deployment), the way PolicyDenied names stacks.
An object stalewatch does not watch (a Service, a Namespace) is looked for in the Kustomizations'
inventories, which list every kind they apply. A violation whose object no stack owns, or that
the audit counts without listing it, is *unattributed* (`stack` None): reported, never dropped.

This is information for each stack's owner, not a finding: an audit in dryrun or warn mode
denies nothing, and one in deny mode reports objects that exist already (admission blocks new
ones, which PolicyDenied reports when a controller keeps retrying). So it pages nobody.

Never "compliant" when stalewatch could not look: a policy kind it cannot list (403, not listed
yet) is named in `blind`, a constraint never audited says so (audits.Audit.audited None), and a
constraint or report whose counts cannot be read is named in `unread` with why (audits.Read.unread).

Incremental: each policy object is read once per change; the attribution (O(violations), plus a
pass over inventories while some violated object is not watched) is built again only when a
policy object, a violated object, a Kyverno policy, a CRD or (while there are violations) a
Kustomization or HelmRelease changed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from watcher.model.cluster.audits import READERS, Audit, Policy, Read, Violation, kyverno_action, kyverno_key
from watcher.model.ingest.flux import inventory
from watcher.model.ingest.kinds import (
    CRD_GROUP,
    CRD_KIND,
    GATEKEEPER_GROUP,
    KUSTOMIZE_GROUP,
    KYVERNO_GROUP,
    POLICY_FAMILIES,
    policy_kind,
)
from watcher.model.ingest.objects import Key, text
from watcher.model.store.graph import Store, View, installer_or_owner

STACK_KINDS = ("Kustomization", "HelmRelease")
OBJECTS_NAMED = 5
"""Per stack and policy, how many violating objects are named (all are counted)."""
MAX_UP = 8
UNKNOWN_ACTION = "unknown"
"""A report's violation whose policy stalewatch cannot see says no enforcement action."""
_NAMED_KINDS = frozenset(k for kinds in POLICY_FAMILIES.values() if kinds for k in kinds)
_NO_STACK = Key("", "", "", "")


@dataclass(frozen=True, slots=True)
class StackViolations:
    """The violations of one policy (with one action and result) in one stack."""

    policy: Policy
    action: str
    result: str
    stack: Key | None
    """The Kustomization or HelmRelease owning the objects; None: unattributed."""
    count: int
    objects: tuple[Key, ...]
    """The first OBJECTS_NAMED violating objects listed (none for the unlisted remainder)."""


@dataclass(frozen=True, slots=True)
class Unread:
    """A constraint or policy report whose violation counts cannot be read: not judged."""

    obj: Key
    reason: str


@dataclass(frozen=True, slots=True)
class ComplianceReport:
    violations: tuple[StackViolations, ...] = ()
    """By policy, then stack (unattributed last)."""
    audits: tuple[Audit, ...] = ()
    """Every Gatekeeper constraint seen, violated or not."""
    reports: int = 0
    """How many policy reports were read."""
    blind: tuple[str, ...] = ()
    """Policy kinds stalewatch cannot list now: their violations are unknown, not absent."""
    unread: tuple[Unread, ...] = ()
    """Policy objects whose counts cannot be read: what they list is counted, the rest unknown."""

    @property
    def seen(self) -> bool:
        """Whether there is anything to say: a policy object read, or a policy kind unseen."""
        return bool(self.audits or self.reports or self.blind or self.unread)

    def by_stack(self) -> dict[Key | None, list[StackViolations]]:
        found: dict[Key | None, list[StackViolations]] = defaultdict(list)
        for row in self.violations:
            found[row.stack].append(row)
        return found


def stack_of(view: View, key: Key, listed: Mapping[Key, Key]) -> Key | None:
    """The nearest Kustomization or HelmRelease above the object (see the module docstring);
    `listed`: the Kustomization whose inventory lists an object, for those not in `view`."""
    obj = view.get(key)
    seen = {key}
    while obj is not None and len(seen) <= MAX_UP:
        up = installer_or_owner(view, obj)
        if up is None or up in seen:
            break
        if up.kind in STACK_KINDS:
            return up
        seen.add(up)
        obj = view.get(up)
    return listed.get(key)


def listed_by(store: Store, wanted: Collection[Key]) -> dict[Key, Key]:
    """For objects stalewatch does not hold, the Kustomization whose inventory lists each (the
    first by key): one pass over the inventories, every kind."""
    found: dict[Key, Key] = {}
    for owner in sorted(store.raw_of_kind(KUSTOMIZE_GROUP, "Kustomization")):
        obj = store.get(owner)
        if obj is None:
            continue
        for key in inventory(obj, kinds=None):
            if key in wanted and key != owner:
                found.setdefault(key, owner)
    return found


def _is_policy(key: Key) -> bool:
    """A policy or report object compliance reads itself."""
    return key.group in READERS and policy_kind(key.group, key.kind)


class Compliance:
    """The live ComplianceReport of one Store (engine.py refreshes it once per evaluation)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._reads: dict[Key, Read] = {}
        self._objects: frozenset[Key] = frozenset()
        self._moved = False
        self.report = ComplianceReport()

    def refresh(self, touched: Collection[Key], *, everything: bool) -> bool:
        """Read what changed and attribute again if it matters: whether the report changed."""
        if everything:
            self._reads = {}
            for group, kind in self._store.kinds():
                if group in READERS and policy_kind(group, kind):
                    for key in self._store.raw_of_kind(group, kind):
                        self._read(key)
        relevant = everything
        for key in touched:
            if _is_policy(key):
                self._read(key)
                relevant = True
            elif not relevant:
                relevant = self._bears_on(key)
        if not relevant:
            return False
        report = self._build()
        if report == self.report:
            return False
        self.report = report
        return True

    def reads(self, key: Key) -> bool:
        """Whether a change of `key` alone would have the next refresh attribute again."""
        return _is_policy(key) or self._bears_on(key)

    def _bears_on(self, key: Key) -> bool:
        """A change of this object, not itself a policy or report, may change the report: a
        Kyverno object or a CRD (whether a policy kind is served), an object a report names, or
        a stack (what a named object is attributed to)."""
        return (
            key.group == KYVERNO_GROUP
            or key.kind == CRD_KIND
            or key in self._objects
            or (key.kind in STACK_KINDS and bool(self._objects or self.report.violations))
        )

    def policy_objects(self, engine: str, name: str, namespace: str) -> list[Key]:
        """The objects a denial's policy may be, for the caller to look up (correlation records
        what it reads): the Gatekeeper constraints of that name (any kind), or the Kyverno
        ClusterPolicy of that name and the Policy in the denied object's namespace."""
        if engine == "gatekeeper":
            return sorted(k for k in self._reads if k.group == GATEKEEPER_GROUP and k.name == name)
        if engine != "kyverno":
            return []
        key = kyverno_key(name)
        if key.kind == "ClusterPolicy" and namespace:
            return [key, Key(KYVERNO_GROUP, "Policy", namespace, name)]
        return [key]

    def take_moved(self) -> bool:
        """Whether a constraint came or went since last asked (what policy_objects answers)."""
        moved, self._moved = self._moved, False
        return moved

    def _read(self, key: Key) -> None:
        obj = self._store.get(key)
        known = key in self._reads
        if obj is None:
            self._reads.pop(key, None)
        else:
            self._reads[key] = READERS[key.group](obj)
        if known is (obj is None) and key.group == GATEKEEPER_GROUP:
            self._moved = True

    def _build(self) -> ComplianceReport:
        violations = [v for _, read in sorted(self._reads.items()) for v in read.violations]
        self._objects = frozenset(v.obj for v in violations if v.obj is not None)
        unknown = [k for k in self._objects if self._store.get(k) is None]
        listed = listed_by(self._store, set(unknown)) if unknown else {}
        grouped: dict[tuple[Policy, str, str, Key | None], tuple[list[int], list[Key]]] = {}
        for v in violations:
            stack = stack_of(self._store, v.obj, listed) if v.obj is not None else None
            counted, objects = grouped.setdefault(
                (v.policy, v.action or self._action(v), v.result, stack), ([0], [])
            )
            counted[0] += v.count
            if v.obj is not None:
                objects.append(v.obj)
        rows = [
            StackViolations(
                policy, action, result, stack, counted[0], tuple(sorted(set(objects))[:OBJECTS_NAMED])
            )
            for (policy, action, result, stack), (counted, objects) in grouped.items()
        ]
        rows.sort(key=lambda r: (r.policy, r.action, r.result, r.stack is None, r.stack or _NO_STACK))
        audits = tuple(read.audit for _, read in sorted(self._reads.items()) if read.audit is not None)
        reports = sum(1 for key in self._reads if key.group != GATEKEEPER_GROUP)
        unread = tuple(Unread(key, read.unread) for key, read in sorted(self._reads.items()) if read.unread)
        return ComplianceReport(tuple(rows), audits, reports, self._blind(), unread)

    def _action(self, violation: Violation) -> str:
        if violation.policy.engine != "kyverno" or not violation.policy.name:
            return UNKNOWN_ACTION
        policy = self._store.get(kyverno_key(violation.policy.name))
        return kyverno_action(policy, violation.rule) if policy is not None else UNKNOWN_ACTION

    def _blind(self) -> tuple[str, ...]:
        """The policy kinds blind now: by name, and the constraint kinds their CRDs serve."""
        blind = self._store.blind
        if not blind:
            return ()
        constraints = set()
        for key in self._store.raw_of_kind(CRD_GROUP, CRD_KIND):
            crd = self._store.get(key)
            if crd is not None and text(crd, "spec", "group") == GATEKEEPER_GROUP:
                constraints.add(text(crd, "spec", "names", "kind"))
        return tuple(sorted(k for k in blind if k in _NAMED_KINDS or k in constraints))
