"""How a failing Pod's or workload's state (workloads.WorkloadState) is said: one phrasing for
the WorkloadUnhealthy finding, the controller-down finding, a release's failing Pods and the
impact tree, so on-call reads the same words for the same state wherever it shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watcher.model.rules.workloads import WorkloadState
from watcher.model.types import HealthReason

_PHRASES: Mapping[HealthReason, str] = {
    HealthReason.NO_AVAILABLE_REPLICAS: "has {detail} replicas",
    HealthReason.UNAVAILABLE: "has {detail} replicas",
    HealthReason.PROGRESS_DEADLINE_EXCEEDED: "has exceeded its progress deadline",
    HealthReason.GENERATION_NOT_OBSERVED: "has a spec its controller has not observed ({message})",
}


def exit_text(state: WorkloadState) -> str:
    """`restarted 3 times, last exited with Error (exit code 1)`, or what of it is known."""
    parts = [f"restarted {state.restarts} time{'s' if state.restarts != 1 else ''}" if state.restarts else ""]
    if state.last_termination:
        code = f" (exit code {state.exit_code})" if state.exit_code is not None else ""
        parts.append(f"last exited with {state.last_termination}{code}")
    return ", ".join([p for p in parts if p])


def termination_evidence(state: WorkloadState) -> dict[str, Any]:
    """The container's last exit, for evidence, when it has one."""
    if not state.last_termination:
        return {}
    return {"last_termination": state.last_termination, "exit_code": state.exit_code}


def describe_state(state: WorkloadState) -> str:
    """`is in CrashLoopBackOff (container app, image x:1, restarted 6 times, last exited with
    Error (exit code 1))`, `has failed: Evicted` or `has 0/2 available replicas`."""
    phrase = _PHRASES.get(state.failing) if state.failing is not None else None
    if phrase is not None:
        return phrase.format(detail=state.detail, message=state.message)
    if state.failing is HealthReason.FAILED:
        head = f"has failed: {state.detail}"
    elif state.failing is HealthReason.NOT_READY and state.restarted_after_exit:
        head = "is not ready: its container exits and is restarted"
    elif state.failing is HealthReason.NOT_READY:
        head = "is Running but not Ready" if state.detail == "Running" else f"is in {state.detail}"
    else:
        head = f"is in {state.failing}"
    return head + particulars(state)


def particulars(state: WorkloadState, *, container: bool = True) -> str:
    """` (container app, image x:1, restarted 6 times, ...)`, what of it is known, or "" (the
    controller-down finding names the Pod instead of the container: `container=False`)."""
    parts = [
        f"container {state.container}" if container and state.container else "",
        f"image {state.image}" if state.image else "",
        exit_text(state),
    ]
    listed = ", ".join([p for p in parts if p])
    return f" ({listed})" if listed else ""
