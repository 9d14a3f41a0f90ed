"""Flux revision strings, compared by what they point at rather than how they are spelled.

Flux has written the same commit several ways over its versions:
  main@sha1:<hex>      source-controller v1 Git revision (ref@algo:digest)
  main/<hex>           the legacy (v1beta2) spelling of the same thing
  latest/sha256:<hex>  the legacy OCIRepository spelling
  sha256:<hex>         Bucket / OCI artifact digest without a ref
  latest@sha256:<hex>  OCIRepository tag@digest (also v1.2.3@sha256:...)
  <hex>                legacy Bucket revision (bare digest)
  1.2.3, 1.2.3+abc     Helm chart versions (no digest at all)
Two revisions are the same when both carry a digest and the digests are equal (the ref
is only a label: `main@sha1:abc` == `main/abc`, `sha256:x` == `latest@sha256:x`). When
either has no digest, their version/ref text is compared instead ("v1.2.3" == "1.2.3").
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_HEX = re.compile(r"[0-9a-fA-F]{7,128}")
_ALGO_DIGEST = re.compile(r"(sha1|sha256|sha384|sha512|blake3):([0-9a-fA-F]+)")


@dataclass(frozen=True, slots=True)
class Revision:
    """A parsed revision: an optional ref/version label and an optional lower-case digest."""

    text: str
    ref: str
    digest: str


@functools.lru_cache(maxsize=4096)
def parse_revision(value: str) -> Revision:
    """Cached: every judgement of a Flux object compares its revisions with its source's, and
    under churn the same few thousand strings come back on every pass."""
    value = value.strip()
    ref, at, tail = value.rpartition("@")
    if at:
        match = _ALGO_DIGEST.fullmatch(tail)
        if match:
            return Revision(value, ref, match.group(2).lower())
    match = _ALGO_DIGEST.fullmatch(value)
    if match:
        return Revision(value, "", match.group(2).lower())
    head, slash, last = value.rpartition("/")
    if slash:
        match = _ALGO_DIGEST.fullmatch(last)
        if match:
            return Revision(value, head, match.group(2).lower())
        if _HEX.fullmatch(last):
            return Revision(value, head, last.lower())
    if len(value) in (40, 64) and _HEX.fullmatch(value):
        return Revision(value, "", value.lower())
    return Revision(value, value, "")


def _version(label: str) -> str:
    return label[1:] if label[:1] in ("v", "V") and label[1:2].isdigit() else label


def same_revision(a: str, b: str) -> bool:
    """Whether two revision strings name the same content (see the module docstring).

    An empty string is "unknown" and equals nothing, not even another empty string.
    """
    if not a or not b:
        return False
    left, right = parse_revision(a), parse_revision(b)
    if left.digest and right.digest:
        return left.digest == right.digest
    return _version(left.ref) == _version(right.ref) and bool(left.ref)


def short(value: str) -> str:
    """A revision as people read it: ref plus the first 12 digest characters."""
    revision = parse_revision(value)
    if not revision.digest:
        return revision.text
    return f"{revision.ref}@{revision.digest[:12]}" if revision.ref else revision.digest[:12]
