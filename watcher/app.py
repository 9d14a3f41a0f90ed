"""Wires the live watcher, the health model and the HTTP renderers for `stalewatch run`.

`add_run_arguments` and `run_command` are what the CLI calls; `Runtime` is the assembled
service (tests start it in-process). Shutdown on SIGTERM/SIGINT: stop the watches, let
in-flight HTTP requests finish, exit 0 within a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
from typing import Any

from aiohttp import web

from watcher.cli_args import add_namespaces_argument
from watcher.config import ConfigError, Settings, build_model_config, load_settings, parse_set_options
from watcher.export.metrics import build_registry
from watcher.export.watcher_metrics import WatcherCollector
from watcher.fleet.prom import Credentials
from watcher.kube.client import KubeConfigError, load_client
from watcher.kube.cluster import ClusterWatcher
from watcher.kube.heartbeat_prometheus import PrometheusReads
from watcher.kube.heartbeats import HeartbeatReader
from watcher.kube.live import LiveModel
from watcher.kube.reflector import WatchOptions
from watcher.logs import fields, get_logger, setup_logging
from watcher.telemetry import Telemetry
from watcher.terminal import complain
from watcher.tracing import TracingUnavailable, configure_tracing
from watcher.web import server
from watcher.web.timeline import TIMELINE

log = get_logger("app")

EXIT_OK = 0
EXIT_BAD_INPUT = 2
STOP_TIMEOUT = 10.0

_FLAGS = ("listen", "kubeconfig", "context", "namespaces", "log_level", "log_format", "heartbeat_prometheus")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The `stalewatch run` flags; each maps onto the setting of the same name. --config and
    --set come from the CLI's shared settings options (read with getattr when absent)."""
    group = parser.add_argument_group("run")
    group.add_argument("--listen", metavar="[HOST]:PORT", help="HTTP address (default :8080)")
    group.add_argument(
        "--kubeconfig", metavar="FILE", help="default $KUBECONFIG, else ~/.kube/config, else in-cluster"
    )
    group.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")
    add_namespaces_argument(group)
    group.add_argument("--log-level", choices=("debug", "info", "warning", "error"), help="default info")
    group.add_argument("--log-format", choices=("json", "text"), help="default json: one object per line")
    group.add_argument(
        "--prometheus",
        dest="heartbeat_prometheus",
        metavar="URL",
        help="read controllers' heartbeats through this Prometheus query API, not from their Pods",
    )


def run_command(args: argparse.Namespace) -> int:
    """`stalewatch run`: 0 after a clean shutdown, 2 for bad configuration or credentials."""
    try:
        settings = load_settings(config_file=getattr(args, "config", None), overrides=_overrides(args))
    except ConfigError as error:
        for line in error.lines:
            complain(line)
        return EXIT_BAD_INPUT
    if settings.heartbeat_prometheus and settings.heartbeat_interval:
        problems = _credentials(settings).check()
        for line in problems:  # fleet's check names its flags: these are settings here
            complain("config: " + re.sub(r"--([a-z-]+)", _credential_setting, line))
        if problems:
            return EXIT_BAD_INPUT
    setup_logging(level=settings.log_level, fmt=settings.log_format)
    try:
        provider = configure_tracing(settings.otel_exporter)
    except TracingUnavailable as error:
        complain(f"stalewatch: {error}")
        return EXIT_BAD_INPUT
    try:
        return asyncio.run(serve(settings))
    finally:
        if provider is not None:
            provider.shutdown()  # flushes the spans still batched


def _credentials(settings: Settings) -> Credentials:
    return Credentials(
        bearer_token_file=settings.heartbeat_prometheus_bearer_token_file,
        basic_auth_user=settings.heartbeat_prometheus_basic_auth_user,
        basic_auth_password_file=settings.heartbeat_prometheus_basic_auth_password_file,
        ca_file=settings.heartbeat_prometheus_ca_file,
    )


def _credential_setting(flag: re.Match[str]) -> str:
    return "heartbeat_prometheus_" + flag[1].replace("-", "_")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides = parse_set_options(getattr(args, "assignments", None) or [])
    for name in _FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return overrides


class Runtime:
    """The assembled service: watches -> live model -> HTTP. Start, then stop, once."""

    def __init__(
        self,
        settings: Settings,
        api: Any,
        *,
        options: WatchOptions | None = None,
        debounce: float = 0.0,
        tick: float = 1.0,
    ) -> None:
        config = build_model_config(settings)
        self.settings = settings
        self.telemetry = Telemetry(scope=settings.scope())
        self.live = LiveModel(
            config, self.telemetry, debounce=debounce, tick=tick, timeline_entries=settings.timeline_entries
        )
        self.watcher = ClusterWatcher(
            api,
            self.live,
            self.telemetry,
            controllers=config.controllers,
            extra_kinds=settings.watched_kinds(),
            keep_namespace=settings.watches_namespace,
            options=options,
            listed_limit=settings.listed_kinds_limit,
            namespaces=settings.namespaces,
        )
        self.live.on_listed = self.watcher.list_kinds
        registry = build_registry(lambda: self.live.latest)
        registry.register(WatcherCollector(self.telemetry))
        self.app = server.create_app(
            telemetry=self.telemetry,
            source=lambda: self.live.latest,
            registry=registry,
            published=self.live.published,
            model=self.live.model,
        )
        self.app[TIMELINE] = self.live.timeline
        self._runner: web.AppRunner | None = None
        self._evaluator: asyncio.Task[None] | None = None
        interval = settings.heartbeat_interval.total_seconds()
        timeout = settings.heartbeat_timeout.total_seconds()
        prometheus = (
            PrometheusReads(
                settings.heartbeat_prometheus,
                timeout=timeout,
                stale_after=config.thresholds.heartbeat_stale_after.total_seconds(),
                credentials=_credentials(settings),
                selectors=settings.heartbeat_selectors(),
            )
            if settings.heartbeat_prometheus
            else None
        )
        self.heartbeats = (
            HeartbeatReader(
                self.live.model.metrics_targets,
                self.live.heartbeat,
                self.telemetry,
                interval=interval,
                timeout=timeout,
                concurrency=settings.heartbeat_concurrency,
                ready=lambda: self.telemetry.synced,
                prometheus=prometheus,
            )
            if interval
            else None
        )
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """HTTP first (so probes answer, not ready), then the watches and the evaluation loop."""
        self._runner = await server.start(self.app, self.settings.listen)
        await self.watcher.start()
        self._evaluator = asyncio.create_task(self.live.run(), name="stalewatch evaluation")
        if self.heartbeats is not None:
            self._reader = asyncio.create_task(self.heartbeats.run(), name="stalewatch heartbeats")

    async def stop(self) -> None:
        await self.watcher.stop()
        for task in (self._reader, self._evaluator):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()


async def serve(settings: Settings) -> int:
    """Run until SIGTERM or SIGINT."""
    try:
        api = await load_client(kubeconfig=settings.kubeconfig, context=settings.context)
    except KubeConfigError as error:
        log.error("cannot load Kubernetes credentials", extra=fields(error=str(error)))
        complain(f"stalewatch: {error}")
        return EXIT_BAD_INPUT
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with api:
        runtime = Runtime(settings, api)
        try:
            await runtime.start()
        except OSError as error:
            log.error("cannot listen", extra=fields(listen=settings.listen, error=str(error)))
            reason = error.strerror or error
            complain(f"stalewatch: cannot listen on {settings.listen}: {reason}")
            await runtime.stop()
            return EXIT_BAD_INPUT
        scope = runtime.telemetry.scope
        log.info(
            "stalewatch running",
            extra=fields(listen=settings.listen, scope=scope.mode, namespaces=list(scope.namespaces)),
        )
        log.info(scope.said())
        await stop.wait()
        log.info("stopping")
        try:
            await asyncio.wait_for(runtime.stop(), STOP_TIMEOUT)
        except TimeoutError:
            log.warning("shutdown took too long; exiting anyway")
    log.info("stopped")
    return EXIT_OK
