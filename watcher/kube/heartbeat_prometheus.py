"""Heartbeats read through a Prometheus-compatible query API, where stalewatch cannot reach the
controllers' Pod IPs (`heartbeat_prometheus`, `run --prometheus URL`).

One instant query per controller per round, through the fleet's client (fleet/prom.py: its
timeout, credentials and bounds on bytes and samples): the families the parser reads plus `up`,
and `timestamp(up)`, the moment Prometheus last scraped each target. Every series of one target
in an instant query comes from that one scrape (Prometheus marks the series a scrape no longer
has as stale, and a query sees no half-appended scrape), so that moment dates the read: never
the moment we asked, or a counter Prometheus has not scraped for a while would look unmoved
until now, a false NotReconciling.

The answer is written back as the text exposition of the controller's Pod and read by
`parse_controller_metrics`, the one strict path: every bound and every unknown of the direct read
applies unchanged (NaN stays NaN, so it is unknown; a label set that cannot be spelled is a line
the parser cannot attribute). Each Pod's own label that Prometheus renamed `exported_<name>`
because the target has a label of that name (the gotk series' `namespace`) gets its name back;
the target's labels stay on the lines, where the parser ignores them (dropping them would drop
an object's own `namespace` under `honor_labels`, when it equals the target's).

A target Prometheus did not scrape (`up` not 1), scraped longer than `stale_after` ago, or has no
series of, and an answer that failed (unreachable, HTTP error, not the API's JSON, too large) or
came with warnings (Thanos' partial answers may miss series, which would look like objects never
reconciled) is an `Unreadable` naming the URL and why: the heartbeat is unknown.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from watcher.fleet.prom import Credentials, Prometheus
from watcher.kube.heartbeats import Read, choose
from watcher.model.ingest.controller_metrics import (
    FAMILIES,
    MAX_EXPOSITION_BYTES,
    ControllerMetrics,
    Unreadable,
    parse_controller_metrics,
)
from watcher.model.rules.metrics_targets import MetricsTarget

UP = "up"
SCRAPED = "stalewatch_scraped"
"""The label marking the `timestamp(up)` series of the query (its name is dropped by timestamp)."""
TARGET = ("job", "instance")
"""Labels Prometheus puts on every series of a target: one scrape target per pair."""
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_EXPORTED = "exported_"

Dated = tuple[str, Read, datetime | None]
"""(result as the reader's telemetry counts it, the read, the moment it was scraped)."""


def default_selector(target: MetricsTarget) -> str:
    """The target's Pods by name (the leader's alone when the model knows it): `pod` is the label
    kube-prometheus' PodMonitors, Flux's own and the annotation-based scrape jobs give. Their
    namespace is checked on `up`, not selected: under `honor_labels` the gotk series carry their
    object's namespace, and selecting the Pod's would drop every object of another namespace."""
    names = "|".join(re.sub(r"([^a-zA-Z0-9-])", r"\\\1", pod) for pod, _ in target.pods)
    return "{" + f"pod=~{_quoted(names)}" + "}"


def query(selector: str) -> str:
    """The families the parser reads and `up` of the selected targets, and each target's last
    scrape moment, in one instant vector (the `or`'s sides never share a label set)."""
    inner = selector.strip()[1:-1].strip().rstrip(",")
    names = "|".join(sorted(FAMILIES | {UP}))
    matchers = f"__name__=~{_quoted(names)}" + (f", {inner}" if inner else "")
    scraped = f'label_replace(timestamp({UP}{{{inner}}}), "{SCRAPED}", "true", "", "")'
    return f"{{{matchers}}} or {scraped}"


@dataclass(slots=True)
class Scrape:
    """What Prometheus holds of one scrape target: its `up` labels and value, when it was last
    scraped, and the samples of the families read."""

    labels: dict[str, str] = field(default_factory=dict)
    up: str | None = None
    scraped_at: float | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)


def scrapes(result: Iterable[dict[str, Any]]) -> list[Scrape]:
    """The answer's series grouped by scrape target (job, instance), in the answer's order."""
    groups: dict[tuple[str, ...], Scrape] = {}
    for sample in result:
        labels: dict[str, str] = sample["metric"]
        group = groups.setdefault(tuple(labels.get(n, "") for n in TARGET), Scrape())
        name, value = labels.get("__name__"), _value(sample)
        if name is None and labels.get(SCRAPED) == "true":
            group.scraped_at = _finite(value)
        elif name == UP:
            group.labels = {k: v for k, v in labels.items() if k != "__name__"}
            group.up = value
        else:
            group.samples.append(sample)
    for group in groups.values():
        if group.up is None:  # named by the labels all its series share, to say `up` is missing
            common = set(group.samples[0]["metric"].items()) if group.samples else set()
            for sample in group.samples[1:]:
                common &= sample["metric"].items()
            group.labels = {k: v for k, v in common if k != "__name__"}
    return list(groups.values())


def exposition(scrape: Scrape) -> str:
    """The samples as the Pod's own text exposition (format 0.0.4) for the strict parser."""
    lines = []
    for sample in scrape.samples:
        labels = dict(sample["metric"])
        name = labels.pop("__name__", None)
        if name not in FAMILIES:
            continue  # not asked for; the parser would skip it too (and it is not spelled here)
        for label in scrape.labels:  # the target's: Prometheus renamed the Pod's own one
            own = labels.pop(_EXPORTED + label, None)
            if own is not None:
                labels[label] = own
        lines.append(f"{name}{{{_spell(labels)}}} {_number(_value(sample))}")
    return "\n".join(lines) + "\n"


def _spell(labels: Mapping[str, str]) -> str:
    """Escaped as the format says (\\\\, \\" and \\n); a name the format cannot hold is written as
    one the parser cannot read, so the line is unattributed (its family incomplete), not lost."""
    escaped = (
        f'{name if _LABEL_NAME.fullmatch(name) else "?"}="'
        + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        + '"'
        for name, value in labels.items()
    )
    return ",".join(escaped)


def _number(text: str | None) -> str:
    """The sample's value as the parser reads numbers; NaN and ±Inf stay so (the parser makes
    them unknown). A value that is no number is written as one the parser names as such."""
    try:
        if text is None or "_" in text or text != text.strip():
            raise ValueError(text)
        return repr(float(text))
    except ValueError:
        return "not-a-number"


def _value(sample: dict[str, Any]) -> str | None:
    pair = sample.get("value")
    if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str):
        return pair[1]
    return None


def _finite(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _quoted(text: str) -> str:
    """A PromQL double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class PrometheusReads:
    """Each target's read through `url`'s query API, dated by its scrape (the reader's source
    when `heartbeat_prometheus` is set; kube/heartbeats.py)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        stale_after: float,
        credentials: Credentials | None = None,
        selectors: Mapping[str, str] | None = None,
        max_bytes: int = MAX_EXPOSITION_BYTES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = Prometheus(url, timeout=timeout, credentials=credentials)
        self.stale_after, self.max_bytes, self._clock = stale_after, max_bytes, clock
        self.selectors = dict(selectors or {})
        """Per controller (ControllerSpec name), its `heartbeat_selector` setting."""

    async def __aenter__(self) -> PrometheusReads:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(*exc)

    async def read(self, target: MetricsTarget) -> Dated:
        """One controller's read: its Pods' scrapes (every Pod the target lists must have one,
        as in a direct read), or the series the controller's `heartbeat_selector` selects."""
        where = f"Prometheus {self.client.url}"
        selector = self.selectors.get(target.controller)
        if selector is None and not target.pods:
            return "no_endpoint", Unreadable(target.problem or "no Ready Pod to read"), None
        now = self._clock()
        answer = await self.client.query(query(selector or default_selector(target)), at=now)
        if answer.error is not None:
            return "prometheus_error", Unreadable(f"{where}: {answer.error}"), None
        if answer.warnings:
            why = f"{where} warned (a partial answer may miss series): {answer.warnings[0]}"
            return "prometheus_error", Unreadable(why), None
        found = scrapes(answer.result)
        if selector is not None:
            reads = [await self._read(s, _name(s), where, now) for s in found]
            if not reads:
                return "not_scraped", Unreadable(f"{where} has no series matching {selector}"), None
        else:
            namespace = target.workload.split("/")[1]
            reads = [await self._pod(pod, found, namespace, where, now) for pod, _ in target.pods]
        result, read = choose([(result, read) for result, read, _ in reads])
        return result, read, next((at for _, r, at in reads if r is read), None)

    async def _pod(self, pod: str, found: list[Scrape], namespace: str, where: str, now: datetime) -> Dated:
        """That Pod's read: of its scrape targets (two jobs may scrape it), the freshest readable."""
        mine = [
            s
            for s in found
            if s.labels.get("pod") == pod and s.labels.get("namespace", namespace) == namespace
        ]
        what = f"pod {namespace}/{pod}"
        reads = sorted(
            [await self._read(s, what, where, now) for s in mine],
            key=lambda r: (isinstance(r[1], ControllerMetrics), r[2] or datetime.min.replace(tzinfo=UTC)),
        )
        if not reads:
            return "not_scraped", Unreadable(f"{where} has no series of {what}"), None
        return reads[-1]

    async def _read(self, scrape: Scrape, what: str, where: str, now: datetime) -> Dated:
        if scrape.up is None:
            return "not_scraped", Unreadable(f"{where} has series of {what} but no {UP}"), None
        if _finite(scrape.up) != 1.0:
            return "not_scraped", Unreadable(f"{where} could not scrape {what} ({UP} {scrape.up})"), None
        if scrape.scraped_at is None:
            return "not_scraped", Unreadable(f"{where} did not say when it scraped {what}"), None
        at = datetime.fromtimestamp(scrape.scraped_at, UTC)
        age = (now - at).total_seconds()
        if age > self.stale_after:
            return "stale", Unreadable(f"{where} last scraped {what} {age:.0f}s ago"), None
        read = await asyncio.to_thread(self._parse, scrape)  # off the event loop, as a direct read
        if isinstance(read, Unreadable):
            return "unparsable", Unreadable(f"{what} via {where}: {read.reason}"), None
        return "ok", read, at

    def _parse(self, scrape: Scrape) -> Read:
        return parse_controller_metrics(exposition(scrape), max_bytes=self.max_bytes)


def _name(scrape: Scrape) -> str:
    """A scrape target as the reasons name it: its Pod, else its instance and job."""
    labels = scrape.labels
    if "pod" in labels:
        return f"pod {labels.get('namespace', '')}/{labels['pod']}".replace(" /", " ")
    return f"{labels.get('instance', '?')} (job {labels.get('job', '?')})"
