"""Reads cluster snapshots for `stalewatch analyze`: what `kubectl get ... -o yaml|json` wrote.

A PATH is a file, a directory (searched recursively for *.json, *.yaml and *.yml, in sorted
order, skipping hidden entries) or `-` for stdin. A file holds one object, a `List`/`*List` with
`items`, or several YAML documents. Every object goes through the model's `project()`, exactly
as in the live watcher, so `analyze` and `run` judge the same fields.

Snapshots come from clusters in trouble and get edited by hand, so bad input is expected: each
problem becomes one `LoadError` naming the file, the position in it (document and List item,
when there is more than one) and, through the model's message, the object (Kind namespace/name),
and loading carries on with everything else. Sizes are
bounded before anything big is built: files over 256 MiB are refused unread, documents nested
deeper than 100 levels or expanding (YAML aliases) to more values than their file has bytes are
refused before projection walks them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import yaml

from watcher.config import yaml_problem
from watcher.model.projection import MalformedObject, project

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 100
SUFFIXES = (".json", ".yaml", ".yml")
STDIN = "-"


class _KubeLoader(_SafeLoader):
    """Safe YAML that leaves timestamps as strings, as the API server's JSON has them."""


_KubeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True, slots=True)
class LoadError:
    """One unusable input: `source` is the path as given, `where` the object or position in it."""

    source: str
    message: str
    where: str = ""

    def __str__(self) -> str:
        where = f"{self.where}: " if self.where else ""
        return f"{self.source}: {where}{self.message}"


@dataclass(slots=True)
class Snapshot:
    """The projected objects that loaded, and what did not."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    files: int = 0


class _Unusable(Exception):
    """A whole file (or the rest of it) cannot be read; the message says why."""


def load_snapshot(
    paths: Sequence[str],
    *,
    keep_namespace: Callable[[str], bool] = lambda namespace: True,
    stdin: BinaryIO | None = None,
) -> Snapshot:
    """Load every PATH. Objects whose namespace `keep_namespace` rejects are skipped silently
    (configuration, not an error). The same object given twice counts once: the last one wins."""
    snapshot = Snapshot()
    by_identity: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for arg in paths:
        for source, path in _sources(arg, snapshot.errors):
            snapshot.files += 1
            try:
                content = _read_file(path) if path else _sniffed(_read_stream(stdin or sys.stdin.buffer))
                for where, found in _objects(content):
                    identity = _identity(found) if isinstance(found, dict) else None
                    if identity and not keep_namespace(identity[2]):
                        continue
                    projected = _project(found) if isinstance(found, dict) else found
                    if isinstance(projected, str):
                        snapshot.errors.append(LoadError(source, projected, where))
                    elif identity:
                        by_identity.pop(identity, None)  # re-insert: the last copy also takes the last place
                        by_identity[identity] = projected
            except _Unusable as error:
                snapshot.errors.append(LoadError(source, str(error)))
    snapshot.objects = list(by_identity.values())
    return snapshot


def _project(obj: dict[str, Any]) -> dict[str, Any] | str:
    """The projection, or why the model cannot use the object."""
    try:
        return project(obj)
    except MalformedObject as error:
        return str(error)
    except Exception as error:  # the model tripped on odd input: report it, never crash analyze
        return f"could not be projected ({type(error).__name__}: {error}); this is a stalewatch bug"


def _sources(arg: str, errors: list[LoadError]) -> Iterator[tuple[str, Path | None]]:
    """(label, file) for every file an argument names; None is stdin."""
    if arg == STDIN:
        yield arg, None
        return
    path = Path(arg)
    if path.is_dir():
        files = _snapshot_files(path)
        if not files:
            errors.append(LoadError(arg, f"directory has no {', '.join('*' + s for s in SUFFIXES)} files"))
        yield from ((str(file), file) for file in files)
    elif path.exists():
        yield arg, path
    else:
        errors.append(LoadError(arg, "no such file or directory"))


def _snapshot_files(directory: Path) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(root, f) for f in files if not f.startswith(".") and f.lower().endswith(SUFFIXES)]
    return sorted(found)


def _read_file(path: Path) -> tuple[bytes, bool]:
    """The bytes, and whether they are JSON (by suffix, else by sniffing)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            limit = MAX_FILE_BYTES >> 20
            raise _Unusable(f"file is {size / 2**20:.1f} MiB, larger than the {limit} MiB limit")
        data = path.read_bytes()
    except OSError as error:
        raise _Unusable(f"cannot read: {error.strerror or error}") from None
    suffix = path.suffix.lower()
    if suffix in SUFFIXES:
        return data, suffix == ".json"
    return _sniffed(data)


def _read_stream(stream: BinaryIO) -> bytes:
    data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _Unusable(f"input is larger than the {MAX_FILE_BYTES >> 20} MiB limit")
    return data


def _sniffed(data: bytes) -> tuple[bytes, bool]:
    """Without a telling suffix: JSON if it starts like JSON (kubectl -o json always does)."""
    return data, data.lstrip()[:1] in (b"{", b"[")


Found = tuple[str, dict[str, Any] | str]
"""(position, object) for an object, (position, message) for a document or item that is not one.
The model's MalformedObject messages name the object itself (Kind namespace/name)."""


def _objects(content: tuple[bytes, bool]) -> Iterator[Found]:
    """Every object in a file. A bad document or list item is reported and the rest still loads;
    a syntax error ends the file after the documents before it, an alias bomb ends it at once."""
    data, is_json = content
    documents, syntax_error = _json_documents(data) if is_json else _yaml_documents(data)
    budget = [len(data) + 16]
    for index, document in enumerate(documents, start=1):
        position = [f"document {index}"] if len(documents) > 1 or syntax_error else []
        problem = _shape_problem(document, budget)
        if problem:
            yield _position(position), problem
        elif isinstance(document, list):  # a bare array of objects, e.g. from `jq .items`
            yield from _in_document({"kind": "List", "items": document}, position)
        else:
            yield from _in_document(document, position)
    if syntax_error:
        raise _Unusable(syntax_error)


def _in_document(document: object, position: list[str]) -> Iterator[Found]:
    if document is None:  # an empty YAML document, e.g. after a trailing `---`
        return
    if not isinstance(document, dict):
        yield _position(position), f"expected a Kubernetes object (a mapping), got {_type(document)}"
        return
    kind = document.get("kind")
    if not (isinstance(kind, str) and kind.endswith("List") and "items" in document):
        yield _position(position), document
        return
    items = document["items"]
    if not isinstance(items, list):
        yield _position(position), f"items: expected a list, got {_type(items)}"
        return
    for number, item in enumerate(items, start=1):
        yield from _in_document(item, [*position, f"item {number}"])


def _json_documents(data: bytes) -> tuple[list[object], str | None]:
    try:
        return [orjson.loads(data)], None
    except orjson.JSONDecodeError as error:
        return [], f"not valid JSON: {error}"


def _yaml_documents(data: bytes) -> tuple[list[object], str | None]:
    """The documents up to the first syntax error, and that error."""
    documents: list[object] = []
    try:
        documents.extend(yaml.load_all(data.decode("utf-8-sig"), Loader=_KubeLoader))
    except UnicodeDecodeError as error:
        return documents, f"not UTF-8 text: {error}"
    except yaml.YAMLError as error:
        return documents, f"not valid YAML: {yaml_problem(error)}"
    return documents, None


def _shape_problem(document: object, budget: list[int]) -> str | None:
    """Too deep is one bad document; more values than bytes (a YAML alias bomb) ends the file.
    Walks without recursion; the value budget is shared by all documents of a file."""
    stack: list[tuple[object, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        budget[0] -= 1
        if budget[0] < 0:
            raise _Unusable("expands to more values than the file has bytes (YAML aliases?); refusing it")
        if depth > MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} levels deep; refusing it"
        if isinstance(value, dict):
            stack += [(child, depth + 1) for child in value.values()]
        elif isinstance(value, list):
            stack += [(child, depth + 1) for child in value]
    return None


def _identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    """Group (not version), kind, namespace, name: the same object listed twice is one object."""
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    namespace, name = metadata.get("namespace") or "", metadata.get("name", "")
    return group, str(obj.get("kind", "")), str(namespace), str(name)


def _position(position: list[str]) -> str:
    """Where in the file: "document 2, item 5"; empty for a file holding one object."""
    return ", ".join(position)


def _type(value: object) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    return "null" if value is None else names.get(type(value), f"a {type(value).__name__}")
