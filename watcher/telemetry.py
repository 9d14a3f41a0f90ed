"""What the watcher knows about itself: reachability, sync state and counters per watched kind.

A neutral module: the kube layer writes it, the exporters and the web server read it, and
neither has to import the other. Plain Python values only (no prometheus_client objects), so
the metrics collector renders a consistent view at scrape time and a kind that stops being
watched (its CRD was deleted) simply disappears from every gauge.

Only the event-loop thread writes; readers in other threads (the /metrics renderer) copy the
small dicts first, which is atomic under the GIL.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from watcher.model.types import Rejection, RejectReason

KindKey = tuple[str, str]
"""(group, kind); the core group is "" (never "core")."""

EVALUATION_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip


REQUEST_RESULTS = (
    "ok", "forbidden", "not_found", "gone", "throttled", "server_error", "client_error", "connection_error",
)  # fmt: skip
"""`result` of a list or watch request (see watcher.kube.client.classify)."""
RELIST_REASONS = ("initial", "gone", "forbidden")
WATCH_ERROR_REASONS = (
    "connection", "timeout", "decode", "not_found", "throttled", "server_error", "client_error",
)  # fmt: skip
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
REJECT_REASONS = tuple(str(reason) for reason in RejectReason)
"""`reason` of stalewatch_objects_rejected (Malformed is counted by the reflector, the rest by the model)."""

HEARTBEAT_RESULTS = (
    "ok", "no_endpoint", "unreachable", "timeout", "http_error", "too_large", "unparsable",
    "prometheus_error", "not_scraped", "stale",
)  # fmt: skip
"""`result` of a read of a controller's /metrics (kube/heartbeats.py): ok, or why it was unknown."""

UNREADABLE_LISTED = 1000
"""At most this many unreadable objects are listed under `rejected` (all are counted)."""


def _zeros(labels: tuple[str, ...]) -> Callable[[], Counter[str]]:
    """Counters start with every known label at 0, so a first error is a rate, not a new series
    (Prometheus' rate() needs two samples of a series)."""
    return lambda: Counter(dict.fromkeys(labels, 0))


@dataclass(slots=True)
class KindStats:
    """One watched kind. `live` is False from a failed request until the watch is healthy again."""

    synced: bool = False
    forbidden: bool = False
    live: bool = False
    objects: int = 0
    malformed_now: int = 0
    """Objects of this kind currently skipped as malformed (not a counter): unreadable's size."""
    unreadable: dict[tuple[str, str], tuple[str, Rejection]] = field(default_factory=dict)
    """Per (namespace, name), the objects the reflector could not read now: the version it
    read ("uid/resourceVersion", each logged and counted once) and the rejection listed."""
    unreadable_changes: int = 0
    """Bumped whenever `unreadable` changes, so the live model lists them again only then."""
    last_event: float | None = None
    list_requests: Counter[str] = field(default_factory=_zeros(REQUEST_RESULTS))
    watch_requests: Counter[str] = field(default_factory=_zeros(REQUEST_RESULTS))
    relists: Counter[str] = field(default_factory=_zeros(RELIST_REASONS))
    watch_gone: int = 0
    watch_errors: Counter[str] = field(default_factory=_zeros(WATCH_ERROR_REASONS))
    events: Counter[str] = field(default_factory=_zeros(EVENT_TYPES))
    malformed: int = 0
    rejected: Counter[str] = field(default_factory=_zeros(REJECT_REASONS))
    """Objects the model currently sets aside in whole or in part, by reason (not a counter);
    Malformed is `malformed_now`, the objects the reflector could not read at all."""

    def rejected_now(self) -> dict[str, int]:
        return {**self.rejected, str(RejectReason.MALFORMED): self.malformed_now}


@dataclass(frozen=True, slots=True)
class Scope:
    """Where the watcher looks: cluster-wide (narrowed by include/exclude filters), or only in
    `namespaces` (namespace mode), where everything in other namespaces goes unseen: the
    controllers there (Flux's in flux-system) are unknown, never up."""

    namespaces: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def mode(self) -> str:
        return "namespaces" if self.namespaces else "cluster"

    def said(self) -> str:
        if self.namespaces:
            return f"watching namespaces {', '.join(self.namespaces)} (namespace-scoped)"
        where = f"namespaces {', '.join(self.include)}" if self.include else "all namespaces"
        but = f" except {', '.join(self.exclude)}" if self.exclude else ""
        return f"watching {where}{but} (cluster-wide)"


@dataclass(slots=True)
class Histogram:
    """Cumulative-at-render histogram: per-bucket counts, sum and count."""

    bounds: tuple[float, ...] = EVALUATION_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, count) pairs as Prometheus writes them, ending with +Inf."""
        out, running = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


@dataclass(slots=True)
class Telemetry:
    """The watcher's view of itself. `up` is API-server reachability as last observed."""

    up: bool = False
    kinds: dict[KindKey, KindStats] = field(default_factory=dict)
    evaluation: Histogram = field(default_factory=Histogram)
    started: bool = False
    """Set once discovery has registered every kind known at start-up."""
    evaluation_failures: int = 0
    evaluation_error: str = ""
    """Why the last evaluation raised ("" once one succeeds): the one served is older, and stale."""
    unauthorized: str = ""
    """Why the API server rejects our credentials (401), while it does; "" otherwise."""
    listed_kinds: dict[str, frozenset[KindKey]] = field(default_factory=dict)
    """The kinds inventories list that the watcher does not read anyway, by what it does with
    them: "watched", "over_limit" (listed_kinds_limit), "not_served" (no CRD Established); the
    last two are not read, and not about to be."""
    forbidden_in: dict[KindKey, tuple[str, ...]] = field(default_factory=dict)
    """Namespace mode: per kind readable in some namespaces, those that answer 403 (kube/scoped.py)."""
    scope: Scope = field(default_factory=Scope)
    """Where it looks (the namespaces setting, or the cluster mode's filters)."""
    cluster_scoped: set[KindKey] = field(default_factory=set)
    """Namespace mode: the cluster-scoped kinds it watches, read only where the account may. A
    tenant's 403 on one is its scope, said on the page, not a broken install to page about."""
    heartbeat_reads: dict[str, Counter[str]] = field(default_factory=dict)
    """Per controller (ControllerSpec name), its heartbeat reads by result (HEARTBEAT_RESULTS)."""
    heartbeat_read_seconds: dict[str, float] = field(default_factory=dict)
    """Per controller, how long its last heartbeat read took (fetch and parse)."""

    def heartbeat_read(self, controller: str, result: str, seconds: float) -> None:
        reads = self.heartbeat_reads.get(controller)
        if reads is None:
            reads = self.heartbeat_reads[controller] = _zeros(HEARTBEAT_RESULTS)()
        reads[result] += 1
        self.heartbeat_read_seconds[controller] = seconds

    def kind(self, group: str, kind: str) -> KindStats:
        found = self.kinds.get((group, kind))
        if found is None:
            found = self.kinds[group, kind] = KindStats()
        return found

    def forget(self, group: str, kind: str) -> None:
        self.kinds.pop((group, kind), None)
        self.forbidden_in.pop((group, kind), None)
        self.cluster_scoped.discard((group, kind))

    @property
    def synced(self) -> bool:
        """Every watched kind that we are allowed to see has finished its initial list."""
        return self.started and all(s.synced for s in list(self.kinds.values()) if not s.forbidden)

    @property
    def stale(self) -> bool:
        """Our data may lag the cluster: unreachable, credentials rejected, not synced, a kind's
        watch is broken, or the last evaluation failed (the one served is the last good one)."""
        if not self.up or self.unauthorized or not self.synced or self.evaluation_error:
            return True
        return any(not s.live for s in list(self.kinds.values()) if not s.forbidden)

    def ready(self) -> tuple[bool, str]:
        """/readyz: reachable, authorized, synced and every watch live; otherwise why not, naming
        the kinds. Kinds we may not see (403) do not hold readiness back, unless they are all."""
        if not self.up:
            return False, "the Kubernetes API server is unreachable"
        if self.evaluation_error:
            return False, f"the last evaluation failed ({self.evaluation_error}); serving the previous one"
        if self.unauthorized:
            return False, self.unauthorized
        if not self.started:
            return False, "discovering the kinds to watch"
        pending = self.unsynced()
        if pending:
            return False, "initial list not finished for " + ", ".join(pending)
        forbidden = [kind_name(key) for key in self.forbidden()]
        if forbidden and len(forbidden) == len(self.kinds):
            return False, "403 Forbidden: stalewatch may not list any kind it watches: " + ", ".join(
                forbidden
            )
        broken = self.broken()
        if broken:
            return False, "watch broken, serving the last known objects as stale: " + ", ".join(broken)
        if forbidden:
            return True, "ok; 403 Forbidden, not judged: " + ", ".join(forbidden)
        return True, "ok"

    def unseen(self) -> list[str]:
        """What the scope leaves out and the namespaces that answer 403 for a kind readable
        elsewhere, named: never "nothing there" (kinds refused everywhere: forbidden())."""
        said = [
            f"{kind_name(key)} in {', '.join(namespaces)} (403)"
            for key, namespaces in sorted(self.forbidden_in.items())
            if namespaces and key in self.kinds
        ]
        if self.scope.namespaces:
            said.insert(0, "every other namespace (controllers there, such as Flux's: liveness unknown)")
        return said

    def scope_said(self) -> str:
        """The scope and what it cannot see, as the page and /readyz say it."""
        unseen = self.unseen()
        return self.scope.said() + (f"; cannot see: {'; '.join(unseen)}" if unseen else "")

    def broken(self) -> list[str]:
        """Listed kinds whose watch is down or relisting: their last known objects are served, stale."""
        return sorted(kind_name(key) for key in self._broken())

    def stale_kinds(self) -> frozenset[str]:
        """broken(), by kind name (as the model names kinds)."""
        return frozenset(kind for _, kind in self._broken())

    def _broken(self) -> list[KindKey]:
        return [key for key, s in list(self.kinds.items()) if s.synced and not s.live and not s.forbidden]

    def unsynced(self) -> list[str]:
        kinds = list(self.kinds.items())
        return sorted(kind_name(key) for key, s in kinds if not s.synced and not s.forbidden)

    def unjudged(self, blind: Collection[str] | None) -> list[str]:
        """Kinds listed and visible that an evaluation blind to `blind` did not judge (all of
        them before the first evaluation, `blind` None). A kind's list finishes between two
        evaluations: until the next one, what is served says nothing about its objects, and
        must not read as synced and healthy."""
        return sorted(
            kind_name(key)
            for key, s in list(self.kinds.items())
            if s.synced and not s.forbidden and (blind is None or key[1] in blind)
        )

    def listed_pending(self, unread: Iterable[tuple[str, str, int]]) -> list[str]:
        """The kinds an evaluation counted as listed but not read that the watcher is about to
        read: their watch is starting or listing (not those it may not list, or leaves out)."""
        kinds, listed = self.kinds, self.listed_kinds
        left_out = listed.get("over_limit", frozenset()) | listed.get("not_served", frozenset())
        return sorted(
            kind_name((group, kind))
            for group, kind, _ in unread
            if (group, kind) not in left_out
            and not ((found := kinds.get((group, kind))) is not None and found.forbidden)
        )

    def forbidden(self) -> list[KindKey]:
        return sorted(key for key, s in list(self.kinds.items()) if s.forbidden)

    def blind(self) -> frozenset[str]:
        """Kinds (by name) whose objects must not be judged now: forbidden, or never listed.

        A broken watch is not an empty kind: a kind whose watch is down or relisting keeps its
        last known objects in the model (judged, served as stale) until a completed relist
        replaces them; dropping them would resolve every alert about them for the outage."""
        return frozenset(kind for (_, kind), s in list(self.kinds.items()) if s.forbidden or not s.synced)

    def objects(self) -> int:
        return sum(s.objects for s in list(self.kinds.values()))

    def malformed_now(self) -> int:
        return sum(s.malformed_now for s in list(self.kinds.values()))

    def unreadable_listed(self) -> list[Rejection]:
        """The objects no reflector could read, by kind and name, at most UNREADABLE_LISTED of
        them (the rest are counted: malformed_now())."""
        listed: list[Rejection] = []
        for _, stats in sorted(self.kinds.items()):
            for _, (_, rejection) in sorted(stats.unreadable.items()):
                if len(listed) == UNREADABLE_LISTED:
                    return listed
                listed.append(rejection)
        return listed

    def unreadable_changes(self) -> tuple[tuple[KindKey, int], ...]:
        """Equal while no kind's unreadable objects changed (and no kind came or went)."""
        return tuple((key, s.unreadable_changes) for key, s in list(self.kinds.items()))

    def set_aside(self) -> str:
        """How many objects are rejected or malformed now, as "3 objects" ("" when none)."""
        count = sum(sum(s.rejected_now().values()) for s in list(self.kinds.values()))
        return "" if not count else f"{count} object{'' if count == 1 else 's'}"


def kind_name(key: KindKey) -> str:
    """`Kind.group`, or the bare kind of the core group, as kubectl and the logs name kinds."""
    group, kind = key
    return f"{kind}.{group}" if group else kind
