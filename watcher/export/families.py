"""One writer for the model's gauge families: each family is declared once (name, help, label
names in order, and how an item gives its label values), and from that declaration come both its
series lines, served in the text format and in OpenMetrics, and the Samples that
prometheus-client reads (`get_sample_value`, the encoders of other escaping schemes).

The lines are written here rather than by prometheus-client's encoders because a 50k-object
cluster has hundreds of thousands of series and the client builds a Sample, a dict and a sorted
label list for each of them on every scrape; this writer joins a family's precompiled literal
parts with an item's escaped values once, when the item changes (bench/scrape.py: a 5k-object
OpenMetrics scrape 500 ms -> 9 ms). tests/export/test_exposition.py holds both formats byte-equal
to prometheus-client's encoders for every family, hostile label values included.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from operator import itemgetter
from typing import Any, Generic, TypeVar

from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

Item = TypeVar("Item")
Values = tuple[str, ...]
"""An item's label values, in the order of its family's `labels`."""

_go_float: Callable[[float], str] = floatToGoString  # prometheus-client's own number spelling (untyped)
_openmetrics: Callable[..., bytes] = openmetrics.generate_latest  # the client's OpenMetrics encoder (untyped)
_UNDERSCORES = openmetrics.UNDERSCORES
_NAMES_UNCHANGED = {_UNDERSCORES, openmetrics.ALLOWUTF8}
"""Escaping schemes that leave legacy names as they are (the others rewrite `_` or prefix names)."""
_EOF = "# EOF\n"
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_LEGACY = "letters, digits and underscores, not first a digit; colons too in metric names"


class Gauge(Generic[Item]):
    """A gauge with at most one series per item: `of` gives the item's label values and value,
    or None when the item has none (a time that is unknown)."""

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        *,
        of: Callable[[Item], tuple[Values, float] | None],
    ) -> None:
        self.name, self.help, self.labels, self.of = name, help, tuple(labels), of
        self.headers = _headers(name, help, self.labels)
        closing = ["} " if self.labels else " ", len(self.labels), "\n"]  # the value follows the label values
        self._pieces, self._weave = _compile([*_opening(name, self.labels), *closing])

    def key(self, item: Item) -> Values | None:
        row = self.of(item)
        return None if row is None else row[0]

    def text(self, item: Item) -> str:
        row = self.of(item)
        if row is None:
            return ""
        values, value = row
        joined = "".join(values)  # _escaped() and _number() inlined: this runs for every series
        if "\\" in joined or '"' in joined or "\n" in joined:
            values = tuple(map(_escape, values))
        number = "1.0" if value == 1.0 else _number(value)
        return "".join(self._weave((*self._pieces, *values, number)))

    def samples(self, item: Item) -> list[Sample]:
        row = self.of(item)
        if row is None:
            return []
        return [Sample(self.name, dict(zip(self.labels, row[0], strict=True)), row[1])]


class StateSet(Generic[Item]):
    """kube-state-metrics' StateSet: one series per state, 1 for the current one and 0 for the
    others (all 0 when the current one is not a state). The state is the last of `labels` and
    must sort after the others, so an item's lines share everything up to the state; `of` gives
    the values of the other labels and the current state."""

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        *,
        states: Sequence[str],
        of: Callable[[Item], tuple[Values, str]],
    ) -> None:
        self.name, self.help, self.labels, self.states, self.of = name, help, tuple(labels), tuple(states), of
        self.headers = _headers(name, help, self.labels)
        *others, state = self.labels
        if sorted(self.labels)[-1] != state:
            raise ValueError(f"{name}: the state label {state!r} must sort after the other labels")
        opening = [*_opening(name, tuple(others)), ("," if others else "{") + f'{state}="']
        self._pieces, self._weave = _compile(opening)

        def ends(current: str | None) -> tuple[str, ...]:
            return tuple(
                f'{_escape(each)}"}} {"1.0" if each == current else "0.0"}\n' for each in self.states
            )

        self._ends = {current: ends(current) for current in self.states}
        self._none = ends(None)

    def key(self, item: Item) -> Values:
        return self.of(item)[0]

    def text(self, item: Item) -> str:
        values, current = self.of(item)
        joined = "".join(values)  # _escaped(), inlined: this runs for every object
        if "\\" in joined or '"' in joined or "\n" in joined:
            values = tuple(map(_escape, values))
        start = "".join(self._weave((*self._pieces, *values)))
        return start + start.join(self._ends.get(current, self._none))

    def samples(self, item: Item) -> list[Sample]:
        values, current = self.of(item)
        labels = dict(zip(self.labels, values, strict=False))
        last = self.labels[-1]
        return [
            Sample(self.name, {**labels, last: state}, 1.0 if state == current else 0.0)
            for state in self.states
        ]


Family = Gauge[Any] | StateSet[Any]


class Rendered(GaugeMetricFamily):
    """A family as one scrape renders it: its series written item by item (`chunks`, the same
    lines in both text formats), and its samples, which only the client's encoders read, built
    from the items when first asked for."""

    def __init__(self, family: Family, items: Sequence[Any], chunks: list[str]) -> None:
        super().__init__(family.name, family.help, labels=family.labels)
        self.family, self.items, self.chunks = family, items, chunks
        self._written: dict[bool, str] = {}
        self._samples: list[Sample] | None = None

    def text(self, *, openmetrics: bool = False) -> str:
        """The whole family in the Prometheus text format, or in OpenMetrics; kept, as the
        family is while its part of the model is unchanged."""
        written = self._written.get(openmetrics)
        if written is None:
            written = self._written[openmetrics] = self.family.headers[openmetrics] + "".join(self.chunks)
        return written

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            self._samples = [sample for item in self.items for sample in self.family.samples(item)]
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value or None  # Metric.__init__ sets [] before any item is known


def render_whole(family: Family, items: Iterable[Any]) -> Rendered:
    """`family` over `items`, the first item with given label values winning: two series with
    the same labels would make Prometheus drop samples."""
    seen: set[Values] = set()
    kept = []
    for item in items:
        key = family.key(item)
        if key is not None and key not in seen:
            seen.add(key)
            kept.append(item)
    return Rendered(family, kept, [family.text(item) for item in kept])


def render(registry: CollectorRegistry, *, accept: str | None = None) -> tuple[bytes, str]:
    """The body and Content-Type for a scrape with this Accept header, as the client negotiates it.

    Prometheus asks for OpenMetrics first and the text format next. For the model's families both
    are written here: their names are legacy names, which the default and the allow-utf-8
    escaping leave alone, and the series lines of the two formats are the same. Any other
    metric, and any other escaping scheme, is the chosen encoder's own.
    """
    encoder, content_type = choose_encoder(accept or "")
    func, keywords = (encoder.func, encoder.keywords) if isinstance(encoder, partial) else (encoder, {})
    if func in (generate_latest, _openmetrics) and keywords.get("escaping", _UNDERSCORES) in _NAMES_UNCHANGED:
        return _written(registry, openmetrics=func is _openmetrics, other=encoder), content_type
    return encoder(registry), content_type


def text_format(registry: CollectorRegistry) -> bytes:
    """Prometheus text format 0.0.4, byte-identical to prometheus_client.generate_latest: the
    model's families from the text they carry, any other metric by generate_latest itself."""
    return _written(registry, openmetrics=False, other=generate_latest)


def _written(registry: CollectorRegistry, *, openmetrics: bool, other: Callable[[_Single], bytes]) -> bytes:
    """Every collected metric in one format: the model's families from their text, any other one
    by `other` (the client's encoder of that format; OpenMetrics' `# EOF` goes once at the end)."""
    parts = []
    for metric in registry.collect():
        if isinstance(metric, Rendered):
            parts.append(metric.text(openmetrics=openmetrics))
        else:
            parts.append(other(_Single(metric)).decode().removesuffix(_EOF if openmetrics else ""))
    return ("".join(parts) + (_EOF if openmetrics else "")).encode()


class _Single:
    """One already-collected metric, in the shape generate_latest reads."""

    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterable[Metric]:
        return [self._metric]


def _headers(name: str, help: str, labels: Values) -> dict[bool, str]:
    """HELP and TYPE in the text format (False) and in OpenMetrics (True), which also escapes
    double quotes in HELP. The names must be legacy ones, which the default escaping leaves as
    they are: the writer writes them verbatim."""
    if not _METRIC_NAME.fullmatch(name) or not all(_LABEL_NAME.fullmatch(label) for label in labels):
        raise ValueError(f"{name}{labels}: metric and label names must be legacy names ({_LEGACY})")
    text = help.replace("\\", r"\\").replace("\n", r"\n")
    return {
        False: f"# HELP {name} {text}\n# TYPE {name} gauge\n",
        True: f"# HELP {name} {_escape(help)}\n# TYPE {name} gauge\n",
    }


def _opening(name: str, labels: Values) -> list[str | int]:
    """`name{a="<value 0>",b="<value 1>"` (no closing brace) as literal text and the indexes of
    the item's values to put between, labels in sorted order as every encoder writes them."""
    parts: list[str | int] = [name + ("{" if labels else "")]
    for n, (label, index) in enumerate(sorted((label, index) for index, label in enumerate(labels))):
        parts += ["," * (n > 0) + f'{label}="', index, '"']
    return parts


def _compile(parts: list[str | int]) -> tuple[tuple[str, ...], Callable[[tuple[str, ...]], tuple[str, ...]]]:
    """The literal parts (adjacent ones merged) and the weave: from the literals followed by the
    item's values, the whole sequence to join, picked in C by one itemgetter."""
    merged: list[str | int] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    pieces = tuple(part for part in merged if isinstance(part, str))
    order, literal = [], 0
    for part in merged:
        if isinstance(part, str):
            order.append(literal)
            literal += 1
        else:
            order.append(len(pieces) + part)
    if len(order) == 1:  # itemgetter with one index returns the value itself, not a tuple
        return pieces, lambda parts: (parts[order[0]],)
    return pieces, itemgetter(*order)


def _escaped(values: Values) -> Values:
    """`values` escaped as label values; one scan of them all in the usual case of nothing to escape."""
    joined = "".join(values)
    if "\\" in joined or '"' in joined or "\n" in joined:
        return tuple(_escape(value) for value in values)
    return values


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float) -> str:
    """floatToGoString's spelling, the usual 1 and 0 without calling it."""
    if value == 1.0:
        return "1.0"
    if value == 0.0 and math.copysign(1.0, value) > 0:
        return "0.0"
    return _go_float(value)
