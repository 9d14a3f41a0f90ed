"""A tiny DOM from the stdlib parser, so unit tests assert on structure rather than on strings.

The browser tests check the same page in a real Chromium; this one only has to be strict
enough to find elements by tag and class and read their text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"meta", "br", "img", "input", "link", "hr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def all(self, tag: str, cls: str | None = None) -> list[Node]:
        return [n for n in self.walk() if n.tag == tag and (cls is None or cls in n.classes)]

    def one(self, tag: str, cls: str | None = None) -> Node:
        found = self.all(tag, cls)
        assert len(found) == 1, f"expected one <{tag} class={cls}>, found {len(found)}"
        return found[0]

    def by_id(self, ident: str) -> Node:
        return next(n for n in self.walk() if n.attrs.get("id") == ident)

    def walk(self) -> Iterator[Node]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.walk()


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    """Fails on a mis-nested tag: the page must be well-formed, not just tolerated."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], f"unclosed: {[n.tag for n in builder.stack[1:]]}"
    return builder.root
