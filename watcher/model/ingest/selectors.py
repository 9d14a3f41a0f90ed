"""Kubernetes label selectors as a controller's `--watch-label-selector` writes them.

Flux shards its controllers by label: the main controller runs with
`--watch-label-selector=!sharding.fluxcd.io/key`, shard N with
`--watch-label-selector=sharding.fluxcd.io/key in (shardN)`, and each reconciles only the objects
its selector matches. To say which workload serves an object, the model reads that selector the
way the API server does (apimachinery's labels.Parse, as metav1.ParseToLabelSelector accepts it):

    k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k  !k      (a comma is AND)

`k!=v` and `k notin (...)` also match an object without the label. Anything else (`k>1`, which
ParseToLabelSelector refuses, an empty set, a key or value Kubernetes would not accept) raises
SelectorError: the caller then says the workload's scope is unknown, never "everything".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}")
_VALUE = re.compile(rf"(?:{_NAME})?")
_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")
_OPERATORS = {"=", "==", "!=", "in", "notin"}


class SelectorError(ValueError):
    """The selector cannot be read; the message says where and why."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term: `op` is one of "=", "!=", "in", "notin", "exists", "!"."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "!":
            return value is None
        if self.op in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values  # "!=", "notin"


@dataclass(frozen=True, slots=True)
class Selector:
    """Every requirement must match; no requirement matches everything."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    """Read a selector; raise SelectorError naming what is wrong. "" selects everything (as an
    empty `--watch-label-selector` does)."""
    tokens = _tokens(text)
    requirements: list[Requirement] = []
    at = 0
    while at < len(tokens):
        requirement, at = _requirement(tokens, at)
        requirements.append(requirement)
        if at < len(tokens):
            if tokens[at] != ",":
                raise SelectorError(f"expected ',' after a requirement, found {tokens[at]!r}")
            at += 1
            if at == len(tokens):
                raise SelectorError("ends with ','")
    return Selector(tuple(requirements))


def _tokens(text: str) -> list[str]:
    tokens, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        found = _TOKEN.match(text, at)
        if found is None:  # pragma: no cover - the pattern matches any non-space character
            raise SelectorError(f"cannot read {text[at:]!r}")
        tokens.append(found.group(1))
        at = found.end()
    return tokens


def _requirement(tokens: list[str], at: int) -> tuple[Requirement, int]:
    if tokens[at] == "!":
        key = _key(tokens, at + 1)
        return Requirement(key, "!"), at + 2
    key = _key(tokens, at)
    at += 1
    if at == len(tokens) or tokens[at] == ",":
        return Requirement(key, "exists"), at
    op = tokens[at]
    if op not in _OPERATORS:
        raise SelectorError(f"{key}: {op!r} is no operator this selector syntax has (=, ==, !=, in, notin)")
    at += 1
    if op in ("in", "notin"):
        values, at = _set(tokens, at, key)
        return Requirement(key, op, values), at
    value = ""  # `k=` selects the empty value, as in Kubernetes
    if at < len(tokens) and tokens[at] not in (",", "(", ")", "!", "=", "==", "!="):
        value = _value(tokens[at], key)
        at += 1
    return Requirement(key, "!=" if op == "!=" else "=", frozenset({value})), at


def _set(tokens: list[str], at: int, key: str) -> tuple[frozenset[str], int]:
    """`(a,b)`: an empty entry (`(a,)`, `(,a)`) is the empty value, as in Kubernetes; `()` is refused."""
    if at == len(tokens) or tokens[at] != "(":
        raise SelectorError(f"{key}: expected '(' after in/notin")
    if ")" not in tokens[at:]:
        raise SelectorError(f"{key}: unclosed '('")
    end = tokens.index(")", at)
    inner = tokens[at + 1 : end]
    if not inner:
        raise SelectorError(f"{key}: an empty set of values")
    entries: list[list[str]] = [[]]
    for token in inner:
        if token == ",":
            entries.append([])
        else:
            entries[-1].append(token)
    if any(len(entry) > 1 for entry in entries):
        raise SelectorError(f"{key}: values in a set must be separated by ','")
    return frozenset(_value(entry[0], key) if entry else "" for entry in entries), end + 1


def _key(tokens: list[str], at: int) -> str:
    if at == len(tokens):
        raise SelectorError("ends where a label key belongs")
    key = tokens[at]
    if key in _OPERATORS - {"in", "notin"} or key in ("(", ")", ",", "!") or not _KEY.fullmatch(key):
        raise SelectorError(f"{key!r} is no label key")
    return key


def _value(token: str, key: str) -> str:
    if not _VALUE.fullmatch(token):
        raise SelectorError(f"{key}: {token!r} is no label value")
    return token
