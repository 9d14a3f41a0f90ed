"""The kind whose fast path needs code of its own: a healthy Pod, packed on decode."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET


def healthy(pod: Any) -> bool:
    """Running, Ready=True, not being deleted, no container waiting and none last killed for
    memory: what workloads.pod_state calls ready with nothing failing, so the Pod's only rule
    has no finding and nothing to wait for (a test holds the two to that). Read after the Pod's
    checks (Shape.check: no string is left where an object belongs) and before interning."""
    status = pod.status
    if status is UNSET or status.phase != "Running" or pod.metadata.deletionTimestamp:
        return False
    for condition in status.conditions or ():
        if condition.type == "Ready":  # the first one, as objects.condition() reads it
            if condition.status != "True":
                return False
            break
    else:
        return False
    for statuses in (status.initContainerStatuses, status.containerStatuses):
        for container in statuses or ():
            if container.state is not UNSET and container.state.waiting is not UNSET:
                return False
            last = container.lastState.terminated if container.lastState is not UNSET else UNSET
            if last is not UNSET and last.reason == "OOMKilled":
                return False
    return True
