"""The pure health model: Kubernetes objects and a clock in, findings out.

Nothing in this package does I/O or reads the clock; import-linter enforces that it
imports none of the layers that do (kube, export, web, cli, app).

Entry points: `project()` every object first, then `evaluate()` a snapshot or feed a
`HealthModel` live. The rooms (ingest, rules, store, cluster, correlate, views) and the order
their imports run in are laid out in engine.py's docstring; import-linter holds them to it.
"""

from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.projection import MalformedObject, project

__all__ = ["HealthModel", "MalformedObject", "evaluate", "project"]
