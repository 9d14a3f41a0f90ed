"""The real Prometheus fixture, to run every panel's query."""

from ..export.promstack import prom_stack

__all__ = ["prom_stack"]
