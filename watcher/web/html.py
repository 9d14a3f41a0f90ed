"""Small HTML builders the page's parts share: table rows, times, "and N more", part ids.

Every value from the cluster goes through `escape` here or in the caller; only markup built from
trusted constants is passed as `raw`. Escaping stops markup, not text that misleads: a bidi
override (U+202E) reverses what follows it, `main` reads `niam`, and an ESC or NUL is invisible.
So every document and part leaves through `neutral`, which spells those out as the terminal
does (watcher.terminal: one list of the characters, `\u202e`, `\x1b`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape

from watcher.model.ingest.objects import format_age
from watcher.model.types import rfc3339
from watcher.terminal import printable_layout


def neutral(markup: str) -> str:
    """`markup` with every C0/C1 control (but tab, newline and CR: layout in HTML), line and
    paragraph separator and bidi control spelled out as an escape. Our own markup holds none, so
    any there came from a value; spelled out in ASCII, it stays inert in text and attributes."""
    return printable_layout(markup)


def part_id(prefix: str, *names: str) -> str:
    """A DOM id for the part about `names` (a kind, a namespace, a name...): the same for the
    same subject in every evaluation, and safe whatever the names hold (they are hashed: a
    cluster user picks them, and an id must not carry quotes, spaces or `</`)."""
    digest = hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]
    return f"{prefix}-{digest}"


def row(
    cell: str,
    values: Sequence[str | None],
    *,
    raw: Mapping[int, str] | None = None,
    css: str = "",
    mono: Sequence[int] = (),
    classes: Mapping[int, str] | None = None,
    ident: str = "",
) -> str:
    """One table row; a header row also opens the table. `raw` cells are already-escaped markup;
    `mono` cells are revisions; `classes` are more (trusted) class names of some cells; `ident`
    is the row's (trusted) DOM id when it is a part of its own."""
    raw, classes = raw or {}, classes or {}
    cells = []
    for i, value in enumerate(values):
        content = raw[i] if i in raw else escape(value or "")
        names = " ".join(filter(None, ("rev" if i in mono else "", classes.get(i, ""))))
        attr = f' class="{names}"' if names else ""
        cells.append(f"<{cell}{attr}>{content}</{cell}>")
    attrs = (f' id="{ident}"' if ident else "") + (f' class="{css}"' if css else "")
    line = f"<tr{attrs}>" + "".join(cells) + "</tr>"
    return f"<table>{line}" if cell == "th" else line


def since(moment: datetime | None, now: datetime) -> str:
    return f"{rfc3339(moment)} ({format_age(moment, now)})" if moment else ""


def more(count: int, what: str) -> Iterable[str]:
    if count > 0:
        yield f'<p class="more">and {count} more {escape(what)}</p>'


def link(href: str | None, label: str, *, css: str = "") -> str:
    """An <a> whose href and label are both escaped (a path may carry any name); the label
    alone when there is no href (a name no path can hold: watcher.web.stacks.path)."""
    attr = f' class="{css}"' if css else ""
    if href is None:
        return f"<span{attr}>{escape(label)}</span>"
    return f'<a href="{escape(href)}"{attr}>{escape(label)}</a>'
