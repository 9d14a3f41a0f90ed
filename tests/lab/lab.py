"""The real-Flux lab: real Flux controllers against the real kube-apiserver of tests/controlplane.

stalewatch reads what controllers write. Hand-written status (the rest of the suite) only shows
what we believe controllers write; the lab runs the real ones, so tests see the states real
controllers leave behind, including when they die. It starts:

- the control plane (etcd + kube-apiserver) with the CRDs the controllers themselves ship;
- kube-controller-manager (Deployments -> ReplicaSets -> Pods, garbage collection);
- kwok, the kubelet of one fake node: it marks the Flux pods Running/Ready, and, through the fault
  Stage in manifests.py, puts a pod's container into ImagePullBackOff on request;
- the Flux Deployments in flux-system, as `flux install` writes them;
- the real source-, kustomize- and helm-controller as host processes, one per Deployment, each in
  its own mount and UTS namespace: hostname = its pod's name (so its leader-election Lease names the
  pod, as in a cluster) and an in-cluster namespace file (controller-runtime wants it for leader
  election outside a cluster);
- a Git server with one repository the GitRepository objects can point at.

Every process logs to <workdir>/logs/<name>.log; STALEWATCH_KEEP_LAB=1 keeps the workdir.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.controlplane.harness import ControlPlane, free_port, http_ok, stop_process
from tests.lab import manifests
from tests.lab.manifests import CONTROLLERS, FAULT_LABEL, FAULT_MESSAGE, NAMESPACE, WATCH_SELECTOR, lease_name

HERE = Path(__file__).resolve().parent
REPOSITORY = "lab"
INITIAL_FILES = {
    "apps/configmap.yaml": yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "lab-config", "namespace": "default"},
            "data": {"greeting": "hello from git"},
        }
    ),
}
KCM_CONTROLLERS = "deployment-controller,replicaset-controller,garbage-collector-controller"
KCM_CONTROLLERS += ",namespace-controller,serviceaccount-controller"
T = TypeVar("T")


def lab_dir() -> Path:
    """Where build.sh put (or puts, on first use: about 20 minutes) the lab's binaries."""
    override = os.environ.get("STALEWATCH_LAB_BIN")
    if override:
        return Path(override)
    out = subprocess.run(["bash", str(HERE / "build.sh")], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float = 60, interval: float = 0.25) -> T:
    """Polls `probe` until it returns something truthy, and returns that; a bounded deadline, so
    a test that waits on a real controller fails with what it waited for instead of hanging."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except (subprocess.CalledProcessError, OSError, LookupError, ValueError) as err:
            last_error = err
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"{what}: not true after {timeout:.0f}s{detail}")
        time.sleep(interval)


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of type `kind`, if the object has one."""
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == kind:
            return dict(cond)
    return None


@dataclass
class Lab:
    """A running lab; see the module docstring. Built by running_lab()."""

    plane: ControlPlane
    bin_dir: Path
    versions: dict[str, str]
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="stalewatch-lab-")))
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    pods: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)
    """Each controller's metrics endpoint (http://127.0.0.1:PORT/metrics), as Prometheus scrapes it."""
    git_url: str = ""
    storage_port: int = field(default_factory=free_port)

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.plane.install_crds(self.bin_dir / "crds")
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.plane.kubeconfig}",
                f"--controllers={KCM_CONTROLLERS}",
                "--leader-elect=false",
                "--secure-port=0",
            ],
        )
        self.apply(manifests.namespace(NAMESPACE), manifests.node())
        self._start_kwok()
        wait_for(f"node {manifests.NODE} Ready", self._node_ready, timeout=60)
        self.apply(
            *(manifests.service_account(name) for name in CONTROLLERS),
            *(manifests.deployment(name, self.versions[name]) for name in CONTROLLERS),
        )
        for name in CONTROLLERS:
            self.pods[name] = wait_for(f"{name} pod Running and Ready", lambda n=name: self._ready_pod(n))
        self._start_git_server()
        for name in CONTROLLERS:
            self.start_controller(name)
        for name in CONTROLLERS:
            wait_for(
                f"{name} holds its Lease", lambda n=name: self.lease_holder(n) == self.pods[n], timeout=90
            )

    def stop(self) -> None:
        """Stops every process this lab started (a paused one is continued first, so SIGTERM
        works), then the control plane, and removes the workdir unless STALEWATCH_KEEP_LAB is set.
        Safe to call twice, and after a failed start."""
        for proc in reversed(list(self.procs.values())):
            _terminate(proc)
        self.procs.clear()
        self.plane.stop()
        if not os.environ.get("STALEWATCH_KEEP_LAB"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def start_controller(self, name: str, *, extra_args: Sequence[str] = ()) -> None:
        """Starts (or restarts) the real controller process behind Deployment `name`, in its pod's
        identity, with `extra_args` after the lab's flags (e.g. `--concurrent=1`), and waits for its
        readiness endpoint. A running one is stopped first (SIGTERM: it releases its Lease)."""
        if name in self.procs:
            _terminate(self.procs[name])
        health, metrics = free_port(), free_port()
        self.metrics[name] = f"http://127.0.0.1:{metrics}/metrics"
        argv = [
            str(self.bin_dir / name),
            "--enable-leader-election",
            "--events-addr=",
            f"--metrics-addr=127.0.0.1:{metrics}",
            f"--health-addr=127.0.0.1:{health}",
            "--watch-all-namespaces=true",
            "--log-level=info",
            "--log-encoding=json",
            f"--watch-label-selector={WATCH_SELECTOR}",
        ]
        if name == "source-controller":
            storage = self.workdir / "storage"
            storage.mkdir(exist_ok=True)
            address = f"127.0.0.1:{self.storage_port}"
            argv += [
                f"--storage-path={storage}",
                f"--storage-addr={address}",
                f"--storage-adv-addr={address}",
            ]
        env = {"KUBECONFIG": str(self.plane.kubeconfig), "RUNTIME_NAMESPACE": NAMESPACE}
        proc = self._spawn(name, self._as_pod(self.pods[name], [*argv, *extra_args]), env=env)
        wait_for(
            f"{name} /readyz", lambda: _alive(proc, name) and http_ok(f"http://127.0.0.1:{health}/readyz")
        )

    def start_stalewatch(
        self, listen: str, *, kubeconfig: Path | None = None, args: Sequence[str] = ("run",)
    ) -> subprocess.Popen[bytes]:
        """`stalewatch run` as a user starts it against the lab: its own process, default settings
        and thresholds, the lab's kubeconfig, listening on `listen` ([HOST]:PORT); returned once
        /readyz answers (every kind listed). It logs to logs/stalewatch.log and stops with the lab.
        `kubeconfig` (e.g. a ServiceAccount's token) and `args` (e.g. a Deployment's) replace the
        lab's admin kubeconfig and the bare `run`."""
        argv = [
            sys.executable,
            "-m",
            "watcher",
            *args,
            f"--kubeconfig={kubeconfig or self.plane.kubeconfig}",
            f"--listen={listen}",
        ]
        proc = self._spawn("stalewatch", argv)
        wait_for(
            "stalewatch ready", lambda: _alive(proc, "stalewatch") and http_ok(f"http://{listen}/readyz")
        )
        return proc

    # -- faults ----------------------------------------------------------------------------------

    def pause(self, controller: str) -> None:
        """SIGSTOP: the controller hangs (its Lease stops renewing, nothing is reconciled)."""
        self._proc(controller).send_signal(signal.SIGSTOP)

    def resume(self, controller: str) -> None:
        self._proc(controller).send_signal(signal.SIGCONT)

    def kill(self, controller: str) -> None:
        """SIGKILL: the controller dies without releasing its Lease, as an OOM kill does."""
        proc = self._proc(controller)
        proc.kill()
        proc.wait()

    def break_pod(self, controller: str, reason: str = "ImagePullBackOff") -> None:
        """Makes the controller's pod report its container waiting with `reason`, not ready (the
        kubelet's view of a container that died and cannot come back), with the kubelet's events.
        The Deployment then counts 0 available replicas. It does not touch the process: kill() it
        for the full picture."""
        pod = self.pods[controller]
        image = f"ghcr.io/fluxcd/{controller}:{self.versions[controller]}"
        message = manifests.fault_message(reason, image, pod)
        patch = {"metadata": {"labels": {FAULT_LABEL: reason}, "annotations": {FAULT_MESSAGE: message}}}
        self.kubectl(
            "patch", "pod", pod, f"--namespace={NAMESPACE}", "--type=merge", f"--patch={json.dumps(patch)}"
        )
        wait_for(f"pod {pod} waiting with {reason}", lambda: self.waiting_reason(controller) == reason)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        events = manifests.kubelet_events(self.pod(controller), reason, message, now)
        self.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(events))

    # -- Git -------------------------------------------------------------------------------------

    def push(
        self, files: Mapping[str, str | bytes | None], message: str = "lab: update", *, tag: str = ""
    ) -> str:
        """Commits `files` (path -> content; None deletes) on main and pushes it to the Git
        server over HTTP, as a user would, with `tag` on it if given. Returns the new commit's SHA."""
        checkout = self.workdir / "checkout"
        if checkout.exists():
            self._git("pull", "--ff-only", cwd=checkout)
        else:
            self._git("clone", "--branch=main", self.git_url, str(checkout), cwd=self.workdir)
        for rel, content in files.items():
            path = checkout / rel
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):
                    path.write_bytes(content)
                else:
                    path.write_text(content)
        self._git("add", "--all", cwd=checkout)
        self._git("commit", f"--message={message}", cwd=checkout)
        self._git("push", "origin", "HEAD:main", cwd=checkout)
        if tag:
            self._git("tag", tag, cwd=checkout)
            self._git("push", "origin", f"refs/tags/{tag}", cwd=checkout)
        return self._git("rev-parse", "HEAD", cwd=checkout).strip()

    # -- reading the cluster ---------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return self.plane.kubectl(*args, stdin=stdin)

    def apply(self, *objects: Mapping[str, Any]) -> None:
        self.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(objects)
        )

    def get(self, resource: str, name: str, namespace: str | None = NAMESPACE) -> dict[str, Any]:
        scope = [f"--namespace={namespace}"] if namespace else []
        found: dict[str, Any] = json.loads(self.kubectl("get", resource, name, *scope, "--output=json"))
        return found

    def lease(self, controller: str) -> dict[str, Any]:
        return self.get("leases.coordination.k8s.io", lease_name(controller))

    def lease_holder(self, controller: str) -> str:
        """The pod name in the Lease's holderIdentity (controller-runtime writes hostname_uuid)."""
        holder = str(self.lease(controller)["spec"].get("holderIdentity", ""))
        return holder.rsplit("_", 1)[0]

    def pod(self, controller: str) -> dict[str, Any]:
        return self.get("pod", self.pods[controller])

    def waiting_reason(self, controller: str) -> str | None:
        for status in self.pod(controller).get("status", {}).get("containerStatuses", []):
            waiting = status.get("state", {}).get("waiting")
            if waiting:
                return str(waiting.get("reason"))
        return None

    # -- internals -------------------------------------------------------------------------------

    def _spawn(
        self, name: str, argv: list[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # a ^C in the terminal reaches pytest, which stops the lab
            )
        self.procs[name] = proc
        return proc

    def _as_pod(self, pod: str, argv: list[str]) -> list[str]:
        """Wraps argv to run with hostname `pod` and an in-cluster namespace file, in private UTS
        and mount namespaces: /run is a bind mount of a lab directory there, the host's untouched.
        unshare execs (no fork), so the Popen's pid is the controller's."""
        run = self.workdir / "pods" / pod / "run"
        account = run / "secrets" / "kubernetes.io" / "serviceaccount"
        account.mkdir(parents=True, exist_ok=True)
        (account / "namespace").write_text(NAMESPACE)
        user = [] if os.geteuid() == 0 else ["--map-root-user"]
        script = 'mount --bind "$1" /run && hostname "$2" && shift 2 && exec "$@"'
        unshare = ["unshare", *user, "--mount", "--uts", "--propagation=private"]
        return [*unshare, "sh", "-c", script, "sh", str(run), pod, *argv]

    def _start_kwok(self) -> None:
        config = manifests.kwok_config(self.workdir / "kwok.yaml")
        stages = sorted((self.bin_dir / "stages").glob("*.yaml"))
        self._spawn(
            "kwok",
            [
                str(self.bin_dir / "kwok"),
                f"--kubeconfig={self.plane.kubeconfig}",
                *(f"--config={path}" for path in [*stages, config]),
                f"--manage-nodes-with-annotation-selector={manifests.KWOK_NODE_ANNOTATION}=fake",
                "--node-ip=127.0.0.1",
                "--cidr=10.244.0.0/24",
            ],
        )

    def _start_git_server(self) -> None:
        fixture = self.workdir / "fixture"
        for rel, content in INITIAL_FILES.items():
            (fixture / rel).parent.mkdir(parents=True, exist_ok=True)
            (fixture / rel).write_text(content)
        address = self.workdir / "gitserver.url"
        proc = self._spawn(
            "gitserver",
            [
                str(self.bin_dir / "gitserver"),
                f"--root={self.workdir / 'git'}",
                f"--init={REPOSITORY}={fixture}",
                f"--address-file={address}",
            ],
        )
        url = wait_for("git server", lambda: _alive(proc, "gitserver") and address.read_text().strip())
        self.git_url = f"{url}/{REPOSITORY}"

    def _node_ready(self) -> bool:
        ready = condition(self.get("node", manifests.NODE, namespace=None), "Ready")
        return bool(ready and ready["status"] == "True")

    def _ready_pod(self, controller: str) -> str | None:
        found = json.loads(
            self.kubectl(
                "get", "pods", f"--namespace={NAMESPACE}", f"--selector=app={controller}", "--output=json"
            )
        )
        for pod in found["items"]:
            ready = condition(pod, "Ready")
            if pod["status"].get("phase") == "Running" and ready and ready["status"] == "True":
                return str(pod["metadata"]["name"])
        return None

    def _proc(self, name: str) -> subprocess.Popen[bytes]:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} is not running (exit {proc.returncode})")
        return proc

    def _git(self, *args: str, cwd: Path) -> str:
        env = {
            **os.environ,
            "HOME": str(self.workdir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "lab",
            "GIT_AUTHOR_EMAIL": "lab@stalewatch.test",
            "GIT_COMMITTER_NAME": "lab",
            "GIT_COMMITTER_EMAIL": "lab@stalewatch.test",
        }
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
        return done.stdout


@contextmanager
def running_lab() -> Iterator[Lab]:
    """A started lab, stopped on exit, and on any error while starting."""
    bin_dir = lab_dir()
    versions: dict[str, str] = json.loads((bin_dir / "versions.json").read_text())
    plane = ControlPlane(bin_dir=Path(versions["controlplane"]))
    lab = Lab(plane=plane, bin_dir=bin_dir, versions=versions)
    try:
        plane.start()
        lab.start()
        yield lab
    finally:
        lab.stop()


def _alive(proc: subprocess.Popen[bytes], name: str) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"{name} exited with {proc.returncode}; see its log in the lab's logs/")
    return True


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """stop_process, continuing a paused controller first so that SIGTERM reaches it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
    stop_process(proc)
