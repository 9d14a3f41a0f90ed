"""/objects/KIND/NAMESPACE/NAME (/objects/KIND/NAME when cluster-scoped): one object, whole.

What stalewatch makes of it (its stack row), its conditions, its revisions, the owner chain up
to its stack's root, the findings and the Events about it, and the kubectl commands that
confirm all that from the cluster itself: describe and events first (they work while the
controller is down), logs last.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

from watcher.model.evaluation import Evaluation
from watcher.model.ingest.flux import revisions
from watcher.model.ingest.kinds import KINDS
from watcher.model.ingest.objects import Key, conditions, describe, time_at
from watcher.model.rules.events import event_window, involved_subject
from watcher.model.rules.workloads import owner_workload
from watcher.model.store.graph import Snapshot
from watcher.model.types import Finding, Subject
from watcher.model.views.stacks import APPLIERS, Forest, Row
from watcher.web.cards import root_card_id
from watcher.web.html import link, more, row, since
from watcher.web.parts import Part
from watcher.web.stacks import object_href, row_html, stack_href

MAX_EVENTS = 50
EVENT_KINDS: tuple[tuple[str, str], ...] = tuple(k.key for k in KINDS if k.kind == "Event")
KIND_GROUPS: Mapping[str, str] = {k.kind: k.group for k in reversed(KINDS)}
"""The group of each kind stalewatch watches, by kind name (the first declared wins)."""


def kind_key(kind: str, namespace: str, name: str) -> Key | None:
    """The object a path names, or None when stalewatch watches no kind of that name."""
    group = KIND_GROUPS.get(kind)
    return Key(group, kind, namespace, name) if group is not None else None


def around_kinds(key: Key) -> list[tuple[str, str]]:
    """What the page reads near the object (in its namespace): it, its Events, and for a Pod the
    ReplicaSet and workload that own it."""
    kinds = [(key.group, key.kind), *EVENT_KINDS]
    if key.kind == "Pod":
        kinds += [("apps", "ReplicaSet"), *((k.group, k.kind) for k in KINDS if k.group == "apps")]
    return kinds


def object_parts(
    key: Key, around: Snapshot, forest: Forest | None, evaluation: Evaluation, *, now: datetime
) -> list[Part]:
    """The object's parts (one per block); [] when stalewatch holds no such object."""
    obj = around.get(key)
    if obj is None:
        return []
    chain = _chain(key, obj, around, forest)
    findings = [f for f in evaluation.findings if _same(f.subject, key)]
    blocks = [
        ("object-head", _head(key, chain, evaluation, now=now)),
        ("object-conditions", _conditions(obj, now=now)),
        ("object-revisions", _revisions(key, obj, around) if (key.group, key.kind) in APPLIERS else ""),
        ("object-chain", _owners(key, chain)),
        ("object-findings", _findings(findings)),
        ("object-events", _events(key, around, now=now)),
        ("object-commands", _commands(key, chain)),
    ]
    return [Part(ident, "object", f'<div id="{ident}">{html}</div>') for ident, html in blocks if html]


def not_found(key: Key | None, kind: str, namespace: str, name: str, *, visible: bool) -> Part:
    if key is None:
        text = f"stalewatch watches no kind named {kind}, so it holds no {kind} {namespace}/{name}."
    elif not visible:
        text = f"stalewatch cannot see {kind} (forbidden or not listed yet): {describe(key)} may exist."
    else:
        text = f"No {describe(key)} in what stalewatch watches: it was deleted, or never existed."
    return Part(
        "object-head", "object", f'<div id="object-head"><h2>Not found</h2><p>{escape(text)}</p></div>'
    )


def unknown(why: str) -> Part:
    """The page of an object stalewatch cannot look for (yet): never "not found"."""
    text = f"Not judged: {why}, so stalewatch cannot say whether this object exists or how it is."
    return Part(
        "object-head", "object", f'<div id="object-head"><h2>Not judged</h2><p>{escape(text)}</p></div>'
    )


def _same(subject: Subject, key: Key) -> bool:
    return (subject["kind"], subject["namespace"], subject["name"]) == (key.kind, key.namespace, key.name)


def _chain(key: Key, obj: Mapping[str, Any], around: Snapshot, forest: Forest | None) -> list[Row]:
    """The object's stack row and its parents up to the root; a Pod's through its workload."""
    if forest is None:
        return []
    chain = forest.chain(key)
    if not chain and key.kind == "Pod":
        workload = owner_workload(obj, around.get)
        chain = forest.chain(workload) if workload is not None else []
    return chain


def _head(key: Key, chain: Sequence[Row], evaluation: Evaluation, *, now: datetime) -> str:
    lines = [f"<h2>{escape(describe(key))}</h2>"]
    own = chain[0] if chain and chain[0].key == key else None
    if own is not None:
        lines.append(f'<table class="stacks">{row_html(own, "object-row", now=now)}</table>')
    else:
        health = next((o for o in evaluation.objects if _same(o.subject, key)), None)
        if health is not None:
            state = f"{health.status}" + (" (stale: its controller is down)" if health.stale else "")
            lines.append(f"<p>kstatus: {escape(state)}; {escape(health.reason)}</p>")
    return "".join(lines)


def _conditions(obj: Mapping[str, Any], *, now: datetime) -> str:
    found = conditions(obj)
    if not found:
        return ""
    lines = ["<h3>Conditions</h3>", row("th", ["Type", "Status", "Reason", "Message", "Last transition"])]
    for c in found:
        moment = time_at(c, "lastTransitionTime")
        cells = [c.get("type"), c.get("status"), c.get("reason"), c.get("message"), since(moment, now)]
        lines.append(row("td", cells, classes={3: "message"}))
    return "".join([*lines, "</table>"])


def _revisions(key: Key, obj: Mapping[str, Any], around: Snapshot) -> str:
    revs = revisions(obj, around.get)
    if revs.source is None:
        return ""
    source = link(object_href(revs.source), describe(revs.source))
    lines = ["<h3>Revisions</h3>", row("th", ["Source", "Source revision", "Applied", "Attempted"])]
    lines.append(
        row("td", [None, revs.revision, revs.applied, revs.attempted], raw={0: source}, mono=(1, 2, 3))
    )
    return "".join([*lines, "</table>"])


def _owners(key: Key, chain: Sequence[Row]) -> str:
    """The object, then each parent up to its stack's root (a Pod: its workload's chain)."""
    if not chain:
        return "<h3>Owner chain</h3><p>Not in any stack: no Kustomization stalewatch sees applied it.</p>"
    keys = [row.key for row in chain]
    if keys[0] != key:
        keys.insert(0, key)
    links = [link(object_href(k), describe(k)) for k in keys]
    root = keys[-1]
    stack = link(stack_href(root), f"stack {root.namespace}/{root.name}")
    return f"<h3>Owner chain</h3><p>{' ← '.join(links)} ({stack})</p>"


def _findings(found: Sequence[Finding]) -> str:
    if not found:
        return "<h3>Findings</h3><p>No finding on this object.</p>"
    lines = ["<h3>Findings</h3>", row("th", ["Type", "Severity", "Message", "Root cause"])]
    for f in found:
        cause = f.root_cause or f.id
        card = f'<a href="/#{root_card_id(cause)}">{escape(cause)}</a>'
        lines.append(row("td", [str(f.type), str(f.severity), f.message, None], raw={3: card}))
    return "".join([*lines, "</table>"])


def _events(key: Key, around: Snapshot, *, now: datetime) -> str:
    about = []
    for group, kind in EVENT_KINDS:
        for event_key in around.keys(group, kind):
            event = around.get(event_key)
            subject = involved_subject(event) if event is not None else None
            if event is not None and subject is not None and _same(subject, key):
                about.append((event_window(event), event))
    if not about:
        return "<h3>Events</h3><p>No Event about this object (Events expire after an hour by default).</p>"
    about.sort(key=lambda pair: pair[0][2] or datetime.min.replace(tzinfo=now.tzinfo), reverse=True)
    lines = ["<h3>Events</h3>", row("th", ["Type", "Reason", "Message", "Count", "First", "Last"])]
    for (count, first, last), event in about[:MAX_EVENTS]:
        cells = [
            event.get("type"),
            event.get("reason"),
            event.get("message"),
            str(count),
            since(first, now),
            since(last, now),
        ]
        lines.append(
            row("td", cells, css="bad" if event.get("type") == "Warning" else "", classes={2: "message"})
        )
    lines.append("</table>")
    lines += more(len(about) - MAX_EVENTS, "Events")
    return "".join(lines)


def _commands(key: Key, chain: Sequence[Row]) -> str:
    """What confirms this page from the cluster: describe and events first (they need no
    controller), then the object as stored, then the logs of whoever acts on it."""
    resource = f"{key.kind.lower()}.{key.group}" if key.group else key.kind.lower()
    where = ["-n", key.namespace] if key.namespace else []
    commands = [
        ["kubectl", "describe", resource, key.name, *where],
        ["kubectl", "events", *where, "--for", f"{resource}/{key.name}"],
        ["kubectl", "get", resource, key.name, *where, "-o", "yaml"],
    ]
    own = chain[0] if chain and chain[0].key == key else None
    reconciler = own.reconciler if own is not None else None
    if reconciler is not None and reconciler.workload is not None:
        workload = reconciler.workload
        target = f"{workload['kind'].lower()}/{workload['name']}"
        commands.append(
            ["kubectl", "describe", workload["kind"].lower(), workload["name"], "-n", workload["namespace"]]
        )
        commands.append(["kubectl", "logs", "-n", workload["namespace"], target, "--since=1h"])
    elif key.kind in ("Deployment", "StatefulSet", "DaemonSet"):
        commands.append(
            ["kubectl", "logs", *where, f"{key.kind.lower()}/{key.name}", "--all-containers", "--since=1h"]
        )
    elif key.kind == "Pod":
        commands.append(["kubectl", "logs", *where, key.name, "--all-containers", "--previous"])
    text = "\n".join(shlex.join(c) for c in commands)
    return f'<h3>Confirm it with kubectl</h3><pre class="cmd">{escape(text)}</pre>'
