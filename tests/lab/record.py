"""Records what real Flux controllers write while things fail, for the fast tests to replay.

`python -m tests.lab.record --out tests/lab/recordings` starts the lab and runs every slow
scenario of tests/lab/scenarios.py side by side (a failing source needs real minutes before any
threshold passes, so these cannot run live in CI), then heals them, then takes source-controller
down. It keeps:

- `stream.jsonl.gz`: every watch event of the kinds stalewatch watches, as the API server sent it,
  with the moment it arrived (`at`): the live watcher's input, replayable in order;
- `snapshots/<checkpoint>.json`: `kubectl get -o json` of the same kinds at each checkpoint:
  `stalewatch analyze`'s input;
- `metrics/<checkpoint>/<controller>.txt`: each controller's Prometheus exposition then;
- `checkpoints.json` (name -> time) and `versions.json` (what ran).

Redo it when the lab's versions change (tests/lab/build.sh); README.md there says how.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.lab import scenarios
from tests.lab.lab import Lab, running_lab, wait_for

WATCHED = (
    "/api/v1/pods",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/replicasets",
    "/api/v1/events?fieldSelector=type%3DWarning",
    "/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.namespace%21%3Dkube-node-lease",
    "/apis/source.toolkit.fluxcd.io/v1/gitrepositories",
    "/apis/source.toolkit.fluxcd.io/v1/helmrepositories",
    "/apis/source.toolkit.fluxcd.io/v1/helmcharts",
    "/apis/source.toolkit.fluxcd.io/v1/ocirepositories",
    "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations",
    "/apis/helm.toolkit.fluxcd.io/v2/helmreleases",
)
"""The collections stalewatch watches in the lab (watcher/kube/resources.py: the built-in kinds,
and the Flux kinds), with its field selectors."""
SNAPSHOT = (
    "pods,deployments.apps,replicasets.apps,leases.coordination.k8s.io,"
    "gitrepositories.source.toolkit.fluxcd.io,helmrepositories.source.toolkit.fluxcd.io,"
    "helmcharts.source.toolkit.fluxcd.io,ocirepositories.source.toolkit.fluxcd.io,"
    "kustomizations.kustomize.toolkit.fluxcd.io,helmreleases.helm.toolkit.fluxcd.io"
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Tape:
    """One `kubectl get --raw ...?watch=1` per collection; every event kept with its arrival."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen[str]] = []
        self.kubectl = str(lab.plane.bin_dir / "kubectl")

    def start(self) -> None:
        for path in WATCHED:
            joiner = "&" if "?" in path else "?"
            url = f"{path}{joiner}watch=1&timeoutSeconds=7200"
            proc = subprocess.Popen(
                [
                    str(self.lab.plane.bin_dir / "kubectl"),
                    f"--kubeconfig={self.lab.plane.kubeconfig}",
                    "get",
                    "--raw",
                    url,
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            self.procs.append(proc)
            threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                event = json.loads(line)
                with self.lock:
                    self.events.append({"at": now(), "type": event["type"], "object": event["object"]})

    def stop(self) -> list[dict[str, Any]]:
        for proc in self.procs:
            proc.terminate()
            proc.wait()
        with self.lock:
            return sorted(self.events, key=lambda e: e["at"])


class Recorder:
    def __init__(self, lab: Lab, out: Path) -> None:
        self.lab, self.out = lab, out
        self.checkpoints: dict[str, str] = {}

    def checkpoint(self, name: str) -> None:
        """Snapshot and metrics, named; the moment is taken before either is read."""
        self.checkpoints[name] = now()
        objects = json.loads(self.lab.kubectl("get", SNAPSHOT, "--all-namespaces", "--output=json"))
        events = json.loads(
            self.lab.kubectl(
                "get", "events", "--all-namespaces", "--field-selector=type=Warning", "--output=json"
            )
        )
        objects["items"] += events["items"]
        snapshots = self.out / "snapshots"
        snapshots.mkdir(parents=True, exist_ok=True)
        (snapshots / f"{name}.json").write_text(json.dumps(objects, indent=1, sort_keys=True) + "\n")
        for controller, url in self.lab.metrics.items():
            target = self.out / "metrics" / name / f"{controller}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    target.write_bytes(response.read())
            except OSError as error:  # a controller that is down has no metrics: say so
                target.write_text(f"# unreadable at {self.checkpoints[name]}: {error}\n")
        print(f"{self.checkpoints[name]} checkpoint {name}", flush=True)


def sleep_until(moment: datetime) -> None:
    while (left := (moment - datetime.now(UTC)).total_seconds()) > 0:
        time.sleep(min(left, 5))


def record(out: Path, *, failing: timedelta, deleted_after: timedelta) -> None:
    with running_lab() as lab:
        tape = Tape(lab)
        tape.start()
        recorder = Recorder(lab, out)
        started = datetime.now(UTC)
        scenarios.break_all(lab)
        print(f"{now()} scenarios applied", flush=True)
        sleep_until(started + timedelta(minutes=3))
        recorder.checkpoint("early")
        sleep_until(started + deleted_after)
        scenarios.delete_the_deleted(lab)
        sleep_until(started + failing)
        recorder.checkpoint("failing")
        scenarios.heal_all(lab)
        wait_for("every scenario healed", lambda: scenarios.healed(lab), timeout=600, interval=5)
        time.sleep(20)
        recorder.checkpoint("recovered")
        expires = scenarios.take_down_source_controller(lab)
        sleep_until(expires + timedelta(seconds=10))
        recorder.checkpoint("source-controller-down")
        events = tape.stop()
        with gzip.open(out / "stream.jsonl.gz", "wt") as stream:
            for event in events:
                stream.write(json.dumps(event, sort_keys=True) + "\n")
        (out / "checkpoints.json").write_text(json.dumps(recorder.checkpoints, indent=1) + "\n")
        versions = {name: v for name, v in lab.versions.items() if name != "controlplane"}  # a local path
        (out / "versions.json").write_text(json.dumps(versions, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(events)} watch events into {out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.record", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--failing-minutes", type=float, default=13.5, help="how long the failures last")
    parser.add_argument("--delete-after-minutes", type=float, default=4.0)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the lab on the way out
    for part in ("snapshots", "metrics"):
        shutil.rmtree(args.out / part, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    record(
        args.out,
        failing=timedelta(minutes=args.failing_minutes),
        deleted_after=timedelta(minutes=args.delete_after_minutes),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
