"""Tracing is off by default, and each exporter choice is honoured or refused clearly."""

from __future__ import annotations

import sys

import pytest
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from watcher.cli import main
from watcher.tracing import TracingUnavailable, make_exporter


def test_no_exporter_is_configured_by_default() -> None:
    assert make_exporter("none") is None


def test_console_exporter_writes_spans_to_stdout() -> None:
    assert isinstance(make_exporter("console"), ConsoleSpanExporter)


def test_otlp_without_the_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(TracingUnavailable, match=r"pip install 'stalewatch\[otlp\]'"):
        make_exporter("otlp")


def test_run_with_otlp_but_without_the_extra_exits_2_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    assert main(["run", "--set", "otel_exporter=otlp", "--listen", "127.0.0.1:18089"]) == 2
    assert "pip install 'stalewatch[otlp]'" in capsys.readouterr().err
