"""Reads cluster snapshots for `stalewatch analyze`: what `kubectl get ... -o yaml|json` wrote.

A PATH is a file, a directory (searched recursively for *.json, *.yaml and *.yml, in sorted
order, skipping hidden entries) or `-` for stdin. A `*.prom` file is not an object but a recorded
read of a controller's /metrics (watcher.snapshot_metrics). The same object may be given at several
versions (a series, e.g. `kubectl get -o yaml` saved after each change): the model then sees
them in generation order, which is what ConflictingWriters reads in `analyze`. A file holds one
object, a `List`/`*List` with `items`, or several YAML documents. Every object goes through the
model's `project()`, exactly as in the live watcher, so `analyze` and `run` judge the same fields.

Snapshots come from clusters in trouble and get edited by hand, so bad input is expected: each
problem becomes one `LoadError` naming the file, the position in it (document and List item,
when there is more than one) and, through the model's message, the object (Kind namespace/name),
and loading carries on with everything else: a bad List item loses that item, a YAML document
that cannot be built (unknown tag, key set twice) loses that document, a syntax error loses the
rest of its file. Nothing is skipped in silence: an unlistable directory, a FIFO or device in a
directory, an empty file and a snapshot without a single object are each an error. Sizes are
bounded (watcher.inputs) before anything big is built: no file or stream is read past 256 MiB,
objects nested deeper than 100 levels or files expanding (YAML aliases) to more values than
they have bytes are refused before projection walks them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from watcher.inputs import (
    InputError,
    LoadError,
    Refused,
    read_path,
    read_stream,
    shape_problem,
    yaml_documents,
)
from watcher.model.ingest.projection import project_or_problem
from watcher.model.types import DEFAULT_CONTROLLERS
from watcher.snapshot_metrics import SUFFIX as METRICS_SUFFIX
from watcher.snapshot_metrics import MetricsRead, in_time_order, problems_of, read_metrics_file

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 100
SUFFIXES = (".json", ".yaml", ".yml")
_FOUND = (*SUFFIXES, METRICS_SUFFIX)
TRACKED = tuple(spec.name for spec in DEFAULT_CONTROLLERS)
"""The controllers a metrics file may name when the caller's configuration does not say."""
STDIN = "-"


MAX_WARNINGS = 10
"""Warnings named one by one per file; the rest are counted (a file of 20,000 keys set twice
would otherwise write 20,000 lines to stderr)."""


@dataclass(slots=True)
class Snapshot:
    """The projected objects that loaded, and what did not."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    earlier: list[dict[str, Any]] = field(default_factory=list)
    """Earlier versions of objects given more than once (a series), oldest first: the model
    sees each object's versions in turn before its last (ConflictingWriters reads the series)."""
    errors: list[LoadError] = field(default_factory=list)
    warnings: list[LoadError] = field(default_factory=list)
    """What loaded, but not quite as written (a YAML key set twice: the last value wins)."""
    files: int = 0
    metrics: list[MetricsRead] = field(default_factory=list)
    """Recorded reads of controllers' /metrics (`*.prom`, watcher.snapshot_metrics), in time order."""


def load_snapshot(
    paths: Sequence[str],
    *,
    keep_namespace: Callable[[str], bool] = lambda namespace: True,
    stdin: BinaryIO | None = None,
    controllers: Collection[str] = TRACKED,
) -> Snapshot:
    """Load every PATH; `-` reads `stdin` (default: the process's standard input).
    Objects whose namespace `keep_namespace` rejects are skipped (configuration, not an error).
    The same object given twice counts once: the last one wins; given at several generations
    (a series: the same uid at several resourceVersions), the newest is judged and the earlier
    ones are kept, in order, under `earlier`. A `*.prom` file is a recorded read of the /metrics of
    one of `controllers` (the ControllerSpec names). Loading nothing at all is an
    error of its own: an empty pipe from a failed `kubectl get` must not read as healthy."""
    snapshot = Snapshot()
    by_identity: dict[tuple[str, str, str, str], list[_Version]] = {}
    skipped = 0
    for arg in paths:
        for source, path, in_directory in _sources(arg, snapshot.errors):
            snapshot.files += 1
            if path and path.suffix.lower() == METRICS_SUFFIX:
                _load_metrics(snapshot, source, path, in_directory, controllers)
                continue
            try:
                content = _read_file(path, in_directory) if path else _read_stdin(stdin)
                duplicates: list[str] = []
                for where, found in _objects(content, duplicates):
                    identity = _identity(found) if isinstance(found, dict) else None
                    if identity and not keep_namespace(identity[2]):
                        skipped += 1
                        continue
                    projected = _project(found) if isinstance(found, dict) else found
                    if isinstance(projected, str):
                        snapshot.errors.append(LoadError(source, projected, where))
                    elif identity and isinstance(found, dict):
                        # re-inserted: the last copy also takes the last place
                        versions = by_identity.pop(identity, [])
                        versions.append(_Version(projected, _uid(found), len(versions)))
                        by_identity[identity] = versions
            except InputError as error:
                snapshot.errors.append(LoadError(source, str(error)))
            else:
                snapshot.warnings += (LoadError(source, said) for said in duplicates[:MAX_WARNINGS])
                if len(duplicates) > MAX_WARNINGS:
                    more = len(duplicates) - MAX_WARNINGS
                    said = f"and {more} more keys set twice; the last value of each is used"
                    snapshot.warnings.append(LoadError(source, said))
    snapshot.metrics, refused = in_time_order(snapshot.metrics)
    snapshot.errors += refused
    for versions in by_identity.values():
        series = _series(versions)
        snapshot.objects.append(series[-1])
        snapshot.earlier += series[:-1]
    if not snapshot.objects and not snapshot.errors:
        outside = f" ({skipped} outside the watched namespaces)" if skipped else ""
        message = f"no objects in it{outside}; nothing was evaluated"
        snapshot.errors.append(LoadError(", ".join(paths), message))
    return snapshot


def _load_metrics(
    snapshot: Snapshot, source: str, path: Path, in_directory: bool, controllers: Collection[str]
) -> None:
    try:
        read = read_metrics_file(path, source=source, controllers=controllers, regular_only=in_directory)
    except InputError as error:
        snapshot.errors.append(LoadError(source, str(error)))
        return
    snapshot.metrics.append(read)
    errors, warnings = problems_of(read)
    snapshot.errors += errors
    snapshot.warnings += warnings  # the parser names 20 and counts the rest


@dataclass(frozen=True, slots=True)
class _Version:
    projected: dict[str, Any]
    uid: str
    given: int


def _uid(obj: dict[str, Any]) -> str:
    uid = obj["metadata"].get("uid")
    return uid if isinstance(uid, str) else ""


def _series(versions: list[_Version]) -> list[dict[str, Any]]:
    """One object's versions in the order it had them: by metadata.generation (which only grows),
    then as given; copies of another incarnation (another uid than the last) are left out. With
    one generation given (the same object twice), the last copy wins, as it always did."""
    ordered = sorted(versions, key=lambda v: (v.projected["metadata"].get("generation", 0), v.given))
    last = ordered[-1].uid
    return [v.projected for v in ordered if not (last and v.uid and v.uid != last)]


def _project(obj: dict[str, Any]) -> dict[str, Any] | str:
    """The projection, or why the model cannot use the object."""
    projected, problem = project_or_problem(obj)
    return problem if projected is None else projected


def _sources(arg: str, errors: list[LoadError]) -> Iterator[tuple[str, Path | None, bool]]:
    """(label, file, found in a directory) for every file an argument names; None is stdin."""
    if arg == STDIN:
        yield arg, None, False
        return
    path = Path(arg)
    if not path.is_dir():
        yield arg, path, False  # reading it says what is wrong with it, if anything
        return
    before = len(errors)
    files = _snapshot_files(path, errors)
    if not files and len(errors) == before:
        errors.append(LoadError(arg, f"directory has no {', '.join('*' + s for s in SUFFIXES)} files"))
    yield from ((str(file), file, True) for file in files)


def _snapshot_files(directory: Path, errors: list[LoadError]) -> list[Path]:
    """Every snapshot file under `directory`, following symlinks (each directory once, so a
    link loop ends); a directory that cannot be listed is an error, never skipped in silence."""

    def unreadable(error: OSError) -> None:
        errors.append(LoadError(str(error.filename or directory), f"cannot read directory: {error.strerror}"))

    found: list[Path] = []
    searched: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(directory, onerror=unreadable, followlinks=True):
        searched.add(_inode(root))
        dirs[:] = [d for d in dirs if not d.startswith(".") and _inode(os.path.join(root, d)) not in searched]
        found += [Path(root, f) for f in files if not f.startswith(".") and f.lower().endswith(_FOUND)]
    return sorted(found)


def _inode(path: str) -> tuple[int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return (-1, -1)  # os.walk reports it when it tries to list it
    return info.st_dev, info.st_ino


def _read_file(path: Path, in_directory: bool) -> tuple[bytes, bool]:
    """The bytes, and whether they are JSON (by suffix, else by sniffing)."""
    data = read_path(path, limit=MAX_FILE_BYTES, regular_only=in_directory)
    suffix = path.suffix.lower()
    if suffix in SUFFIXES:
        return data, suffix == ".json"
    return _sniffed(data)


def _read_stdin(stdin: BinaryIO | None) -> tuple[bytes, bool]:
    stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
    return _sniffed(read_stream(stream, limit=MAX_FILE_BYTES))


def _sniffed(data: bytes) -> tuple[bytes, bool]:
    """Without a telling suffix: JSON if it starts like JSON (kubectl -o json always does)."""
    return data, data.lstrip()[:1] in (b"{", b"[")


Found = tuple[str, dict[str, Any] | str]
"""(position, object) for an object, (position, message) for a document or item that is not one.
The model's MalformedObject messages name the object itself (Kind namespace/name)."""


def _objects(content: tuple[bytes, bool], duplicates: list[str]) -> Iterator[Found]:
    """Every object in a file. A bad document or list item is reported and the rest still loads;
    a syntax error ends the file after the documents before it, an alias bomb ends it at once.
    A YAML key set twice keeps its last value, described in `duplicates`."""
    data, is_json = content
    if is_json:
        documents, syntax_error = _json_documents(data)
    else:
        documents, syntax_error = yaml_documents(data, duplicates=duplicates)
    if not syntax_error and all(document is None for document in documents):
        raise InputError("is empty: no objects in it")
    budget = [len(data) + 16]
    for index, document in enumerate(documents, start=1):
        position = [f"document {index}"] if len(documents) > 1 or syntax_error else []
        if isinstance(document, Refused):
            yield _position(position), document.problem
        elif isinstance(document, list):  # a bare array of objects, e.g. from `jq .items`
            yield from _in_document({"kind": "List", "items": document}, position, budget)
        else:
            yield from _in_document(document, position, budget)
    if syntax_error:
        raise InputError(syntax_error)


def _in_document(document: object, position: list[str], budget: list[int]) -> Iterator[Found]:
    """The objects of one document; each List item is judged (and refused) on its own."""
    if document is None:  # an empty YAML document, e.g. after a trailing `---`
        return
    if not isinstance(document, dict):
        yield _position(position), f"expected a Kubernetes object (a mapping), got {_type(document)}"
        return
    kind = document.get("kind")
    if len(position) > MAX_DEPTH:  # Lists in Lists: stop before the recursion gets deep
        yield _position(position), f"nested more than {MAX_DEPTH} levels deep; refusing it"
        return
    if not (isinstance(kind, str) and kind.endswith("List") and "items" in document):
        problem = shape_problem(document, budget=budget, max_depth=MAX_DEPTH)
        yield _position(position), problem or document
        return
    items = document["items"]
    if not isinstance(items, list):
        yield _position(position), f"items: expected a list, got {_type(items)}"
        return
    for number, item in enumerate(items, start=1):
        yield from _in_document(item, [*position, f"item {number}"], budget)


def _json_documents(data: bytes) -> tuple[list[object], str | None]:
    if not data.strip():
        return [], None
    try:
        return [orjson.loads(data)], None
    except orjson.JSONDecodeError as error:
        return [], f"not valid JSON: {error}"


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
