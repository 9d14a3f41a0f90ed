"""ConflictingWriters: an object two or more field managers rewrite in turn, each undoing the other.

The API server records in `metadata.managedFields` which manager owns which fields (its fieldsV1
set) and when it last wrote. A full-object Update (an HTTP PUT, what a controller's typed
`Update()` sends) "forces" like every non-apply write: a field whose value it changes moves from
its owner to the writer, and a field the PUT leaves out is removed from the object and from every
owner's set (Kubernetes, "Server-Side Apply: field management"). So when one controller adds fields
to a shared object and another PUTs a typed struct that lacks them, on every reconcile, the first
one's fields vanish from its set, come back on its next turn, vanish again: the writers fight, the
spec changes each time (metadata.generation bumps), and each side thinks it is in charge.

This module follows successive versions of the same object (watch events live; a snapshot series
in `analyze`). A version that changes the spec is a turn, by the manager whose write time moved
(the newest first), or else whose fields grew (`gainer`). A turn flips when another manager lost
fields in it (erased or taken over), or when its writer took back fields it had lost in an earlier
turn. A fight is at least `conflicting_writers_flips` flipping turns, by two or more writers,
within `conflicting_writers_window`. Not a fight: one manager writing often, two writing disjoint
fields, a single handover (one flip), status written through the status subresource (those
entries are never read, and such writes do not bump the generation).

Judged per field, whatever else writes the object: real objects carry several managers
(kubectl-client-side-apply or kubectl's server-side apply, helm, kustomize-controller,
kube-controller-manager; a mutating webhook's changes are recorded under the manager of the
request it mutated), and a manager whose fields no turn touches is a bystander: never named, never
in the way. A PUT that only erased fields dates no entry (the API server moves a manager's time
only when its write took fields), so who wrote it is inferred (`possible_erasers`, `_resolve`):
not a manager that lost fields in it, not one that only applies (an apply never removes a field
another manager owns), and, of the rest, the one owning fields nearest to the fought-over ones
(sharing the longest leading part of their paths: the operator owning `spec.port` erased
`spec.sidecar`, not kubectl-label owning `metadata.labels.team`). When two are as near, the
writes are "by one of" them, and still count as the other side; when none owns a field under the
same top-level field, the eraser is unknown and the writes count for no side.

Bounded state, and none of its own for a quiet object: each managedFields entry the model stores
keeps the hash of its field set (HASH) in place of the set, so the previous version, which the
store hands over anyway, says who owned what then. Only once a turn changes another manager's
fields (at most MAX_FIGHTS objects at once) are an object's field sets and its last turns (twice
the flips threshold) kept here, and they are dropped again once no turn flipped within the window.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from watcher.model.ingest.fieldsets import paths_of, shown
from watcher.model.ingest.objects import Key, describe, format_duration, parse_time, subject_of
from watcher.model.rules.context import new_finding
from watcher.model.types import Finding, FindingType, ModelConfig, Subject, rfc3339

MAX_FIGHTS = 512
"""Objects whose field sets are kept at once; a new one replaces the one whose last flip is oldest."""
MAX_SHOWN = 8
"""Field paths named in a message (the evidence lists up to MAX_LISTED)."""
MAX_LISTED = 32
STATUS = "status"

HASH = "fieldsHash"
"""The key of an entry's field-set hash in a stored projection (fields_of puts it there)."""

Owners = dict[str, frozenset[str]]
"""Per manager, the paths of the fields it owns (its entries outside the status subresource)."""
Marks = dict[str, tuple[int, str]]
"""Per manager, a hash of its field sets and its latest write time: what a version says of who
owned what, read back from the stored previous version (marks_in)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """A version that changed the spec, if it flipped fields: who wrote it, when, what flipped."""

    writer: str
    """"" when no manager's entry says it wrote this version."""
    at: datetime
    lost: tuple[tuple[str, tuple[str, ...]], ...]
    """(manager, the fields it lost: () when not known, a quiet object's first flip)."""
    regained: tuple[str, ...]
    """Fields the writer took back after losing them."""
    candidates: tuple[str, ...] = ()
    """When no entry dates the version (writer ""): the managers that may have erased the fields
    (`possible_erasers`), one of which `_resolve` names, or several equally near."""


@dataclass(slots=True)
class _Fight:
    subject: Subject
    owners: Owners
    turns: deque[Turn]


Written = tuple[tuple[str, str, str], ...]
"""Per entry outside the status subresource: (manager, its projected fieldsV1, its time)."""
APPLY = "Apply"


def fields_of(obj: Mapping[str, Any]) -> Written | None:
    """What managedFields says of who owns what, each field set replaced in its entry by its
    hash on the way (the model stores the projection without the sets, see HealthModel.upsert);
    None when no entry carries one (a kind whose schema keeps none, or a stored projection)."""
    written: list[tuple[str, str, str]] = []
    read = False
    for entry in obj["metadata"].get("managedFields") or ():
        if type(entry) is dict:
            text = entry.pop("fieldsV1", None)
            if text is not None:
                entry[HASH] = hash(text)
        else:
            text = entry.get("fieldsV1")
        if text is None:
            continue
        read = True
        if entry.get("subresource", "") != STATUS:
            written.append((entry.get("manager") or "(no manager)", text, entry.get("time") or ""))
    return tuple(written) if read else None


def _marks(entries: Any) -> Marks:
    """Per manager, from (manager, field-set hash, time) per entry: one hash of its sets (the
    set's own when it has one entry, as most managers do) and its latest write time."""
    hashes: dict[str, list[int]] = {}
    times: dict[str, str] = {}
    for manager, digest, at in entries:
        hashes.setdefault(manager, []).append(digest)
        if at > times.get(manager, ""):
            times[manager] = at
    return {m: (h[0] if len(h) == 1 else hash(tuple(h)), times.get(m, "")) for m, h in hashes.items()}


def marks_of(written: Written) -> tuple[dict[str, str], Marks]:
    """(fieldsV1 per manager, what marks_in will read back of this version)."""
    texts: dict[str, str] = {}
    for manager, text, _ in written:
        texts[manager] = f"{texts[manager]}\n{text}" if manager in texts else text
    return texts, _marks((manager, hash(text), at) for manager, text, at in written)


def marks_in(stored: Mapping[str, Any] | None) -> Marks | None:
    """What a stored version (its entries' HASH) says of who owned what; None when it carries no
    hash (there was no earlier version, or it kept no field sets)."""
    if stored is None:
        return None
    entries = [
        (entry.get("manager") or "(no manager)", entry[HASH], entry.get("time") or "")
        for entry in stored["metadata"].get("managedFields") or ()
        if HASH in entry and entry.get("subresource", "") != STATUS
    ]
    return _marks(entries) if entries else None


def owners_of(texts: Mapping[str, str]) -> Owners:
    """The field sets themselves: read only for a turn that changed the spec."""
    return {manager: paths_of(text) for manager, text in texts.items()}


def writer_of(before: Marks, after: Marks) -> str:
    """The manager whose write time moved (the newest among them), "" when none did: an entry
    that only shrank lost fields to someone else's write (or its own erasing PUT), it wrote nothing."""
    moved = [
        (time, manager)
        for manager, (_, time) in after.items()
        if manager not in before or before[manager][1] != time
    ]
    return max(moved)[1] if moved else ""


def gainer(before: Owners, after: Owners) -> str:
    """The one manager whose set grew, "" unless exactly one did: only a write's own manager takes
    fields, and a write within the second of its manager's previous one moves no time."""
    grew = [m for m, paths in after.items() if paths - before.get(m, frozenset())]
    return grew[0] if len(grew) == 1 else ""


def possible_erasers(before: Marks, after: Marks, *, appliers: frozenset[str]) -> tuple[str, ...]:
    """Who may have written a version no entry dates, in which some managers lost fields: any
    manager on the object that lost none, but for those that only apply."""
    losers = {m for m, (digest, _) in before.items() if m not in after or after[m][0] != digest}
    if not losers:
        return ()
    return tuple(sorted(m for m in after if m not in losers and m not in appliers))


def appliers_of(obj: Mapping[str, Any]) -> frozenset[str]:
    """The managers whose every entry (outside status) is an Apply."""
    operations: dict[str, set[str]] = {}
    for entry in obj["metadata"].get("managedFields") or ():
        if entry.get("subresource", "") != STATUS:
            operations.setdefault(entry.get("manager") or "(no manager)", set()).add(
                entry.get("operation", "")
            )
    return frozenset(m for m, ops in operations.items() if ops == {APPLY})


_SEGMENT = re.compile(r"[^.\[]+|\[[^\]]*\]")


def _prefixes(path: str, *, limit: int | None = None) -> list[str]:
    """`spec.a[x=1].b` as its leading parts, shortest first: spec, spec.a, spec.a[x=1], spec.a[x=1].b
    (the first `limit` of them)."""
    return [path[: match.end()] for match in islice(_SEGMENT.finditer(path), limit)]


def _resolve(turns: Sequence[Turn], owners: Owners) -> list[Turn]:
    """Each undated turn credited to the possible eraser owning fields nearest to the fields the
    fight is over (see the module docstring); the equally near ones kept when there are several."""
    fought = {p for t in turns for _, paths in t.lost for p in paths} | {p for t in turns for p in t.regained}
    depth = {prefix: n for path in fought for n, prefix in enumerate(_prefixes(path), 1)}
    deepest = max(depth.values(), default=0)
    nearness: dict[str, int] = {}

    def near(manager: str) -> int:
        if manager not in nearness:
            nearness[manager] = max(
                (
                    depth.get(prefix, 0)
                    for path in owners.get(manager, ())
                    for prefix in _prefixes(path, limit=deepest)
                ),
                default=0,
            )
        return nearness[manager]

    out: list[Turn] = []
    for turn in turns:
        if turn.writer or not turn.candidates:
            out.append(turn)
            continue
        best = max(near(m) for m in turn.candidates)
        nearest = tuple(m for m in turn.candidates if near(m) == best) if best else ()
        one = nearest[0] if len(nearest) == 1 else ""
        out.append(replace(turn, writer=one, candidates=() if one else nearest))
    return out


def turn_of(
    writer: str,
    at: datetime,
    before: Owners,
    after: Owners,
    earlier: Sequence[Turn],
    *,
    candidates: tuple[str, ...],
) -> Turn:
    """What a spec change by `writer` did to the others' fields and its own lost ones."""
    lost = tuple(
        (manager, tuple(sorted(gone)))
        for manager in sorted(before.keys() | after.keys())
        if manager != writer and (gone := before.get(manager, frozenset()) - after.get(manager, frozenset()))
    )
    gained = after.get(writer, frozenset()) - before.get(writer, frozenset())
    had: set[str] = set()
    unknown = False
    for turn in earlier:
        for manager, paths in turn.lost:
            if manager == writer:
                had.update(paths)
                unknown = unknown or not paths
    regained = gained if unknown else gained & had
    return Turn(writer, at, lost, tuple(sorted(regained)), () if writer else candidates)


class Writers:
    """The fights of every object whose kind keeps field sets; see the module docstring."""

    def __init__(self, config: ModelConfig) -> None:
        self._config = config
        thresholds = config.thresholds
        self._flips, self._window = (
            thresholds.conflicting_writers_flips,
            thresholds.conflicting_writers_window,
        )
        self._fights: dict[Key, _Fight] = {}
        self._findings: dict[Key, Finding] = {}
        self._due: datetime | None = None

    def observe(
        self, key: Key, obj: Mapping[str, Any], previous: Mapping[str, Any] | None, *, now: datetime
    ) -> None:
        """A new version of the object (projected, with its field sets, which this replaces by
        their hashes), after the `previous` one the model stored (with its hashes)."""
        written = fields_of(obj)
        if written is None:
            return
        fight = self._fights.get(key)
        generation = obj["metadata"].get("generation", 0)
        turned = previous is not None and generation > previous["metadata"].get("generation", 0)
        before = marks_in(previous) if turned or fight is not None else None  # not for a status write
        if before is None or not turned:
            if fight is not None:  # no spec change, no turn: who owns what may still have moved
                texts, marks = marks_of(written)
                if marks != before:
                    fight.owners = owners_of(texts)
            return
        texts, marks = marks_of(written)
        times = {manager: at for manager, (_, at) in marks.items()}
        owners = owners_of(texts)
        writer = writer_of(before, marks) or (gainer(fight.owners, owners) if fight is not None else "")
        candidates = () if writer else possible_erasers(before, marks, appliers=appliers_of(obj))
        # an undated turn came after every write either version records: the newest is its lower bound
        recorded = [t for _, t in before.values()] + list(times.values())
        newest = times.get(writer) if writer else max(recorded, default="")
        at = parse_time(newest) or now
        if fight is None:
            touched = sorted(
                m for m, mark in before.items() if m != writer and marks.get(m, (0, ""))[0] != mark[0]
            )
            if touched:
                lost = tuple((m, ()) for m in touched)
                self._start(key, subject_of(obj), owners, Turn(writer, at, lost, (), candidates))
            return
        turn = turn_of(writer, at, fight.owners, owners, fight.turns, candidates=candidates)
        fight.owners = owners
        if turn.lost or turn.regained:
            fight.turns.append(turn)
            self._due = None

    def forget(self, key: Key) -> None:
        """The object is gone (or keeps no field sets any more)."""
        if self._fights.pop(key, None) is not None:
            self._due = None

    def _start(self, key: Key, subject: Subject, owners: Owners, turn: Turn) -> None:
        if len(self._fights) >= MAX_FIGHTS:
            oldest = min(self._fights, key=lambda k: self._fights[k].turns[-1].at)
            del self._fights[oldest]
        self._fights[key] = _Fight(subject, owners, deque([turn], maxlen=2 * self._flips))
        self._due = None

    def due(self, now: datetime) -> bool:
        """Whether time alone may have changed a finding (a flip left the window) since refresh."""
        return self._due is None or self._due <= now

    def refresh(self, now: datetime) -> bool:
        """Judge every fight at `now`, forgetting those with no flip left in the window; whether
        the findings changed."""
        found: dict[Key, Finding] = {}
        due: list[datetime] = []
        for key in sorted(self._fights):
            fight = self._fights[key]
            recent = [t for t in fight.turns if now - t.at < self._window]
            if not recent:
                del self._fights[key]
                continue
            due.append(recent[0].at + self._window)
            finding = self._judge(fight.subject, _resolve(recent, fight.owners), now=now)
            if finding is not None:
                found[key] = finding
        self._due = min(due, default=datetime.max.replace(tzinfo=now.tzinfo))
        changed = found != self._findings
        self._findings = found
        return changed

    def findings(self) -> list[Finding]:
        return list(self._findings.values())

    def fighting(self) -> list[Key]:
        """The objects whose field sets are kept (a flip within the window, or not judged since)."""
        return sorted(self._fights)

    def _judge(self, subject: Subject, turns: Sequence[Turn], *, now: datetime) -> Finding | None:
        """A fight: enough flips, by two sides: two named writers, or one and writes by one of
        several managers none of them named."""
        writers = sorted({t.writer for t in turns if t.writer})
        unnamed = any(t.candidates and not set(t.candidates) & set(writers) for t in turns)
        if len(turns) < self._flips or len(writers) + unnamed < 2:
            return None
        return conflicting_writers(subject, turns, writers=writers, config=self._config, now=now)


def conflicting_writers(
    subject: Subject, turns: Sequence[Turn], *, writers: Sequence[str], config: ModelConfig, now: datetime
) -> Finding:
    """The finding for `turns` (each flipped fields, oldest first) by `writers` (two or more)."""
    managers = sorted(set(writers) | {m for t in turns for m, _ in t.lost})
    fields = sorted(
        {p for t in turns for _, paths in t.lost for p in paths} | {p for t in turns for p in t.regained}
    )
    since, last = turns[0].at, turns[-1].at
    span = max(last - since, timedelta(0))
    named = ", ".join(shown(p) for p in fields[:MAX_SHOWN])
    more = f" and {len(fields) - MAX_SHOWN} more" if len(fields) > MAX_SHOWN else ""
    what = f" ({named}{more})" if fields else ""
    message = (
        f"{describe(subject)} is rewritten in turn by {_names(writers)}: within"
        f" {format_duration(span, rough=True)}, {_story(turns)}{what}."
        " Each write changes the spec, so each controller keeps reconciling the other's version."
        " Let one manager own these fields: the one doing full-object Updates (PUT) should patch,"
        " or server-side apply, only the fields it sets."
    )
    hours = span.total_seconds() / 3600
    evidence = {
        "managers": managers,
        "writers": list(writers),
        "fields": [shown(p) for p in fields[:MAX_LISTED]],
        "fields_total": len(fields),
        "flips": len(turns),
        "per_hour": round(len(turns) / hours, 1) if hours > 0 else None,
        "last": rfc3339(last),
    }
    return new_finding(config, FindingType.CONFLICTING_WRITERS, subject, message, since, evidence)


def _story(turns: Sequence[Turn]) -> str:
    """Who took whose fields how often, and who took them back: "3 writes by edge-operator took
    fields mesh-controller owned; 2 by mesh-controller took them back"."""
    back = Counter(t.writer for t in turns if t.regained)
    took = Counter((_by(t), manager) for t in turns for manager, _ in t.lost)
    parts = [
        f"{_count(n)} by {w} took fields {shown(m, limit=80)} owned"
        for (w, m), n in sorted(took.items(), key=lambda item: (-item[1], item[0]))
    ]
    parts += [f"{_count(n)} by {shown(w, limit=80)} took them back" for w, n in sorted(back.items())]
    return "; ".join(parts)


def _by(turn: Turn) -> str:
    if turn.writer:
        return shown(turn.writer, limit=80)
    if turn.candidates:
        return "one of " + _names(turn.candidates, word="or")
    return "an unnamed manager"


def _count(writes: int) -> str:
    return "1 write" if writes == 1 else f"{writes} writes"


def _names(names: Sequence[str], *, word: str = "and") -> str:
    quoted = [shown(n, limit=80) for n in names]
    return f" {word} ".join(quoted) if len(quoted) < 3 else ", ".join(quoted[:-1]) + f" {word} {quoted[-1]}"
