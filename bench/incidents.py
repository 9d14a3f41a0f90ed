"""Controllers going down in the synthetic stream, as a real outage writes it: the incident benchmark.

Two incidents are measured on the maximum-size stream (bench/envelope.py in process,
bench/served.py through a real `stalewatch run`): source-controller alone down, when every Flux
source and all that reads one goes stale, and every controller in flux-system down. A controller
that crashes leaves in the API server what its kubelet and kube-controller-manager write, and
stops writing what it wrote itself:

  * its Pod: Ready and ContainersReady False, the container waiting in CrashLoopBackOff after
    exiting with an error (kubelet);
  * its ReplicaSet and Deployment: no ready or available replica, the Deployment's Available
    condition False (kube-controller-manager);
  * its leader Lease: no longer renewed, so it expires leaseDurationSeconds after its last renewal
    (which is when stalewatch's ControllerDown rule counts it down: rules/controllers.py);
  * the statuses of the kinds it reconciles (its API groups, watcher's DEFAULT_CONTROLLERS): no
    longer written, so the churn drops them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from bench.kinds import CONTROLLERS, FLUX_NS, Obj
from watcher.model.types import DEFAULT_CONTROLLERS

SCENARIOS: Mapping[str, tuple[str, ...]] = {
    "source-controller": ("source-controller",),
    "flux": CONTROLLERS,
}
"""Each incident by name: the controllers down in it."""
TITLES: Mapping[str, str] = {
    "source-controller": "source-controller down",
    "flux": "every controller in flux-system down",
}

RESTARTS = 6
"""Restarts a crash-looping container has after a few minutes (kubelet's back-off doubles from 10 s)."""


def _owned_by(obj: Mapping[str, Any], down: tuple[str, ...]) -> bool:
    """The object is one of the down controllers' workloads: Deployment, ReplicaSet or Pod."""
    meta = obj["metadata"]
    if meta.get("namespace") != FLUX_NS or obj["kind"] not in ("Deployment", "ReplicaSet", "Pod"):
        return False
    name: str = meta["name"]
    return name in down if obj["kind"] == "Deployment" else any(name.startswith(c + "-") for c in down)


def leader_lease(obj: Mapping[str, Any], down: tuple[str, ...]) -> bool:
    meta = obj["metadata"]
    return (
        obj["kind"] == "Lease"
        and meta.get("namespace") == FLUX_NS
        and meta["name"] in {f"{c}-leader-election" for c in down}
    )


def silenced(obj: Mapping[str, Any], down: tuple[str, ...]) -> bool:
    """A churn write the down controllers would have made: their Lease renewals, and statuses of
    the kinds they reconcile."""
    group = obj["apiVersion"].rpartition("/")[0]
    groups = {g for spec in DEFAULT_CONTROLLERS if spec.name in down for g in spec.groups}
    return group in groups or leader_lease(obj, down)


def outage(obj: Mapping[str, Any], down: tuple[str, ...], *, since: str) -> Obj | None:
    """The object as the outage of `down` (which began at `since`, RFC 3339) leaves it, or None
    when the outage does not write it."""
    if not _owned_by(obj, down):
        return None
    out: Obj = copy.deepcopy(dict(obj))
    status = out.setdefault("status", {})
    if out["kind"] == "Pod":
        _crash_looping(status, since)
    else:
        status.pop("readyReplicas", None)
        status.pop("availableReplicas", None)
    if out["kind"] == "Deployment":
        status["unavailableReplicas"] = out["spec"].get("replicas", 1)
        for cond in status.get("conditions", ()):
            if cond["type"] == "Available":
                cond.update(
                    status="False",
                    reason="MinimumReplicasUnavailable",
                    message="Deployment does not have minimum availability.",
                    lastUpdateTime=since,
                    lastTransitionTime=since,
                )
    return out


def _crash_looping(status: Obj, since: str) -> None:
    names = [c["name"] for c in status.get("containerStatuses", ())]
    for cond in status.get("conditions", ()):
        if cond["type"] in ("Ready", "ContainersReady"):
            cond.update(
                status="False",
                lastTransitionTime=since,
                reason="ContainersNotReady",
                message=f"containers with unready status: [{' '.join(names)}]",
            )
    for container in status.get("containerStatuses", ()):
        container.update(
            ready=False,
            started=False,
            restartCount=container.get("restartCount", 0) + RESTARTS,
            state={
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off 2m40s restarting failed container={container['name']}",
                }
            },
            lastState={
                "terminated": {
                    "exitCode": 1,
                    "reason": "Error",
                    "startedAt": since,
                    "finishedAt": since,
                    "containerID": container.get("containerID", ""),
                }
            },
        )
