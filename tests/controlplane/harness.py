"""Starts a real etcd + kube-apiserver on loopback, the way controller-runtime's envtest does.

No kubelet, scheduler or controller-manager runs: tests write pod and CR status
themselves through the /status subresource, which is exactly what stalewatch must
read correctly. The API server can be stopped and started again on the same etcd,
so tests can cut the watcher off from it mid-run.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane.pki import Pki, make_pki

HERE = Path(__file__).resolve().parent
CRDS = HERE.parent / "crds"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def binaries_dir() -> Path:
    """Where build.sh put (or puts, on first use) the binaries; cached outside the clone."""
    override = os.environ.get("STALEWATCH_CONTROLPLANE_BIN")
    if override:
        return Path(override)
    out = subprocess.run(
        ["bash", str(HERE / "build.sh")], check=True, capture_output=True, text=True
    ).stdout.strip()
    return Path(out.splitlines()[-1])


def _wait(what: str, probe: Callable[[], bool], *, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before it was ready")
        if probe():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} not ready after {timeout:.0f}s")


@dataclass
class ControlPlane:
    """One etcd and one kube-apiserver, with an admin kubeconfig."""

    bin_dir: Path
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="stalewatch-cp-")))
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    apiserver_port: int = field(default_factory=free_port)
    etcd: subprocess.Popen[bytes] | None = None
    apiserver: subprocess.Popen[bytes] | None = None
    pki: Pki | None = None
    apiserver_args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def start(self) -> None:
        self.pki = make_pki(self.workdir / "pki")
        self.start_etcd()
        self.start_apiserver()
        self.write_kubeconfig(
            self.kubeconfig,
            user={
                "client-certificate": str(self.pki.admin_cert),
                "client-key": str(self.pki.admin_key),
            },
        )

    def start_etcd(self) -> None:
        log = open(self.workdir / "etcd.log", "ab")  # noqa: SIM115 - the process owns it
        self.etcd = subprocess.Popen(
            [
                str(self.bin_dir / "etcd"),
                "--name=stalewatch-test",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-cluster=stalewatch-test=http://127.0.0.1:{self.etcd_peer_port}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _wait("etcd", lambda: http_ok(f"{self.etcd_url}/health"), timeout=30, proc=self.etcd)

    def start_apiserver(self) -> None:
        assert self.pki is not None
        log = open(self.workdir / "kube-apiserver.log", "ab")  # noqa: SIM115 - the process owns it
        self.apiserver = subprocess.Popen(
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={self.pki.serving_cert}",
                f"--tls-private-key-file={self.pki.serving_key}",
                f"--client-ca-file={self.pki.ca_cert}",
                f"--secure-port={self.apiserver_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                f"--service-account-issuer={self.url}",
                f"--service-account-key-file={self.pki.sa_public}",
                f"--service-account-signing-key-file={self.pki.sa_private}",
                "--v=0",
                *self.apiserver_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _wait("kube-apiserver", self.ready, timeout=90, proc=self.apiserver)

    def stop_apiserver(self) -> None:
        stop_process(self.apiserver)
        self.apiserver = None

    def pause_apiserver(self) -> None:
        """SIGSTOP: the API server hangs (a frozen VM, a long GC pause): connections open, nothing answers."""
        assert self.apiserver is not None
        self.apiserver.send_signal(signal.SIGSTOP)

    def resume_apiserver(self) -> None:
        assert self.apiserver is not None
        self.apiserver.send_signal(signal.SIGCONT)

    @contextmanager
    def second_apiserver(self) -> Iterator[ControlPlane]:
        """Another kube-apiserver on the same etcd, as an HA control plane runs several: what is
        written through it reaches the first one's watchers through etcd. Stopped on exit (etcd
        stays)."""
        other = dataclasses.replace(
            self,
            workdir=Path(tempfile.mkdtemp(prefix="stalewatch-cp2-")),
            apiserver_port=free_port(),
            apiserver=None,
            etcd=None,
        )
        try:
            other.start_apiserver()
            assert self.pki is not None
            user = {"client-certificate": str(self.pki.admin_cert), "client-key": str(self.pki.admin_key)}
            other.write_kubeconfig(other.kubeconfig, user=user)
            yield other
        finally:
            other.stop_apiserver()
            shutil.rmtree(other.workdir, ignore_errors=True)

    def stop(self) -> None:
        if self.apiserver is not None and self.apiserver.poll() is None:
            self.apiserver.send_signal(signal.SIGCONT)  # a paused one cannot handle SIGTERM
        self.stop_apiserver()
        stop_process(self.etcd)
        self.etcd = None
        if not os.environ.get("STALEWATCH_KEEP_CONTROLPLANE"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def etcd_compact(self) -> int:
        """Compacts etcd's history up to now (what etcd and the API server do periodically),
        so a watch resuming from an older resourceVersion gets 410 Gone. Returns the revision."""
        rng = _post_json(f"{self.etcd_url}/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(rng["header"]["revision"])
        _post_json(f"{self.etcd_url}/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def etcd_get(self, key: str) -> dict[str, Any]:
        """A JSON-stored object (custom resources are stored as JSON) read straight from etcd."""
        found = _post_json(f"{self.etcd_url}/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
        stored: dict[str, Any] = json.loads(base64.b64decode(found["kvs"][0]["value"]))
        return stored

    def etcd_put(self, key: str, obj: dict[str, Any]) -> None:
        """Write an object straight into etcd, behind the API server's back."""
        value = base64.b64encode(json.dumps(obj).encode()).decode()
        _post_json(
            f"{self.etcd_url}/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(), "value": value}
        )

    def etcd_delete(self, key: str) -> None:
        """Delete one key straight in etcd, behind the API server's back."""
        deleted = _post_json(
            f"{self.etcd_url}/v3/kv/deleterange", {"key": base64.b64encode(key.encode()).decode()}
        )
        assert deleted.get("deleted") == "1", key

    def admin_ssl(self) -> ssl.SSLContext:
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def ready(self) -> bool:
        return http_ok(f"{self.url}/readyz", context=self.admin_ssl())

    def write_kubeconfig(self, path: Path, *, user: dict[str, str], namespace: str = "default") -> Path:
        """A kubeconfig as a user would have it; `user` holds client-certificate/-key or a token."""
        assert self.pki is not None
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca_cert)},
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [
                {"name": "test", "context": {"cluster": "test", "user": "user", "namespace": namespace}}
            ],
            "current-context": "test",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def install_crds(self, *paths: Path) -> None:
        """Applies CRD files or folders and returns once every CRD in the server is usable."""
        self.kubectl("apply", "--server-side", *(f"--filename={path}" for path in paths))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        self.wait_listable(self.kubectl("get", "crd", "-o", "jsonpath={.items[*].metadata.name}").split())

    def wait_listable(self, resources: list[str], *, timeout: float = 60) -> None:
        """Established is not enough: a new CRD's watch cache answers 429 until it has synced."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.kubectl("get", ",".join(resources), "--all-namespaces")
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def service_account_token(self, namespace: str, name: str) -> str:
        """A token for a ServiceAccount from the TokenRequest API, as the kubelet mints a pod's."""
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        minted = json.loads(self.kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(request)))
        return str(minted["status"]["token"])

    def server_side_apply(
        self, objects: list[dict[str, Any]], *flags: str
    ) -> subprocess.CompletedProcess[str]:
        """`kubectl apply --server-side [flags] -f -` of `objects`, its outcome returned unraised:
        the tests read what the API server admitted, refused or warned about (stderr)."""
        return subprocess.run(
            [
                str(self.bin_dir / "kubectl"),
                f"--kubeconfig={self.kubeconfig}",
                "apply",
                "--server-side",
                *flags,
                "-f",
                "-",
            ],
            input=yaml.safe_dump_all(objects),
            capture_output=True,
            text=True,
            check=False,
        )

    def kubectl(self, *args: str, kubeconfig: Path | None = None, stdin: str | None = None) -> str:
        """Runs the kubectl built beside the API server, as a user would."""
        done = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise KubectlError(done.returncode, done.args, done.stdout, done.stderr)
        return done.stdout


class KubectlError(subprocess.CalledProcessError):
    """CalledProcessError that shows what kubectl said, so a failing test explains itself."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr}"


@contextmanager
def running_control_plane(*crds: Path) -> Iterator[ControlPlane]:
    """A started control plane with `crds` installed, stopped on exit."""
    plane = ControlPlane(bin_dir=binaries_dir())
    plane.start()
    try:
        plane.install_crds(*crds)
        yield plane
    finally:
        plane.stop()


def http_ok(url: str, *, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _post_json(url: str, body: dict[str, object]) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        result: dict[str, Any] = json.loads(resp.read())
        return result


def stop_process(proc: subprocess.Popen[bytes] | None, *, patience: float = 15) -> None:
    """SIGTERM, then SIGKILL after `patience` seconds; nothing if it already ended."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=patience)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
