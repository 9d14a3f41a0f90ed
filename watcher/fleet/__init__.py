"""`stalewatch fleet`: one pane for many clusters, read from a Prometheus-compatible query API.

stalewatch runs once per cluster; their series meet in one Prometheus, Thanos, Mimir, Cortex or
VictoriaMetrics. This package asks that store (prom.py: instant queries, queries.py: which ones),
turns the answers into the fleet (model.py, pure: answers and a clock in) and renders it (page.py,
server.py). It never talks to a Kubernetes API server.
"""
