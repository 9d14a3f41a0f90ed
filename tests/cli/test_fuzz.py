"""Property: no snapshot, however mangled, makes stalewatch raise, and the text report never
carries a raw control character to the terminal.

Hypothesis takes the example snapshots under examples/ and mutates them the way a hostile or
broken cluster would: a field replaced by a value of another type, an extreme number, a time
out of the calendar, control characters and bidi overrides in names and messages, very long
strings, deep nesting. Each mutated snapshot goes the whole way `stalewatch analyze` and the
live watcher go: the snapshot loader (YAML text, so projection sees what a file holds), the
model's evaluation, and all three renderers (text report, JSON report, metrics exposition).
A fixed, derandomized example count keeps it the same test on every run and bounded in time.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watcher.cli import EXIT_BAD_INPUT, EXIT_CRITICAL, EXIT_OK, main
from watcher.export.metrics import build_registry, text_format
from watcher.export.report import render_json
from watcher.model.engine import evaluate
from watcher.model.types import ModelConfig
from watcher.snapshot import load_snapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SNAPSHOTS = {
    example.name: [
        item for file in sorted(example.glob("*.yaml")) for item in yaml.safe_load(file.read_text())["items"]
    ]
    for example in sorted(EXAMPLES.iterdir())
    if example.is_dir()
}
RAW_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
HOSTILE_CHARACTERS = "\x00\x07\x08\t\n\r\x1b\x7f\x85\x9b\u2028\u202e\u2066\u200f\u061cé日🙂"

extreme_integers = st.sampled_from(
    [0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**20, -(10**20), 10**41]
)
extreme_floats = st.sampled_from([1e41, 1e300, -1e300, float("inf"), float("-inf"), float("nan"), 0.5, -0.0])
extreme_times = st.one_of(
    st.sampled_from(
        [
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00Z",
            "1970-01-01T00:00:00Z",
            "2026-11-30T12:00:00.999999999Z",
            "2026-02-30T00:00:00Z",
        ]
    ),
    st.datetimes(timezones=st.timezones()).map(lambda moment: moment.isoformat()),
)
hostile_text = st.one_of(
    st.text(alphabet=HOSTILE_CHARACTERS, max_size=40),
    st.text(max_size=40),
    st.sampled_from(["", "x" * 70_000, "a\nCRITICAL ControllerDown: forged", "10m", "-5m", "999999999999h"]),
)
scalars = st.one_of(extreme_integers, extreme_floats, extreme_times, hostile_text, st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["type", "status", "x"]), inner, max_size=3),
    ),
    max_leaves=8,
)


def entries(node: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every entry under `node`, however deep: leaves are most of them."""
    found: list[tuple[Any, Any]] = []
    stack = [node]
    while stack:
        current = stack.pop()
        keys = list(current) if isinstance(current, dict) else range(len(current))
        for key in keys:
            found.append((current, key))
            if isinstance(current[key], dict | list):
                stack.append(current[key])
    return found


def like(value: object) -> st.SearchStrategy[Any]:
    """Values that keep the old value's type but not its sanity (a time out of the calendar,
    an integer past int64), so the model reads them; and sometimes anything at all."""
    if isinstance(value, bool) or value is None:
        same: st.SearchStrategy[Any] = st.one_of(scalars)
    elif isinstance(value, int | float):
        same = st.one_of(extreme_integers, extreme_floats)
    elif isinstance(value, str) and value[:2].isdigit() and "T" in value:
        same = extreme_times
    else:
        same = hostile_text
    return st.one_of(same, same, values)


@st.composite
def mutated_snapshots(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An example snapshot with 1-6 entries (anywhere in any object) replaced, or added."""
    objects = orjson.loads(orjson.dumps(SNAPSHOTS[draw(st.sampled_from(sorted(SNAPSHOTS)))]))
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        obj = draw(st.sampled_from(objects))
        container, key = draw(st.sampled_from(entries(obj)))
        if isinstance(container, dict) and draw(st.integers(0, 5)) == 0:
            key = draw(hostile_text)  # a field the object did not have
        container[key] = draw(like(container.get(key) if isinstance(container, dict) else container[key]))
    return objects


def as_yaml(objects: list[dict[str, Any]]) -> bytes:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump({"apiVersion": "v1", "kind": "List", "items": objects}, Dumper=dumper).encode()


@settings(
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    objects=mutated_snapshots(),
    now=st.datetimes(
        min_value=datetime(1970, 1, 1), max_value=datetime(8999, 12, 31), timezones=st.just(UTC)
    ),
)
def test_no_mutated_snapshot_makes_stalewatch_raise_or_reach_the_terminal_raw(
    objects: list[dict[str, Any]], now: datetime
) -> None:
    data = as_yaml(objects)
    code, out, err = analyze(data, "--now", now.isoformat())
    assert code in (EXIT_OK, EXIT_CRITICAL, EXIT_BAD_INPUT), err  # 3 would be a crash
    assert RAW_CONTROL.search(out) is None
    assert RAW_CONTROL.search(err) is None
    snapshot = load_snapshot(["-"], stdin=io.BytesIO(data))
    evaluation = evaluate(snapshot.objects, now=now, config=ModelConfig())
    document = orjson.loads(render_json(evaluation, objects=len(snapshot.objects)))
    assert document["summary"]["objects"] == len(snapshot.objects)
    assert text_format(build_registry(lambda: evaluation)).endswith(b"\n")


def analyze(data: bytes, *args: str) -> tuple[int, str, str]:
    """`stalewatch analyze -` in this process, with `data` as its stdin."""
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(data))
    saved = sys.stdin
    sys.stdin = stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["analyze", *args, "-"])
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()
