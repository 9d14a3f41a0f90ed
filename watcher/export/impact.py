"""What `stalewatch impact` prints: the tree, one line per object under what it follows from,
and the verdict; or, with -o json, one document holding the same tree.

Names and reasons come from the cluster (or a hand-edited snapshot), so the text goes through
`printable`; the document through orjson.
"""

from __future__ import annotations

from typing import Any

import orjson

from watcher.model.ingest.objects import Key, describe
from watcher.model.store.graph import installer_name
from watcher.model.views.impact_tree import Effect, Impact, Node, verdict
from watcher.terminal import printable

SCHEMA_VERSION = 1

LABELS = {
    Effect.TARGET: "",
    Effect.REMOVED: "removed",
    Effect.KEPT: "kept",
    Effect.DELETED: "deleted",
    Effect.CANNOT_WATCH: "cannot watch",
    Effect.UNRECONCILED: "not reconciled",
    Effect.BLOCKED: "blocked",
}
_WIDTH = max(map(len, LABELS.values()))
INDENT_LEVELS = 16
"""How deep the layout indents, in the text and the document: past it a line is indented no
further (the text shows its depth as a number), so the output grows with the number of objects,
not with the square of a dependsOn chain's depth (10,000 deep was 2 GiB of indentation)."""


def render_text(impact: Impact) -> str:
    root = impact.root
    head = f"{impact.action} {describe(root.key)}"
    if impact.installers:
        head += ", installed by " + ", ".join(map(installer_name, impact.installers))
    lines = [head]
    for node, depth in root.levels():
        if depth:
            lines.append(_line(node, depth=depth))
    lines += ["", verdict(impact)]
    return "".join(printable(line) + "\n" for line in lines)


def _line(node: Node, *, depth: int) -> str:
    stack = f" [{installer_name(node.stack)}]" if node.stack is not None and node.stack != node.key else ""
    indent = "  " * min(depth, INDENT_LEVELS) + (f"[{depth}] " if depth > INDENT_LEVELS else "")
    return f"{indent}{LABELS[node.effect]:<{_WIDTH}}  {describe(node.key)}{stack}: {node.why}"


def render_json(impact: Impact, *, code: int) -> str:
    document = {
        "schema": SCHEMA_VERSION,
        "target": _key(impact.root.key),
        "action": str(impact.action),
        "outcome": str(impact.outcome),
        "exit_code": code,
        "verdict": verdict(impact),
        "installed_by": [installer_name(k) for k in impact.installers],
        "summary": {
            "removed": len(impact.removed),
            "broken": len(impact.broken),
            "stacks": [installer_name(k) for k in impact.stacks],
        },
        "not_looked_at": list(impact.blind),
        "tree": _TREE,
    }
    text = orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
    head, placeholder, tail = text.rpartition(orjson.dumps(_TREE).decode())
    assert placeholder, "the tree's place in the document"
    return head + _tree(impact.root) + tail + "\n"


_DEEPEST = 2 * INDENT_LEVELS + 1
"""The indent (in steps) of a node INDENT_LEVELS deep: each level is an object and its array."""
_TREE = "\x00tree"
"""Where the tree goes in the document: orjson nests at most 255 levels, and a dependsOn chain is
deeper than that as often as a cluster makes it, so the tree is written out by _tree()."""


def _key(key: Key) -> dict[str, str]:
    return {"group": key.group, "kind": key.kind, "namespace": key.namespace, "name": key.name}


def _fields(node: Node) -> dict[str, Any]:
    return {
        **_key(node.key),
        "effect": str(node.effect),
        "why": node.why,
        "stack": installer_name(node.stack) if node.stack is not None else None,
    }


def _tree(root: Node) -> str:
    """The tree as `"children"`-nested objects, laid out as orjson's OPT_INDENT_2 lays out the rest
    of the document (the root's brace follows `"tree": `) down to INDENT_LEVELS, no deeper past
    it; without recursion."""
    out: list[str] = []
    pending: list[tuple[Node, int, bool] | str] = [(root, 1, True)]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, level, last = item
        shown = min(level, _DEEPEST)
        pad, inner = "  " * shown, "  " * (shown + 1)
        out.append("{\n" if level == 1 else f"{pad}{{\n")
        out += [
            f"{inner}{orjson.dumps(k).decode()}: {orjson.dumps(v).decode()},\n"
            for k, v in _fields(node).items()
        ]
        closing = f"{pad}}}" + ("" if last or level == 1 else ",") + ("" if level == 1 else "\n")
        if not node.children:
            out.append(f'{inner}"children": []\n')
            out.append(closing)
            continue
        out.append(f'{inner}"children": [\n')
        pending += [closing, f"{inner}]\n"]
        count = len(node.children)
        pending += [
            (child, level + 2, index == count - 1)
            for index, child in reversed(list(enumerate(node.children)))
        ]
    return "".join(out)
