"""The search box and status filters over stack rows (the syntax: watcher.web.query)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from watcher.model.ingest.revisions import parse_revision
from watcher.model.views.stacks import Row, Stack
from watcher.web.query import Query, Term


def _kind(row: Row, value: str) -> bool:
    return row.key.kind.lower() == value.lower()


def _namespace(row: Row, value: str) -> bool:
    return row.key.namespace == value


def _name(row: Row, value: str) -> bool:
    return value.lower() in row.key.name.lower()


def _revision(row: Row, value: str) -> bool:
    """A prefix of the revision as written (`main@sha1:4f2c`) or of its digest (`4f2c`)."""
    lowered = value.lower()
    for revision in (row.revision, row.applied, row.attempted):
        if revision and (revision.startswith(value) or parse_revision(revision).digest.startswith(lowered)):
            return True
    return False


def _type(row: Row, value: str) -> bool:
    return any(str(f.type).lower() == value.lower() for f in row.findings)


_MATCHERS: Mapping[str, Callable[[Row, str], bool]] = {
    "kind": _kind,
    "namespace": _namespace,
    "name": _name,
    "revision": _revision,
    "type": _type,
}


def _any(row: Row, value: str) -> bool:
    return any(match(row, value) for match in _MATCHERS.values())


def matches(row: Row, term: Term) -> bool:
    return _MATCHERS.get(term.field, _any)(row, term.value)


def wanted(row: Row, query: Query) -> bool:
    """Every word matches and, when statuses are asked for, the row has one of them."""
    if query.statuses and row.verdict not in query.statuses:
        return False
    return all(matches(row, term) for term in query.terms)


def found_in(stack: Stack, query: Query) -> list[Row]:
    """The rows of `stack` a search shows: those it matches, each with its parents up to the
    root (the tree stays readable), in tree order; [] when none matches."""
    hits = {row.key for row in stack.rows if wanted(row, query)}
    if not hits:
        return []
    parents = {row.key: row.parent for row in stack.rows}
    shown = set(hits)
    for key in hits:
        parent = parents.get(key)
        while parent is not None and parent not in shown:
            shown.add(parent)
            parent = parents.get(parent)
    return [row for row in stack.rows if row.key in shown]
