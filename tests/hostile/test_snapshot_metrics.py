"""Metrics files recorded with a snapshot that cannot be used: one message naming the file (and
line), exit 2, and the rest analyzed: the other controllers' reads and every object.

Each case puts one bad `kustomize-controller` file next to good reads of helm-controller and
the lab's objects; helm-controller must still be judged (Reconciling), and kustomize-controller
must never be said to reconcile on the strength of a file that was not read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.cli.test_snapshot_metrics import NOW, analyze, body, heartbeats, lab_snapshot, recorded
from watcher.model.ingest.controller_metrics import MAX_SERIES
from watcher.snapshot_metrics import MAX_FILE_BYTES

KS = "kustomize-controller"
EARLY, LATE = "2026-12-07T07:25:07Z", "2026-12-07T07:36:03Z"


def good(directory: Path) -> None:
    """Two good reads of helm-controller: what must still be judged beside the bad file."""
    recorded(directory, "helm-controller", EARLY, body("early", "helm-controller"))
    recorded(directory, "helm-controller", LATE, body("recovered", "helm-controller"))


def with_header(directory: Path, raw: bytes, *, header: str = f"controller={KS} at={LATE}") -> Path:
    path = directory / "bad.prom"
    path.write_bytes(f"# stalewatch-read {header}\n".encode() + raw)
    return path


BAD_BYTE = len(f"# stalewatch-read controller={KS} at={LATE}\n# caf".encode()) + len(
    body("recovered", KS).encode()
)


def not_utf8(directory: Path) -> Path:
    return with_header(directory, body("recovered", KS).encode() + b"# caf\xe9\n")


def over_the_byte_bound(directory: Path) -> Path:
    path = directory / "bad.prom"
    with path.open("wb") as file:  # sparse: refused by its size before a byte is read
        file.write(f"# stalewatch-read controller={KS} at={LATE}\n".encode())
        file.truncate(MAX_FILE_BYTES + 1)
    return path


def over_the_series_bound(directory: Path) -> Path:
    return with_header(directory, b"go_goroutines 1\n" * (MAX_SERIES + 1))


def not_controller_metrics(directory: Path) -> Path:
    return with_header(directory, b"<html><body>502 Bad Gateway</body></html>\n")


def no_header(directory: Path) -> Path:
    path = directory / "bad.prom"
    path.write_text(body("recovered", KS))
    return path


def no_read_time(directory: Path) -> Path:
    return with_header(directory, body("recovered", KS).encode(), header=f"controller={KS}")


def a_time_that_does_not_parse(directory: Path) -> Path:
    return with_header(directory, body("recovered", KS).encode(), header=f"controller={KS} at=yesterday")


def a_time_without_a_zone(directory: Path) -> Path:
    header = f"controller={KS} at=2026-12-07T07:36:03"
    return with_header(directory, body("recovered", KS).encode(), header=header)


def an_unknown_controller(directory: Path) -> Path:
    header = f"controller=kustomise-controller at={LATE}"
    return with_header(directory, body("recovered", KS).encode(), header=header)


@dataclass(frozen=True)
class Case:
    write: Callable[[Path], Path]
    message: str
    """What follows `FILE: ` on stderr."""
    state: str
    """kustomize-controller's heartbeat: Unknown when the read was fed as unreadable, or absent
    (no read taken from the file: it was never read)."""


HEADER_HELP = "expected the header `# stalewatch-read controller=NAME at=RFC3339` (whose read, and when)"
UNKNOWN = "its heartbeat is unknown from then"
CASES = {
    "not UTF-8": Case(
        not_utf8,
        f"{KS} at {LATE}: the exposition is not UTF-8 text (byte {BAD_BYTE}); {UNKNOWN}",
        "Unknown",
    ),
    "over the byte bound": Case(
        over_the_byte_bound, f"file is {MAX_FILE_BYTES + 1} bytes, larger than the 64 MiB limit", "never read"
    ),
    "over the series bound": Case(
        over_the_series_bound,
        f"{KS} at {LATE}: the exposition has more than {MAX_SERIES} samples; {UNKNOWN}",
        "Unknown",
    ),
    "not controller metrics": Case(
        not_controller_metrics,
        f"{KS} at {LATE}: no controller_runtime_reconcile_total series: not a controller-runtime metrics "
        f"endpoint; {UNKNOWN}",
        "Unknown",
    ),
    "no header": Case(no_header, f"line 1: {HEADER_HELP}; no read taken from it", "never read"),
    "no read time": Case(no_read_time, f"line 1: {HEADER_HELP}; no read taken from it", "never read"),
    "a time that does not parse": Case(
        a_time_that_does_not_parse,
        "line 1: at='yesterday' is not an RFC 3339 time with a zone, e.g. 2026-12-07T07:25:07Z",
        "never read",
    ),
    "a time without a zone": Case(
        a_time_without_a_zone,
        "line 1: at='2026-12-07T07:36:03' is not an RFC 3339 time with a zone, e.g. 2026-12-07T07:25:07Z",
        "never read",
    ),
    "an unknown controller": Case(
        an_unknown_controller,
        "line 1: controller='kustomise-controller' is not a controller stalewatch tracks (",
        "never read",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_metrics_file_that_cannot_be_read_is_one_message_naming_it_and_the_rest_is_analyzed(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    good(directory)
    bad = case.write(directory)
    code, out, err = analyze(capsys, "-o", "json", str(directory))
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"stalewatch: {bad}: {case.message}")
    beats = heartbeats(out)
    assert beats["helm-controller"] == ("Reconciling", "")
    state, detail = beats[KS]
    assert state == "Unknown"
    assert ("never read" in detail) == (case.state == "never read")
    assert orjson.loads(out)["summary"]["objects"] == 46


def test_two_reads_of_one_controller_at_the_same_moment_are_both_refused_each_naming_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    good(directory)
    first = recorded(directory, KS, LATE, body("recovered", KS), name="a.prom")
    second = recorded(directory, KS, LATE, body("early", KS), name="b.prom")
    code, out, err = analyze(capsys, "-o", "json", str(directory))
    assert code == 2
    said = f"{KS} is read at {LATE} here and in"
    assert err.splitlines() == [
        f"stalewatch: {first}: line 1: {said} {second}; neither read is used",
        f"stalewatch: {second}: line 1: {said} {first}; neither read is used",
    ]
    assert heartbeats(out)[KS] == ("Unknown", f"{KS}'s heartbeat is unknown: never read.")


def test_a_sample_that_cannot_be_read_is_a_warning_naming_the_file_and_line_and_the_read_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    recorded(directory, KS, EARLY, body("early", KS))
    late = recorded(directory, KS, LATE, body("recovered", KS) + 'workqueue_depth{name="x"} NaN\n')
    code, out, err = analyze(capsys, "-o", "json", str(directory))
    assert code == 0
    [line] = err.splitlines()
    lines = len(body("recovered", KS).splitlines()) + 2
    assert line.startswith(f"stalewatch: warning: {late}: line {lines}: ")
    assert line.endswith("(this series is unknown in this read)")
    assert heartbeats(out)[KS][0] == "Reconciling"


def test_a_metrics_file_that_cannot_be_opened_is_named_and_the_rest_analyzed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = lab_snapshot(tmp_path)
    good(directory)
    fifo = directory / "kustomize-controller.prom"
    os.mkfifo(fifo)
    code, out, err = analyze(capsys, "-o", "json", str(directory))
    assert code == 2
    assert err.splitlines() == [f"stalewatch: {fifo}: is a FIFO, not a regular file; not read"]
    assert heartbeats(out)["helm-controller"] == ("Reconciling", "")
    assert orjson.loads(out)["summary"]["now"] == NOW
