"""What a URL asks the page to show: everything in the query string, so a link reproduces a view.

  q=TEXT          the search box: words, all of which must match a stack row. A word matches
                  the row's kind (exactly, any case), namespace (exactly), name (a part of it),
                  revision (a prefix of the source's, applied or attempted revision, or of its
                  digest) or a finding type on it (exactly, any case); `kind:`, `ns:`, `name:`,
                  `rev:` and `type:` narrow a word to one of those.
  status=VERDICT  only rows stalewatch judges so (failing, stale, not-judged, missing,
                  in-progress, current); repeat it for several.
  open=NS/NAME    a stack shown open on `/` (repeat it for several); a search opens the stacks
                  it matches.
  page=N          which page of stacks (of a stack's rows on /stacks/NS/NAME).
  namespace=NS    narrows the GitOps objects and revisions tables.

Parsing never raises: a value the page cannot use is dropped and named in `problems`, which the
page shows; the rest of the query still applies (a pasted URL with one typo still helps).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from watcher.model.ingest.objects import Key
from watcher.model.views.row_verdicts import Verdict

FIELDS: Mapping[str, str] = {
    "kind": "kind",
    "ns": "namespace",
    "namespace": "namespace",
    "name": "name",
    "rev": "revision",
    "revision": "revision",
    "type": "type",
    "finding": "type",
}
"""The prefixes a search word may carry, and the row field each narrows it to."""
STATUSES: Mapping[str, Verdict] = {verdict.value.replace(" ", "-"): verdict for verdict in Verdict}
MAX_TEXT = 256
MAX_PAGE = 100_000
_DIGITS = re.compile(r"[0-9]{1,18}")
"""ASCII digits only: `²` and `٣` pass str.isdigit() (int() refuses the one and reads the other),
and int() raises on 5,000 digits; eighteen fit every bound we have."""


@dataclass(frozen=True, slots=True)
class Term:
    field: str
    """A value of FIELDS, or "any"."""
    value: str


@dataclass(frozen=True, slots=True)
class Query:
    namespace: str | None = None
    text: str = ""
    """The search box as typed (shown back in it)."""
    terms: tuple[Term, ...] = ()
    statuses: frozenset[Verdict] = frozenset()
    opened: frozenset[tuple[str, str]] = frozenset()
    page: int = 1
    problems: tuple[str, ...] = field(default=())
    """One line per query value the page could not use, naming it."""
    stack: Key | None = None
    """The root of the stack a /stacks/NS/NAME view shows (from the path, not the query)."""

    @property
    def searching(self) -> bool:
        return bool(self.terms or self.statuses)

    def href(self, path: str = "/", **changes: object) -> str:
        """This view's URL at `path`, with `changes` (field=value) made: unescaped (escape it in
        markup)."""
        query = replace(self, **changes) if changes else self  # type: ignore[arg-type]
        pairs: list[tuple[str, str]] = []
        if query.text:
            pairs.append(("q", query.text))
        pairs += [("status", slug(v)) for v in sorted(query.statuses, key=list(Verdict).index)]
        pairs += [("open", f"{ns}/{name}") for ns, name in sorted(query.opened)]
        if query.namespace is not None:
            pairs.append(("namespace", query.namespace))
        if query.page != 1:
            pairs.append(("page", str(query.page)))
        return path + ("?" + urlencode(pairs) if pairs else "")


def slug(verdict: Verdict) -> str:
    return verdict.value.replace(" ", "-")


def parse_query(params: Mapping[str, str]) -> Query:
    """`params` as the request carries them (aiohttp's MultiDict: `getall` reads repeats)."""
    problems: list[str] = []
    text = " ".join(_one(params, "q").split())
    if len(text) > MAX_TEXT:
        problems.append(f"q is longer than {MAX_TEXT} characters: searched for its first {MAX_TEXT}")
        text = text[:MAX_TEXT]
    terms = []
    for word in text.split():
        prefix, colon, value = word.partition(":")
        if colon and prefix.lower() in FIELDS:
            if not value:
                problems.append(f"q: {word!r} names no value after the colon: ignored")
                continue
            terms.append(Term(FIELDS[prefix.lower()], value))
        else:
            terms.append(Term("any", word))
    statuses = set()
    for value in _all(params, "status"):
        if value in STATUSES:
            statuses.add(STATUSES[value])
        elif value:
            problems.append(f"status={value!r} is not one of {', '.join(STATUSES)}: ignored")
    opened = set()
    for value in _all(params, "open"):
        namespace, slash, name = value.partition("/")
        if slash and namespace and name and "/" not in name:
            opened.add((namespace, name))
        elif value:
            problems.append(f"open={value!r} is not NAMESPACE/NAME: ignored")
    page = 1
    raw = _one(params, "page")
    if raw:
        number = whole_number(raw, low=1, high=MAX_PAGE)
        if number is not None:
            page = number
        else:
            problems.append(f"page={raw[:80]!r} is not a page number (1 to {MAX_PAGE}): showing page 1")
    return Query(
        namespace=_one(params, "namespace") or None,
        text=text,
        terms=tuple(terms),
        statuses=frozenset(statuses),
        opened=frozenset(opened),
        page=page,
        problems=tuple(problems),
    )


def whole_number(text: str, *, low: int, high: int) -> int | None:
    """`text` as a whole number from `low` to `high` in ASCII digits (what every query parameter
    that counts takes); None for anything else."""
    if _DIGITS.fullmatch(text) is None:
        return None
    number = int(text)
    return number if low <= number <= high else None


def _one(params: Mapping[str, str], name: str) -> str:
    return params.get(name) or ""


def _all(params: Mapping[str, str], name: str) -> list[str]:
    getall = getattr(params, "getall", None)
    if getall is not None:
        return list(getall(name, []))
    value = params.get(name)
    return [value] if value else []
