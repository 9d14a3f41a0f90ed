"""The end of a correlation pass: every finding's root cause, each root's blast radius.

Every finding gets root_cause = the end of its chain of links (a cycle is broken at its
smallest id); each root lists, in `affected`, every subject it explains, counting the
unpromoted satellites (see store/satellites.py) as if they had been members. A ControllerDown's
message says how many objects it leaves with a cached status, a ControllerStuck's how many are
overdue.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from watcher.model.ingest.objects import Key, describe
from watcher.model.store.working import Correlation, Pass, key_of_subject, order_key, subject_order
from watcher.model.types import Finding, FindingType

_OWN_ROOTS = (FindingType.CONFLICTING_WRITERS,)
"""Types no other finding on their subject explains (a controller down does not make two others
fight): a root even when that subject's first finding is another."""
_CHAINED = (FindingType.DEPENDENCY_BLOCKED, FindingType.RECONCILE_FAILED)
"""Types linked to another object's finding, whose message names the end of the chain too."""


def finish(run: Pass) -> Correlation:
    parent: dict[str, str | None] = {}
    for ids in run.by_subject.values():
        for index, fid in enumerate(ids):
            first = index == 0 or run.found[fid].type in _OWN_ROOTS
            parent[fid] = run.links.get(fid) if first else ids[0]
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
        run.found[root].affected = sorted(subjects.values(), key=subject_order)
        if run.found[root].type is FindingType.CONTROLLER_DOWN:
            _controller_message(run, run.found[root], explained, stale=len(satellites.get(root, ())))
        elif run.found[root].type is FindingType.CONTROLLER_STUCK:
            _stuck_message(run, run.found[root], explained)
    for root, extra in run.extra.items():
        run.found[root].affected = sorted(extra, key=subject_order)
    explaining = members.keys() | satellites.keys()
    for finding in run.found.values():
        if finding.type is FindingType.CONTROLLER_DOWN and finding.id not in explaining:
            _controller_message(run, finding, [])
        elif finding.type is FindingType.CONTROLLER_STUCK and finding.id not in explaining:
            _stuck_message(run, finding, [])
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


def _stuck_message(run: Pass, finding: Finding, explained: Sequence[str]) -> None:
    """How many of the objects it reconciles are overdue (its blast radius lists those, not the
    ones whose window has not passed yet), and how many more are blocked behind them."""
    overdue = {run.keys[f] for f in explained if run.found[f].type is FindingType.NOT_RECONCILING}
    others = len({run.keys[f] for f in explained} - overdue)
    total = finding.evidence.get("due_objects", 0)
    finding.message += f" {len(overdue)} of the {total} objects it reconciles on an interval are overdue"
    blocked = f" and {others} more {'is' if others == 1 else 'are'} blocked behind them"
    finding.message += (blocked if others else "") + "."


def _controller_message(run: Pass, finding: Finding, explained: Sequence[str], *, stale: int = 0) -> None:
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
