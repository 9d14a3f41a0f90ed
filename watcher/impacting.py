"""`stalewatch impact`: what breaks if an object goes away or stops, from a snapshot or live.

The objects come from the readers `analyze` and `run` use: snapshot files through
watcher.snapshot, or the cluster through one ClusterWatcher that lists the kinds the answer
reads (workloads, CRDs and the custom kinds configured controllers reconcile, plus the
target's own group) and stops once each is listed or forbidden. They go into a graph.Store,
and the pure watcher.model.views.impact walks it; watcher.export.impact prints the result.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from watcher.cli_args import CLUSTER_FLAGS, add_cluster_arguments, positive_duration
from watcher.config import Settings, build_model_config, load_settings, parse_set_options
from watcher.export.impact import render_json, render_text
from watcher.model.ingest.kinds import CRD_GROUP, CRD_KIND
from watcher.model.ingest.objects import describe, format_duration, key_of
from watcher.model.ingest.packed import Packed
from watcher.model.store.graph import Store
from watcher.model.types import ControllerSpec
from watcher.model.views.impact import impact
from watcher.model.views.impact_tree import Outcome, Sight, SnapshotSight
from watcher.model.views.spelling import (
    KNOWN,
    SpellingError,
    crd_kind,
    parse_target,
    resolve_kind,
    spellings,
)
from watcher.terminal import complain, printable, write_stdout

_EXITS: tuple[tuple[int, str], ...] = (
    (0, "nothing depends on it, and every kind the answer needs was looked at"),
    (1, "something depends on it: the tree says what breaks, and why"),
    (2, "bad input: an unknown kind, the object not found, a file unreadable, or the cluster\n"
        "could not be read (kubeconfig, unreachable, the target's kind forbidden); or the answer\n"
        "could not be written in full (a closed pipe, a full disk): never a partial one with 0 or 1"),
    (3, "stalewatch itself failed (a bug: the answer is unknown)"),
    (4, "nothing found depending on it, but a kind the answer needs could not be looked at\n"
        "(not in the snapshot, forbidden): not known to be safe"),
)  # fmt: skip
EXIT_CODES: Mapping[Outcome, int] = {Outcome.NOTHING: 0, Outcome.BREAKS: 1, Outcome.UNKNOWN: 4}
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def _exit_help() -> str:
    """The epilog of `stalewatch impact --help` (docs/impact.md has the same table)."""
    lines = ["exit codes:"]
    for code, meaning in _EXITS:
        first, *more = meaning.split("\n")
        lines += [f"  {code}  {first}", *(f"     {line}" for line in more)]
    return "\n".join(lines) + "\nsee docs/impact.md for what is followed per kind and the JSON document\n"


EXIT_HELP = _exit_help()


def add_impact_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="KIND/[NAMESPACE/]NAME",
        help="e.g. crd/imagepolicies.image.toolkit.fluxcd.io, hr/team-platform/platform-base, "
        "deploy/flux-system/tofu-controller (kinds, plurals, short names, KIND.GROUP)",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="snapshot file or directory, as for analyze; none: read the cluster (--kubeconfig)",
    )
    add_cluster_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=positive_duration,
        default=timedelta(minutes=1),
        metavar="DURATION",
        help="how long listing the cluster may take (default 1m)",
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="report format")


class BadInput(Exception):
    """One line, naming what cannot be used."""


def impact_command(args: argparse.Namespace) -> int:
    live = not args.paths
    if not live and (args.kubeconfig or args.context):
        complain("stalewatch impact: give snapshot PATHs or --kubeconfig/--context, not both")
        return EXIT_BAD_INPUT
    overrides = parse_set_options(args.assignments)
    overrides.update({k: v for k in CLUSTER_FLAGS if (v := getattr(args, k)) is not None})
    settings = load_settings(config_file=args.config, overrides=overrides)
    controllers = build_model_config(settings).controllers
    errors: list[Any] = []
    try:
        if live:
            store, sight = asyncio.run(_listed(settings, controllers, args.target, args.timeout))
            where = "in the cluster"
        else:
            store, sight, errors = _loaded(args.paths, settings)
            where = "in the snapshot"
        for error in errors:
            complain(printable(f"stalewatch: {error}"))
        store.namespaces = frozenset(settings.namespaces)
        target = parse_target(args.target, spellings(_crds(store)))
        if not store.sees(target):
            raise BadInput(
                f"{describe(target)} is outside the namespaces looked at ({settings.scope().said()})"
            )
        if store.get(target) is None:
            why = "" if not live else sight.unseen(target.group, target.kind)
            because = f" ({target.kind}: {why})" if why else ""
            raise BadInput(f"{describe(target)} not found {where}{because}")
        found = impact(target, store, controllers=controllers, sight=sight)
        code = EXIT_BAD_INPUT if errors else EXIT_CODES[found.outcome]
        answer = render_json(found, code=code) if args.output == "json" else render_text(found)
        failed = write_stdout(answer)
        if failed:
            raise BadInput(f"could not write the answer to stdout ({failed}): it is incomplete")
    except (SpellingError, BadInput) as error:
        complain(printable(f"stalewatch impact: {error}"))
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt:
        complain("stalewatch impact: interrupted")
        return EXIT_INTERRUPTED
    return code


def _loaded(paths: Sequence[str], settings: Settings) -> tuple[Store, Sight, list[Any]]:
    from watcher.snapshot import load_snapshot

    snapshot = load_snapshot(paths, keep_namespace=settings.watches_namespace)
    for warning in snapshot.warnings:
        complain(printable(f"stalewatch impact: warning: {warning}"))
    store = Store()
    for obj in snapshot.objects:
        store.put(obj)
    return store, SnapshotSight(store), list(snapshot.errors)


def _crds(store: Store) -> list[Mapping[str, Any]]:
    return [obj for key in store.raw_of_kind(CRD_GROUP, CRD_KIND) if (obj := store.get(key)) is not None]


def target_groups(typed: str) -> tuple[str, ...]:
    """The API group a target names beyond the configured controllers' (its kind's, or, for a
    CRD, the group it serves), so that its objects are listed too."""
    kind, _, rest = typed.partition("/")
    try:
        if resolve_kind(kind, KNOWN).kind == CRD_KIND:
            return (rest.partition(".")[2],) if "." in rest else ()
        return ()
    except SpellingError:
        return (kind.partition(".")[2],) if "." in kind else ()


async def _listed(
    settings: Settings, controllers: Sequence[ControllerSpec], typed: str, patience: timedelta
) -> tuple[Store, Sight]:
    from watcher.kube.client import KubeConfigError, load_client
    from watcher.logs import setup_logging

    setup_logging(level="error", fmt="text", stream=sys.stderr)
    try:
        api = await load_client(kubeconfig=settings.kubeconfig, context=settings.context)
    except KubeConfigError as error:
        raise BadInput(str(error)) from None
    async with api:
        return await list_cluster(api, settings, controllers, target_groups(typed), patience)


async def list_cluster(
    api: Any,
    settings: Settings,
    controllers: Sequence[ControllerSpec],
    groups: Sequence[str],
    patience: timedelta,
) -> tuple[Store, Sight]:
    """One list of each kind the answer reads, through the live watcher's reflectors."""
    from watcher.kube.cluster import ClusterWatcher
    from watcher.kube.resources import BUILT_IN, CRDS
    from watcher.telemetry import Telemetry

    telemetry = Telemetry()
    sink = _Collect()
    extra = tuple(ControllerSpec(name="impact target", groups=(group,)) for group in groups if group)
    wanted = tuple(controllers) + extra
    kinds = [r for r in BUILT_IN if r.kind in ("Deployment", "StatefulSet", "DaemonSet") or r == CRDS]
    watcher = ClusterWatcher(
        api,
        sink,
        telemetry,
        controllers=wanted,
        keep_namespace=settings.watches_namespace,
        built_in=kinds,
        namespaces=settings.namespaces,
    )
    await watcher.start()
    try:
        async with asyncio.timeout(patience.total_seconds()):
            while not _all_listed(telemetry, CRDS.key):
                if telemetry.unauthorized:
                    refused = telemetry.unauthorized
                    raise BadInput(f"the Kubernetes API server refuses the credentials: {refused}")
                sink.changed.clear()
                await sink.changed.wait()
    except TimeoutError:
        if not telemetry.up:
            raise BadInput(
                f"the Kubernetes API server did not answer within {format_duration(patience)}"
            ) from None
    finally:
        await watcher.stop()
    return sink.store, LiveSight(telemetry, sink.store, CRDS.key, patience)


def _all_listed(telemetry: Any, crds: tuple[str, str]) -> bool:
    kinds = dict(telemetry.kinds)
    return crds in kinds and all(s.synced or s.forbidden for s in kinds.values())


class _Collect:
    """The reflectors' Sink: every object into a Store (the same projections)."""

    def __init__(self) -> None:
        self.store = Store()
        self.changed = asyncio.Event()

    def upsert(self, resource: Any, obj: Mapping[str, Any]) -> None:
        if type(obj) is Packed:
            self.store.put_packed(obj)
        else:
            self.store.put(obj)

    def delete(self, resource: Any, obj: dict[str, Any]) -> None:
        self.store.remove(key_of(obj))

    def retain(self, resource: Any, keys: set[tuple[str, str]]) -> None:
        for key in self.store.raw_of_kind(resource.group, resource.kind):
            if (key.namespace, key.name) not in keys:
                self.store.remove(key)

    def notify(self) -> None:
        self.changed.set()


class LiveSight:
    """A cluster looked at a kind it listed, or one it does not serve (no CRD for it)."""

    def __init__(self, telemetry: Any, store: Store, crds: tuple[str, str], timeout: timedelta) -> None:
        self._kinds = dict(telemetry.kinds)
        self._served = {crd_kind(crd) for crd in _crds(store)}
        self._crds, self._timeout = crds, timeout

    def unseen(self, group: str, kind: str) -> str:
        stats = self._kinds.get((group, kind))
        if stats is not None:
            if stats.forbidden:
                return "403 Forbidden: may not list it"
            return "" if stats.synced else f"not listed within {format_duration(self._timeout)}"
        if not group or "." not in group or group.endswith(".k8s.io"):
            return "a built-in kind stalewatch impact does not list"
        crds = self._kinds.get(self._crds)
        if crds is None or not crds.synced:
            return "not known whether it is served: CustomResourceDefinitions could not be listed"
        if (group, kind) in self._served:
            return "served, but not listed: no configured controller reconciles it"
        return ""
