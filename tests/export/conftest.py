"""Makes the real Prometheus + Alertmanager fixture available to the export tests."""

from .promstack import prom_stack

__all__ = ["prom_stack"]
