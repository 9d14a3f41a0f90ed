"""The page as keyed parts, so the live stream can send what changed instead of the whole page.

A part is one element the browser can replace in place: the trust banner, a root cause card, a
stack's header, one stack row, the recent changes. The page renders its parts in document order
into their containers; the stream (`/api/v1/stream`) renders the same parts again after an
evaluation and sends only those whose HTML changed, were added (with the part they go before) or
were removed. One renderer for both, so the page after a delta equals the page after a reload.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Part:
    """One keyed element of the page.

    `id` is the element's DOM id, unique in the page and stable across evaluations for the same
    subject (so a delta finds it); `container` is the DOM id of the element it lives in; `html`
    is the element itself, its `id` attribute included, every value in it already escaped.
    """

    id: str
    container: str
    html: str
