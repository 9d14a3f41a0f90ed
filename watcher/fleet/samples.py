"""One sample of a query API answer, read: its labels, its value as a number, a count or a flag.

The fleet's builder (model.py) reads every answer through these, so what a sample may hold and
what is made of a value it cannot read is decided in one place.
"""

from __future__ import annotations

import math
from typing import Any


def labels(sample: dict[str, Any], *names: str) -> tuple[str, ...]:
    """The sample's values of those labels, "" for one it lacks (an empty label is no label)."""
    metric = sample["metric"]
    return tuple(str(metric.get(name, "")) for name in names)


def count(sample: dict[str, Any]) -> int:
    value = number(sample)
    return int(value) if math.isfinite(value) else 0


def number(sample: dict[str, Any]) -> float:
    try:
        return float(sample["value"][1])
    except (ValueError, TypeError):
        return float("nan")


def flag(value: float | None) -> bool | None:
    return None if value is None else value == 1
