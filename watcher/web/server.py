"""The HTTP face of `stalewatch run`: probes, the findings API and Prometheus metrics.

  /healthz          the process is alive (the event loop answers).
  /readyz           200 once every watched kind finished its initial list and was judged
                    by the evaluation served, the API server is reachable and the last
                    evaluation succeeded; 503 with the reason
                    otherwise. Objects set aside (rejected, malformed) do not make it 503 (the
                    evaluation judged everything else); the 200 body says how many there are.
  /api/v1/findings  the same JSON as `stalewatch analyze --output json` (findings, summary,
                    and the objects set aside under `rejected`), whose summary also says
                    whether the data is live: `up`, `synced`, `stale`, why the last evaluation
                    failed (`evaluation_error`), and the kinds stalewatch cannot see
                    (`forbidden_kinds`), has not listed yet (`unsynced_kinds`) or listed
                    since the evaluation served (`unjudged_kinds`, stale until the next).
  /api/v1/timeline  what changed, newest first (watcher.web.timeline; docs/web.md#timeline).
  /metrics          the model's and the watcher's metrics from one registry.
  /                 the single-pane HTML view of all that (watcher.web.page): root causes,
                    stacks, search (the query string: watcher.web.query), tables.
  /stacks/NS/NAME   one stack's rows; /objects/KIND/NS/NAME (/objects/KIND/NAME when
                    cluster-scoped) one object: conditions, owner chain, findings, Events.
  /api/v1/stream    the page's parts, live, as server-sent events (watcher.web.stream).

It only renders: the evaluation and the telemetry come in, nothing here talks to the cluster.
Rendering runs in a worker thread so a large scrape does not stall the watches.

Every response the application makes, errors (404, 405) included, carries a restrictive CSP,
`nosniff`, `Cache-Control: no-store` (everything here is live state) and a `Server:` header
without versions. Malformed requests (garbage bytes, a bad method, an 8 KB request line) are
what any port open to a network receives: aiohttp answers them 400 and we log them at debug,
one line without a traceback, so nobody can flood the log by sending them.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web, web_response
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client.registry import CollectorRegistry

from watcher.export.metrics import render
from watcher.export.report import summary
from watcher.generations import Generations
from watcher.model.evaluation import Evaluation
from watcher.model.types import Finding
from watcher.telemetry import Telemetry
from watcher.web import stream, timeline
from watcher.web.objects import around_kinds, kind_key, not_found, object_parts, unknown
from watcher.web.page import (
    SECURITY_HEADERS,
    STATIC_HEADERS,
    PageState,
    found,
    page_parts,
    render_object,
    render_page,
    stack_key,
)
from watcher.web.query import parse_query
from watcher.web.stacks import Model, StacksCache

EvaluationSource = Callable[[], Evaluation | None]

TELEMETRY: web.AppKey[Telemetry] = web.AppKey("telemetry", Telemetry)
SOURCE: web.AppKey[EvaluationSource] = web.AppKey("source")
REGISTRY: web.AppKey[CollectorRegistry] = web.AppKey("registry", CollectorRegistry)


class DocumentCache:
    """The last /api/v1/findings body, served again while its inputs are the same.

    An evaluation is immutable once served, and clients poll this endpoint far more often than
    evaluations happen: during an incident with thousands of findings, building the document
    for every poll (in a thread, but holding the GIL) slowed the evaluations it waits for.
    """

    def __init__(self) -> None:
        self._evaluation: Evaluation | None = None
        self._inputs: tuple[Any, ...] = ()
        self._body = b""
        self.fragments: Fragments = {}
        """Each finding of the last document as written in it (findings_document)."""

    def body(self, evaluation: Evaluation | None, inputs: tuple[Any, ...]) -> bytes | None:
        if evaluation is not None and evaluation is self._evaluation and inputs == self._inputs:
            return self._body
        return None

    def keep(self, evaluation: Evaluation | None, inputs: tuple[Any, ...], body: bytes) -> None:
        self._evaluation, self._inputs, self._body = evaluation, inputs, body


DOCUMENTS: web.AppKey[DocumentCache] = web.AppKey("documents", DocumentCache)
STACKS: web.AppKey[StacksCache | None] = web.AppKey("stacks")

EVERY_RESPONSE: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
"""Headers of every response; the page's own (SECURITY_HEADERS: its stylesheet's CSP) win."""

web_response.SERVER_SOFTWARE = "stalewatch"  # type: ignore[attr-defined]
"""aiohttp writes this `Server:` into every response it prepares, its own 400s for malformed
requests included (those never reach an application hook); its default names the Python and
aiohttp versions to anyone who connects."""


async def _harden(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in EVERY_RESPONSE.items():
        response.headers.setdefault(name, value)


class ProtocolLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger, with malformed requests (HttpProcessingError: BadHttpMessage,
    LineTooLong, BadHttpMethod, ...) demoted to one debug line naming the error, no traceback."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger("aiohttp.server"), {})

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self.debug(msg, *args, exc_info=exc_info, **kwargs)
        else:
            super().exception(msg, *args, exc_info=exc_info, **kwargs)

    def debug(self, msg: object, *args: object, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            msg, args = f"{msg}: malformed request: %s", (*args, _one_line(exc_info))
            exc_info = None
        super().debug(msg, *args, exc_info=exc_info, **kwargs)


def _one_line(error: HttpProcessingError) -> str:
    return f"{type(error).__name__} {error.code}: {' '.join(str(error.message).split())[:200]}"


_LISTEN = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]\s]*):(?P<port>\d{1,5})")


def hardened_app() -> web.Application:
    """An application whose every response carries EVERY_RESPONSE (the fleet's too)."""
    app = web.Application()
    app.on_response_prepare.append(_harden)
    return app


def create_app(
    *,
    telemetry: Telemetry,
    source: EvaluationSource,
    registry: CollectorRegistry,
    published: Generations | None = None,
    model: Model | None = None,
) -> web.Application:
    """`source` returns the evaluation to serve (None before the first one); `published` is
    bumped with each new one (the live model's), which the stream waits on; without it the
    stream serves the one evaluation there is, and heartbeats. `model` is the live model the
    evaluations come from, whose objects the stacks and object pages read (without one they
    say they cannot)."""
    app = hardened_app()
    app[TELEMETRY], app[SOURCE], app[REGISTRY] = telemetry, source, registry
    app[DOCUMENTS] = DocumentCache()
    app[STACKS] = StacksCache(model) if model is not None else None
    stream.install(
        app,
        stream.StreamHub(
            state=lambda: page_state(app),
            view=lambda request: parse_query(request.query),
            parts=lambda state, query: page_parts(state, query, now=datetime.now(UTC)),
            published=published or Generations(),
        ),
    )
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/api/v1/findings", findings)
    app.router.add_get("/api/v1/timeline", timeline.timeline)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", index)
    app.router.add_get("/stacks/{namespace}/{name}", stack)
    app.router.add_get("/objects/{kind}/{namespace}/{name}", object_page)
    app.router.add_get("/objects/{kind}/{name}", object_page)
    return app


def parse_listen(listen: str) -> tuple[str | None, int]:
    """ ":8080" -> (None, 8080) (every interface), "[::1]:9090" -> ("::1", 9090)."""
    match = _LISTEN.fullmatch(listen)
    if match is None:
        raise ValueError(f"listen address {listen!r} is not [HOST]:PORT")
    host = match["host"].strip("[]") or None
    return host, int(match["port"])


async def start(app: web.Application, listen: str) -> web.AppRunner:
    """Serve `app` on `listen`; the caller awaits runner.cleanup() to stop."""
    host, port = parse_listen(listen)
    runner = web.AppRunner(
        app, access_log=None, handle_signals=False, shutdown_timeout=2.0, logger=ProtocolLog()
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    telemetry, evaluation = request.app[TELEMETRY], request.app[SOURCE]()
    ready, why = telemetry.ready()
    unjudged = _unjudged(telemetry, evaluation)
    if ready and unjudged:
        ready, why = False, "initial list finished; the next evaluation judges " + ", ".join(unjudged)
    pending = telemetry.listed_pending(evaluation.unread) if evaluation is not None else []
    if ready and pending:
        ready, why = (
            False,
            "inventories list kinds not read yet (their watch is starting): " + ", ".join(pending),
        )
    set_aside = telemetry.set_aside()
    if ready and set_aside:
        why += f"; {set_aside} set aside (rejected or malformed, see /api/v1/findings)"
    if telemetry.scope.namespaces:  # what it cannot see is not a healthy nothing
        why += f"; {telemetry.scope_said()}"
    return web.Response(text=f"{why}\n", status=200 if ready else 503)


async def findings(request: web.Request) -> web.Response:
    telemetry, evaluation = request.app[TELEMETRY], request.app[SOURCE]()
    counts = {"objects": telemetry.objects(), "load_errors": _load_errors(telemetry, evaluation)}
    status, cache = watch_status(telemetry, evaluation), request.app[DOCUMENTS]
    inputs = (orjson.dumps(status), counts["objects"], counts["load_errors"])
    body = cache.body(evaluation, inputs)
    if body is None:
        fragments: Fragments = {}
        body = await asyncio.to_thread(
            findings_document, evaluation, status, **counts, kept=cache.fragments, written=fragments
        )
        cache.keep(evaluation, inputs, body)
        cache.fragments = fragments
    return web.Response(body=body, content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    body, content_type = await asyncio.to_thread(
        render, request.app[REGISTRY], accept=request.headers.get("Accept")
    )
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response


async def index(request: web.Request) -> web.Response:
    state, query = page_state(request.app), parse_query(request.query)
    body = await asyncio.to_thread(render_page, state, query, now=datetime.now(UTC))
    return _html(body)


async def stack(request: web.Request) -> web.Response:
    """/stacks/NS/NAME: one stack's rows (404 when no root Kustomization has that name)."""
    root = stack_key(request.match_info["namespace"], request.match_info["name"])
    state, query = page_state(request.app), replace(parse_query(request.query), stack=root)

    def render() -> tuple[bool, bytes]:
        return found(state, query), render_page(state, query, now=datetime.now(UTC))

    exists, body = await asyncio.to_thread(render)
    return _html(body, status=200 if exists else 404, headers=STATIC_HEADERS)


async def object_page(request: web.Request) -> web.Response:
    """/objects/KIND/NS/NAME, /objects/KIND/NAME (cluster-scoped): one object (404 when unknown,
    503 while there is nothing to look in yet)."""
    kind, name = request.match_info["kind"], request.match_info["name"]
    namespace = request.match_info.get("namespace", "")
    key, state = kind_key(kind, namespace, name), page_state(request.app)
    cache = request.app[STACKS]
    around = cache.model.snapshot(around_kinds(key), namespace=namespace) if key and cache else None
    now = datetime.now(UTC)

    def render() -> tuple[int, bytes]:
        if cache is None or state.evaluation is None:  # nothing to look in: not "not found"
            why = "no live model behind this page" if cache is None else "no evaluation yet"
            return 503, render_object(state, [unknown(why)], title=name, now=now)
        parts = []
        if key is not None and around is not None:
            forest = state.stacks.forest() if state.stacks is not None else None
            parts = object_parts(key, around, forest, state.evaluation, now=now)
        status = 200 if parts else 404
        if not parts:
            visible = around is None or around.visible(kind)
            parts = [not_found(key, kind, namespace, name, visible=visible)]
        title = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        return status, render_object(state, parts, title=title, now=now)

    status, body = await asyncio.to_thread(render)
    return _html(body, status=status, headers=STATIC_HEADERS)


def _html(body: bytes, *, status: int = 200, headers: Mapping[str, str] = SECURITY_HEADERS) -> web.Response:
    return web.Response(body=body, status=status, content_type="text/html", charset="utf-8", headers=headers)


def page_state(app: web.Application) -> PageState:
    """What the page shows, taken on the event loop (consistent with the watches) for a
    renderer to use in a worker thread: the page and the stream both start here."""
    telemetry, evaluation, cache = app[TELEMETRY], app[SOURCE](), app[STACKS]
    return PageState(
        evaluation,
        watch_status(telemetry, evaluation),
        objects=telemetry.objects(),
        load_errors=_load_errors(telemetry, evaluation),
        stacks=cache.current(evaluation) if cache is not None else None,
        changes=timeline.snapshot_of(app),
    )


def _load_errors(telemetry: Telemetry, evaluation: Evaluation | None) -> int:
    """Counted with the `rejected` list the same answer shows (Evaluation.unreadable), so a
    malformed object read since the last evaluation is counted and listed together; before the
    first evaluation, as the reflectors count now."""
    return telemetry.malformed_now() if evaluation is None else evaluation.unreadable


def _unjudged(telemetry: Telemetry, evaluation: Evaluation | None) -> list[str]:
    return telemetry.unjudged(None if evaluation is None else evaluation.blind)


def watch_status(telemetry: Telemetry, evaluation: Evaluation | None) -> dict[str, Any]:
    """The watcher's part of the summary, taken on the event loop so it is consistent, and
    told against the `evaluation` served with it: a kind listed since that evaluation was made
    is `unjudged_kinds`, and the answer stale until the next one judges it."""
    unjudged = _unjudged(telemetry, evaluation)
    pending = telemetry.listed_pending(evaluation.unread) if evaluation is not None else []
    return {
        "up": telemetry.up,
        "synced": telemetry.synced,
        "stale": telemetry.stale or bool(unjudged) or bool(pending),
        "evaluation_error": telemetry.evaluation_error,
        "forbidden_kinds": [{"group": g, "kind": k} for g, k in telemetry.forbidden()],
        "unsynced_kinds": telemetry.unsynced(),
        "unjudged_kinds": unjudged,
        "unauthorized": telemetry.unauthorized,
        "scope": {
            "mode": telemetry.scope.mode,
            "namespaces": list(telemetry.scope.namespaces),
            "cannot_see": telemetry.unseen(),
            "said": telemetry.scope_said(),
        },
    }


Fragments = dict[int, tuple[Finding, bytes]]
"""A finding as written in a findings document, by the identity of the Finding (kept with it)."""


def findings_document(
    evaluation: Evaluation | None,
    status: dict[str, Any],
    *,
    objects: int,
    load_errors: int,
    kept: Fragments | None = None,
    written: Fragments | None = None,
) -> bytes:
    """`{"findings": [...], "summary": {...}}` as `analyze --output json` writes it, plus the
    watch status. `objects` are those watched; `load_errors` those skipped as malformed.
    Before the first evaluation: no findings, and the summary says stale.

    Each finding is written once while the model hands out the same Finding: `kept` are those of
    the last document, `written` is filled with this one's. During an incident at 200,000 objects
    the findings are tens of thousands and most (satellites) are the same from one evaluation to
    the next; the document is the same bytes orjson writes for it whole."""
    if evaluation is None:
        evaluation = Evaluation(datetime.now(UTC), [], [], [], [])
    rest = {
        "summary": {**summary(evaluation, objects=objects, load_errors=load_errors), **status},
        "rejected": [rejection.to_dict() for rejection in evaluation.rejected],
    }
    if not evaluation.findings:
        return orjson.dumps({"findings": [], **rest}, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    kept = kept or {}
    written = {} if written is None else written
    parts = []
    for finding in evaluation.findings:
        found = kept.get(id(finding))
        if found is None or found[0] is not finding:
            found = (
                finding,
                _INDENT
                + orjson.dumps(finding.to_dict(), option=orjson.OPT_INDENT_2).replace(b"\n", _NEWLINE),
            )
        written[id(finding)] = found
        parts.append(found[1])
    tail = orjson.dumps(rest, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    return b'{\n  "findings": [\n' + b",\n".join(parts) + b"\n  ],\n" + tail[2:]


_INDENT, _NEWLINE = b"    ", b"\n    "
"""A finding's place in the document: the second level of its indentation (OPT_INDENT_2)."""
