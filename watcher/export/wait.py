"""What `stalewatch wait` prints: progress lines, the final text report, the JSON document.

Everything in them that the cluster wrote (names, reasons, messages) goes through `printable`
(the text) or orjson (the document); the root causes are rendered by the analyze report's
own code, so a failed wait reads like `stalewatch analyze` on the same cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from watcher.export.report import render_text as render_findings
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.objects import Key, describe, format_age
from watcher.model.types import rfc3339
from watcher.model.views.convergence import Outcome, Verdict
from watcher.model.views.subtree import ObjectState, State
from watcher.model.views.targets import Target
from watcher.terminal import printable

SCHEMA_VERSION = 1

_HEADLINES = {
    Outcome.CONVERGED: "converged",
    Outcome.FAILED: "failed",
    Outcome.CANNOT_WAIT: "cannot wait",
    Outcome.TIMED_OUT: "timed out",
    Outcome.STALE: "stale",
    Outcome.WAITING: "waiting",
}


def _object_line(state: ObjectState, now: datetime) -> str:
    age = f" (since {format_age(state.since, now)})" if state.since is not None else ""
    return f"{describe(state.key)}: {state.reason}{age}"


def progress_line(verdict: Verdict, *, now: datetime) -> str:
    """`waiting: 4/6 current; Kustomization flux-system/apps: at main@1a2b3c4d5e6f, waiting for
    main@5e0f1a2b3c4d (since 2m ago)`: the count and the first object (parents first) not current."""
    line = f"{_HEADLINES[verdict.outcome]}: {verdict.message}"
    pending = verdict.not_current()
    if pending:
        line += f"; {_object_line(pending[0], now)}"
    return printable(line)


def render_text(verdict: Verdict, *, now: datetime) -> str:
    """The verdict, then the root causes (like analyze), then what is not current and why."""
    lines = [f"{_HEADLINES[verdict.outcome]}: {verdict.message}"]
    targets = [describe(state.key) for state in verdict.objects if state.parent is None]
    if verdict.outcome is Outcome.CONVERGED and targets:
        under = "them" if len(targets) > 1 else "it"
        lines.append(f"  {', '.join(targets)} and everything under {under}: {len(verdict.objects)} objects")
    out = "".join(printable(line) + "\n" for line in lines)
    if verdict.findings:
        shown = Evaluation(now=now, findings=verdict.findings, objects=[], controllers=[], revisions=[])
        out += "\n" + render_findings(shown, objects=len(verdict.objects))
    pending = verdict.not_current()
    if pending:
        title = "still in progress" if verdict.outcome is Outcome.TIMED_OUT else "not current"
        out += f"{title} ({len(pending)} of {len(verdict.objects)}):\n"
        out += "".join(f"  {printable(_object_line(state, now))}\n" for state in pending)
    return out


def _key(key: Key | None) -> dict[str, str] | None:
    if key is None:
        return None
    return {"group": key.group, "kind": key.kind, "namespace": key.namespace, "name": key.name}


def _object(state: ObjectState) -> dict[str, Any]:
    return {
        **(_key(state.key) or {}),
        "state": str(state.state),
        "reason": state.reason,
        "since": rfc3339(state.since),
        "parent": _key(state.parent),
    }


def render_json(
    verdict: Verdict, targets: Sequence[Target], *, started: datetime, now: datetime, code: int
) -> str:
    """The one document of `-o json` (docs/wait.md describes every field)."""
    document = {
        "schema_version": SCHEMA_VERSION,
        "outcome": str(verdict.outcome),
        "exit_code": code,
        "message": verdict.message,
        "started": rfc3339(started),
        "finished": rfc3339(now),
        "targets": [{**(_key(t.key) or {}), "revision": t.revision} for t in targets],
        "summary": {
            "objects": len(verdict.objects),
            **{str(state): sum(o.state is state for o in verdict.objects) for state in State},
        },
        "objects": [_object(state) for state in verdict.objects],
        "root_causes": [f.to_dict() for f in verdict.findings if f.is_root],
        "findings": [f.to_dict() for f in verdict.findings],
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE).decode()
