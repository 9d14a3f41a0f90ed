"""`stalewatch fleet`: the fleet page and `GET /api/v1/fleet`, asked of the store on each request.

  /               the fleet page (watcher.fleet.page); `?name=`, `?namespace=`, `?cluster=`
                  filter it by regular expression (RE2, fully anchored, as PromQL matches).
  /api/v1/fleet   the same fleet as JSON (docs/operations.md#the-fleet-view has the schema).
  /healthz        the process is alive (says nothing of the store: the page does).

Each request runs the fleet's instant queries (queries.py) concurrently, each within the query
timeout; answers for the same filters are reused for a second, so many open pages cost the store
one set of queries. The responses carry the single pane's hardening (watcher.web.server).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import orjson
from aiohttp import web

from watcher.config import setting_duration
from watcher.config_input import shown
from watcher.fleet.model import Fleet, build
from watcher.fleet.page import HEADERS, render_fleet
from watcher.fleet.prom import Credentials, Prometheus
from watcher.fleet.queries import Filters, matrix_query, queries
from watcher.logs import fields, setup_logging
from watcher.model.ingest.objects import format_duration
from watcher.terminal import complain
from watcher.web.server import hardened_app, healthz, parse_listen, start

log = logging.getLogger("stalewatch.fleet")

EXIT_OK, EXIT_BAD_INPUT = 0, 2
MAX_FILTER = 1000
"""Characters in one filter; longer is refused (400) rather than sent to the store."""
REUSE_SECONDS = 1.0
LONGEST_WAIT = timedelta(days=1)
"""--query-timeout and --stale-after are shorter: a day is no wait anyone means."""
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass
class FleetSource:
    """Asks the store for the fleet under some filters; `now` is read here, once per fleet."""

    prometheus: Prometheus
    cluster_label: str
    stale_after: float
    urls: Mapping[str, str]
    reuse: float = REUSE_SECONDS
    """Seconds an answer is served again for the same filters."""
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    """The instant asked about (the benchmark's is its data's last)."""
    _kept: dict[Filters, tuple[float, Fleet]] = field(default_factory=dict)

    async def fleet(self, filters: Filters) -> Fleet:
        kept = self._kept.get(filters)
        if kept is not None and time.monotonic() - kept[0] < self.reuse:
            return kept[1]
        now = self.clock()
        asked = queries(cluster_label=self.cluster_label, filters=filters)
        answered = await asyncio.gather(*(self.prometheus.query(expr, at=now) for expr in asked.values()))
        answers = dict(zip(asked, answered, strict=True))
        rows = answers["matrix_rows"].result
        if rows:
            cells = matrix_query(rows, cluster_label=self.cluster_label, filters=filters)
            answers["matrix"] = await self.prometheus.query(cells, at=now)
        fleet = build(
            answers,
            now=now,
            cluster_label=self.cluster_label,
            prometheus=self.prometheus.url,
            filters=filters,
            stale_after=self.stale_after,
            urls=self.urls,
        )
        for name, error in fleet.errors.items():
            log.warning("query failed", extra=fields(query=name, error=error))
        self._kept = {filters: (time.monotonic(), fleet)}
        return fleet


SOURCE: web.AppKey[FleetSource] = web.AppKey("fleet", FleetSource)


def create_fleet_app(source: FleetSource) -> web.Application:
    app = hardened_app()
    app[SOURCE] = source
    app.router.add_get("/", index)
    app.router.add_get("/api/v1/fleet", document)
    app.router.add_get("/healthz", healthz)
    return app


def filters_of(request: web.Request) -> Filters:
    values = {name: request.query.get(name, "") for name in ("name", "namespace", "cluster")}
    for name, value in values.items():
        if len(value) > MAX_FILTER:
            raise web.HTTPBadRequest(text=f"filter {name} is longer than {MAX_FILTER} characters\n")
    return Filters(**values)


async def index(request: web.Request) -> web.Response:
    fleet = await request.app[SOURCE].fleet(filters_of(request))
    body = await asyncio.to_thread(render_fleet, fleet)
    return web.Response(body=body, content_type="text/html", charset="utf-8", headers=HEADERS)


async def document(request: web.Request) -> web.Response:
    fleet = await request.app[SOURCE].fleet(filters_of(request))
    body = orjson.dumps(fleet.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    return web.Response(body=body, content_type="application/json")


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prometheus",
        required=True,
        metavar="URL",
        help="the query API's base URL (Prometheus, Thanos, Mimir, ...)",
    )
    parser.add_argument(
        "--cluster-label",
        default="cluster",
        metavar="NAME",
        help="the label naming each cluster (default: cluster)",
    )
    parser.add_argument(
        "--listen", default=":8081", metavar="[HOST]:PORT", help="where to serve (default :8081)"
    )
    parser.add_argument(
        "--bearer-token-file", type=Path, metavar="FILE", help="send this token (read per query)"
    )
    parser.add_argument(
        "--basic-auth-user", metavar="USER", help="basic auth user (with --basic-auth-password-file)"
    )
    parser.add_argument("--basic-auth-password-file", type=Path, metavar="FILE", help="basic auth password")
    parser.add_argument(
        "--ca-file", type=Path, metavar="FILE", help="PEM bundle to verify the store's TLS certificate"
    )
    parser.add_argument(
        "--query-timeout",
        default="10s",
        metavar="DURATION",
        help="per query: a duration such as 10s, 1m or 1m30s, or plain seconds (default 10s)",
    )
    parser.add_argument(
        "--stale-after",
        default="2m",
        metavar="DURATION",
        help="a cluster whose last sample is older is unknown: a duration, as above (default 2m)",
    )
    parser.add_argument(
        "--cluster-url",
        action="append",
        default=[],
        metavar="CLUSTER=URL",
        help="link to that cluster's own stalewatch page; listed even when silent (repeatable)",
    )
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


@dataclass(frozen=True)
class Checked:
    """The flags that needed reading, read."""

    credentials: Credentials
    urls: dict[str, str]
    query_timeout: float
    """Seconds."""
    stale_after: float
    """Seconds."""


def duration_flag(flag: str, text: str) -> tuple[float, str]:
    """A duration flag's seconds, spelled as the settings spell durations (watcher.config), and
    its problem ("" when none): more than nothing and less than LONGEST_WAIT."""
    try:
        value = setting_duration(text)
    except ValueError as error:
        return 0.0, f"{flag}: {error}"
    if not timedelta(0) < value < LONGEST_WAIT:
        longest = format_duration(LONGEST_WAIT)
        return 0.0, f"{flag}: expected more than 0s and less than {longest}; got {shown(text)}"
    return value.total_seconds(), ""


def check_arguments(args: argparse.Namespace) -> tuple[Checked, list[str]]:
    """The flags read, and every problem with them, one line each."""
    problems = []
    if not _http_url(args.prometheus):
        problems.append(f"--prometheus {args.prometheus!r}: expected an http:// or https:// URL")
    elif "@" in urlsplit(args.prometheus).netloc:
        problems.append(
            "--prometheus: no credentials in the URL (it is shown on the page); use --basic-auth-user"
        )
    if not _LABEL_NAME.fullmatch(args.cluster_label):
        problems.append(
            f"--cluster-label {args.cluster_label!r}: not a label name (letters, digits, underscores)"
        )
    try:
        parse_listen(args.listen)
    except ValueError as error:
        problems.append(f"--listen: {error}")
    query_timeout, timeout_problem = duration_flag("--query-timeout", args.query_timeout)
    stale_after, stale_problem = duration_flag("--stale-after", args.stale_after)
    problems += [problem for problem in (timeout_problem, stale_problem) if problem]
    urls = {}
    for pair in args.cluster_url:
        name, sep, url = pair.partition("=")
        if not sep or not _http_url(url):
            problems.append(f"--cluster-url {pair!r}: expected CLUSTER=http(s)://...")
        urls[name] = url
    credentials = Credentials(
        bearer_token_file=args.bearer_token_file,
        basic_auth_user=args.basic_auth_user,
        basic_auth_password_file=args.basic_auth_password_file,
        ca_file=args.ca_file,
    )
    return Checked(credentials, urls, query_timeout, stale_after), problems + credentials.check()


def _http_url(text: str) -> bool:
    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def fleet_command(args: argparse.Namespace) -> int:
    """0 after a clean shutdown; 2 for bad flags (each problem one line) or an address in use."""
    checked, problems = check_arguments(args)
    for problem in problems:
        complain(f"stalewatch fleet: {problem}")
    if problems:
        return EXIT_BAD_INPUT
    setup_logging(level=args.log_level)
    return asyncio.run(_serve(args, checked))


async def _serve(args: argparse.Namespace, checked: Checked) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with Prometheus(
        args.prometheus, timeout=checked.query_timeout, credentials=checked.credentials
    ) as prometheus:
        source = FleetSource(prometheus, args.cluster_label, checked.stale_after, checked.urls)
        try:
            runner = await start(create_fleet_app(source), args.listen)
        except OSError as error:
            complain(f"stalewatch fleet: cannot listen on {args.listen}: {error.strerror or error}")
            return EXIT_BAD_INPUT
        log.info("fleet serving", extra=fields(listen=args.listen, prometheus=args.prometheus))
        await stop.wait()
        await runner.cleanup()
    log.info("stopped")
    return EXIT_OK
