"""`stalewatch wait`: the second line after a GitOps push. Watches the stack live and exits
with what it became: converged, failed, stale, timed out, or that it could not look.

The watching is `stalewatch run`'s own: one ClusterWatcher (a list + watch per kind, no
polling) feeds the live model, and a graph.Store of the same projections answers what the
verdict reads (inventories, releases, Pods). After every evaluation (paced by its cost) and every
tick (thresholds, --grace, the deadline) the pure watcher.model.views.convergence.judge decides; the
first outcome that is not WAITING ends the wait. Progress goes to stderr when the picture
changes; the verdict to stdout (text, or one JSON document with -o json, see docs/wait.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from watcher.cli_args import CLUSTER_FLAGS, add_cluster_arguments, positive_duration
from watcher.config import ConfigError, Settings, build_model_config, load_settings, parse_set_options
from watcher.export.wait import progress_line, render_json, render_text
from watcher.kube.client import KubeConfigError, get, load_client
from watcher.kube.cluster import ClusterWatcher
from watcher.kube.live import LiveModel
from watcher.kube.reflector import WatchOptions
from watcher.kube.resources import CRDS, Resource
from watcher.logs import setup_logging
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.kinds import KINDS, Judge
from watcher.model.ingest.objects import key_of
from watcher.model.ingest.packed import Packed
from watcher.model.store.graph import Store
from watcher.model.views.convergence import (
    CONFIRM_WITHIN,
    Blind,
    Outcome,
    Verdict,
    default_revision,
    judge,
)
from watcher.model.views.targets import Target, TargetError, check_revision, parse_target
from watcher.telemetry import Telemetry, kind_name
from watcher.terminal import complain, write_stdout

_EXITS: tuple[tuple[Outcome, int, str], ...] = (
    (Outcome.CONVERGED, 0, "the targets and everything under them are Current, observed, at the revision"),
    (Outcome.FAILED, 1, "a root cause waiting will not fix (printed with its blast radius)"),
    (
        Outcome.CANNOT_WAIT,
        2,
        "bad input, a target not found, the API server unreachable or a needed kind\n"
        "forbidden for longer than --blind-timeout or at the deadline, or the verdict could\n"
        "not be written in full (a closed pipe, a full disk)",
    ),
    (Outcome.TIMED_OUT, 3, "printed with what is still in progress under the targets, and why"),
    (
        Outcome.STALE,
        4,
        "a controller the targets depend on is down or stuck (up, reconciling nothing), or\n"
        "an object under them is not reconciled, so their status cannot change",
    ),
)
EXIT_CODES: Mapping[Outcome, int] = {outcome: code for outcome, code, _ in _EXITS}


def _exit_help() -> str:
    """The epilog of `stalewatch wait --help`, from _EXITS (docs/wait.md has the same table)."""
    lines = ["exit codes:"]
    for outcome, code, meaning in _EXITS:
        first, *more = meaning.split("\n")
        lines.append(f"  {code}  {str(outcome).replace('_', ' ')}: {first}")
        lines += [f"     {line}" for line in more]
    lines.append("see docs/wait.md for the JSON document of -o json and CI examples")
    return "\n".join(lines) + "\n"


EXIT_HELP = _exit_help()
EXIT_CANNOT_WAIT = EXIT_CODES[Outcome.CANNOT_WAIT]
"""Also bad input, and a stalewatch bug: it could not wait, so the answer is unknown."""
EXIT_INTERRUPTED = 130


NEEDED = frozenset(k.key for k in KINDS if k.judge is not Judge.EVENT)
"""The kinds a verdict reads (workloads, Pods, Leases, CRDs, Flux and Terraform objects): while
one is unreachable, forbidden or not listed the wait is blind. Other watched kinds (Events for
RetryLoop, notification and image automation objects) are judged when visible, never needed."""
_MODEL_ONLY = frozenset({"Event", "Lease", "CustomResourceDefinition"})
"""Kinds the verdict never reads; only the model keeps them."""
DEBOUNCE = 0.05
TICK = 0.25


def add_wait_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets", nargs="+", metavar="KIND/NAMESPACE/NAME", help="e.g. ks/flux-system/apps, hr/apps/podinfo"
    )
    parser.add_argument(
        "--revision",
        metavar="REV",
        help="main@sha1:<sha>, a full SHA or digest, or a chart version "
        "(default: each target's source's artifact revision, read at start)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_duration,
        default=timedelta(minutes=5),
        metavar="DURATION",
        help="give up (exit 3) after this long (default 5m)",
    )
    parser.add_argument(
        "--grace",
        type=positive_duration,
        default=timedelta(minutes=1),
        metavar="DURATION",
        help="how long a Pod may be in ImagePullBackOff, CrashLoopBackOff, ... counted "
        "from the state's own start (default 1m)",
    )
    parser.add_argument(
        "--blind-timeout",
        type=positive_duration,
        default=timedelta(seconds=30),
        metavar="DURATION",
        help="how long the API server may be unreachable or a needed kind forbidden "
        "before exit 2 (default 30s)",
    )
    add_cluster_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="json: quiet, one document at the end",
    )


def wait_command(args: argparse.Namespace) -> int:
    try:
        revision = check_revision(args.revision) if args.revision is not None else ""
        targets = [parse_target(t, revision=revision) for t in args.targets]
    except TargetError as error:
        complain(f"stalewatch wait: {error}")
        return EXIT_CANNOT_WAIT
    overrides = parse_set_options(args.assignments)
    overrides.update({k: v for k in CLUSTER_FLAGS if (v := getattr(args, k)) is not None})
    try:
        settings = load_settings(config_file=args.config, overrides=overrides)
    except ConfigError as error:
        for line in error.lines:
            complain(line)
        return EXIT_CANNOT_WAIT
    for target in targets:
        if not settings.watches_namespace(target.key.namespace):  # never "not found": not looked at
            complain(
                f"stalewatch wait: {target} is outside the namespaces watched ({settings.scope().said()})"
            )
            return EXIT_CANNOT_WAIT
    setup_logging(level="error", fmt="text", stream=sys.stderr)
    limits = Limits(timeout=args.timeout, grace=args.grace, blind=args.blind_timeout)
    try:
        return asyncio.run(_main(settings, targets, limits, json=args.output == "json"))
    except KeyboardInterrupt:
        complain("stalewatch wait: interrupted")
        return EXIT_INTERRUPTED


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    timeout: timedelta
    grace: timedelta
    blind: timedelta


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    verdict: Verdict
    targets: list[Target]
    """With the revision each waited for (a default one resolved)."""
    started: datetime


async def _main(settings: Settings, targets: list[Target], limits: Limits, *, json: bool) -> int:
    try:
        api = await load_client(kubeconfig=settings.kubeconfig, context=settings.context)
    except KubeConfigError as error:
        complain(f"stalewatch wait: {error}")
        return EXIT_CANNOT_WAIT
    async with api:
        progress = None if json else complain
        result = await wait_for(settings, api, targets, limits, progress=progress)
    now, verdict = datetime.now(UTC), result.verdict
    code = EXIT_CODES[verdict.outcome]
    if json:
        answer = render_json(verdict, result.targets, started=result.started, now=now, code=code)
    else:
        answer = render_text(verdict, now=now)
    failed = write_stdout(answer)
    if failed:
        complain(f"stalewatch wait: could not write the verdict to stdout ({failed}): it is incomplete")
        return EXIT_CANNOT_WAIT
    return code


class WaitSink:
    """The reflectors' Sink: every change to the live model, and the kinds the verdict reads
    to a Store of its own (the same projections: nothing is copied)."""

    def __init__(self, live: LiveModel) -> None:
        self.live = live
        self.store = Store()
        self.changed = asyncio.Event()

    def upsert(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        self.live.upsert(resource, obj)
        if resource.kind not in _MODEL_ONLY:
            if type(obj) is Packed:
                self.store.put_packed(obj)
            else:
                self.store.put(obj)
        self.changed.set()

    def delete(self, resource: Resource, obj: dict[str, Any]) -> None:
        self.live.delete(resource, obj)
        self.store.remove(key_of(obj))
        self.changed.set()

    def retain(self, resource: Resource, keys: set[tuple[str, str]]) -> None:
        self.live.retain(resource, keys)
        for key in self.store.raw_of_kind(resource.group, resource.kind):
            if (key.namespace, key.name) not in keys:
                self.store.remove(key)
        self.changed.set()

    def notify(self) -> None:
        self.live.notify()
        self.changed.set()


def blindness(telemetry: Telemetry, *, answered: bool) -> str:
    """Why the watcher cannot judge now ("" when it can): the API server reachable and every
    kind the verdict needs listed, live and allowed. `answered`: it has answered before."""
    if not telemetry.up:
        return (
            "the Kubernetes API server is unreachable"
            if answered
            else "connecting to the Kubernetes API server"
        )
    if telemetry.unauthorized:
        return telemetry.unauthorized
    if telemetry.evaluation_error:
        return f"the health model's evaluation fails: {telemetry.evaluation_error}"
    if not telemetry.started:
        return "discovering the kinds to watch"
    needed = {key: s for key, s in list(telemetry.kinds.items()) if key in NEEDED}
    crds = needed.get(CRDS.key)
    if telemetry.scope.namespaces and crds is not None and crds.forbidden:
        del needed[CRDS.key]  # a tenant may read no CRD: its custom kinds come from API discovery
    forbidden = sorted(kind_name(key) for key, s in needed.items() if s.forbidden)
    if forbidden:
        return "403 Forbidden: may not list and watch " + ", ".join(forbidden)
    pending = sorted(kind_name(key) for key, s in needed.items() if not s.synced)
    if pending:
        return "initial list not finished for " + ", ".join(pending)
    broken = sorted(kind_name(key) for key, s in needed.items() if not s.live)
    if broken:
        return "watch broken (reconnecting) for " + ", ".join(broken)
    return ""


def _unserved(telemetry: Telemetry, targets: Sequence[Target]) -> Verdict | None:
    kinds = [t.key for t in targets if (t.key.group, t.key.kind) not in telemetry.kinds]
    if not kinds:
        return None
    names = ", ".join(sorted({f"{k.kind}.{k.group}" for k in kinds}))
    return Verdict(Outcome.CANNOT_WAIT, f"not served by this API server (is its CRD installed?): {names}")


def _unseen_controllers(verdict: Verdict, evaluation: Evaluation | None, *, namespaced: bool) -> Verdict:
    """Namespace mode may not see the controllers (Flux's, in flux-system): a convergence judged
    from the objects' own status alone says so, rather than reading as the full check."""
    if verdict.outcome is not Outcome.CONVERGED or not namespaced or evaluation is None:
        return verdict
    if any(c.up for c in evaluation.controllers):
        return verdict
    said = "; no controller seen (namespace mode): judged from the objects' own status"
    return dataclasses.replace(verdict, message=verdict.message + said)


async def wait_for(
    settings: Settings,
    api: Any,
    targets: list[Target],
    limits: Limits,
    *,
    progress: Callable[[str], None] | None,
    options: WatchOptions | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Result:
    """Watch until the verdict is final."""
    config = build_model_config(settings)
    telemetry = Telemetry(scope=settings.scope())
    live = LiveModel(config, telemetry, clock=clock)
    sink = WaitSink(live)
    sink.store.namespaces = frozenset(settings.namespaces)
    watcher = ClusterWatcher(
        api,
        sink,
        telemetry,
        controllers=config.controllers,
        extra_kinds=settings.watched_kinds(),
        keep_namespace=settings.watches_namespace,
        options=options,
        listed_limit=settings.listed_kinds_limit,
        namespaces=settings.namespaces,
    )
    live.on_listed = watcher.list_kinds  # what the targets applied is judged too
    started = clock()
    deadline, answered, shown = started + limits.timeout, False, ""
    blind_since: datetime | None = started
    asked: asyncio.Task[datetime | None] | None = None

    def verdict_now(now: datetime) -> Verdict:
        nonlocal targets, blind_since, answered
        answered = answered or telemetry.up
        reason = blindness(telemetry, answered=answered)
        blind_since = (blind_since or now) if reason else None
        if not reason and (unserved := _unserved(telemetry, targets)) is not None:
            return unserved
        if not reason:
            sink.store.blind = telemetry.blind()
            targets = [_resolved(t, sink.store) for t in targets]
        evaluation = None if reason else live.evaluate()
        found = judge(
            targets,
            view=sink.store,
            evaluation=evaluation,
            now=now,
            deadline=deadline,
            grace=limits.grace,
            blind=Blind(reason, blind_since) if reason and blind_since is not None else None,
            blind_window=limits.blind,
            served=set(telemetry.kinds),
            forbidden={kind for kind, stats in telemetry.kinds.items() if stats.forbidden},
            heard=asked.result() if asked is not None and asked.done() else None,
        )
        return _unseen_controllers(found, evaluation, namespaced=bool(settings.namespaces))

    await watcher.start()
    try:
        while (verdict := verdict_now(now := clock())).outcome is Outcome.WAITING:
            if now >= deadline and asked is None:
                asked = asyncio.create_task(answered_at(api, clock), name="stalewatch wait: deadline")
            line = progress_line(verdict, now=now)
            if progress is not None and _picture(line) != shown:
                shown = _picture(line)
                progress(line)
            await _next_change(sink.changed)
        return Result(verdict, targets, started)
    finally:
        if asked is not None:
            asked.cancel()
        await watcher.stop()


async def answered_at(api: Any, clock: Callable[[], datetime]) -> datetime | None:
    """When the API server answered a GET /version asked now; None if it did not, within
    CONFIRM_WITHIN (hung, unreachable), or not with 200."""
    patience = CONFIRM_WITHIN.total_seconds()
    try:
        async with asyncio.timeout(patience):
            response = await get(api, "/version", [], limits=aiohttp.ClientTimeout(total=patience))
        response.release()
    except Exception:  # any failure to answer: the judge says blind, never timed out
        return None
    return clock() if response.status == 200 else None  # a 503 or 504: a proxy before a hung one


def _resolved(target: Target, store: Store) -> Target:
    """A target without --revision waits for its source's revision as first seen."""
    if target.revision:
        return target
    return dataclasses.replace(target, revision=default_revision(target, store))


def _picture(line: str) -> str:
    """A progress line without its ages: a new line only when something changed."""
    return "".join(part.split(" (since ")[0] for part in line.split("; "))


async def _next_change(changed: asyncio.Event) -> None:
    try:
        await asyncio.wait_for(changed.wait(), TICK)
        await asyncio.sleep(DEBOUNCE)
    except TimeoutError:
        pass
    changed.clear()
