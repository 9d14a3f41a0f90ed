"""Where each tracked controller's own /metrics can be read: the heartbeat reader's address book.

The model knows each controller's workload, the Pods it owns and its leader Lease; the reader
(kube/heartbeats.py) only does the I/O. A target that cannot be read says why (`problem`), so
the reader turns it into an `Unreadable` read (heartbeat unknown), never into no read at all.

The port, in this order: the controller's `metrics_port` setting (said explicitly, it wins), the
workload's container port named `http-prom` (Flux's), the workload's pod template annotation
`prometheus.io/port`. They are read from the workload's pod template, not from each Pod: a Pod
keeps only its IP (memory per Pod, BENCHMARKS.md).

The leader is the Ready Pod the Lease's holderIdentity names ("<pod>_<uuid>"): only it
reconciles, so it alone is read. Without one (no Lease, or held by no Ready Pod of ours) every
Ready Pod is read and the reader keeps the one that reconciled most (kube/heartbeats.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.model.ingest.objects import dig, text
from watcher.model.ingest.schema import METRICS_PORT_ANNOTATION
from watcher.model.rules.workloads import pod_state
from watcher.model.types import ControllerSpec

HTTP_PROM = "http-prom"
"""The container port name Flux's controllers give their metrics port."""


@dataclass(frozen=True, slots=True)
class MetricsTarget:
    """One controller's metrics endpoints: read `pods` (name, IP) on `port`, or say `problem`."""

    controller: str
    """The heartbeat key, as HealthModel.heartbeat takes it: the workload's name (shards.beat_name;
    a Flux controller's main Deployment is named like its ControllerSpec, a shard `<name>-shardN`)."""
    workload: str
    """Kind/namespace/name of the workload read."""
    port: int | None
    port_from: str
    """Where the port came from (said in logs and docs), "" when there is none."""
    pods: tuple[tuple[str, str], ...]
    """(Pod name, IP) of its Ready Pods with an IP, in name order; only the leader's when known."""
    leader: str | None
    problem: str
    """Why it cannot be read; "" when it can."""


def metrics_target(
    spec: ControllerSpec,
    workload: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    lease: Mapping[str, Any] | None,
    *,
    name: str,
) -> MetricsTarget:
    """`name`: the heartbeat key of the workload read."""
    meta = workload["metadata"]
    where = f"{workload['kind']}/{meta.get('namespace', '')}/{meta['name']}"
    port, port_from = _port(spec, workload)
    ready = sorted(
        (pod["metadata"]["name"], text(pod, "status", "podIP"))
        for pod in pods
        if "deletionTimestamp" not in pod["metadata"] and pod_state(pod).ready
    )
    holder = text(lease or {}, "spec", "holderIdentity")
    leader = next((p for p in ready if holder == p[0] or holder.startswith(p[0] + "_")), None)
    chosen = tuple(p for p in ([leader] if leader else ready) if p[1])
    problem = ""
    if port is None:
        problem = (
            f"no metrics port: no container port named {HTTP_PROM}, no {METRICS_PORT_ANNOTATION} "
            "annotation on its pod template, no metrics_port setting"
        )
    elif not ready:
        problem = f"{where} has no Ready Pod"
    elif not chosen:
        problem = f"its Ready Pod {(leader or ready[0])[0]} has no IP yet"
    return MetricsTarget(name, where, port, port_from, chosen, leader[0] if leader else None, problem)


def _port(spec: ControllerSpec, workload: Mapping[str, Any]) -> tuple[int | None, str]:
    if spec.metrics_port is not None:
        return spec.metrics_port, "metrics_port setting"
    template = dig(workload, "spec", "template")
    for container in dig(template or {}, "spec", "containers") or ():
        for port in container.get("ports") or ():
            number = port.get("containerPort")
            if port.get("name") == HTTP_PROM and _valid(number):
                return number, f"container port {HTTP_PROM}"
    annotated = text(template or {}, "metadata", "annotations", METRICS_PORT_ANNOTATION)
    if annotated.isdecimal() and _valid(int(annotated)):
        return int(annotated), f"annotation {METRICS_PORT_ANNOTATION}"
    return None, ""


def _valid(port: object) -> bool:
    return isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536
