"""One sample of a query API answer, read strictly: its labels, and its value as the fleet needs
it (a flag, a count, a time), or why it cannot be (Unreadable, naming what came back).

The API writes a sample as `{"metric": {label: value}, "value": [unix_time, "value"]}`, the
value a string in Go's float form ("1", "0.5", "1764612250.123", "NaN", "+Inf"). The fleet's
builder (model.py) reads every value through these, so what a sample may hold is decided in one
place, and a value that cannot be read is never taken for 0, 1 or a time: it comes back
Unreadable, and the cluster whose field it was is unknown.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number as the API writes one: ASCII digits, no NaN, no Inf, no spaces (Python's float()
would take "nan", " 1 ", "1_0" and other scripts' digits)."""
LARGEST_COUNT = 2**53
"""Counts above this are not exact as floats: no real count of findings comes near it."""
CLOCK_ROUNDING = 1.0
"""Seconds a sample's time may be after the instant asked about: the query sends that instant
rounded to the millisecond."""
_SHOWN = 40
"""Characters of an unreadable value kept to name it."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A value the fleet could not read: what came back (as JSON, shortened) and what it needed."""

    got: str
    expected: str

    def __str__(self) -> str:
        return f"{self.got}, not {self.expected}"


def labels(sample: dict[str, Any], *names: str) -> tuple[str, ...]:
    """The sample's values of those labels, "" for one it lacks (an empty label is no label)."""
    metric = sample["metric"]
    return tuple(str(metric.get(name, "")) for name in names)


def number(sample: dict[str, Any]) -> float | Unreadable:
    """The sample's value: a finite number, from the API's string form only."""
    pair = sample.get("value")
    if not isinstance(pair, list) or len(pair) != 2:
        return Unreadable(as_json(pair), "a [time, value] pair")
    text = pair[1]
    if not isinstance(text, str):
        return Unreadable(as_json(text), "a number in the API's string form")
    if _NUMBER.fullmatch(text) is None or not math.isfinite(value := float(text)):
        return Unreadable(as_json(text), "a finite number")
    return value


def flag(sample: dict[str, Any]) -> bool | Unreadable:
    """1 is true, 0 false (stalewatch_up, stalewatch_synced, stalewatch_controller_up)."""
    value = number(sample)
    if isinstance(value, Unreadable):
        return value
    if value not in (0, 1):
        return Unreadable(as_json(sample["value"][1]), "0 or 1")
    return value == 1


def count(sample: dict[str, Any]) -> int | Unreadable:
    """A count: a whole number from 0 up."""
    value = number(sample)
    if isinstance(value, Unreadable):
        return value
    if not (value.is_integer() and 0 <= value <= LARGEST_COUNT):
        return Unreadable(as_json(sample["value"][1]), "a count (a whole number from 0)")
    return int(value)


def moment(sample: dict[str, Any], *, now: datetime) -> datetime | Unreadable:
    """A time in Unix seconds, from 1970 up to `now`, the instant the query was asked at (a
    store answers nothing after it)."""
    value = number(sample)
    if isinstance(value, Unreadable):
        return value
    if not 0 <= value <= now.timestamp() + CLOCK_ROUNDING:
        return Unreadable(as_json(sample["value"][1]), "a time between 1970 and the instant asked about")
    return datetime.fromtimestamp(value, UTC)


def as_json(value: object) -> str:
    """What came back, as the JSON it was, cut short (it may be a hostile store's megabytes)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
