"""The live model: watch events in, a current Evaluation out, within a fraction of a second.

Every event is applied to the incremental HealthModel at once (O(1): it only marks what the
change can affect); a pass evaluates what arrived since the last one as soon as it can, and a
timer re-evaluates every `tick` so time-based findings (thresholds) appear without an event.
Passes are paced by their own cost beyond what their changes cost (kube/pacing.py): passes that
only judge what changed run as changes come, a costly one is followed by a wait in proportion.

Honesty rules:
  * while the API server is unreachable the evaluation is FROZEN: the last one is served,
    flagged stale, instead of drawing findings (an expired Lease, a threshold crossed) from
    data that stopped updating;
  * kinds we cannot see (403, or not listed yet) are blind in the model, so no finding and no
    ControllerDown is drawn from them; a kind whose watch broke after its list keeps its last
    known objects (and their findings, served as stale) until a completed relist replaces them,
    and a controller judged from it keeps its last verdict (a Lease not seen renewed while its
    watch was down is no hung leader);
  * an evaluation that raises is never "healthy": the last good one stays served, the
    telemetry says why it is stale (/readyz 503, stalewatch_evaluation_failures_total), and
    the next tick tries again. Objects the model set aside (Evaluation.rejected) are counted
    per kind and reason and logged once each; they do not fail the evaluation. Objects no
    reflector could read (malformed) are listed with them, the reflectors counting them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from watcher.generations import Generations
from watcher.kube.pacing import Pacing
from watcher.kube.resources import Resource
from watcher.logs import fields, get_logger
from watcher.model.engine import HealthModel
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.controller_metrics import ControllerMetrics, Unreadable
from watcher.model.types import ModelConfig, Rejection
from watcher.model.views.timeline import Timeline
from watcher.model.views.transitions import Transitions
from watcher.telemetry import Telemetry
from watcher.tracing import tracer

log = get_logger("model")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SyncCollections:
    """Garbage collection around the initial sync (the benchmark applies the same policy).

    While the sync builds the cache, each full collection walks everything built so far, again
    every time it grew by a quarter: at 50k objects, 7 of them cost 2.9 s of a 14 s ingest. So
    they wait (the young generations still collect the decoding's garbage) until the cache is
    synced; then one collection, and the long-lived, acyclic cache is frozen out of the
    collector's view, which keeps full collections (about 180 ms at 50k) off the event loop.
    What exists before the sync starts is frozen first: modules, classes and functions (about
    70k objects, most of them kubernetes-asyncio's client models) live as long as the process,
    and walking them again made up a third of the collection that ends the sync.

    The sync ends with a collection of the young generations only, not a full one: the old
    generation then holds what outlived two young collections during the sync, the cache, and
    the full collection over it freed nothing (0 objects at 50k and at 200k in the benchmark)
    for 0.4 s of CPU at 200k objects (it reads every object the cache refers to). What it
    would catch, a reference cycle that outlived two young collections and died before the
    sync ended, stays frozen, once.
    """

    def __init__(self) -> None:
        self.frozen = False
        self._usual: tuple[int, int, int] | None = None

    def defer(self) -> None:
        if self.frozen or self._usual is not None:
            return
        gc.collect()
        gc.freeze()
        self._usual = gc.get_threshold()
        gc.set_threshold(self._usual[0], self._usual[1], 1 << 30)

    def restore(self) -> None:
        if self._usual is not None:
            gc.set_threshold(*self._usual)
            self._usual = None

    def freeze(self) -> None:
        self.restore()
        gc.collect(1)
        gc.freeze()
        self.frozen = True


class LiveModel:
    """A Sink for the reflectors that keeps `latest` current."""

    def __init__(
        self,
        config: ModelConfig,
        telemetry: Telemetry,
        *,
        debounce: float = 0.0,
        tick: float = 1.0,
        clock: Callable[[], datetime] = _utc_now,
        longest: float = 0.5,
        timeline_entries: int = 2000,
    ) -> None:
        """`longest`: the most a change waits for its pass under churn (see Pacing);
        `timeline_entries`: how many changes `timeline` keeps."""
        self.model = HealthModel(config)
        self.timeline = Timeline(limit=timeline_entries)
        self._transitions = Transitions(config.controllers, stored=self.model.stored)
        self.latest: Evaluation | None = None
        self.published = Generations()
        """Bumped with each new `latest` (the live stream waits on it)."""
        self._telemetry = telemetry
        self._tick, self._clock = tick, clock
        self._pacing = Pacing(debounce=debounce, longest=max(debounce, longest))
        self._dirty = asyncio.Event()
        self._changes = 0
        """Changes (events, heartbeat reads) since the last pass began: what Pacing weighs its cost by."""
        self.collections = SyncCollections()
        self._rejected: list[Rejection] = []
        self._logged: set[tuple[str, ...]] = set()
        self._listed: tuple[list[Rejection], tuple[object, ...], list[Rejection]] = ([], (), [])
        """(the model's rejected, the unreadable changes seen, both listed together)."""
        self.on_listed: Callable[[frozenset[tuple[str, str]]], None] | None = None
        """Told the kinds the inventories list whenever they change (ClusterWatcher.list_kinds)."""
        self._kinds_listed: frozenset[tuple[str, str]] = frozenset()

    # -- Sink ------------------------------------------------------------------------------

    def upsert(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        now = self._clock()
        follows = self._transitions.follows(resource.group, resource.kind)  # never a Pod
        self._apply(
            "upsert",
            resource,
            obj,
            lambda: self.model.upsert(obj, now=now),
            # before the model replaces the version it is compared with
            timeline=(lambda: self.timeline.extend(self._transitions.upserted(obj, now=now)))
            if follows
            else None,
        )

    def delete(self, resource: Resource, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self._apply(
            "delete",
            resource,
            obj,
            lambda: self.model.delete(obj, now=self._clock()),
            timeline=lambda: self._transitions.deleted(
                resource.group, resource.kind, meta.get("namespace", ""), meta["name"]
            ),
        )

    def retain(self, resource: Resource, keys: set[tuple[str, str]]) -> None:
        now = self._clock()
        self._apply(
            "retain",
            resource,
            None,
            lambda: self.model.retain(resource.api_version, resource.kind, keys, now=now),
            timeline=lambda: self._transitions.listed(resource.group, resource.kind, keys),
        )

    def _apply(
        self,
        what: str,
        resource: Resource,
        obj: Mapping[str, Any] | None,
        change: Callable[[], None],
        *,
        timeline: Callable[[], None] | None,
    ) -> None:
        """The timeline's bookkeeping of a change, then the model's, each guarded: a bug on one
        object must stop neither the watch of its kind nor the other (the model must still see
        a delete the timeline could not follow). A failure is logged once, here: the model's if
        both failed."""
        failed: Exception | None = None
        if timeline is not None:
            try:
                timeline()
            except Exception as error:
                failed = error
        try:
            change()
        except Exception:
            name = obj["metadata"].get("name", "") if obj is not None else ""
            log.exception(
                "the model failed on a change; skipped it",
                extra=fields(event=what, group=resource.group, kind=resource.kind, name=name),
            )
            return
        finally:
            self._changes += 1
            self._dirty.set()
        if failed is not None:
            log.error("the timeline failed on a change; skipped it", exc_info=failed)

    def notify(self) -> None:
        self._dirty.set()

    def heartbeat(
        self, controller: str, read: ControllerMetrics | Unreadable, at: datetime | None = None
    ) -> None:
        """One read of a controller's /metrics (kube/heartbeats.py), dated `at` (when Prometheus
        scraped it), else now; guarded like a change: a bug on one read must not stop the reader."""
        try:
            self.model.heartbeat(controller, at=at or self._clock(), read=read)
        except Exception:
            log.exception(
                "the model failed on a heartbeat read; skipped it", extra=fields(controller=controller)
            )
        finally:
            self._changes += 1
            self._dirty.set()

    # -- Evaluation ------------------------------------------------------------------------

    def evaluate(self) -> Evaluation | None:
        """One pass now (unless frozen: unreachable). Returns the evaluation served: the last
        good one when this pass raised (the telemetry then says so)."""
        if not self._telemetry.up:
            return self.latest
        try:
            evaluation = self._evaluate()
        except Exception as error:  # never "healthy": keep the last good one, say it is stale
            self._failed(error)
            return self.latest
        if self._telemetry.evaluation_error:
            log.warning("evaluation works again", extra=fields(failures=self._telemetry.evaluation_failures))
            self._telemetry.evaluation_error = ""
        if evaluation.rejected is not self._rejected:
            self._count_rejected(evaluation.rejected)
        evaluation = self._with_unreadable(evaluation)
        self.latest = evaluation
        telemetry = self._telemetry
        try:  # a failure there loses entries, never the evaluation
            self.timeline.extend(
                self._transitions.evaluated(
                    evaluation,
                    synced=telemetry.synced and not telemetry.unjudged(evaluation.blind),
                    blind=telemetry.blind(),
                )
            )
        except Exception:
            log.exception("the timeline failed on an evaluation; skipped it")
        self.timeline.comparing_since = self._transitions.comparing_since
        self._tell_listed()
        self.published.bump()
        if not self.collections.frozen and self._telemetry.synced:
            self.collections.freeze()
        return evaluation

    def _tell_listed(self) -> None:
        listed = self.model.listed_kinds()
        if listed != self._kinds_listed and self.on_listed is not None:
            self._kinds_listed = listed
            try:  # a failure there leaves the watches as they were, never the evaluation
                self.on_listed(listed)
            except Exception:
                log.exception("starting or stopping the watches of listed kinds failed")

    def _failed(self, error: Exception) -> None:
        """Logged with its traceback when it starts or changes, not on every tick it lasts."""
        reason = f"{type(error).__name__}: {error}"[:200]
        telemetry = self._telemetry
        telemetry.evaluation_failures += 1
        if reason != telemetry.evaluation_error:
            log.exception("evaluation failed; serving the previous evaluation, marked stale")
        telemetry.evaluation_error = reason

    def _with_unreadable(self, evaluation: Evaluation) -> Evaluation:
        """The model's evaluation with the objects no reflector could read listed under
        `rejected` too (never silently dropped); the list is rebuilt only when either changed."""
        rejected, seen, listed = self._listed
        changes = self._telemetry.unreadable_changes()
        if evaluation.rejected is not rejected or changes != seen:
            unread = self._telemetry.unreadable_listed()
            listed = [*evaluation.rejected, *unread] if unread else evaluation.rejected
            self._listed = (evaluation.rejected, changes, listed)
        if listed is evaluation.rejected:
            return evaluation
        return dataclasses.replace(evaluation, rejected=listed, unreadable=self._telemetry.malformed_now())

    def _count_rejected(self, rejected: list[Rejection]) -> None:
        """Per kind and reason, objects (not fields) set aside; each logged once while it lasts."""
        self._rejected = rejected
        per_kind: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
        seen: set[tuple[str, ...]] = set()
        for r in rejected:
            subject = r.subject
            group = subject["apiVersion"].rpartition("/")[0]
            where = (subject["namespace"], subject["name"])
            per_kind.setdefault((group, subject["kind"]), set()).add((*where, r.reason))
            key = (group, subject["kind"], *where, r.field, r.reason)
            seen.add(key)
            if key not in self._logged:
                log.warning(
                    "object rejected",
                    extra=fields(
                        group=group,
                        kind=subject["kind"],
                        namespace=subject["namespace"],
                        name=subject["name"],
                        reason=str(r.reason),
                        field=r.field,
                        value=r.value,
                        evaluated=r.evaluated,
                    ),
                )
        self._logged = seen
        for kind, stats in list(self._telemetry.kinds.items()):
            counts = stats.rejected
            for reason in counts:
                counts[reason] = 0
            for _, _, reason in per_kind.get(kind, ()):
                counts[reason] += 1

    def _evaluate(self) -> Evaluation:
        self.model.set_watched(self._telemetry.kinds.keys())
        self.model.set_blind(self._telemetry.blind())
        self.model.set_stale(self._telemetry.stale_kinds())
        with tracer().start_as_current_span("stalewatch.evaluate") as span:
            started = time.perf_counter()
            evaluation = self.model.evaluate(self._clock())
            self._telemetry.evaluation.observe(time.perf_counter() - started)
            if span.is_recording():
                before = {f.id for f in self.latest.findings} if self.latest else set()
                after = {f.id for f in evaluation.findings}
                span.set_attributes(
                    {
                        "stalewatch.gitops_objects": len(evaluation.objects),
                        "stalewatch.findings": len(after),
                        "stalewatch.roots": len(evaluation.roots),
                        "stalewatch.findings_changed": len(before ^ after),
                    }
                )
        return evaluation

    async def run(self) -> None:
        """Evaluate after each burst of changes (debounced) and at least every tick."""
        self.collections.defer()
        try:
            while True:
                try:
                    await asyncio.wait_for(self._dirty.wait(), timeout=self._tick)
                    await asyncio.sleep(self._pacing.delay(time.monotonic()))
                except TimeoutError:
                    pass
                self._dirty.clear()
                changes, self._changes = self._changes, 0
                began, started = time.monotonic(), time.thread_time()
                try:
                    self.evaluate()
                except Exception:  # evaluate() keeps its own failures; this is a bug around it
                    log.exception("evaluation failed; serving the previous evaluation")
                cost = time.thread_time() - started
                self._pacing.passed(started=began, ended=time.monotonic(), cost=cost, changes=changes)
        finally:
            self.collections.restore()  # stopped before the sync finished
