"""The check of each schema node: what project() does to one value, compiled once per node.

projection.py says what happens to a wrong value and why (its module docstring); this module is
how: each node type of schema_nodes.py compiles into a function that validates one value and
returns what to keep, or raises Drop (nothing to keep: null, "", an empty entry), Rejected (a
lenient field was wrong), Partial (a container read through: what it kept, and every Rejected
inside it, which projection.py reports) or Malformed (a strict field was wrong: the whole object
is unusable). One pass finds every wrong value, whatever the object's size. The fast path
(fastpath/shapes.py) calls some of these checks too; all are ValueErrors, on which it steps
aside to the slow path.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

from watcher.model.ingest.fieldsets import read_fields
from watcher.model.ingest.schema_nodes import Bool, Field, FieldSet, Flags, Int, Labels, List, Obj, Str, Time
from watcher.model.types import RejectReason

VALUE_LIMIT = 120
"""A rejected value is quoted up to this many characters."""
MAX_REJECTED = 256
"""More wrong values than this in one object section is malformed (a list stops reading at once)."""
OUT_OF_RANGE = "is out of range"
"""The problem of a value of the right type outside its bounds (the others say what it is not)."""


class Drop(ValueError):
    """Nothing to keep (null, "", an empty entry, one without a field it needs): left out quietly.
    (This and Located are ValueErrors: the fast path, which calls some of these checks, then
    takes the slow path.)"""


class Located(ValueError):
    """Raised from a field; each enclosing level adds its step to `path` on the way out (a list
    index as "[i]", a mapping key as written)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[Any] = []

    def steps(self) -> list[Any]:
        return self.path[::-1]

    def where(self) -> str:
        return "".join(_step(step) for step in self.steps()).lstrip(".")


def _step(step: Any) -> str:
    return step if isinstance(step, str) and step.startswith("[") else f".{step}"


class Malformed(Located):
    """A strict field was wrong."""


class Rejected(Located):
    """A lenient field was wrong: drop it and say so."""

    def __init__(self, reason: RejectReason, value: Any, problem: str = OUT_OF_RANGE) -> None:
        super().__init__(problem)
        self.reason = reason
        text = value.isoformat() if isinstance(value, datetime) else value
        self.value = (text if isinstance(text, str) else _written(text))[:VALUE_LIMIT]


class Partial(ValueError):
    """A container read through with wrong values in it: what it kept (None: it goes too, an
    entry whose required field was wrong) and each Rejected, its path from here."""

    def __init__(self, kept: Any, rejected: list[Rejected]) -> None:
        super().__init__(f"{len(rejected)} wrong values")
        self.kept, self.rejected = kept, rejected


def _found(error: Rejected | Partial, step: Any, into: list[Rejected]) -> Any:
    """Collect the wrong values of one field or entry (at `step`); what of it is kept, or None."""
    if isinstance(error, Rejected):
        error.path.append(step)
        into.append(error)
        return None
    for rejected in error.rejected:
        rejected.path.append(step)
    into.extend(error.rejected)
    return error.kept


def _written(value: Any) -> str:
    """A value as JSON would spell it (YAML's datetimes as text), for a message."""
    try:
        return json.dumps(value, default=str, ensure_ascii=False)[: VALUE_LIMIT + 1]
    except (TypeError, ValueError):  # a mapping with keys JSON has no spelling for
        return repr(value)


Check = Callable[[Any], Any]
"""Validates one value and returns what to keep; raises Drop (nothing to keep), Rejected
(a lenient field was wrong) or Malformed (a strict one was)."""


def _reject(strict: bool, problem: str, value: Any) -> NoReturn:
    if strict:
        raise Malformed(problem)
    raise Rejected(RejectReason.WRONG_TYPE, value, problem)


def _str(node: Str) -> Check:
    limit, strict, intern = node.limit, node.strict, node.intern

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            _reject(strict, "is not a string", value)
        if not value and not strict:
            raise Drop  # "" reads the same as absent everywhere, and absent costs nothing
        if limit is not None and len(value) > limit:
            if strict:
                raise Malformed(f"is longer than {limit} characters")
            value = value[: limit - 1] + "…"
        return sys.intern(value) if intern else value

    return check


def _int(node: Int) -> Check:
    """An integer in [-limit, limit) (int64 by default, as the API server stores them)."""
    strict, limit, reason = node.strict, node.limit, node.reason

    def check(value: Any) -> Any:
        if type(value) is not int:  # bool is an int subclass, and not a count
            if type(value) is float and not strict:
                big = not math.isfinite(value) or abs(value) >= limit
                raise Rejected(reason if big else RejectReason.NOT_AN_INTEGER, value)
            _reject(strict, "is not an integer", value)
        if not -limit <= value < limit:
            if strict:
                raise Malformed(f"is out of range ({repr(value)[:VALUE_LIMIT]})")
            raise Rejected(reason, value)
        return value

    return check


def _bool(value: Any) -> Any:
    if type(value) is not bool:
        _reject(False, "is not a boolean", value)
    return value


_TIMES: dict[str, str] = {}
"""Timestamps already checked, each to the first copy seen: objects share most of theirs (a
Pod's conditions usually carry its start time, Pods created together the same second), so a
check is mostly a lookup and the kept copies are shared like interned strings."""
_TIMES_LIMIT = 8192


def _time(value: Any) -> Any:
    """RFC3339 strings are kept as written; YAML-parsed datetimes are spelled back out. A time
    that is no moment in UTC (9999-12-31T23:59:59-01:00) is out of range."""
    if type(value) is str and (known := _TIMES.get(value)) is not None:
        return known
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
        except OverflowError:
            raise Rejected(RejectReason.TIME_OUT_OF_RANGE, value) from None
    if not isinstance(value, str):
        _reject(False, "is not a timestamp", value)
    if not value:
        raise Drop
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Rejected(RejectReason.TIME_UNPARSEABLE, value, "is not an RFC3339 timestamp") from None
    if not _in_utc_range(moment):
        raise Rejected(RejectReason.TIME_OUT_OF_RANGE, value)
    if len(_TIMES) >= _TIMES_LIMIT:
        _TIMES.clear()
    _TIMES[value] = value
    return value


def _in_utc_range(moment: datetime) -> bool:
    """Whether this moment exists in UTC (only one in year 1 or 9999 with an offset may not)."""
    if moment.year not in (1, 9999) or moment.tzinfo is None:
        return True
    try:
        moment.astimezone(UTC)
    except OverflowError:
        return False
    return True


def _labels(node: Labels) -> Check:
    """A str->str map (of the keys with a `keep` prefix, if any); an entry that is not str->str
    is rejected, too many kept is malformed."""
    limit, keep, value_limit = node.limit, node.keep, node.value_limit

    def check(value: Any) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):
            _reject(False, "is not a map of strings", value)
        kept = {
            sys.intern(k): sys.intern(v) if value_limit is None else v[:value_limit]
            for k, v in value.items()
            if isinstance(k, str) and isinstance(v, str) and (not keep or k.startswith(keep))
        }
        if len(kept) > limit:
            raise Malformed(f"has {len(kept)} entries (more than {limit})")
        found: list[Rejected] = []
        if len(kept) < len(value):  # rare: find the bad entries among those read
            for key, item in value.items():
                if not isinstance(key, str):
                    rejected = Rejected(RejectReason.WRONG_TYPE, key, "is a key that is not a string")
                elif item is not None and not isinstance(item, str) and (not keep or key.startswith(keep)):
                    rejected = Rejected(RejectReason.WRONG_TYPE, item, "is not a string")
                else:
                    continue
                _found(rejected, key, found)
        if found:
            raise Partial(kept, found)
        return kept

    return check


def kept_flags(node: Flags) -> Callable[[Sequence[Any]], list[str]]:
    """The flags a Flags node keeps of a list of arguments (entries that are no string skipped)."""
    names, limit = node.names, node.limit

    def keep(args: Sequence[Any]) -> list[str]:
        found: dict[str, str | None] = {}
        for index, arg in enumerate(args):
            if type(arg) is not str or not arg.startswith("--"):
                continue
            name, equals, written = arg.partition("=")
            if name not in names:
                continue
            value: str | None = written
            if not equals:  # "--flag value": the next argument, when it is no flag itself
                following = args[index + 1] if index + 1 < len(args) else None
                value = following if type(following) is str and not following.startswith("-") else None
            found.pop(name, None)  # the last one written wins, and is listed last
            found[name] = value if value is None or len(value) <= limit else None
        return [name if value is None else f"{name}={value}" for name, value in found.items()]

    return keep


def _flags(node: Flags) -> Check:
    keep = kept_flags(node)

    def check(value: Any) -> Any:
        if not isinstance(value, list):
            _reject(False, "is not a list", value)
        kept = keep(value)
        found: list[Rejected] = []
        for index, arg in enumerate(value):
            if not isinstance(arg, str):
                _found(Rejected(RejectReason.WRONG_TYPE, arg, "is not a string"), f"[{index}]", found)
        if found:
            raise Partial(kept or None, found)
        if not kept:
            raise Drop
        return kept

    return check


def _fieldset(value: Any) -> Any:
    """fieldsV1 as its sorted paths (fieldsets.py); neither a trie nor paths: rejected."""
    paths = read_fields(value)
    if paths is None:
        _reject(False, "is not a fieldsV1 set", value)
    return paths


def _obj(node: Obj) -> Check:
    """A mapping of known fields. `strict`: a non-mapping is malformed (else dropped).
    `required`: without these entries, this (lenient) entry is dropped; so is an empty
    result unless `keep_empty` (an empty mapping can be a marker, e.g. state.running)."""
    fields = {name: compiled(field) for name, field in node.fields.items()}
    strict, required, keep_empty = node.strict, node.required, node.keep_empty

    def check(value: Any) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):
            if value is None and not strict:  # a null list entry reads as absent
                raise Drop
            _reject(strict, "is not an object", value)
        out: dict[str, Any] = {}
        found: list[Rejected] = []
        for name, item in value.items():
            field = fields.get(name)
            if field is None or item is None:
                continue
            try:
                out[name] = field(item)
            except Drop:
                continue
            except (Rejected, Partial) as error:
                kept = _found(error, name, found)
                if kept is not None:
                    out[name] = kept
                elif name in required:  # the entry cannot do without it: both go, under its name
                    raise Partial(None, found) from None
            except Located as error:
                error.path.append(name)
                raise
        if any(name not in out for name in required) or (not out and not keep_empty):
            if found:
                raise Partial(None, found)
            raise Drop
        if found:
            raise Partial(out, found)
        return out

    return check


def _list(node: List) -> Check:
    """A list. Longer than `limit` is malformed, or cut when `truncate`; entries of other `types`
    (a mapping's "type"), or with the value `unless` names, are left out first."""
    item, limit, strict, truncate = compiled(node.item), node.limit, node.strict, node.truncate
    types, unless = node.types, node.unless
    filtered = types is not None or unless is not None

    def read(entry: Any) -> bool:
        if type(entry) is not dict:
            return True  # for the entry's check to reject
        if unless is not None and entry.get(unless[0]) == unless[1]:
            return False
        return types is None or not isinstance(kind := entry.get("type"), str) or kind in types

    def check(value: Any) -> Any:
        if not isinstance(value, list):
            _reject(strict, "is not a list", value)
        entries: Sequence[Any] = value
        if filtered:  # (index as written, entry): a bad entry's path must name it in the object
            entries = [(index, entry) for index, entry in enumerate(value) if read(entry)]
        if len(entries) > limit:
            if not truncate:
                raise Malformed(f"has {len(entries)} entries (more than {limit})")
            entries = entries[:limit]
        out = []
        found: list[Rejected] = []
        for index, entry in entries if filtered else enumerate(entries):
            try:
                out.append(item(entry))
            except Drop:
                continue
            except (Rejected, Partial) as error:
                kept = _found(error, f"[{index}]", found)
                if kept is not None:
                    out.append(kept)
                if len(found) > MAX_REJECTED:  # 100,000 wrong entries cost no more than 257
                    raise Malformed(f"has more than {MAX_REJECTED} wrong values") from None
            except Located as error:
                error.path.append(f"[{index}]")
                raise
        if found:
            raise Partial(out, found)
        return out

    return check


_COMPILED: dict[int, tuple[Field, Check]] = {}
_COMPILERS: dict[type, Callable[[Any], Check]] = {
    Str: _str,
    Int: _int,
    Bool: lambda n: _bool,
    Time: lambda n: _time,
    Labels: _labels,
    Obj: _obj,
    List: _list,
    FieldSet: lambda n: _fieldset,
    Flags: _flags,
}


def compiled(node: Field) -> Check:
    """The check of one schema node (built once: shared nodes such as conditions share theirs)."""
    known = _COMPILED.get(id(node))
    if known is None:
        known = _COMPILED[id(node)] = (node, _COMPILERS[type(node)](node))
    return known[1]
