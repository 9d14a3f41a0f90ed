"""Controller metrics recorded with a snapshot (`*.prom`), for `stalewatch analyze`'s heartbeats.

A snapshot's objects cannot show a controller that is up and reconciles nothing; its own
/metrics can, read a few times (docs/design/heartbeats.md). A recording is one read per file:
the exposition exactly as the controller served it, after one header line that says whose it
is and when it was read, which nothing in the exposition says:

    # stalewatch-read controller=kustomize-controller at=2026-12-07T07:25:07Z

The header is an exposition comment, so the file stays valid Prometheus text. `curl` (through
`kubectl port-forward` or the API server's Pod proxy) and `date` write it (docs/analyze.md).

Reads are fed to the model in time order per controller, whatever order their files sort in
(the time is in each file; `-10.prom` sorting before `-2.prom` must not reorder a series). A file
that cannot be used is one LoadError naming it and its line, and the rest is analyzed:

- no header, a time that does not parse or has no zone, a controller stalewatch does not
  track: the file gives no read (a read dated wrong would date every movement wrong);
- not UTF-8, over the parser's bounds, not a controller-runtime exposition: the read is fed as
  `Unreadable`, so that controller's heartbeat is unknown from then on rather than judged
  from the reads around the one that was lost;
- two reads of one controller at the same moment: neither is used (which one is true?).

Samples the parser could not read inside a usable read (NaN, a broken label set) are that
read's own unknowns, as in the live watcher: warnings naming the file and line, not errors.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from watcher.inputs import InputError, LoadError, read_path
from watcher.model.ingest.controller_metrics import (
    MAX_EXPOSITION_BYTES,
    ControllerMetrics,
    Unreadable,
    parse_controller_metrics,
)
from watcher.model.types import rfc3339

SUFFIX = ".prom"
HEADER = "# stalewatch-read controller=NAME at=RFC3339"
MAX_HEADER_BYTES = 1024
"""A header line is about 80 bytes; past this the file is over its bound before the body."""
MAX_FILE_BYTES = MAX_EXPOSITION_BYTES + MAX_HEADER_BYTES

_HEADER = re.compile(r"# stalewatch-read controller=(?P<controller>\S*) at=(?P<at>\S*)[ \t]*\r?")


@dataclass(frozen=True, slots=True)
class MetricsRead:
    """One recorded read of a controller's /metrics: `source` is the file it came from."""

    controller: str
    at: datetime
    read: ControllerMetrics | Unreadable
    source: str


def read_metrics_file(
    path: Path, *, source: str, controllers: Collection[str], regular_only: bool
) -> MetricsRead:
    """The read in one file; InputError when it gives none. An `Unreadable` body is still a read
    (its controller's heartbeat is unknown), and the caller names it as a problem too."""
    data = read_path(path, limit=MAX_FILE_BYTES, regular_only=regular_only)
    first, _, _ = data[:MAX_HEADER_BYTES].partition(b"\n")
    controller, at = _header(first.decode("utf-8", errors="replace"), controllers)
    # the header is a comment, so the parser's line numbers are the file's; its bound is the body's
    read = parse_controller_metrics(data, max_bytes=MAX_EXPOSITION_BYTES + len(first) + 1)
    return MetricsRead(controller, at, read, source)


def _header(line: str, controllers: Collection[str]) -> tuple[str, datetime]:
    matched = _HEADER.fullmatch(line)
    if matched is None:
        raise InputError(
            f"line 1: expected the header `{HEADER}` (whose read, and when); no read taken from it"
        )
    controller, text = matched["controller"], matched["at"]
    if controller not in controllers:
        known = ", ".join(sorted(controllers))
        raise InputError(f"line 1: controller={controller!r} is not a controller stalewatch tracks ({known})")
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise InputError(
            f"line 1: at={text!r} is not an RFC 3339 time with a zone, e.g. 2026-12-07T07:25:07Z"
        )
    try:
        return controller, at.astimezone(UTC)
    except OverflowError:
        raise InputError(f"line 1: at={text!r} is outside the calendar") from None


def problems_of(read: MetricsRead) -> tuple[list[LoadError], list[LoadError]]:
    """(errors, warnings) a usable file's read carries: an Unreadable body is an error, samples
    the parser could not read are warnings ("line N: ..." as the parser names them)."""
    if isinstance(read.read, Unreadable):
        message = (
            f"{read.controller} at {rfc3339(read.at)}: {read.read.reason}; its heartbeat is unknown from then"
        )
        return [LoadError(read.source, message)], []
    warnings = []
    for said in read.read.problems:
        where, _, message = said.partition(": ")
        warnings.append(LoadError(read.source, f"{message} (this series is unknown in this read)", where))
    if read.read.problems_left_off:
        more = f"and {read.read.problems_left_off} more samples not read"
        warnings.append(LoadError(read.source, more))
    return [], warnings


def in_time_order(reads: list[MetricsRead]) -> tuple[list[MetricsRead], list[LoadError]]:
    """Every controller's reads sorted by time; two of one controller at one moment are both
    refused (an error each, naming the other), never one silently preferred."""
    by_moment: dict[tuple[str, datetime], list[MetricsRead]] = defaultdict(list)
    for read in reads:
        by_moment[read.controller, read.at].append(read)
    kept: list[MetricsRead] = []
    errors: list[LoadError] = []
    for (controller, at), same in by_moment.items():
        if len(same) == 1:
            kept += same
            continue
        for read in same:
            others = ", ".join(other.source for other in same if other is not read)
            said = f"{controller} is read at {rfc3339(at)} here and in {others}; neither read is used"
            errors.append(LoadError(read.source, said, "line 1"))
    return sorted(kept, key=lambda read: (read.at, read.controller, read.source)), errors
