"""Slim, validated projections of API objects: the only shape the model ever reads.

Both `stalewatch analyze` (files) and the live watcher call `project()` on every object
before it reaches the model, so the rules can trust types and never see a Secret's data,
a managedFields blob or a 50 KiB condition message. The live watcher keeps only these
projections, which is why they are small: a typical Pod is under 1 KiB as JSON (about
2.2 KiB as Python objects). A Pod keeps no spec (its images are in containerStatuses),
container states keep no times, managedFields shrink to who wrote when and the paths of the
fields each owns (not for Pods and Events; the model keeps the paths only for objects whose
writers fight, writers.py), and an empty string is left out (it reads the same as absent).

The fields and their bounds are declared in schema.py; this module compiles each schema node
into a check. Per field the schema says what happens when the value is wrong:
  * strict fields (kind, apiVersion, metadata.name/namespace/generation,
    status.observedGeneration, the status.conditions list itself, and anything beyond a
    sane size) raise MalformedObject: the object cannot be judged correctly without them;
  * in every other field a wrong value is REJECTED: the field is dropped, the rest of the
    object kept, and the projection says so under `rejected` (a list of {field, reason,
    value}; a types.RejectReason each), which the model reports. Wrong is a value of another
    type than the field's (a string where an object belongs, a label whose value is a number,
    a whole `status` that is a list), a timestamp that is no RFC3339 time or no moment in
    years 1-9999 once in UTC, an integer past int64 or a number where a count belongs, a
    number of seconds past a century. When the wrong field is one its entry cannot do without
    (a condition's type or status), the entry goes with it, under the field's name. Nothing
    downstream ever meets such a value, so no rule has to guard its arithmetic, and no field
    stalewatch reads is ever left out without saying so.
What is left out quietly is what reads the same as absent: null, "", an empty entry, an entry
without a field it needs (a condition with no status: nothing to read), and fields not read.
Unknown fields are ignored. Long messages are truncated to MESSAGE_LIMIT characters.
events.k8s.io/v1 Events are projected under their core/v1 field names.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

from watcher.model.fieldsets import read_fields
from watcher.model.schema import (
    EVENTS_V1_RENAMES,
    Bool,
    Field,
    FieldSet,
    Int,
    Labels,
    List,
    Obj,
    Str,
    Time,
    kind_schema,
)
from watcher.model.schema import MESSAGE_LIMIT as MESSAGE_LIMIT
from watcher.model.types import RejectReason

VALUE_LIMIT = 120
"""A rejected value is quoted up to this many characters."""
MAX_REJECTED = 256
"""More wrong values than this in one object section is malformed."""
REJECTED = "rejected"
"""The projection's key for its rejected fields (no Kubernetes object has one at top level)."""


class MalformedObject(ValueError):
    """The object cannot be used; the message is one line naming the object and the field."""


class _Drop(ValueError):
    """Nothing to keep (null, "", an empty entry, one without a field it needs): left out quietly.
    (This and _Located are ValueErrors: the fast path, which calls some of these checks, then
    takes the slow path.)"""


class _Located(ValueError):
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


class _Malformed(_Located):
    """A strict field was wrong."""


class _Rejected(_Located):
    """A lenient field was wrong: drop it and say so. `entry`: how many of the innermost steps
    name the entry that goes with it (0: only the field goes)."""

    def __init__(self, reason: RejectReason, value: Any, problem: str = "is out of range") -> None:
        super().__init__(problem)
        self.reason = reason
        self.entry = 0
        text = value.isoformat() if isinstance(value, datetime) else value
        self.value = (text if isinstance(text, str) else _written(text))[:VALUE_LIMIT]


def _written(value: Any) -> str:
    """A value as JSON would spell it (YAML's datetimes as text), for a message."""
    try:
        return json.dumps(value, default=str, ensure_ascii=False)[: VALUE_LIMIT + 1]
    except (TypeError, ValueError):  # a mapping with keys JSON has no spelling for
        return repr(value)


Check = Callable[[Any], Any]
"""Validates one value and returns what to keep; raises _Drop (nothing to keep), _Rejected
(a lenient field was wrong) or _Malformed (a strict one was)."""


def _reject(strict: bool, problem: str, value: Any) -> NoReturn:
    if strict:
        raise _Malformed(problem)
    raise _Rejected(RejectReason.WRONG_TYPE, value, problem)


def _str(node: Str) -> Check:
    limit, strict, intern = node.limit, node.strict, node.intern

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            _reject(strict, "is not a string", value)
        if not value and not strict:
            raise _Drop  # "" reads the same as absent everywhere, and absent costs nothing
        if limit is not None and len(value) > limit:
            if strict:
                raise _Malformed(f"is longer than {limit} characters")
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
                raise _Rejected(reason if big else RejectReason.NOT_AN_INTEGER, value)
            _reject(strict, "is not an integer", value)
        if not -limit <= value < limit:
            if strict:
                raise _Malformed(f"is out of range ({repr(value)[:VALUE_LIMIT]})")
            raise _Rejected(reason, value)
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
            raise _Rejected(RejectReason.TIME_OUT_OF_RANGE, value) from None
    if not isinstance(value, str):
        _reject(False, "is not a timestamp", value)
    if not value:
        raise _Drop
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise _Rejected(RejectReason.TIME_UNPARSEABLE, value, "is not an RFC3339 timestamp") from None
    if not _in_utc_range(moment):
        raise _Rejected(RejectReason.TIME_OUT_OF_RANGE, value)
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
            raise _Malformed(f"has {len(kept)} entries (more than {limit})")
        if len(kept) < len(value):  # rare: find a bad entry among those read
            for key, item in value.items():
                if not isinstance(key, str):
                    rejected = _Rejected(RejectReason.WRONG_TYPE, key, "is a key that is not a string")
                elif item is not None and not isinstance(item, str) and (not keep or key.startswith(keep)):
                    rejected = _Rejected(RejectReason.WRONG_TYPE, item, "is not a string")
                else:
                    continue
                rejected.path.append(key)
                raise rejected
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
                raise _Drop
            _reject(strict, "is not an object", value)
        out: dict[str, Any] = {}
        for name, item in value.items():
            field = fields.get(name)
            if field is None or item is None:
                continue
            try:
                out[name] = field(item)
            except _Drop:
                continue
            except _Located as error:
                error.path.append(name)
                if name in required and isinstance(error, _Rejected):
                    error.entry = len(error.path)  # the entry cannot do without it: both go
                raise
        for name in required:
            if name not in out:
                raise _Drop
        if not out and not keep_empty:
            raise _Drop
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
                raise _Malformed(f"has {len(entries)} entries (more than {limit})")
            entries = entries[:limit]
        out = []
        for index, entry in entries if filtered else enumerate(entries):
            if entry is _TAKEN_OUT:
                continue
            try:
                out.append(item(entry))
            except _Drop:
                continue
            except _Located as error:
                error.path.append(f"[{index}]")
                raise
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
}


def compiled(node: Field) -> Check:
    """The check of one schema node (built once: shared nodes such as conditions share theirs)."""
    known = _COMPILED.get(id(node))
    if known is None:
        known = _COMPILED[id(node)] = (node, _COMPILERS[type(node)](node))
    return known[1]


def project(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only what the model reads, validated; raise MalformedObject when unusable."""
    if not isinstance(obj, Mapping):
        raise MalformedObject("object is not a mapping")
    kind, api_version, metadata = obj.get("kind"), obj.get("apiVersion"), obj.get("metadata")
    if not isinstance(kind, str) or not kind:
        raise MalformedObject("object has no kind")
    if not isinstance(api_version, str) or not api_version:
        raise MalformedObject(f"{kind}: object has no apiVersion")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise MalformedObject(f"{kind}: object has no metadata.name")
    try:
        return _project(obj, kind, api_version, metadata)
    except _Malformed as error:
        namespace = metadata.get("namespace")
        where = f"{kind} {namespace}/{metadata['name']}" if namespace else f"{kind} {metadata['name']}"
        raise MalformedObject(f"{where}: {error.where()} {error.problem}") from None


def project_or_problem(obj: Any) -> tuple[dict[str, Any] | None, str]:
    """(the projection, "") or (None, why the model cannot use the object), never an exception:
    for the watcher and `stalewatch analyze`, which set the object aside and go on."""
    try:
        return project(obj), ""
    except MalformedObject as error:
        return None, str(error)
    except Exception as error:  # the model tripped on odd input: a bug, but the rest must go on
        return None, f"could not be projected ({type(error).__name__}: {error}); this is a stalewatch bug"


def _project(
    obj: Mapping[str, Any], kind: str, api_version: str, metadata: Mapping[str, Any]
) -> dict[str, Any]:
    schema = kind_schema(api_version.rpartition("/")[0], kind)
    rejected: list[dict[str, str]] = []
    meta = _section(compiled(schema.metadata), metadata, "metadata", rejected)
    out: dict[str, Any] = {"apiVersion": sys.intern(api_version), "kind": sys.intern(kind), "metadata": meta}
    for name, fields in schema.sections.items():
        if not fields.fields:  # nothing read (a ConfigMap's spec): nothing to say of it
            continue
        if name:
            section = _section(compiled(fields), obj.get(name), name, rejected)
            if section:
                out[name] = section
        else:  # fields at the top level: an Event's, under their core/v1 names
            top = {EVENTS_V1_RENAMES.get(k, k): v for k, v in obj.items()}
            out.update(_section(compiled(fields), top, "", rejected))
    if rejected:
        out[REJECTED] = rejected
    return out


def _section(check: Check, value: Any, name: str, rejected: list[dict[str, str]]) -> dict[str, Any]:
    """A top-level section: absent or not an object means empty (strictness is per field).

    A rejected value (and its entry, when the entry cannot do without it) is taken out of (a
    copy of) the section, which is checked again without it: rare, so the usual object pays
    nothing for it."""
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        if name:  # a `status` that is a string or a list: nothing in it can be read
            rejected.append(_mark(name, _Rejected(RejectReason.WRONG_TYPE, value, "is not an object")))
        return {}
    for _ in range(MAX_REJECTED):
        try:
            section: dict[str, Any] = check(value)
            return section
        except _Rejected as error:
            steps = error.steps()
            rejected.append(_mark(f"{name}.{error.where()}" if name else error.where(), error))
            value = _without(value, steps[: len(steps) - error.entry])
        except _Malformed as error:
            if name:
                error.path.append(name)
            raise
    too_many = _Malformed(f"has more than {MAX_REJECTED} wrong values")
    too_many.path.append(name)
    raise too_many


def _mark(field: str, error: _Rejected) -> dict[str, str]:
    return {"field": field, "reason": str(error.reason), "value": error.value, "problem": error.problem}


_TAKEN_OUT = object()
"""A list entry _without() took out (a list check skips it; the indexes of the rest stay as written)."""


def _without(value: Any, steps: Sequence[Any]) -> Any:
    """A copy of `value` without the field at `steps` (the containers on the way are copied)."""
    step, rest = steps[0], steps[1:]
    if isinstance(value, list):
        items = list(value)
        index = int(step[1:-1])
        items[index] = _without(items[index], rest) if rest else _TAKEN_OUT
        return items
    fields = dict(value)
    if rest:
        fields[step] = _without(fields[step], rest)
    else:
        del fields[step]
    return fields
