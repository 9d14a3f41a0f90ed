"""The fast path's msgspec types, generated from schema.py, with the steps each needs after decoding.

Each schema node becomes a Struct field whose type states the node's bounds (a length, an entry
count, an integer range, a required entry), so a value project() would drop, cut or refuse fails
decoding, and the caller takes the slow path. Lenient strings default to "" and everything else
to UNSET, so msgspec.to_builtins leaves out exactly what project() leaves out: absent fields
and empty strings. A lenient object given a string is decoded and left out, as project() drops
it (a HelmChart's spec.chart is a name, a HelmRelease's an object).

What a type cannot say is done after decoding by one function per Struct, generated as source
(as dataclasses generates __init__) because it runs on every event: interning, timestamps
checked, lists cut or kept by type, annotations kept by prefix, an empty entry left out. Each
comes in two modes: `fix` interns, `check` does all the rest (a Pod packed as bytes needs no
interned strings).
"""

from __future__ import annotations

import functools
import keyword
import operator
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, NamedTuple

import msgspec
from msgspec import UNSET, Meta, UnsetType

from watcher.model.projection import in_utc_range
from watcher.model.schema import EVENTS_V1_RENAMES, Bool, Field, Int, Kind, Labels, List, Obj, Str, Time

intern = sys.intern
_parse_time = datetime.fromisoformat


class Unsure(ValueError):
    """The fast path cannot promise project()'s result: take the slow path."""


_TIMES: dict[str, str] = {}
"""Timestamps already checked, each to the first copy seen: objects share most of theirs (a
Pod's conditions usually carry its start time, Pods created together the same second), so a
check is mostly a lookup and the kept copies are shared like interned strings."""
_TIMES_LIMIT = 8192


def checked_time(value: str | None) -> str:
    if not value:
        return ""
    known = _TIMES.get(value)
    if known is None:
        if not in_utc_range(_parse_time(value)):  # ValueError: project() would drop it
            raise Unsure("a time out of range: project() rejects it and says so")
        if len(_TIMES) >= _TIMES_LIMIT:
            _TIMES.clear()
        known = _TIMES[value] = value
    return known


def _interned(labels: dict[str, str]) -> dict[str, str]:
    return {intern(k): intern(v) for k, v in labels.items()}


def _kept(node: Labels) -> Callable[[dict[str, str]], dict[str, str]]:
    """The entries project() keeps of a map it filters by key prefix or cuts the values of."""

    def kept(labels: dict[str, str]) -> dict[str, str]:
        out = {
            intern(k): v if node.value_limit is None else v[: node.value_limit]
            for k, v in labels.items()
            if not node.keep or k.startswith(node.keep)
        }
        if len(out) > node.limit:
            raise Unsure("too many entries kept: project() names the object")
        return out

    return kept


Step = Callable[[Any], None]


class Shape(NamedTuple):
    """One kind's Struct type and its steps after decoding: `check` all but interning, `intern`
    only that, `fix` both."""

    struct: type[msgspec.Struct]
    fix: Step
    check: Step
    intern: Step


def _union(*types: Any) -> Any:
    return functools.reduce(operator.or_, types)


class _Generator:
    """Builds each schema node's Struct once (shared nodes, e.g. conditions, share theirs), and
    per kind one step function that walks the decoded object, each nested entry inlined."""

    def __init__(self) -> None:
        self._structs: dict[int, tuple[Obj, str]] = {}
        self._ns: dict[str, Any] = {
            "UNSET": UNSET,
            "_intern": intern,
            "_interned": _interned,
            "_time": checked_time,
            "_Unsure": Unsure,
        }
        """What the generated steps see: these, and each Struct, filter and map filter by name."""

    def _name(self, prefix: str, value: Any) -> str:
        name = f"{prefix}{len(self._ns)}"
        self._ns[name] = value
        return name

    def struct(
        self, node: Obj, name: str, *, top: bool = False, nullable: bool = False, extra: Any = ()
    ) -> str:
        """The name (in the steps' namespace) of the Struct decoding `node`, made on first use
        (keyed by the node alone: the options below are only ever given to a kind's own top
        level and metadata). `top`: an object's own level (a section is never a string);
        `nullable`: its fields may be null (an Event's are, often); `extra`: fields decoded for
        the caller, not projected."""
        known = self._structs.get(id(node))
        if known is not None:
            return known[1]
        fields = list(extra)
        for field_name, field in node.fields.items():
            if not field_name.isidentifier() or keyword.iskeyword(field_name):
                raise ValueError(f"{name}.{field_name}: not a name a Struct can have")
            required = field_name in node.required
            typ, default = self._type(f"{name}.{field_name}", field, required=required, top=top)
            if required:
                fields.append((field_name, typ))
            else:
                fields.append((field_name, _union(typ, None) if nullable else typ, default))
        struct = msgspec.defstruct(name, fields, omit_defaults=True, gc=False, kw_only=True)
        known = self._structs[id(node)] = (node, self._name("_Struct", struct))
        return known[1]

    def _type(self, path: str, node: Field, *, required: bool, top: bool) -> tuple[Any, Any]:
        """(type, default) of one field: the default is what to_builtins leaves out."""
        if isinstance(node, Str):
            bounds = Meta(min_length=1 if required else None, max_length=node.limit)
            typ: Any = Annotated[str, bounds] if required or node.limit else str
            return (typ, "") if required or not node.strict else (typ | UnsetType, UNSET)
        if isinstance(node, Int):
            return Annotated[int, Meta(ge=-node.limit, le=node.limit - 1)] | UnsetType, UNSET
        if isinstance(node, Bool):
            return bool | UnsetType, UNSET
        if isinstance(node, Time):
            return str | None, ""  # null reads as absent (a condition's lastUpdateTime often is)
        if isinstance(node, Labels):
            if node.keep or node.value_limit is not None:
                return dict[str, str] | UnsetType, UNSET
            return Annotated[dict[str, str], Meta(max_length=node.limit)] | UnsetType, UNSET
        if isinstance(node, Obj):
            struct = self._ns[self.struct(node, path)]
            if required:
                return struct, None
            return (_union(struct, UnsetType) if top else _union(struct, str, UnsetType)), UNSET
        item: Any = self._ns[self.struct(node.item, path)]
        typ = list[item]
        if node.types is None and not node.truncate:
            typ = Annotated[typ, Meta(max_length=node.limit)]
        return typ | UnsetType, UNSET

    def steps(
        self, node: Obj, var: str, *, checks: bool, interns: bool, depth: int = 0, top: bool = False
    ) -> list[str]:
        """Source lines doing, on the Struct in `var`, what its type cannot say: the `checks`
        (times, filters, cuts, strings dropped where objects belong), the `interns`, or both."""
        mode = {"checks": checks, "interns": interns}
        lines = []
        for name, field in node.fields.items():
            attr = f"{var}.{name}"
            if isinstance(field, Str) and field.intern and interns:
                always = name in node.required or not (field.strict or top)
                lines.append(
                    f"{attr} = _intern({attr})"
                    if always
                    else f"if type({attr}) is str: {attr} = _intern({attr})"
                )
            elif isinstance(field, Time) and checks:
                lines.append(f"{attr} = _time({attr})")
            elif isinstance(field, Labels):
                filtered = field.keep or field.value_limit is not None
                if filtered and checks:
                    lines.append(
                        f"if type({attr}) is dict: {attr} = {self._name('_kept', _kept(field))}({attr})"
                    )
                elif not filtered and interns:
                    lines.append(f"if type({attr}) is dict: {attr} = _interned({attr})")
            elif isinstance(field, Obj):
                lines += self._object_steps(field, attr, mode, depth=depth, top=top)
            elif isinstance(field, List):
                lines += self._list_steps(field, attr, mode, depth=depth)
        return lines

    def _object_steps(
        self, node: Obj, attr: str, mode: dict[str, bool], *, depth: int, top: bool
    ) -> list[str]:
        value = f"o{depth}"
        inner = self.steps(node, value, **mode, depth=depth + 1)
        if not node.keep_empty and mode["checks"]:
            struct = self._ns[self.struct(node, attr)]
            empty = " and ".join(
                f"{value}.{f.name} is UNSET" if f.default is UNSET else f"{value}.{f.name} == {f.default!r}"
                for f in msgspec.structs.fields(struct)
            )
            inner.append(f"if {empty}: {attr} = UNSET")
        lines = []
        if inner:
            lines += [f"if type({value}) is {self.struct(node, attr)}:", *(f"    {line}" for line in inner)]
        if not top and mode["checks"]:
            lines.append(f"{'elif' if inner else 'if'} type({value}) is str: {attr} = UNSET")
        return [f"{value} = {attr}", *lines] if lines else []

    def _list_steps(self, node: List, attr: str, mode: dict[str, bool], *, depth: int) -> list[str]:
        value, entry = f"l{depth}", f"x{depth}"
        inner = []
        if node.types is not None and mode["checks"]:
            inner += [
                f"{value} = {attr} = [e for e in {value} if e.type in {self._name('_types', node.types)}]",
                f"if len({value}) > {node.limit}: raise _Unsure('too many entries kept')",
            ]
        if node.truncate and mode["checks"]:
            inner.append(f"if len({value}) > {node.limit}: {value} = {attr} = {value}[: {node.limit}]")
        each = self.steps(node.item, entry, **mode, depth=depth + 1)
        if each:
            inner += [f"for {entry} in {value}:", *(f"    {line}" for line in each)]
        if not inner:
            return []
        return [f"{value} = {attr}", f"if type({value}) is list:", *(f"    {line}" for line in inner)]

    def function(self, name: str, lines: list[str]) -> Step:
        function = self._name("_steps", None)
        source = f"def {function}(s):  # {name}\n    " + "\n    ".join(lines or ["pass"]) + "\n"
        exec(source, self._ns)
        step: Step = self._ns[function]
        return step


_GENERATOR = _Generator()
_METADATA_EXTRA = (("resourceVersion", str, ""),)
"""Read by the caller (the watch's resourceVersion), then cleared: not part of the projection."""


@functools.cache
def kind_shape(schema: Kind) -> Shape:
    """The Struct of one kind's objects: apiVersion and kind (set by the caller: list items carry
    neither), metadata, and its sections; an Event's fields under both spellings (see kinds.py)."""
    fields: dict[str, Field] = {"metadata": schema.metadata}
    for name, section in schema.sections.items():
        if name and section.fields:
            fields[name] = section
        elif not name:
            fields |= section.fields
            fields |= {old: section.fields[new] for old, new in EVENTS_V1_RENAMES.items()}
    _GENERATOR.struct(schema.metadata, "metadata", extra=_METADATA_EXTRA)
    top = Obj(fields, required=("metadata",))
    extra = (("apiVersion", str, ""), ("kind", str, ""))
    struct = _GENERATOR.struct(top, "object", top=True, nullable="" in schema.sections, extra=extra)
    steps = [
        _GENERATOR.function(struct, _GENERATOR.steps(top, "s", checks=checks, interns=interns, top=True))
        for checks, interns in ((True, True), (True, False), (False, True))
    ]
    return Shape(_GENERATOR._ns[struct], *steps)
