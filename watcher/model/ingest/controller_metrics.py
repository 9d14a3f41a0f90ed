"""A controller's own /metrics, read strictly: the few series that say whether it is reconciling.

Input is Prometheus text exposition format 0.0.4, as controller-runtime serves it (Flux's
controllers, tofu-controller, any other built on it). Out comes `ControllerMetrics`: per object
`gotk_reconcile_duration_seconds_count` (Flux's per-object counter: it moves on every reconcile
of that object), per controller-runtime controller `controller_runtime_reconcile_total` by
result and `controller_runtime_active_workers`, per work queue `workqueue_depth` (summed over
priorities), `workqueue_longest_running_processor_seconds` and `workqueue_unfinished_work_seconds`,
and `process_start_time_seconds` (a restart shows there before any counter goes down).

Strict because a value read wrong is worse than one not read: a sample that is not a finite
number (NaN, ±Inf, a negative count) or a label set that cannot be read is kept as None (unknown)
and named in `problems`, never taken as 0; a duplicate series is unknown. Bounded because the
endpoint is not ours: past `max_bytes` or `max_series` sample lines, or not UTF-8, the whole
read is `Unreadable` rather than partial (a truncated read would make the objects after the cut
look unreconciled). A body without `controller_runtime_reconcile_total` is not a
controller-runtime endpoint (a wrong port, a proxy's error page) and is Unreadable too: read as
"no series for any object" it would raise a false alarm on every object.

prometheus_client's parser is not used: it takes NaN as a value, and the model imports no client.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

ObjectRef = tuple[str, str, str]
"""(kind, namespace, name), as the gotk series labels them."""

MAX_EXPOSITION_BYTES = 64 * 2**20
"""10k objects' gotk histograms are about 16 MiB; four times that is not a controller."""
MAX_SERIES = 500_000
"""Sample lines (of every family): 10k objects are about 130k."""
MAX_LABEL_VALUE = 1024
"""Characters of one label value: a Kubernetes name is at most 253; past this the line is not read
(so a single hostile line costs at most this much Python-level scanning)."""
MAX_PROBLEMS = 20
"""Problems named one by one; past this they are counted (`problems_left_off`)."""

OBJECT_COUNT = "gotk_reconcile_duration_seconds_count"
RECONCILE_TOTAL = "controller_runtime_reconcile_total"
ACTIVE_WORKERS = "controller_runtime_active_workers"
QUEUE_DEPTH = "workqueue_depth"
LONGEST_RUNNING = "workqueue_longest_running_processor_seconds"
UNFINISHED_WORK = "workqueue_unfinished_work_seconds"
PROCESS_START = "process_start_time_seconds"

FAMILIES = frozenset(
    {
        OBJECT_COUNT,
        RECONCILE_TOTAL,
        ACTIVE_WORKERS,
        QUEUE_DEPTH,
        LONGEST_RUNNING,
        UNFINISHED_WORK,
        PROCESS_START,
    }
)
"""The families read; every other line is skipped by name (and a heartbeat read through Prometheus
asks for these alone)."""
_KEYS: Mapping[str, tuple[str, ...]] = {
    OBJECT_COUNT: ("kind", "namespace", "name"),
    RECONCILE_TOTAL: ("controller", "result"),
    ACTIVE_WORKERS: ("controller",),
    QUEUE_DEPTH: ("name", "priority"),
    LONGEST_RUNNING: ("name",),
    UNFINISHED_WORK: ("name",),
    PROCESS_START: (),
}
"""The labels that identify a series of each family (others, like `controller` on a queue, are
carried along but not part of the key). An absent `namespace` or `priority` is read as ""
(Prometheus' own reading; `priority` is absent on older controller-runtime); any other absent
key label makes the line unattributable."""
_OPTIONAL = frozenset({"namespace", "priority"})

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_PLAIN_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')
_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
_PLAIN_LABELS = re.compile(rf"\{{(?:{_PAIR}(?:,{_PAIR})*,?)?\}}")
"""A label set with no blank and no escape, which `_labels` reads with these instead of by character
(a duplicate label or an overlong value still goes the strict way, which names it)."""
_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_TIMESTAMP = re.compile(r"-?\d+")
_BLANK = " \t"
_BLANK_OR_EOL = _BLANK + "\r\n"


@dataclass(frozen=True, slots=True)
class Queue:
    """One work queue; a value is None when its sample could not be read (named in problems)."""

    depth: float | None = 0.0
    longest_running_seconds: float | None = 0.0
    unfinished_seconds: float | None = 0.0


@dataclass(frozen=True, slots=True)
class ControllerMetrics:
    """What one read of a controller's /metrics said. None anywhere means "sample unreadable"."""

    objects: Mapping[ObjectRef, float | None]
    reconciles: Mapping[str, Mapping[str, float | None]]
    """controller-runtime controller name -> result (success, error, requeue, ...) -> count."""
    active_workers: Mapping[str, float | None]
    queues: Mapping[str, Queue]
    started_at: float | None
    """The process' start (Unix seconds), None when absent or unreadable."""
    problems: tuple[str, ...] = ()
    problems_left_off: int = 0
    incomplete: frozenset[str] = frozenset()
    """Families with a line that could not be attributed to a series (labels unreadable): what is
    absent from them is not known to be absent (an object's missing series, a total's missing
    result)."""

    def reconciles_total(self) -> float | None:
        """Every completed reconcile of every controller in the process; None if any is unknown."""
        values = [v for results in self.reconciles.values() for v in results.values()]
        if RECONCILE_TOTAL in self.incomplete or None in values:
            return None
        return sum(v for v in values if v is not None)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A read that gives nothing to judge by, and why (the heartbeat is unknown, not healthy)."""

    reason: str


@dataclass(slots=True)
class _Reading:
    series: dict[str, dict[tuple[str, ...], float | None]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    left_off: int = 0
    incomplete: set[str] = field(default_factory=set)

    def problem(self, line_number: int, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"line {line_number}: {message}")
        else:
            self.left_off += 1

    def keep(self, line_number: int, name: str, key: tuple[str, ...], value: float | None) -> None:
        family = self.series.setdefault(name, {})
        if key in family:
            self.problem(line_number, f"{name}{_spell(name, key)} appears twice: unknown")
            value = None
        family[key] = value


def parse_controller_metrics(
    body: bytes | str, *, max_bytes: int = MAX_EXPOSITION_BYTES, max_series: int = MAX_SERIES
) -> ControllerMetrics | Unreadable:
    """Read an exposition; Unreadable when it is too large, not text, or not controller-runtime's."""
    size = len(body.encode() if isinstance(body, str) else body)
    if size > max_bytes:
        return Unreadable(f"the exposition is {size} bytes, more than the {max_bytes} read")
    try:
        text = body if isinstance(body, str) else body.decode("utf-8")
    except UnicodeDecodeError as error:
        return Unreadable(f"the exposition is not UTF-8 text (byte {error.start})")
    reading = _Reading()
    samples = 0
    name_of = _NAME.match
    # one line at a time: a list of 130k lines (10k objects' histograms) would be the read's peak
    for number, line in enumerate(io.StringIO(text, newline="\n"), start=1):
        if not line.strip(_BLANK_OR_EOL):
            continue
        if line.startswith("#"):
            _comment(reading, number, line)
            continue
        samples += 1
        if samples > max_series:
            return Unreadable(f"the exposition has more than {max_series} samples")
        name = name_of(line)
        if name is not None and name.group() not in FAMILIES:
            continue  # the bulk (go_*, histogram buckets): never decoded, so never misread
        _sample(reading, number, line.rstrip("\r\n"), name)
    if RECONCILE_TOTAL not in reading.series:
        return Unreadable(f"no {RECONCILE_TOTAL} series: not a controller-runtime metrics endpoint")
    return _assemble(reading)


def _comment(reading: _Reading, number: int, line: str) -> None:
    """HELP and TYPE must be well formed (a broken one says the body is not what it claims);
    any other comment is free text."""
    parts = line[1:].lstrip(_BLANK).split(None, 2)
    if not parts or parts[0] not in ("HELP", "TYPE"):
        return
    if len(parts) < 2 or not _NAME.fullmatch(parts[1]):
        reading.problem(number, f"a {parts[0]} line without a metric name")
    elif parts[0] == "TYPE" and (len(parts) < 3 or parts[2].strip() not in _TYPES):
        reading.problem(number, f"TYPE of {parts[1]} is not one of {', '.join(sorted(_TYPES))}")


def _sample(reading: _Reading, number: int, line: str, name_match: re.Match[str] | None) -> None:
    """A sample line of a family read (`name_match`: its name, None when it has none)."""
    if name_match is None:
        reading.problem(number, "a sample line that does not start with a metric name")
        return
    name = name_match.group()
    labels, rest = _labels(line, name_match.end())
    if labels is not None:
        missing = [label for label in _KEYS[name] if label not in labels and label not in _OPTIONAL]
        rest, labels = (f"no {missing[0]} label", None) if missing else (rest, labels)
    if labels is None:
        reading.problem(number, f"{name}: {rest}")
        reading.incomplete.add(name)
        return
    key = tuple(labels.get(label, "") for label in _KEYS[name])
    value, why = _value(rest)
    if why:
        reading.problem(number, f"{name}{_spell(name, key)}: {why}: unknown")
    reading.keep(number, name, key, value)


def _labels(line: str, at: int) -> tuple[dict[str, str] | None, str]:
    """The label set from `at` and the rest of the line; (None, why) when it cannot be read."""
    labels: dict[str, str] = {}
    if at >= len(line) or line[at] != "{":
        return labels, line[at:]
    plain = _PLAIN_LABELS.match(line, at)
    if plain is not None:  # as controllers write them: no blank, no escape (the strict reading's result)
        pairs = _PLAIN_LABEL.findall(line, at, plain.end())
        labels = dict(pairs)
        if len(labels) == len(pairs) and all(len(value) <= MAX_LABEL_VALUE for _, value in pairs):
            return labels, line[plain.end() :]
        labels = {}
    at += 1
    while True:
        at = _skip_blank(line, at)
        if line.startswith("}", at):
            return labels, line[at + 1 :]
        label = _LABEL_NAME.match(line, at)
        if label is None:
            return None, f"an unreadable label name at column {at + 1}"
        at = _skip_blank(line, label.end())
        if not line.startswith("=", at) or not line.startswith('"', at := _skip_blank(line, at + 1)):
            return None, f"label {label.group()} has no quoted value"
        value, at = _quoted(line, at + 1)
        if value is None:
            return None, (
                f"label {label.group()}'s value is not a closed, validly escaped string "
                f"of at most {MAX_LABEL_VALUE} characters"
            )
        if label.group() in labels:
            return None, f"label {label.group()} twice"
        labels[label.group()] = value
        at = _skip_blank(line, at)
        if line.startswith(",", at):
            at += 1
        elif not line.startswith("}", at):
            return None, f"no ',' or '}}' after label {label.group()}"


def _skip_blank(line: str, at: int) -> int:
    while at < len(line) and line[at] in _BLANK:
        at += 1
    return at


def _quoted(line: str, at: int) -> tuple[str | None, int]:
    """A label value after its opening quote: only \\\\, \\" and \\n are escapes (format 0.0.4);
    None past MAX_LABEL_VALUE characters."""
    out: list[str] = []
    while at < len(line) and len(out) <= MAX_LABEL_VALUE:
        char = line[at]
        if char == '"':
            return "".join(out), at + 1
        if char == "\\":
            escaped = _ESCAPES.get(line[at + 1 : at + 2])
            if escaped is None:
                return None, at
            out.append(escaped)
            at += 2
            continue
        out.append(char)
        at += 1
    return None, at


def _value(rest: str) -> tuple[float | None, str]:
    """The value (and an optional integer timestamp, which is read and not used: the read's own
    time dates it); (None, why) when it is not a finite, non-negative number."""
    fields = rest.split()
    if not rest[:1].isspace() and rest:
        return None, "no space before the value"
    if not fields or len(fields) > 2:
        return None, "not one value and at most a timestamp"
    if len(fields) == 2 and not _TIMESTAMP.fullmatch(fields[1]):
        return None, f"timestamp {fields[1][:40]!r} is not an integer"
    try:
        if "_" in fields[0]:  # Python's float() reads 1_000; Go's ParseFloat does not
            raise ValueError(fields[0])
        value = float(fields[0])
    except ValueError:
        return None, f"value {fields[0][:40]!r} is not a number"
    if not math.isfinite(value):
        return None, f"value {fields[0]} is not finite"
    if value < 0:
        return None, f"value {fields[0]} is negative"
    return value, ""


def _spell(name: str, key: tuple[str, ...]) -> str:
    pairs = ",".join(f'{label}="{value[:80]}"' for label, value in zip(_KEYS[name], key, strict=True))
    return f"{{{pairs}}}" if pairs else ""


def _assemble(reading: _Reading) -> ControllerMetrics:
    """The families, keyed for their readers. A per-controller or per-queue family with an
    unattributable line has every value unknown (the lost line may have been any of them); the
    objects read stay known, only their absence is in doubt (`incomplete`)."""
    series: dict[str, dict[tuple[str, ...], float | None]] = {
        name: {key: None for key in values} if name in reading.incomplete and name != OBJECT_COUNT else values
        for name, values in reading.series.items()
    }
    objects = {(k[0], k[1], k[2]): v for k, v in series.get(OBJECT_COUNT, {}).items()}
    reconciles: dict[str, dict[str, float | None]] = {}
    for (controller, result), value in series.get(RECONCILE_TOTAL, {}).items():
        reconciles.setdefault(controller, {})[result] = value
    workers = {k[0]: v for k, v in series.get(ACTIVE_WORKERS, {}).items()}
    depth: dict[str, float | None] = {}
    for (queue, _priority), value in series.get(QUEUE_DEPTH, {}).items():
        before = depth.get(queue, 0.0)
        depth[queue] = None if before is None or value is None else before + value
    longest = {k[0]: v for k, v in series.get(LONGEST_RUNNING, {}).items()}
    unfinished = {k[0]: v for k, v in series.get(UNFINISHED_WORK, {}).items()}
    absent = {family: None if family in reading.incomplete else 0.0 for family in _KEYS}
    queues = {
        name: Queue(  # a queue with no sample of a family has not set it yet: 0, unless lines were lost
            depth=depth.get(name, absent[QUEUE_DEPTH]),
            longest_running_seconds=longest.get(name, absent[LONGEST_RUNNING]),
            unfinished_seconds=unfinished.get(name, absent[UNFINISHED_WORK]),
        )
        for name in {*depth, *longest, *unfinished}
    }
    return ControllerMetrics(
        objects=objects,
        reconciles=reconciles,
        active_workers=workers,
        queues=queues,
        started_at=series.get(PROCESS_START, {}).get(()),
        problems=tuple(reading.problems),
        problems_left_off=reading.left_off,
        incomplete=frozenset(reading.incomplete),
    )
