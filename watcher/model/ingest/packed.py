"""The packed form of a projected object: msgpack bytes the Store keeps and the fast path makes.

Pods and workloads, most of a cluster's objects and read again only when they change or a finding
names them, are kept packed once judged (store/graph.py). A healthy Pod is packed already by the
decoder's fast path (fastpath/), so both ends of that trip meet here, below the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

import msgspec

from watcher.model.ingest.objects import Key

_encode = msgspec.msgpack.Encoder().encode
unpack = msgspec.msgpack.Decoder().decode


class Packed(Mapping[str, Any]):
    """A projection already in the Store's packed form (msgpack), with its key: read as a
    mapping it unpacks once, so whoever only passes it on (a reflector, a sink) never pays."""

    __slots__ = ("_object", "data", "key")

    def __init__(self, key: Key, data: bytes) -> None:
        self.key, self.data = key, data
        self._object: dict[str, Any] | None = None

    def unpacked(self) -> dict[str, Any]:
        if self._object is None:
            self._object = cast(dict[str, Any], unpack(self.data))
        return self._object

    def __getitem__(self, name: str) -> Any:
        return self.unpacked()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.unpacked())

    def __len__(self) -> int:
        return len(self.unpacked())

    def __repr__(self) -> str:
        return f"Packed({self.unpacked()!r})"


def pack(value: Any) -> bytes:
    """The packed form of a projection (a Struct encodes as the dict it would build)."""
    return bytes(memoryview(_encode(value)))  # the copy drops spare capacity


def unpacked(value: Mapping[str, Any] | bytes | None) -> Mapping[str, Any] | None:
    """What the Store keeps for a key, read as a mapping (None stays None)."""
    if isinstance(value, bytes):
        mapping: Mapping[str, Any] = unpack(value)
        return mapping
    return value
