"""`stalewatch run` in-process against the lab, reading the real controllers' own /metrics.

The lab's controllers are host processes: their Pods' IPs are kwok's and lead nowhere, so the
targets the model names (leader Pod, http-prom port 8080) are pointed at each controller's actual
metrics address; the rest (reading, parsing, judging) is `stalewatch run`'s own. Thresholds are
test-sized (1 s slack, 1% jitter, stale after 10 s) and reads every 2 s, so windows are minutes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from tests.kube.support import Service, settings_for
from tests.kube.support import running as stalewatch_running
from tests.lab.lab import Lab
from tests.lab.manifests import CONTROLLERS
from watcher.model.rules.metrics_targets import MetricsTarget

THRESHOLDS: Mapping[str, object] = {
    "heartbeat_slack": "1s",
    "heartbeat_jitter_fraction": 0.01,
    "heartbeat_stale_after": "10s",
}


def at_the_lab(lab: Lab, target: MetricsTarget) -> MetricsTarget:
    address = urlsplit(lab.metrics[target.controller])
    assert target.port == 8080, target  # what the model found: the Deployment's http-prom port
    pods = tuple((pod, address.hostname or "") for pod, _ in target.pods)
    return dataclasses.replace(target, port=address.port, pods=pods)


@asynccontextmanager
async def reading_the_lab(
    lab: Lab, *, thresholds: Mapping[str, object] = THRESHOLDS
) -> AsyncIterator[Service]:
    """The service, its heartbeat reader aimed at the lab's controllers (`thresholds` on top of
    the test-sized ones)."""
    settings = settings_for(
        lab.plane.kubeconfig,
        thresholds={**THRESHOLDS, **thresholds},
        heartbeat_interval="2s",
        heartbeat_timeout="1s",
    )
    async with stalewatch_running(settings) as service:
        reader, model = service.runtime.heartbeats, service.runtime.live.model
        assert reader is not None
        reader.targets = lambda: [
            at_the_lab(lab, t) for t in model.metrics_targets() if t.controller in CONTROLLERS
        ]
        yield service
