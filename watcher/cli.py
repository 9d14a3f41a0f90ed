"""The `stalewatch` command line: one small function per subcommand, wiring settings, loaders,
the model and the renderers. `run` is the live watcher in watcher.app (its flags and handler),
`wait` the CI gate in watcher.waiting (its exit codes are its own: see `stalewatch wait --help`;
a stalewatch bug there exits 2, "cannot wait", since 3 means timed out), `impact` the plan
of a deletion in watcher.impacting (its exit codes: `stalewatch impact --help`).

`analyze` exit codes: 0 nothing critical, 1 a critical root cause was found, 2 bad input or
usage (the message says which file, object, flag or setting; never a traceback for a user
mistake), 3 stalewatch itself failed (a bug: the answer is unknown, so it is neither 0 nor 1).
Bad configuration exits 2 for every subcommand. Everything written to stderr goes through
`complain`, which makes it printable (watcher.terminal): file names and object names in it
come from whoever made the snapshot.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn, TextIO

import yaml

from watcher import __version__
from watcher.config import (
    ConfigError,
    Settings,
    build_model_config,
    effective_config,
    load_settings,
    parse_set_options,
    unknown_environment,
)
from watcher.export.report import render_json, render_text
from watcher.inputs import LoadError
from watcher.model.engine import HealthModel
from watcher.model.evaluation import Evaluation
from watcher.model.types import ModelConfig, Severity, rfc3339
from watcher.snapshot import Snapshot, load_snapshot
from watcher.terminal import complain, printable

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

EXIT_OK = 0
EXIT_CRITICAL = 1
EXIT_BAD_INPUT = 2
EXIT_FAILED = 3

EARLIEST_NOW = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_NOW = datetime(9000, 1, 1, tzinfo=UTC)
"""`--now` is bounded so that it plus or minus any threshold (at most Go's longest duration,
about 292 years) stays inside the calendar the model computes in."""


class _Parser(argparse.ArgumentParser):
    """argparse that says a usage error in one printable line, and prints help printable too."""

    def error(self, message: str) -> NoReturn:
        complain(f"{self.prog}: error: {message} (see {self.prog} --help)")
        raise SystemExit(EXIT_BAD_INPUT)

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if message:
            super()._print_message("\n".join(map(printable, message.split("\n"))), file)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; `argv` only decides whether the live watcher's flags are needed (see run)."""
    parser = _Parser(
        prog="stalewatch",
        description="Is the doctor in the building? Correlates GitOps status with controller liveness.",
    )
    parser.add_argument("--version", action="version", version=f"stalewatch {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    settings = _settings_options()

    analyze = commands.add_parser(
        "analyze",
        parents=[settings],
        help="find the root cause in a snapshot of the cluster",
        description="Evaluate objects saved with `kubectl get ... -o yaml|json` and report root causes "
        "with their blast radius. Exit 0: nothing critical; 1: a critical root cause; 2: bad input.",
    )
    analyze.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="file or directory (searched for *.json, *.yaml, *.yml) of kubectl output; - reads stdin",
    )
    analyze.add_argument("-o", "--output", choices=("text", "json"), default="text", help="report format")
    analyze.add_argument(
        "--now",
        type=parse_now,
        metavar="RFC3339",
        help="evaluate as if it were this time, e.g. 2026-11-30T12:00:00Z (default: the current time)",
    )
    analyze.set_defaults(handler=_cmd_analyze)

    run = commands.add_parser(
        "run",
        parents=[settings],
        help="watch the cluster: metrics, alerts, web view and /api/v1/findings",
        description="Watch the cluster read-only and serve the health model over HTTP until stopped.",
    )
    if "run" in argv:  # the live watcher takes seconds to import; analyze should not pay for it
        from watcher.app import add_run_arguments, run_command

        add_run_arguments(run)
        run.set_defaults(handler=run_command)

    wait = commands.add_parser(
        "wait",
        parents=[settings],
        help="wait for a GitOps stack to converge at a revision; fail fast on the root cause",
        description="Watch the targets and everything under them (inventories, HelmRelease\n"
        "workloads, their Pods) until they are Current at the revision; exit with the outcome.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if "wait" in argv:  # like run: the watcher's imports are for the commands that watch
        from watcher.waiting import EXIT_CANNOT_WAIT, EXIT_HELP, add_wait_arguments, wait_command

        add_wait_arguments(wait)
        wait.epilog = EXIT_HELP
        wait.set_defaults(handler=wait_command, internal_error=EXIT_CANNOT_WAIT)

    impact = commands.add_parser(
        "impact",
        parents=[settings],
        help="what breaks if an object goes away or stops: a plan of its deletion",
        description="Follow what depends on one object (a CRD, a HelmRelease or Kustomization, a\n"
        "controller's Deployment, a source) in a snapshot or the cluster, and print it as a tree.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if "impact" in argv:
        from watcher.impacting import EXIT_HELP as IMPACT_EXITS
        from watcher.impacting import add_impact_arguments, impact_command

        add_impact_arguments(impact)
        impact.epilog = IMPACT_EXITS
        impact.set_defaults(handler=impact_command)

    fleet = commands.add_parser(
        "fleet",
        help="serve one page for many clusters, from the Prometheus that holds their series",
        description="Serve the fleet page and /api/v1/fleet from instant queries over every cluster's "
        "stalewatch_* series in Prometheus, Thanos, Mimir, Cortex or VictoriaMetrics.",
    )
    if "fleet" in argv:
        from watcher.fleet.server import add_fleet_arguments, fleet_command

        add_fleet_arguments(fleet)
        fleet.set_defaults(handler=fleet_command)

    config = commands.add_parser("config", help="inspect the configuration")
    config_commands = config.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    show = config_commands.add_parser(
        "show", parents=[settings], help="print the effective configuration as YAML"
    )
    show.set_defaults(handler=_cmd_config_show)
    return parser


def _settings_options() -> _Parser:
    """--config and --set, shared by every subcommand that reads settings."""
    options = _Parser(add_help=False)
    group = options.add_argument_group("configuration (flags > STALEWATCH_* environment > file > defaults)")
    group.add_argument("--config", metavar="FILE", help="YAML configuration file")
    group.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. --set thresholds.revision_skew=5m (repeatable)",
    )
    return options


def parse_now(text: str) -> datetime:
    """An RFC 3339 time with a zone (a bare local time would make the report depend on the
    host), between EARLIEST_NOW and LATEST_NOW."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"expected an RFC 3339 time with a zone, e.g. 2026-11-30T12:00:00Z; got {text!r}"
        )
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is in year 10000 in UTC
        moment = LATEST_NOW
    if not EARLIEST_NOW <= moment < LATEST_NOW:
        raise argparse.ArgumentTypeError(
            f"{text!r} is out of range: expected a time from {EARLIEST_NOW:%Y-%m-%dT%H:%M:%SZ} "
            f"up to {LATEST_NOW:%Y-%m-%dT%H:%M:%SZ}"
        )
    return moment


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse printed help, the version, or a usage error
        return stop.code if isinstance(stop.code, int) else EXIT_BAD_INPUT
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    for warning in unknown_environment(os.environ):
        complain(f"stalewatch: {warning}")
    try:
        code: int = args.handler(args)
        if sys.stdout is not None:  # None: stdout closed (`>&-`), which the handler said
            sys.stdout.flush()
    except ConfigError as error:
        for line in error.lines:
            complain(printable(line))
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `stalewatch analyze ... | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:  # a bug: say so in one line, and never exit 0 or 1 ("critical"; wait: 2)
        where = traceback.extract_tb(error.__traceback__)[-1]
        complain(
            f"stalewatch: internal error, this is a stalewatch bug: {type(error).__name__}: {error} "
            f"(at {os.path.basename(where.filename)}:{where.lineno})"
        )
        return int(getattr(args, "internal_error", EXIT_FAILED))
    return code


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(config_file=args.config, overrides=parse_set_options(args.assignments))


def _cmd_analyze(args: argparse.Namespace) -> int:
    settings = _settings(args)
    now = args.now or datetime.now(UTC)
    config = build_model_config(settings)
    controllers = [spec.name for spec in config.controllers]
    snapshot = load_snapshot(args.paths, keep_namespace=settings.watches_namespace, controllers=controllers)
    evaluation = _evaluate(snapshot, now=now, config=config)
    counts = {"objects": len(snapshot.objects), "load_errors": len(snapshot.errors)}
    if args.output == "json":
        sys.stdout.write(render_json(evaluation, **counts).decode())
    else:
        sys.stdout.write(render_text(evaluation, **counts, color=_wants_color(sys.stdout)))
    for warning in snapshot.warnings:
        complain(printable(f"stalewatch: warning: {warning}"))
    for error in snapshot.errors:
        complain(printable(f"stalewatch: {error}"))
    if snapshot.errors:
        return EXIT_BAD_INPUT
    critical = any(root.severity == Severity.CRITICAL for root in evaluation.roots)
    return EXIT_CRITICAL if critical else EXIT_OK


def _evaluate(snapshot: Snapshot, *, now: datetime, config: ModelConfig) -> Evaluation:
    """The model over the snapshot at `now`: each object's earlier versions before its last, then
    the recorded metrics reads in time order. A read after `now` is not known at `now`: left out,
    and said (a warning)."""
    model = HealthModel(config)
    for obj in [*snapshot.earlier, *snapshot.objects]:
        model.upsert(obj, now=now)
    for read in snapshot.metrics:
        if read.at > now:
            said = f"read at {rfc3339(read.at)}, after the moment evaluated ({rfc3339(now)}); not used"
            snapshot.warnings.append(LoadError(read.source, said))
            continue
        model.heartbeat(read.controller, at=read.at, read=read.read)
    return model.evaluate(now)


def _cmd_config_show(args: argparse.Namespace) -> int:
    sys.stdout.write(yaml.safe_dump(effective_config(_settings(args)), sort_keys=False))
    return EXIT_OK


def _wants_color(stream: TextIO) -> bool:
    """Colour for a terminal only, and never when NO_COLOR is set (https://no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")
