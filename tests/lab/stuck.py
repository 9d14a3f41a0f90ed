"""A stuck kustomize-controller in the lab: up, Lease renewed, its only worker held.

kustomize-controller is restarted with `--concurrent=1` (one worker). Kustomization `blocker`
health-checks a Deployment that never exists, with `wait: false` and `timeout: 1h`: Flux polls
that object's status until the timeout, inside the reconcile, so the one worker is held for an
hour. Every other Kustomization queues behind it (`workqueue_depth` > 0) and nothing completes
(`controller_runtime_reconcile_total` rests), while `workqueue_longest_running_processor_seconds`
grows. `heal()` deletes the blocker and restarts the controller as the lab starts it.

`python -m tests.lab.stuck --out tests/lab/recordings` records what the real controller shows
while held (see `record`); tests/lab/test_lab_stuck.py judges it live.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.lab.lab import Lab, running_lab, wait_for
from tests.lab.manifests import NAMESPACE, git_repository, kustomization
from tests.lab.test_lab import GITREPOSITORIES, KUSTOMIZATIONS, ready
from watcher.model.ingest.controller_metrics import ControllerMetrics, parse_controller_metrics

KC = "kustomize-controller"
QUEUE = "kustomization"
"""kustomize-controller's work queue (controller-runtime names it after the controller)."""
BLOCKER = "blocker"
QUEUED = ("queued-a", "queued-b", "queued-c")
"""Kustomizations applied while the blocker holds the worker: they have never been reconciled."""
HOLDING = ("--concurrent=1",)


def blocker() -> dict[str, Any]:
    """A Kustomization whose reconcile cannot finish before its 1h timeout (see the module)."""
    obj = kustomization(BLOCKER)
    obj["spec"].update(
        prune=False,
        wait=False,
        timeout="1h",
        healthChecks=[
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "never", "namespace": "default"}
        ],
    )
    return obj


def queued(name: str) -> dict[str, Any]:
    """A Kustomization due every 20s: its due window is short, so it is overdue soon."""
    obj = kustomization(name)
    obj["spec"].update(interval="20s", prune=False)
    return obj


def read_metrics(lab: Lab) -> bytes:
    with urllib.request.urlopen(lab.metrics[KC], timeout=5) as response:
        body: bytes = response.read()
        return body


def parsed(lab: Lab) -> ControllerMetrics:
    got = parse_controller_metrics(read_metrics(lab))
    assert isinstance(got, ControllerMetrics), got
    return got


def held(lab: Lab, *, longer_than: float = 0.0) -> ControllerMetrics | None:
    """The controller's metrics once its one worker has run one reconcile for `longer_than`
    seconds, and others wait in its queue; else None."""
    got = parsed(lab)
    queue = got.queues.get(QUEUE)
    busy = got.active_workers.get(QUEUE) == 1
    running = queue is not None and (queue.longest_running_seconds or 0) > longer_than
    waiting = queue is not None and (queue.depth or 0) > 0
    return got if busy and running and waiting else None


def start(lab: Lab) -> None:
    """The healthy pair (GitRepository `lab`, Kustomization `apps`) Ready, then kustomize-controller
    restarted with one worker."""
    lab.apply(git_repository(lab.git_url), kustomization())
    wait_for("GitRepository Ready", lambda: ready(lab.get(GITREPOSITORIES, "lab")), timeout=120)
    wait_for("Kustomization Ready", lambda: ready(lab.get(KUSTOMIZATIONS, "apps")), timeout=120)
    lab.start_controller(KC, extra_args=HOLDING)
    wait_for(f"{KC} holds its Lease", lambda: lab.lease_holder(KC) == lab.pods[KC], timeout=90)


def request_reconcile(lab: Lab, name: str) -> None:
    moment = datetime.now(UTC).isoformat()
    request = f"reconcile.fluxcd.io/requestedAt={moment}"
    lab.kubectl("annotate", "--overwrite", f"--namespace={NAMESPACE}", f"{KUSTOMIZATIONS}/{name}", request)


def hold(lab: Lab) -> ControllerMetrics:
    """The blocker applied and holding the worker, then the queued Kustomizations and a reconcile
    request of `apps` waiting behind it. Returns the controller's metrics once they wait."""
    lab.apply(blocker())
    wait_for(f"{BLOCKER} holding the only worker", lambda: _running(lab), timeout=60)
    lab.apply(*(queued(name) for name in QUEUED))
    request_reconcile(lab, "apps")
    return wait_for("the others queued behind it", lambda: held(lab), timeout=60)


def _running(lab: Lab) -> bool:
    queue = parsed(lab).queues.get(QUEUE)
    return queue is not None and (queue.longest_running_seconds or 0) > 0


def heal(lab: Lab) -> None:
    """The blocker deleted (its finalizer is removed by the controller) and the controller
    restarted as the lab starts it: every worker free."""
    lab.kubectl("delete", f"{KUSTOMIZATIONS}/{BLOCKER}", f"--namespace={NAMESPACE}", "--wait=false")
    lab.start_controller(KC)


# -- recording ---------------------------------------------------------------------------------

OBJECTS = f"{KUSTOMIZATIONS},{GITREPOSITORIES},deployments.apps,pods,leases.coordination.k8s.io"
"""What is saved beside the second recording: the Kustomizations, their GitRepository, the
controllers' Deployments, Pods and Leases (flux-system holds nothing else)."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def record(out: Path, *, apart: float) -> None:
    """Two reads of kustomize-controller's /metrics `apart` seconds apart while held, and the
    objects at the second: metrics/kustomize-controller-stuck-{1,2}.prom, stuck/objects.yaml,
    stuck/recorded.json (the moments, the versions, the controller's flags)."""
    with running_lab() as lab:
        start(lab)
        hold(lab)
        moments: dict[str, str] = {}
        metrics = out / "metrics"
        metrics.mkdir(parents=True, exist_ok=True)
        for n in (1, 2):
            if n == 2:
                time.sleep(apart)
                wait_for("still held", lambda: held(lab, longer_than=apart), timeout=10)
            moments[f"{KC}-stuck-{n}.prom"] = now()
            (metrics / f"{KC}-stuck-{n}.prom").write_bytes(read_metrics(lab))
            print(f"{moments[f'{KC}-stuck-{n}.prom']} recorded {KC}-stuck-{n}.prom", flush=True)
        stuck = out / "stuck"
        stuck.mkdir(parents=True, exist_ok=True)
        moments["objects.yaml"] = now()
        objects = lab.kubectl("get", OBJECTS, f"--namespace={NAMESPACE}", "--output=yaml")
        (stuck / "objects.yaml").write_text(objects)
        versions = {name: v for name, v in lab.versions.items() if name != "controlplane"}  # a local path
        recorded = {"at": moments, "versions": versions, "flags": {KC: list(HOLDING)}}
        (stuck / "recorded.json").write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.stuck", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--apart-minutes", type=float, default=6.5, help="between the two reads")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the lab on the way out
    record(args.out, apart=args.apart_minutes * 60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
