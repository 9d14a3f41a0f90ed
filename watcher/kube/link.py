"""Whether the API server answers and accepts us, as one fact for the whole cluster connection.

Every reflector reports what its requests met and the probe asks on its own schedule; the Link
keeps telemetry's `up`/`unauthorized`, tells the supervisor when reachability changes, and logs an
outage once rather than once per watched kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from watcher.kube.client import describe_error
from watcher.logs import fields, get_logger
from watcher.telemetry import Telemetry

log = get_logger("kube")

SAID_BY_LINK = frozenset({"connection_error", "unauthorized"})
"""Request failures the Link logs itself (at the first, then once a minute / once), not per request."""


class Link:
    """API-server reachability and acceptance, fed by every request a reflector or the probe opens.

    Only failing to connect (or to get an answer in time) counts as unreachable; a connection
    reset or a watch stream cut midway (a proxy, a server closing long requests) is that
    request's problem, not an outage. The log says so at the first failure (also when the
    server was never reached), then once every `repeat` seconds while it lasts, and once when
    it answers again; a 401 (credentials rejected) is logged once until a request is accepted.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        on_change: Callable[[bool], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        repeat: float = 60.0,
    ) -> None:
        self._telemetry = telemetry
        self._on_change = on_change
        self._clock, self._repeat = clock, repeat
        self._down_since: float | None = None
        self._said_at = 0.0

    def reached(self) -> None:
        if self._down_since is not None:
            log.info(
                "API server reachable again",
                extra=fields(unreachable_seconds=round(self._clock() - self._down_since)),
            )
            self._down_since = None
        elif not self._telemetry.up:
            log.info("API server reachable")
        if not self._telemetry.up:
            self._telemetry.up = True
            self._on_change(True)

    def lost(self, error: BaseException) -> None:
        now = self._clock()
        if self._down_since is None:
            self._down_since = self._said_at = now
            log.warning("API server unreachable", extra=fields(error=describe_error(error)))
        elif now - self._said_at >= self._repeat:
            self._said_at = now
            log.warning(
                "API server still unreachable",
                extra=fields(error=describe_error(error), unreachable_seconds=round(now - self._down_since)),
            )
        if self._telemetry.up:
            self._telemetry.up = False
            self._on_change(False)

    def rejected(self, message: str) -> None:
        """The API server answered 401: it does not accept our credentials."""
        if not self._telemetry.unauthorized:
            log.error(
                "the API server rejects stalewatch's credentials (401 Unauthorized): check the "
                "kubeconfig user or the ServiceAccount token",
                extra=fields(error=message),
            )
        self._telemetry.unauthorized = (
            f"401 Unauthorized: the API server rejects stalewatch's credentials ({message})"
        )

    def accepted(self) -> None:
        if self._telemetry.unauthorized:
            self._telemetry.unauthorized = ""
            log.info("the API server accepts stalewatch's credentials again")
