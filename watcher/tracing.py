"""OpenTelemetry traces of evaluation passes and relists, off unless configured.

The hot path always asks `tracer()` for spans; with no provider configured that is
OpenTelemetry's no-op tracer, so tracing costs nothing until a user turns it on with
`otel_exporter: console` or `otlp` (the OTLP exporter is an optional extra, so the
image stays small for the many who do not use it).
"""

from __future__ import annotations

from typing import Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from watcher import __version__

TRACER_NAME = "stalewatch"
Exporter = Literal["none", "console", "otlp"]


class TracingUnavailable(Exception):
    """The chosen exporter needs a package that is not installed."""


def make_exporter(kind: Exporter) -> SpanExporter | None:
    if kind == "none":
        return None
    if kind == "console":
        return ConsoleSpanExporter()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise TracingUnavailable(
            "otel_exporter: otlp needs the OTLP exporter: pip install 'stalewatch[otlp]'"
        ) from None
    exporter: SpanExporter = OTLPSpanExporter()  # endpoint and headers from OTEL_EXPORTER_OTLP_*
    return exporter


def configure_tracing(kind: Exporter) -> TracerProvider | None:
    """Installs the global tracer provider for `kind`; returns it so shutdown can flush it."""
    exporter = make_exporter(kind)
    if exporter is None:
        return None
    provider = TracerProvider(
        resource=Resource.create({"service.name": "stalewatch", "service.version": __version__})
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME, __version__)
