"""What a URL asks the page to show: everything in the query string, so a link reproduces a view.

Parsing never raises: a value the page cannot use is dropped and named in `problems`, which the
page shows; the rest of the query still applies (a pasted URL with one typo still helps).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Query:
    namespace: str | None = None
    """Narrows the GitOps objects and revisions tables (`?namespace=NS`)."""
    problems: tuple[str, ...] = field(default=())
    """One line per query value the page could not use, naming it."""


def parse_query(params: Mapping[str, str]) -> Query:
    """`params` as the request carries them (the first of repeated names)."""
    return Query(namespace=params.get("namespace") or None)
