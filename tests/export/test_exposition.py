"""The model's own text writer against prometheus-client's encoders, family by family.

stalewatch writes the text format itself (families.py) because it is faster on hundreds of
thousands of series; these tests hold every byte of it to what `prometheus_client.generate_latest`
writes from the same families' Samples, with label values that need escaping (backslash, double
quote, newline) and ones that must pass through untouched (UTF-8, control characters, `%` and
braces), and parse both served formats back to the values the model gave.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Iterable

import pytest
from prometheus_client import generate_latest
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text
from prometheus_client.registry import CollectorRegistry

from tests.app.test_watcher_metrics import telemetry
from watcher.export.families import Gauge, Rendered, StateSet
from watcher.export.metrics import FAMILIES, ModelCollector, build_registry, render
from watcher.export.watcher_metrics import WatcherCollector
from watcher.model.evaluation import Evaluation

from . import evaluations as ev
from .test_metrics import chained

SCENES = [
    pytest.param(ev.empty, id="empty"),
    pytest.param(ev.controller_down, id="controller_down"),
    pytest.param(ev.odd_names, id="odd_names"),
    pytest.param(chained, id="broken_root_chains"),
    pytest.param(ev.hostile, id="hostile_values"),
]


class One:
    """Collected metrics in the shape the client's encoders read."""

    def __init__(self, *metrics: Metric) -> None:
        self._metrics = list(metrics)

    def collect(self) -> Iterable[Metric]:
        return self._metrics


def hostile_families() -> dict[str, Rendered]:
    return {m.name: m for m in ModelCollector(ev.hostile).collect() if isinstance(m, Rendered)}


PROMETHEUS = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
"""The Accept header of a real scrape by the Prometheus these tests run (2.42): OpenMetrics first."""
ACCEPTS = [
    pytest.param(None, id="no_accept_header"),
    pytest.param("text/plain; version=0.0.4", id="text_0_0_4"),
    pytest.param(PROMETHEUS, id="prometheus_accept_header"),
    pytest.param(
        "application/openmetrics-text; version=1.0.0; escaping=allow-utf-8", id="openmetrics_allow_utf8"
    ),
    pytest.param("application/openmetrics-text", id="openmetrics_without_version"),
    pytest.param("text/plain; version=1.0.0; escaping=allow-utf-8", id="text_1_0_0_allow_utf8"),
    pytest.param("text/plain; version=1.0.0; escaping=dots", id="text_1_0_0_dots"),
    pytest.param("application/openmetrics-text; version=1.0.0; escaping=values", id="openmetrics_values"),
]
FORMATS = [
    pytest.param(False, generate_latest, id="text_format"),
    pytest.param(
        True, lambda one: openmetrics.generate_latest(one).removesuffix(b"# EOF\n"), id="openmetrics"
    ),
]


@pytest.mark.parametrize(("as_openmetrics", "encoder"), FORMATS)
@pytest.mark.parametrize("name", [pytest.param(name, id=name) for name in FAMILIES])
def test_each_family_is_written_byte_for_byte_as_prometheus_client_writes_it(
    name: str, as_openmetrics: bool, encoder: Callable[[One], bytes]
) -> None:
    family = hostile_families()[name]
    assert family.samples, "the hostile scene gives every family series, so every family is compared"
    assert family.text(openmetrics=as_openmetrics).encode() == encoder(One(family))


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("scene", SCENES)
def test_a_whole_scrape_is_byte_for_byte_what_the_clients_chosen_encoder_writes(
    scene: Callable[[], Evaluation], accept: str | None
) -> None:
    """The watcher's own metrics (counters, a histogram) are in the scrape too."""
    registry = build_registry(scene)
    registry.register(WatcherCollector(telemetry()))
    encoder, content_type = choose_encoder(accept or "")
    assert render(registry, accept=accept) == (encoder(registry), content_type)


def served_labels(
    body: str, parse: Callable[[str], Iterable[Metric]]
) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(s.name, tuple(sorted(s.labels.items()))) for family in parse(body) for s in family.samples}


@pytest.mark.parametrize(
    ("accept", "parse"),
    [
        pytest.param(None, parse_text, id="text_format"),
        pytest.param("application/openmetrics-text; version=1.0.0", parse_openmetrics, id="openmetrics"),
    ],
)
def test_hostile_label_values_parse_back_to_what_the_model_gave(
    accept: str | None, parse: Callable[[str], Iterable[Metric]]
) -> None:
    body, _ = render(build_registry(ev.hostile), accept=accept)
    expected = {
        (s.name, tuple(sorted(s.labels.items())))
        for family in hostile_families().values()
        for s in family.samples
    }
    assert served_labels(body.decode(), parse) == expected
    served = hostile_families()["stalewatch_revision_info"].samples
    revisions = {s.labels["revision"]: s.labels for s in served}
    assert revisions[f"main@{ev.HOSTILE}"]["applied_revision"] == ev.HOSTILE
    assert set(revisions) == {f"main@{ev.HOSTILE}", *ev.EACH_ESCAPE}


def test_promtool_accepts_the_hostile_exposition() -> None:
    body, _ = render(build_registry(ev.hostile))
    lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_other_escaping_schemes_are_prometheus_clients_own() -> None:
    registry = build_registry(ev.hostile)
    body, content_type = render(registry, accept="text/plain; version=1.0.0; escaping=allow-utf-8")
    assert content_type.endswith("escaping=allow-utf-8")
    assert body == generate_latest(registry, escaping=openmetrics.ALLOWUTF8)


def gauge(help: str = "Help.") -> Gauge[tuple[tuple[str, ...], float]]:
    return Gauge("stalewatch_test", help, ("zeta", "alpha", "mid"), of=lambda row: row)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(v, id=repr(v))
        for v in (
            1.0,
            0.0,
            -0.0,
            0.5,
            -2.0,
            1e-7,
            123456.0,
            1234567.0,
            1.7408304e9,
            2.0**53,
            math.inf,
            -math.inf,
            math.nan,
        )
    ],
)
def test_a_gauge_spells_every_value_as_prometheus_client_does(value: float) -> None:
    family = gauge()
    row = (("z", ev.HOSTILE, ""), value)
    rendered = Rendered(family, [row], [family.text(row)])
    assert rendered.text().encode() == generate_latest(One(rendered))


def test_help_text_is_escaped_as_prometheus_client_escapes_it() -> None:
    family = gauge(help=f"Help with {ev.HOSTILE}")
    rendered = Rendered(family, [], [])
    assert rendered.text().encode() == generate_latest(One(rendered))


@pytest.mark.parametrize(
    "current",
    [
        pytest.param("plain", id="a_plain_state"),
        pytest.param(ev.HOSTILE, id="a_hostile_state"),
        pytest.param("none of them", id="no_state_current"),
    ],
)
def test_a_stateset_writes_what_prometheus_client_writes(current: str) -> None:
    family = StateSet[tuple[tuple[str, ...], str]](
        "stalewatch_test_state",
        "States.",
        ("b", "state"),
        states=("plain", ev.HOSTILE, "%s"),
        of=lambda row: row,
    )
    row = ((ev.HOSTILE,), current)
    rendered = Rendered(family, [row], [family.text(row)])
    assert rendered.text().encode() == generate_latest(One(rendered))


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        pytest.param("stalewatch.dotted", ("a",), id="a_utf8_metric_name"),
        pytest.param("stalewatch_test", ("a-b",), id="a_utf8_label_name"),
        pytest.param("1stalewatch", (), id="a_name_starting_with_a_digit"),
    ],
)
def test_a_family_whose_names_the_writer_would_have_to_escape_is_refused(
    name: str, labels: tuple[str, ...]
) -> None:
    """Every escaping scheme leaves legacy names as they are; the writer writes names verbatim."""
    with pytest.raises(ValueError, match="must be legacy names"):
        Gauge(name, "Help.", labels, of=lambda row: None)


def test_registering_the_collector_gives_the_client_each_familys_declaration() -> None:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ModelCollector(ev.hostile))
    described = {m.name: (m.documentation, m.type) for m in ModelCollector(ev.hostile).describe()}
    assert described == {name: (family.help, "gauge") for name, family in FAMILIES.items()}
