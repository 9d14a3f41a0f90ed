"""What decoding a watch line or a list page yields, whichever path read it.

The reflector and its ledger work with these, not with how they were decoded (fastpath/: msgspec
Structs generated from schema.py, else orjson + project()).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from msgspec import Struct

ObjectKey = tuple[str, str]
"""(namespace, name) within one kind."""


class Decoded(Struct, gc=False):
    """One watch event, decoded and projected (a Struct: built per event, and a NamedTuple's
    constructor is a Python function)."""

    type: str
    """ADDED, MODIFIED, DELETED or BOOKMARK (ERROR always takes the slow path)."""
    resource_version: str
    key: ObjectKey
    """(namespace, name); ("", "") for a BOOKMARK."""
    object: Mapping[str, Any] | None
    """The projection, equal to project()'s (a healthy Pod comes Packed); None for a BOOKMARK,
    an ERROR, or an object that could not be projected."""
    problem: str = ""
    """Why the object could not be projected (MalformedObject's message, naming it and the field)."""
    raw: Mapping[str, Any] | None = None
    """The object as written, when the slow path read it (an ERROR event's Status, a malformed
    object, whose uid and resourceVersion say which version was set aside)."""


class Malformed(NamedTuple):
    """A list item that could not be projected, and why."""

    key: ObjectKey
    problem: str
    metadata: Mapping[str, Any]


class Page(NamedTuple):
    """One list page: its items projected, and where the list goes on."""

    items: list[tuple[ObjectKey, Mapping[str, Any]]]
    resource_version: str
    continue_token: str
    malformed: tuple[Malformed, ...] = ()


class Unreadable(ValueError):
    """A watch line or list page that is no JSON watch event or list at all."""


def metadata_of(raw: Any) -> Mapping[str, Any]:
    """An object's metadata as written ({} when missing or not a mapping)."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    return meta if isinstance(meta, dict) else {}
