"""What `stalewatch impact` prints: the tree, one line per object under what it follows from,
and the verdict; or, with -o json, one document holding the same tree.

Names and reasons come from the cluster (or a hand-edited snapshot), so the text goes through
`printable`; the document through orjson.
"""

from __future__ import annotations

from typing import Any

import orjson

from watcher.model.graph import installer_name
from watcher.model.impact_tree import Effect, Impact, Node, verdict
from watcher.model.objects import Key, describe
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


def render_text(impact: Impact) -> str:
    root = impact.root
    head = f"{impact.action} {describe(root.key)}"
    if impact.installers:
        head += ", installed by " + ", ".join(map(installer_name, impact.installers))
    lines = [head]
    for child in root.children:
        lines += _lines(child, depth=1)
    lines += ["", verdict(impact)]
    return "".join(printable(line) + "\n" for line in lines)


def _lines(node: Node, *, depth: int) -> list[str]:
    stack = f" [{installer_name(node.stack)}]" if node.stack is not None and node.stack != node.key else ""
    line = f"{'  ' * depth}{LABELS[node.effect]:<{_WIDTH}}  {describe(node.key)}{stack}: {node.why}"
    return [line] + [text for child in node.children for text in _lines(child, depth=depth + 1)]


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
        "tree": _node(impact.root),
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


def _key(key: Key) -> dict[str, str]:
    return {"group": key.group, "kind": key.kind, "namespace": key.namespace, "name": key.name}


def _node(node: Node) -> dict[str, Any]:
    return {
        **_key(node.key),
        "effect": str(node.effect),
        "why": node.why,
        "stack": installer_name(node.stack) if node.stack is not None else None,
        "children": [_node(child) for child in node.children],
    }
