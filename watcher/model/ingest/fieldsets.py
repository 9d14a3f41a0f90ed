"""A managedFields entry's fieldsV1, read as the field paths it names.

FieldsV1 is a trie in JSON (the Kubernetes API reference, "FieldsV1"): each key is "." (the field
itself, always mapping to an empty set) or one of 'f:<name>' (a struct field or map key),
'v:<value>' (a set item, its exact JSON value), 'i:<index>' (a list position) or 'k:<keys>' (an
associative list item, a JSON map of its key fields); a key mapping to an empty set is a field in
the set. ConflictingWriters (rules/writers.py) compares these sets from version to version, so the walk
turns each into sorted dotted paths (`spec.template.spec.containers[name=app].image`), bounded:
at most MAX_PATHS paths (the rest cut, and said so by CUT), each at most PATH_LIMIT characters,
no deeper than MAX_DEPTH, and no more than MAX_NODES trie nodes read, whatever the object holds.
Both project() and the fast path call `field_paths`, so the two agree by construction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_PATHS = 256
PATH_LIMIT = 256
MAX_DEPTH = 32
MAX_NODES = 4096
CUT = "…"
"""The last path of a set that held more than MAX_PATHS (or was deeper or bigger than read)."""


def read_fields(value: Any) -> str | None:
    """What a projection keeps of a fieldsV1 value: the paths of a trie, one a line (one string:
    cheap to copy, and its hash, the digest rules/writers.py compares, is computed once), or a
    projection's own string as it is (projecting a projection changes nothing); None otherwise."""
    if isinstance(value, Mapping):
        return "\n".join(field_paths(value))
    if isinstance(value, str):
        if value.count("\n") < MAX_PATHS:
            return value
        return "\n".join([*value.split("\n")[: MAX_PATHS - 1], CUT])
    return None


def paths_of(text: str) -> frozenset[str]:
    """The paths a projected fieldsV1 names (CUT, the mark of a set cut short, is none)."""
    return frozenset(text.split("\n")) - {CUT, ""}


def field_paths(fields: Mapping[str, Any]) -> list[str]:
    """The paths of one fieldsV1 set, sorted, the members whose key maps to an empty set (and
    those marked "." themselves); CUT last when the set was bigger than read."""
    out: list[str] = []
    budget = [MAX_NODES]
    cut = _walk(fields, "", 0, out, budget)
    paths = sorted(set(out))
    if cut or len(paths) > MAX_PATHS:
        paths = [*paths[: MAX_PATHS - 1], CUT]
    return paths


def _walk(node: Mapping[str, Any], prefix: str, depth: int, out: list[str], budget: list[int]) -> bool:
    """Add the members under `node` to `out`; True when some were not read (too deep, too many)."""
    cut = False
    for key, child in node.items():
        budget[0] -= 1
        if budget[0] < 0 or depth >= MAX_DEPTH:
            return True
        if key == ".":
            if prefix:
                out.append(prefix)
            continue
        if not isinstance(key, str):
            continue
        path = _join(prefix, key.replace("\n", "\\n"))[:PATH_LIMIT]  # one path a line
        if isinstance(child, Mapping) and child:
            cut = _walk(child, path, depth + 1, out, budget) or cut
        else:
            out.append(path)
    return cut


def _join(prefix: str, key: str) -> str:
    kind, _, value = key.partition(":")
    if kind == "f":
        return f"{prefix}.{value}" if prefix else value
    if kind == "i":
        return f"{prefix}[{value}]"
    if kind == "k":
        return f"{prefix}[{_keys(value)}]"
    if kind == "v":
        return f"{prefix}[={_value(value)}]"
    return f"{prefix}[{key}]"


def _keys(value: str) -> str:
    """`{"name":"app","port":80}` as `name=app,port=80` (as written when it is no JSON map)."""
    try:
        keys = json.loads(value)
    except ValueError:
        return value
    if not isinstance(keys, dict):
        return value
    return ",".join(f"{k}={_value(json.dumps(v))}" for k, v in keys.items())


def _value(value: str) -> str:
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if isinstance(parsed, str) else value


def shown(path: str, *, limit: int = 120) -> str:
    """A path for a message: control and other unprintable characters escaped, long ones cut
    (a field name is whatever a user's CRD allows: a message is one line)."""
    text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in path)
    return text if len(text) <= limit else text[: limit - 1] + CUT
