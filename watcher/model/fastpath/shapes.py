"""The fast path's msgspec types, generated from schema.py, with the steps each needs after decoding.

Each schema node becomes a Struct field whose type states the node's bounds (a length, an entry
count, an integer range, a required entry), so a value project() would drop, cut or refuse fails
decoding, and the caller takes the slow path. Lenient strings default to "" and everything else
to UNSET, so msgspec.to_builtins leaves out exactly what project() leaves out: absent fields
and empty strings. A lenient object given a string is decoded and left out, as project() drops
it (a HelmChart's spec.chart is a name, a HelmRelease's an object).

What a type cannot say is done after decoding by one function per kind, generated as source (as
dataclasses generates __init__) because it runs on every event, each nested entry inlined: times
and filtered maps checked by project()'s own checks (any doubt raises a ValueError: the slow
path), lists cut or kept by type, an empty entry or section left out, and, in `fix` only (a Pod
packed as bytes needs none), tokens interned.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

import msgspec
from msgspec import UNSET, Meta, UnsetType

from watcher.model.projection import compiled
from watcher.model.schema import EVENTS_V1_RENAMES, Bool, Field, Int, Kind, Labels, List, Obj, Str, Time


class Unsure(ValueError):
    """The fast path cannot promise project()'s result: take the slow path."""


_TIMES: dict[str, str] = {}
"""Timestamps already checked, each to the first copy seen: objects share most of theirs (a
Pod's conditions usually carry its start time, Pods created together the same second), so a
check is mostly a lookup and the kept copies are shared like interned strings."""
_TIMES_LIMIT = 8192
_check_time = compiled(Time())


def checked_time(value: str | None) -> str:
    if not value:
        return ""
    known = _TIMES.get(value)
    if known is None:
        if len(_TIMES) >= _TIMES_LIMIT:
            _TIMES.clear()
        known = _TIMES[value] = _check_time(value)
    return known


def _interned(labels: dict[str, str]) -> dict[str, str]:
    return {sys.intern(k): sys.intern(v) for k, v in labels.items()}


Step = Callable[[Any], None]


class Shape(NamedTuple):
    """One kind's Struct type and its steps after decoding: `check` all but interning, `fix` all."""

    struct: type[msgspec.Struct]
    fix: Step
    check: Step


def _filtered(node: Labels) -> bool:
    return bool(node.keep) or node.value_limit is not None


def _indent(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]


class _Generator:
    """Builds each schema node's Struct once (shared nodes, e.g. conditions, share theirs), and
    per kind one step function that walks the decoded object, each nested entry inlined."""

    def __init__(self) -> None:
        self._structs: dict[int, tuple[Obj, type[msgspec.Struct], str]] = {}
        self._ns: dict[str, Any] = {
            "UNSET": UNSET,
            "_intern": sys.intern,
            "_interned": _interned,
            "_time": checked_time,
            "_Unsure": Unsure,
        }
        """What the generated steps see: these, and each Struct, check and type set by name."""

    def _name(self, prefix: str, value: Any) -> str:
        name = f"{prefix}{len(self._ns)}"
        self._ns[name] = value
        return name

    def struct(self, node: Obj, path: str) -> tuple[type[msgspec.Struct], str]:
        """The Struct decoding `node` and its name in the steps' namespace, made on first use."""
        known = self._structs.get(id(node))
        if known is None:
            fields = []
            for name, field in node.fields.items():
                required = name in node.required
                typ, default = self._type(f"{path}.{name}", field, required=required)
                fields.append((name, typ) if required else (name, typ, default))
            struct = msgspec.defstruct(path, fields, omit_defaults=True, gc=False, kw_only=True)
            known = self._structs[id(node)] = (node, struct, self._name("_Struct", struct))
        return known[1], known[2]

    def _type(self, path: str, node: Field, *, required: bool) -> tuple[Any, Any]:
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
            bounds = Meta(max_length=None if _filtered(node) else node.limit)
            return Annotated[dict[str, str], bounds] | UnsetType, UNSET
        if isinstance(node, Obj):
            struct = self.struct(node, path)[0]
            return (struct, None) if required else (struct | str | UnsetType, UNSET)
        typ = list[self.struct(node.item, path)[0]]  # type: ignore[misc]
        if node.types is None and not node.truncate:
            typ = Annotated[typ, Meta(max_length=node.limit)]
        return typ | UnsetType, UNSET

    def steps(self, node: Obj, var: str, *, interns: bool, depth: int = 0) -> list[str]:
        """Source lines doing, on the Struct in `var`, what its type cannot say (times, filters,
        cuts, strings dropped where objects belong), and the interning when `interns`."""
        lines = []
        for name, field in node.fields.items():
            attr = f"{var}.{name}"
            if isinstance(field, Str) and field.intern and interns:
                maybe_unset = field.strict and name not in node.required
                lines.append(f"{f'if type({attr}) is str: ' if maybe_unset else ''}{attr} = _intern({attr})")
            elif isinstance(field, Time):
                lines.append(f"{attr} = _time({attr})")
            elif isinstance(field, Labels) and (_filtered(field) or interns):
                check = self._name("_check", compiled(field)) if _filtered(field) else "_interned"
                lines.append(f"if type({attr}) is dict: {attr} = {check}({attr})")
            elif isinstance(field, Obj):
                required = name in node.required
                lines += self._object_steps(field, attr, interns=interns, depth=depth, required=required)
            elif isinstance(field, List):
                lines += self._list_steps(field, attr, interns=interns, depth=depth)
        return lines

    def _object_steps(self, node: Obj, attr: str, *, interns: bool, depth: int, required: bool) -> list[str]:
        value = f"o{depth}"
        struct, name = self.struct(node, attr)
        inner = self.steps(node, value, interns=interns, depth=depth + 1)
        if not node.keep_empty:
            empty = " and ".join(
                f"{value}.{f.name} is UNSET" if f.default is UNSET else f"{value}.{f.name} == {f.default!r}"
                for f in msgspec.structs.fields(struct)
            )
            inner.append(f"if {empty}: {attr} = UNSET")
        lines = [f"if type({value}) is {name}:", *_indent(inner)] if inner else []
        if not required:
            lines.append(f"{'elif' if inner else 'if'} type({value}) is str: {attr} = UNSET")
        return [f"{value} = {attr}", *lines] if lines else []

    def _list_steps(self, node: List, attr: str, *, interns: bool, depth: int) -> list[str]:
        value, entry = f"l{depth}", f"x{depth}"
        inner = []
        if node.types is not None:
            inner += [
                f"{value} = {attr} = [e for e in {value} if e.type in {self._name('_types', node.types)}]",
                f"if len({value}) > {node.limit}: raise _Unsure('too many entries kept')",
            ]
        if node.truncate:
            inner.append(f"if len({value}) > {node.limit}: {value} = {attr} = {value}[: {node.limit}]")
        each = self.steps(node.item, entry, interns=interns, depth=depth + 1)
        if each:
            inner += [f"for {entry} in {value}:", *_indent(each)]
        return [f"{value} = {attr}", f"if type({value}) is list:", *_indent(inner)] if inner else []

    def function(self, name: str, lines: list[str]) -> Step:
        function = self._name("_steps", None)
        exec(f"def {function}(s):  # {name}\n" + "\n".join(_indent(lines or ["pass"])), self._ns)
        step: Step = self._ns[function]
        return step


_GENERATOR = _Generator()


@functools.cache
def kind_shape(schema: Kind) -> Shape:
    """The Struct of one kind's objects: apiVersion and kind (set by the caller: list items carry
    neither), metadata with the resourceVersion (read by the caller, then cleared), and the
    kind's sections, each left out when empty as project() leaves it out; an Event's fields
    under both spellings (see kinds.py)."""
    meta = schema.metadata
    fields: dict[str, Field] = {
        "apiVersion": Str(),
        "kind": Str(),
        "metadata": dataclasses.replace(meta, fields={**meta.fields, "resourceVersion": Str()}),
    }
    for name, section in schema.sections.items():
        if name and section.fields:
            fields[name] = dataclasses.replace(section, keep_empty=False)
        elif not name:
            fields |= section.fields
            fields |= {old: section.fields[new] for old, new in EVENTS_V1_RENAMES.items()}
    top = Obj(fields, required=("metadata",))
    struct, name = _GENERATOR.struct(top, "object")
    fix, check = (_GENERATOR.steps(top, "s", interns=interns) for interns in (True, False))
    return Shape(struct, _GENERATOR.function(name, fix), _GENERATOR.function(name, check))
