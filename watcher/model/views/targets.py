"""What `stalewatch wait` is asked to wait for: targets named `KIND/NAMESPACE/NAME`, and the
revision they must reach.

Both are user input, so both are checked here, once, with one message naming the bad part:
an unknown kind lists the kinds that are known, a revision that cannot name content says why
(an abbreviated SHA is refused rather than silently never matching: revisions are compared
by their full digest, see ingest/revisions.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from watcher.model.ingest.kinds import FLUX_GROUPS
from watcher.model.ingest.objects import Key
from watcher.model.ingest.revisions import parse_revision
from watcher.model.views.spelling import KNOWN

WAITABLE: Mapping[str, tuple[str, ...]] = {
    s.kind: s.names() for s in KNOWN if FLUX_GROUPS.get(s.kind) == s.group
}
"""Every kind `wait` takes, and the names it answers to (matched case-insensitively): kubectl's,
declared once in spelling.KNOWN."""

_BY_NAME = {name: kind for kind, names in WAITABLE.items() for name in names}
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_HEX = re.compile(r"[0-9a-fA-F]+")
_ALGO = re.compile(r"(sha1|sha256|sha384|sha512|blake3):(.*)")
_FULL_DIGEST = (40, 64, 96, 128)
"""Hex lengths of a whole sha1, sha256, sha384 or sha512 digest."""


class TargetError(ValueError):
    """Bad input; str() is one line naming what was given."""


@dataclass(frozen=True, slots=True)
class Target:
    """One object to wait for, and the revision asked for ("" = its source's, read at start)."""

    key: Key
    revision: str = ""

    def __str__(self) -> str:
        return f"{self.key.kind.lower()} {self.key.namespace}/{self.key.name}"


def parse_target(text: str, *, revision: str = "") -> Target:
    """`ks/flux-system/apps` -> the Kustomization flux-system/apps."""
    parts = text.split("/")
    if len(parts) != 3 or not all(parts):
        raise TargetError(f"target {text!r}: expected KIND/NAMESPACE/NAME, e.g. ks/flux-system/apps")
    name, namespace = parts[2], parts[1]
    kind = _BY_NAME.get(parts[0].lower())
    if kind is None:
        known = ", ".join(sorted(_BY_NAME))
        raise TargetError(f"target {text!r}: unknown kind {parts[0]!r}; known kinds: {known}")
    for what, value in (("namespace", namespace), ("name", name)):
        if len(value) > 253 or not _NAME.fullmatch(value):
            raise TargetError(f"target {text!r}: {what} {value!r} is not a Kubernetes object name")
    return Target(Key(FLUX_GROUPS[kind], kind, namespace, name), revision)


def check_revision(text: str) -> str:
    """The revision as given, or TargetError when it cannot name one revision: empty, spaced,
    an `algo:` digest that is not whole hex, or a hex string too short to be a whole digest
    (an abbreviated commit SHA would never compare equal to the full one Flux records)."""
    if not text or text != text.strip() or any(c.isspace() or not c.isprintable() for c in text):
        raise TargetError(f"--revision {text!r}: expected one revision without spaces, e.g. main@sha1:<sha>")
    tail = text.rpartition("@")[2] if "@" in text else text.rpartition("/")[2]
    algo = _ALGO.fullmatch(tail)
    if algo is not None and not _HEX.fullmatch(algo[2]):
        raise TargetError(f"--revision {text!r}: the {algo[1]} digest is not hexadecimal")
    bare = tail if algo is None else algo[2]
    if (algo is not None or bare == text) and _HEX.fullmatch(bare) and _is_abbreviated(bare):
        raise TargetError(
            f"--revision {text!r}: {bare} looks like an abbreviated digest; give the whole "
            f"{'SHA' if algo is None else algo[1]} (e.g. $GITHUB_SHA), Flux records it in full"
        )
    if not parse_revision(text).text:
        raise TargetError(f"--revision {text!r}: not a revision")
    return text


def _is_abbreviated(hex_digits: str) -> bool:
    """Hex that is not a whole digest; a run of decimal digits alone may be a version, so it passes."""
    return len(hex_digits) not in _FULL_DIGEST and not hex_digits.isdigit()
