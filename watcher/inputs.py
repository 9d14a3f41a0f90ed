"""Reading what a user hands stalewatch (snapshot files, stdin, the config file), bounded.

Both loaders share these readers and this one YAML loader, so a limit added here holds for
both. Whatever `stat` says, no read takes more than its byte limit (`/dev/zero` stops there);
a file found inside a directory must be a regular file, and is checked before it is opened (a
FIFO would block forever, a device may do anything on open); a path the user named is read
even when it is a pipe, as `<(kubectl get ...)` is. Every way a read can fail is one
`InputError` whose message says why, in a form that follows the path: "is a FIFO, not a
regular file".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputError(Exception):
    """A file or stream cannot be used; str() is one line saying why."""


@dataclass(frozen=True, slots=True)
class LoadError:
    """One unusable input: `source` is the path as given, `where` the object or position in it."""

    source: str
    message: str
    where: str = ""

    def __str__(self) -> str:
        where = f"{self.where}: " if self.where else ""
        return f"{self.source}: {where}{self.message}"


def size_text(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"


def read_path(path: Path, *, limit: int, regular_only: bool) -> bytes:
    """At most `limit` bytes of `path`. `regular_only` (a file found in a directory rather than
    named by the user): anything but a regular file is refused before it is opened."""
    try:
        if regular_only:
            _require_regular(os.stat(path).st_mode)
        # non-blocking: opening a FIFO without a writer must not hang before the check below
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        raise InputError(_os_problem(error, path)) from None
    try:
        info = os.fstat(fd)
        if regular_only or stat.S_ISDIR(info.st_mode):
            _require_regular(info.st_mode)  # again: it may have been replaced since the stat
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:  # refused unread (0 proves nothing)
            raise InputError(f"file is {info.st_size} bytes, larger than the {size_text(limit)} limit")
        os.set_blocking(fd, True)  # a pipe the user named is waited for, as `cat` would
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        return read_stream(handle, limit=limit)


def _os_problem(error: OSError, path: Path) -> str:
    if isinstance(error, FileNotFoundError):
        return "no such file or directory" + (" (a symlink to nothing)" if path.is_symlink() else "")
    return f"cannot read: {error.strerror or error}"


def read_stream(stream: BinaryIO | None, *, limit: int) -> bytes:
    """At most `limit` bytes of a stream; None is a closed standard input (`<&-`)."""
    if stream is None:
        raise InputError("standard input is closed")
    try:
        data = stream.read(limit + 1)
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}") from None
    except ValueError:  # "I/O operation on closed file"
        raise InputError("standard input is closed") from None
    if len(data) > limit:
        raise InputError(f"input is larger than the {size_text(limit)} limit")
    return data


def _require_regular(mode: int) -> None:
    for test, what in _NOT_REGULAR:
        if test(mode):
            raise InputError(f"is {what}, not a regular file; not read")


class SafeLoader(_BaseLoader):
    """Safe YAML that leaves timestamps as strings, as the API server's JSON has them, and says
    when a mapping gives one key twice (PyYAML would silently keep the last): refused, or, with
    `duplicates` set, kept as kubectl keeps it (the last value wins) and described there."""

    duplicates: list[str] | None = None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
                key = (key_node.tag, key_node.value)
                if key in seen:
                    said = f"key {key_node.value!r} is set twice"
                    if self.duplicates is None:
                        raise yaml.constructor.ConstructorError(None, None, said, key_node.start_mark)
                    line = key_node.start_mark.line + 1
                    self.duplicates.append(f"line {line}: {said}; the last value is used, as kubectl does")
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


SafeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True, slots=True)
class Refused:
    """A YAML document that parsed but could not be built (an unknown tag, a key set twice,
    nesting too deep): only this document is lost, the ones after it still load."""

    problem: str


def yaml_documents(data: bytes, *, duplicates: list[str] | None = None) -> tuple[list[object], str | None]:
    """Every document (a `Refused` for one that could not be built) up to the first syntax
    error, and that error; a syntax error leaves the parser nowhere to resume. A key set twice
    refuses its document, unless `duplicates` is given: the last value then wins and each is
    described there (kubectl's own loader keeps the last)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        return [], f"not UTF-8 text: {error}"
    loader = SafeLoader(text)
    loader.duplicates = duplicates
    documents: list[object] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            try:
                documents.append(loader.construct_document(node))
            except (yaml.constructor.ConstructorError, RecursionError) as error:
                documents.append(Refused(_construction_problem(error)))
                _reset(loader)
    except yaml.YAMLError as error:
        return documents, f"not valid YAML: {yaml_problem(error)}"
    finally:
        loader.dispose()
    return documents, None


def _construction_problem(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply to build; refusing it"
    assert isinstance(error, yaml.YAMLError)
    return f"not valid YAML: {yaml_problem(error)}"


def _reset(loader: SafeLoader) -> None:
    """What construct_document would have cleared had it finished."""
    loader.constructed_objects = {}
    loader.recursive_objects = {}
    loader.state_generators = []
    loader.deep_construct = False


def yaml_problem(error: yaml.YAMLError) -> str:
    """Where and what, for a YAML syntax error: "line 3, column 1: did not find expected ','"."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is None:
        return str(problem)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


class TooBig(InputError):
    """More values than the input has bytes: YAML aliases expanding; the whole input is refused."""


def shape_problem(value: object, *, budget: list[int], max_depth: int) -> str | None:
    """Deeper than `max_depth` is a problem of this value alone; more values than `budget`
    (shared by every value of one input, so a bomb split over documents still counts) raises
    TooBig. Walks without recursion, so no depth can overflow the stack."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        budget[0] -= 1
        if budget[0] < 0:
            raise TooBig("expands to more values than the file has bytes (YAML aliases?); refusing it")
        if depth > max_depth:
            return f"nested more than {max_depth} levels deep; refusing it"
        children: Sequence[object] = ()
        if isinstance(current, dict):
            children = list(current.values())
        elif isinstance(current, list):
            children = current
        stack += [(child, depth + 1) for child in children]
    return None
