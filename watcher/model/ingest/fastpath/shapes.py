"""The fast path's msgspec types, generated from schema.py, with the steps each needs after decoding.

Each schema node becomes a Struct field whose type states the node's type and bounds (a length,
an entry count, an integer range, a required entry), so a value project() would reject, cut or
refuse fails decoding, and the caller takes the slow path (which says what it rejected). Lenient
strings default to "" and everything else to UNSET, so msgspec.to_builtins leaves out exactly
what project() leaves out quietly: absent fields and empty strings.

What a type cannot say is done after decoding by one function per kind, generated as source (as
dataclasses generates __init__) because it runs on every event, each nested entry inlined: times
and filtered maps checked by project()'s own checks (a doubt raises a ValueError: the slow
path), lists cut or kept by type, an empty entry or section left out, and, in `fix` only (a Pod
packed as bytes needs none), tokens interned.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, cast

import msgspec
from msgspec import UNSET, Meta, UnsetType

from watcher.model.ingest.checks import compiled, kept_flags
from watcher.model.ingest.fieldsets import read_fields
from watcher.model.ingest.schema import EVENT_KINDS, EVENTS_V1_RENAMES, kind_schema
from watcher.model.ingest.schema_nodes import Bool, Field, FieldSet, Flags, Int, Labels, List, Obj, Str, Time


class Unsure(ValueError):
    """The fast path cannot promise project()'s result: take the slow path."""


Step = Callable[[Any], None]
_STRUCTS: dict[int, tuple[Obj, type[msgspec.Struct], str]] = {}
"""Each schema node's Struct (and its name below), made once: shared nodes, e.g. conditions, share it."""


def _fields(raw: msgspec.Raw) -> Any:
    """The paths project() keeps of one fieldsV1 (UNSET for null); one it rejects: Unsure."""
    return _walk(bytes(raw))


@functools.lru_cache(maxsize=4096)
def _walk(data: bytes) -> str | UnsetType:
    """Cached by the set's bytes: a status writer's set is the same in every event of an object,
    and most objects of a kind share theirs, so a walk is mostly a lookup."""
    value = msgspec.json.decode(data)
    text = read_fields(value)
    if text is None and value is not None:
        raise Unsure("fieldsV1 is no field set: project() rejects it")
    return UNSET if text is None else text


_NS: dict[str, Any] = {"UNSET": UNSET, "_Unsure": Unsure, "_fields": _fields}
_NS |= {"_intern": sys.intern, "_time": compiled(Time())}
"""What the generated steps see: these, and each Struct, check and type set by name."""


def _name(prefix: str, value: Any) -> str:
    name = f"{prefix}{len(_NS)}"
    _NS[name] = value
    return name


def _struct(node: Obj, *, absent: Any = ()) -> tuple[type[msgspec.Struct], str]:
    """The Struct decoding `node`, and its name in the steps' namespace. `absent`: fields that
    must not be there (decoding fails when one is)."""
    known = _STRUCTS.get(id(node))
    if known is None:
        fields: list[Any] = [(name, UnsetType, UNSET) for name in absent]
        for name, field in node.fields.items():
            required = name in node.required
            typ, default = _type(field, required=required)
            fields.append((name, typ) if required else (name, typ, default))
        struct = msgspec.defstruct("Struct", fields, omit_defaults=True, gc=False, kw_only=True)
        known = _STRUCTS[id(node)] = (node, struct, _name("_Struct", struct))
    return known[1], known[2]


def _filtered(node: Labels) -> bool:
    return bool(node.keep) or node.value_limit is not None


def _type(node: Field, *, required: bool) -> tuple[Any, Any]:
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
    if isinstance(node, FieldSet):  # read only when kept: the raw bytes, walked by _fields
        return msgspec.Raw | UnsetType, UNSET
    if isinstance(node, Flags):  # any entry no string: the slow path says so
        return list[str] | UnsetType, UNSET
    if isinstance(node, Obj):
        struct = _struct(node)[0]
        return (struct, None) if required else (struct | UnsetType, UNSET)
    typ = list[_struct(node.item)[0]]  # type: ignore[misc]
    if node.types is None and not node.truncate:
        typ = Annotated[typ, Meta(max_length=node.limit)]
    return typ | UnsetType, UNSET


def _indent(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]


def _steps(node: Obj, var: str, *, interns: bool, depth: int = 0) -> list[str]:
    """Source lines doing, on the Struct in `var`, what its type cannot say (times, filters,
    cuts), and the interning when `interns`."""
    lines = []
    for name, field in node.fields.items():
        attr = f"{var}.{name}"
        if isinstance(field, Str) and field.intern and interns:
            maybe_unset = field.strict and name not in node.required
            lines.append(f"{f'if type({attr}) is str: ' if maybe_unset else ''}{attr} = _intern({attr})")
        elif isinstance(field, Time) and interns:  # the checked copy: the first one seen, shared
            lines.append(f"{attr} = _time({attr}) if {attr} else ''")
        elif isinstance(field, Time):  # packed as bytes next: checking is enough
            lines += [f"if {attr}: _time({attr})", f"elif {attr} is None: {attr} = ''"]
        elif isinstance(field, Labels) and _filtered(field):
            lines.append(f"if type({attr}) is dict: {attr} = {_name('_check', compiled(field))}({attr})")
        elif isinstance(field, Labels) and interns:  # its type said the rest (str to str, how many)
            lines.append(f"if {attr}: {attr} = {{_intern(k): _intern(v) for k, v in {attr}.items()}}")
        elif isinstance(field, FieldSet):
            lines.append(f"if {attr} is not UNSET: {attr} = _fields({attr})")
        elif isinstance(field, Flags):
            lines.append(
                f"if type({attr}) is list: {attr} = {_name('_flags', kept_flags(field))}({attr}) or UNSET"
            )
        elif isinstance(field, Obj):
            lines += _object_steps(field, attr, interns=interns, depth=depth)
        elif isinstance(field, List):
            lines += _list_steps(field, attr, interns=interns, depth=depth)
    return lines


def _object_steps(node: Obj, attr: str, *, interns: bool, depth: int) -> list[str]:
    value = f"o{depth}"
    struct, name = _struct(node)
    inner = _steps(node, value, interns=interns, depth=depth + 1)
    if not node.keep_empty:
        empty = " and ".join(
            f"{value}.{f.name} is UNSET" if f.default is UNSET else f"{value}.{f.name} == {f.default!r}"
            for f in msgspec.structs.fields(struct)
        )
        inner.append(f"if {empty}: {attr} = UNSET")
    lines = [f"if type({value}) is {name}:", *_indent(inner)] if inner else []
    return [f"{value} = {attr}", *lines] if lines else []


def _list_steps(node: List, attr: str, *, interns: bool, depth: int) -> list[str]:
    value, entry = f"l{depth}", f"x{depth}"
    inner = []
    if node.unless is not None:
        field, skipped = node.unless
        inner.append(f"{value} = {attr} = [e for e in {value} if e.{field} != {skipped!r}]")
    if node.types is not None:
        inner += [
            f"{value} = {attr} = [e for e in {value} if e.type in {_name('_types', node.types)}]",
            f"if len({value}) > {node.limit}: raise _Unsure('too many entries kept')",
        ]
    if node.truncate:
        inner.append(f"if len({value}) > {node.limit}: {value} = {attr} = {value}[: {node.limit}]")
    each = _steps(node.item, entry, interns=interns, depth=depth + 1)
    if each:
        inner += [f"for {entry} in {value}:", *_indent(each)]
    return [f"{value} = {attr}", f"if type({value}) is list:", *_indent(inner)] if inner else []


def _function(lines: list[str]) -> Step:
    function = _name("_steps", None)
    exec(f"def {function}(s):\n" + "\n".join(_indent(lines or ["pass"])), _NS)
    return cast(Step, _NS[function])


@functools.cache
def kind_shape(group: str, kind: str) -> tuple[type[msgspec.Struct], Step, Step]:
    """The Struct of one kind's objects and its steps after decoding: `fix` all, `check` all but
    the interning. The Struct holds apiVersion and kind (set by the caller: list items carry
    neither), metadata with the resourceVersion (read by the caller, then cleared), and the
    kind's sections, each left out when empty as project() leaves it out. An Event's fields are
    read as its kind spells them (the caller renames them) and the other spelling must be
    absent: project() reads both, and with both there the later one wins."""
    schema = kind_schema(group, kind)
    meta = schema.metadata
    metadata = dataclasses.replace(meta, fields={**meta.fields, "resourceVersion": Str()})
    fields: dict[str, Field] = {"apiVersion": Str(), "kind": Str(), "metadata": metadata}
    absent: list[str] = []
    for name, section in schema.sections.items():
        if name and section.fields:
            fields[name] = dataclasses.replace(section, keep_empty=False)
        elif not name and (group, kind) not in EVENT_KINDS:
            fields |= section.fields  # a policy report's fields
        elif not name:
            spelled = {new: old for old, new in EVENT_KINDS[group, kind].items()}
            fields |= {spelled.get(name, name): field for name, field in section.fields.items()}
            absent = [n for n in (*EVENTS_V1_RENAMES, *EVENTS_V1_RENAMES.values()) if n not in fields]
    top = Obj(fields, required=("metadata",))
    struct = _struct(top, absent=absent)[0]
    fix, check = (_function(_steps(top, "s", interns=interns)) for interns in (True, False))
    return struct, fix, check
