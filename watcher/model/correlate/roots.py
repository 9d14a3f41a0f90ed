"""The end of a correlation pass: every finding's root cause, each root's blast radius.

Every finding gets root_cause = the end of its chain of links (a cycle is broken at its
smallest id); each root lists, in `affected`, every subject it explains, counting the
unpromoted satellites (see store/satellites.py) as if they had been members. A ControllerDown's
message says how many objects it leaves with a cached status, a ControllerStuck's how many are
overdue.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from watcher.model.ingest.objects import Key, describe
from watcher.model.store.satellites import Group
from watcher.model.store.working import (
    Correlation,
    Pass,
    key_of_subject,
    order_key,
    stale_since,
    subject_order,
)
from watcher.model.types import Finding, FindingType, Subject

_OWN_ROOTS = (FindingType.CONFLICTING_WRITERS,)
"""Types no other finding on their subject explains (a controller down does not make two others
fight): a root even when that subject's first finding is another."""
_CHAINED = (FindingType.DEPENDENCY_BLOCKED, FindingType.RECONCILE_FAILED)
"""Types linked to another object's finding, whose message names the end of the chain too."""


def finish(
    run: Pass, radii: BlastRadii, *, elsewhere: Callable[[str], Explained] | None = None
) -> Correlation:
    """`elsewhere`: what a root of this pass explains among the findings kept from components
    out of its scope (a hub's: store/components.py)."""
    parent: dict[str, str | None] = {}
    for ids in run.by_subject.values():
        for index, fid in enumerate(ids):
            first = index == 0 or run.found[fid].type in _OWN_ROOTS
            parent[fid] = run.links.get(fid) if first else ids[0]
    roots: dict[str, str] = {}
    members: dict[str, Explained] = defaultdict(list)
    for fid in sorted(run.found):
        root = _root(fid, parent, roots)
        if root != fid:
            run.found[fid].root_cause = root
            members[root].append((run.keys[fid], run.found[fid]))
    if elsewhere is not None:
        for fid in [f for f, root in roots.items() if f == root]:
            if kept := elsewhere(fid):
                members[fid] += kept
    for fid, root in roots.items():
        finding = run.found[fid]
        if finding.type in _CHAINED and root != run.links.get(fid) and run.keys[root] != run.keys[fid]:
            cause = run.found[root]
            finding.message += f" Root cause: {cause.type} of {describe(cause.subject)}."
    result = Correlation([], run.promoted)
    grouped: dict[str, list[tuple[str, Group, frozenset[Key]]]] = defaultdict(list)
    for link, group in run.groups.items():
        promoted = frozenset(k for k in run.promoted if k in group.subjects) if run.promoted else _NONE
        if len(group.subjects) > len(promoted):  # some are not promoted: they point at its root
            root = result.roots[link] = roots.get(link, link)
            result.since[link] = stale_since(run.found, link)
            grouped[root].append((link, group, promoted))
    for root in [*members, *(r for r in grouped if r not in members)]:
        explained = members.get(root, [])
        finding = run.found[root]
        named = [(key, f.subject["apiVersion"]) for key, f in explained]
        finding.affected = radii.affected(run, root, named, grouped.get(root, ()))
        if finding.type is FindingType.CONTROLLER_DOWN:
            stale = sum(len(group.subjects) - len(promoted) for _, group, promoted in grouped.get(root, ()))
            _controller_message(run, finding, explained, stale=stale)
        elif finding.type is FindingType.CONTROLLER_STUCK:
            _stuck_message(run, finding, explained)
    for root, extra in run.extra.items():
        run.found[root].affected = sorted(extra, key=subject_order)
    explaining = members.keys() | grouped.keys()
    for finding in run.found.values():
        if finding.type is FindingType.CONTROLLER_DOWN and finding.id not in explaining:
            _controller_message(run, finding, [])
        elif finding.type is FindingType.CONTROLLER_STUCK and finding.id not in explaining:
            _stuck_message(run, finding, [])
    placed = sorted((order_key(f), f) for f in run.found.values())
    result.findings, result.order = [f for _, f in placed], [where for where, _ in placed]
    return result


_NONE: frozenset[Key] = frozenset()

Explained = list[tuple[Key, Finding]]
"""Findings a root explains, each with its subject's key."""

Named = list[tuple[Key, str]]
"""Subjects as (key, apiVersion): a Subject is made of nothing else."""


class BlastRadii:
    """Each root's `affected` list, kept from one pass to the next while what it was made of
    is the same. During an incident a ControllerDown explains thousands of satellites, and a
    change elsewhere must not sort them all again: when it has one group, its list is the group's,
    sorted once per version of the group, with the few other subjects it names inserted;
    otherwise it is kept until the members' subjects, the groups (by version), which of
    their subjects were promoted, or the extra subjects change."""

    def __init__(self, *, keep: bool = True) -> None:
        self._keep = keep
        """False: every list made from scratch (the reference pass, HealthModel.reference)."""
        self._kept: dict[str, tuple[tuple[object, ...], list[Subject]]] = {}
        self._asked: dict[str, tuple[tuple[object, ...], list[Subject]]] = {}
        self._groups: dict[str, tuple[int, list[tuple[str, str, str, str]], list[Subject]]] = {}
        """Per group: its version, and its subjects in order with their order keys."""

    def affected(
        self, run: Pass, root: str, named: Named, grouped: Sequence[tuple[str, Group, frozenset[Key]]]
    ) -> list[Subject]:
        """Every subject `root` explains but its own: its members' (`named`), its unpromoted
        satellites', its extra ones (a removal's orphans), in subject order."""
        extra = [(key_of_subject(s), s["apiVersion"]) for s in run.extra.pop(root, ())]
        own = run.keys[root]
        if not self._keep:
            return _affected(own, named, grouped, extra)
        made_of = (own, tuple(named), tuple((v.version, p) for _, v, p in grouped), tuple(extra))
        kept = self._kept.get(root)
        if kept is None or kept[0] != made_of:
            found = self._around(own, named, extra, *grouped[0]) if len(grouped) == 1 else None
            kept = (made_of, found if found is not None else _affected(own, named, grouped, extra))
        self._asked[root] = kept
        return kept[1]

    def _around(
        self, own: Key, named: Named, extra: Named, link: str, group: Group, promoted: frozenset[Key]
    ) -> list[Subject] | None:
        """The group's subjects in order (made once per version of it) with the few others its
        root names inserted: None when that is not the answer (the root's own subject is in the
        group, a promoted satellite is not named again, or a key comes with another apiVersion)."""
        subjects = group.subjects
        if own in subjects:
            return None
        merged = dict(named)
        for key, api_version in extra:
            merged.setdefault(key, api_version)
        merged.pop(own, None)
        if not promoted <= merged.keys():
            return None
        others = []
        for key, api_version in merged.items():
            already = subjects.get(key)
            if already is None:
                others.append((key, api_version))
            elif already != api_version:
                return None
        kept = self._groups.get(link)
        if kept is None or kept[0] != group.version:
            entries = sorted(subjects.items(), key=_order)
            kept = self._groups[link] = (group.version, [_order(e) for e in entries], _subjects(entries))
        _, orders, whole = kept
        if not others:
            return whole
        orders, whole = list(orders), list(whole)
        for entry in others:
            at = bisect_left(orders, _order(entry))
            orders.insert(at, _order(entry))
            whole.insert(at, _subjects([entry])[0])
        return whole

    def end_pass(self, groups: Collection[str], scope: Collection[Key] | None = None) -> None:
        """Keep only the roots this pass asked about and the groups still there; a pass over a
        `scope` of subjects keeps those of roots outside it."""
        if scope is not None:
            self._asked.update(
                (r, k) for r, k in self._kept.items() if r not in self._asked and k[0][0] not in scope
            )
        self._kept, self._asked = self._asked, {}
        for link in self._groups.keys() - groups:
            del self._groups[link]

    def clear(self) -> None:
        self._kept, self._asked, self._groups = {}, {}, {}


def _affected(
    own: Key, named: Named, grouped: Sequence[tuple[str, Group, frozenset[Key]]], extra: Named
) -> list[Subject]:
    """Members first (the last of one key wins), then satellites (never a member's key: a finding
    added on a satellite's subject promotes it), then extra subjects where no other names theirs;
    ordered by subject, then apiVersion (one key has one)."""
    subjects = dict(named)
    for _, group, promoted in grouped:
        if promoted:
            subjects.update((k, v) for k, v in group.subjects.items() if k not in promoted)
        else:
            subjects.update(group.subjects)
    for key, api_version in extra:
        subjects.setdefault(key, api_version)
    subjects.pop(own, None)
    return _subjects(sorted(subjects.items(), key=_order))


def _subjects(entries: Iterable[tuple[Key, str]]) -> list[Subject]:
    return [Subject(apiVersion=v, kind=k.kind, namespace=k.namespace, name=k.name) for k, v in entries]


def _order(entry: tuple[Key, str]) -> tuple[str, str, str, str]:
    key, api_version = entry
    return key.namespace, key.kind, key.name, api_version


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


def _stuck_message(run: Pass, finding: Finding, explained: Explained) -> None:
    """How many of the objects it reconciles are overdue (its blast radius lists those, not the
    ones whose window has not passed yet), and how many more are blocked behind them."""
    overdue = {key for key, f in explained if f.type is FindingType.NOT_RECONCILING}
    others = len({key for key, _ in explained} - overdue)
    total = finding.evidence.get("due_objects", 0)
    finding.message += f" {len(overdue)} of the {total} objects it reconciles on an interval are overdue"
    blocked = f" and {others} more {'is' if others == 1 else 'are'} blocked behind them"
    finding.message += (blocked if others else "") + "."


def _controller_message(run: Pass, finding: Finding, explained: Explained, *, stale: int = 0) -> None:
    """`stale`: unpromoted satellites it explains, besides `explained`."""
    stale += sum(1 for _, f in explained if f.type is FindingType.STATUS_STALE)
    others = len({key for key, f in explained if f.type is not FindingType.STATUS_STALE})
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
