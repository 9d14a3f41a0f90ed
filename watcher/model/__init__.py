"""The pure health model: Kubernetes objects and a clock in, findings out.

Nothing in this package does I/O or reads the clock; import-linter enforces that it
imports none of the layers that do (kube, export, web, cli, app).
"""
