"""Fixtures for the deploy tests: a control plane of their own, deploy/ rendered by kubectl,
its RBAC applied for real, a ServiceAccount token, and the image's install run the way the
pod runs it.

The deploy tests get their own API server because they create cluster-wide objects (a
ClusterRole, CRDs, a namespace that can never finish deleting with no controller-manager)
that the other tests' shared server should not see.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import CRDS, ControlPlane, free_port, running_control_plane
from tests.deploy.dockerfile import BASE_IMAGE_BIN, Stage, parse, replay_builder

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEPLOY = REPO / "deploy"
DOCKERFILE = REPO / "Dockerfile"
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")


@pytest.fixture(scope="package")
def plane() -> Iterator[ControlPlane]:
    with running_control_plane(CRDS, HERE / "crds.yaml") as plane:
        yield plane


def render(plane: ControlPlane, path: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize`, as `kubectl apply -k` renders it."""
    return [doc for doc in yaml.safe_load_all(plane.kubectl("kustomize", str(path))) if doc]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
    return found[0]


def granted(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(API group, resource) pairs the ClusterRole among `objects` grants."""
    return {
        (group, resource)
        for rule in one(objects, "ClusterRole")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


@pytest.fixture(scope="package")
def rendered(plane: ControlPlane) -> list[dict[str, Any]]:
    return render(plane, DEPLOY)


@pytest.fixture(scope="package")
def rbac(plane: ControlPlane, rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """deploy/'s Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding, applied for real."""
    objects = [o for o in rendered if o["kind"] in RBAC_KINDS]
    plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    return objects


@pytest.fixture(scope="package")
def shared_dir() -> Iterator[Path]:
    """A scratch directory the unprivileged user the image runs as can read."""
    path = Path(tempfile.mkdtemp(prefix="stalewatch-deploy-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="package")
def token_kubeconfig(plane: ControlPlane, rbac: list[dict[str, Any]], shared_dir: Path) -> Path:
    """A kubeconfig holding nothing but a token minted for deploy/'s ServiceAccount through
    the TokenRequest API, as the kubelet mints the pod's projected token."""
    account = one(rbac, "ServiceAccount")["metadata"]
    token = plane.service_account_token(account["namespace"], account["name"])
    assert plane.pki is not None
    ca = shared_dir / "ca.crt"
    shutil.copyfile(plane.pki.ca_cert, ca)
    kubeconfig = plane.write_kubeconfig(shared_dir / "kubeconfig", user={"token": token})
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["certificate-authority"] = str(ca)
    kubeconfig.write_text(yaml.safe_dump(config))
    for readable in (ca, kubeconfig):
        readable.chmod(0o644)
    return kubeconfig


def dockerfile_stages() -> tuple[Stage, Stage]:
    """(builder, final): the stage named builder and the last stage."""
    stages = parse(DOCKERFILE.read_text())
    builders = [s for s in stages if s.name == "builder"]
    assert len(builders) == 1, "the Dockerfile needs exactly one stage named builder"
    return builders[0], stages[-1]


def base_python(image: str) -> Path:
    """A Python of the base image's minor version that any user may run (the one in the
    test venv may live under a private home directory)."""
    minor = image.split(":", 1)[1].split("-", 1)[0].rsplit(".", 1)[0]
    found = shutil.which(f"python{minor}", path="/usr/local/bin:/usr/bin")
    assert found, f"the image test needs python{minor} in /usr/local/bin or /usr/bin, as the base image has"
    return Path(found)


@pytest.fixture(scope="package")
def image_root(shared_dir: Path) -> Path:
    """The builder stage replayed, then everything the final stage does not copy from it
    removed: the returned directory stands for the final image's root."""
    builder, final = dockerfile_stages()
    root = shared_dir / "image"
    replay_builder(builder, context=REPO, root=root, python=base_python(builder.base))
    keep = [root / BASE_IMAGE_BIN]
    for copy in final.all("COPY"):
        flag, source, dest = shlex.split(copy.args)
        assert flag == f"--from={builder.name}", f"the final stage copies only from the builder: {copy.args}"
        # A venv's scripts name its interpreter by absolute path: it must not move.
        assert source == dest, f"the venv must keep its path from builder to final stage: {copy.args}"
        keep.append(root / dest.lstrip("/"))
    _prune(root, keep)
    return root


def _prune(directory: Path, keep: list[Path]) -> None:
    for path in directory.iterdir():
        if path in keep:
            continue
        if any(path in kept.parents for kept in keep):
            _prune(path, keep)
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


@dataclass
class Running:
    """stalewatch started the way the pod starts it."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, path: str, *, timeout: float = 60) -> tuple[int, str]:
        """Polls `path` until it answers 200; the last answer otherwise."""
        deadline = time.monotonic() + timeout
        answer: tuple[int, str] = (0, "never answered")
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"stalewatch exited with {self.process.returncode}:\n{self.logs()}")
            try:
                answer = self.get(path)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                answer = (0, "connection refused")
            if answer[0] == 200:
                return answer
            time.sleep(0.2)
        return answer

    def stop(self) -> None:
        """SIGTERM, as the kubelet sends after preStop; SIGKILL if that is ignored."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_like_the_pod(
    *, image_root: Path, rendered: list[dict[str, Any]], kubeconfig: Path, workdir: Path
) -> Running:
    """Runs the image's entrypoint with the Deployment's args and ConfigMap, as the image's
    user, on a read-only root file system (a private mount namespace, so only this process
    sees it read-only). Outside a cluster it needs --kubeconfig, and --listen on a free port."""
    _, final = dockerfile_stages()
    pod = one(rendered, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    entrypoint = container.get("command") or final.all("ENTRYPOINT")[-1].exec_form()
    args = container.get("args") or final.all("CMD")[-1].exec_form()
    for mount_path, where in _mount_config_maps(pod, rendered, workdir).items():
        args = [arg.replace(mount_path, str(where)) for arg in args]
    env = final.env({"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    env["PATH"] = os.pathsep.join(_in_image(image_root, entry) for entry in env["PATH"].split(os.pathsep))
    env["HOME"] = "/"  # what docker sets for a user with no passwd entry
    port = free_port()
    command = [*entrypoint, *args, f"--kubeconfig={kubeconfig}", f"--listen=127.0.0.1:{port}"]
    command[0] = shutil.which(command[0], path=env["PATH"]) or command[0]
    uid, _, gid = final.all("USER")[-1].args.partition(":")
    drop = f"mount -o remount,bind,ro / && exec setpriv --reuid={uid} --regid={gid or uid} --clear-groups -- "
    log = workdir / "stalewatch.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["unshare", "--mount", "--", "/bin/sh", "-c", drop + '"$@"', "sh", *command],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd="/",
        )
    return Running(process=process, url=f"http://127.0.0.1:{port}", log=log)


def _in_image(image_root: Path, path: str) -> str:
    """A path of the image's PATH, where it is under `image_root` (else the host's)."""
    moved = image_root / path.lstrip("/")
    return str(moved) if path.startswith("/") and moved.is_dir() else path


def _mount_config_maps(pod: dict[str, Any], rendered: list[dict[str, Any]], workdir: Path) -> dict[str, Path]:
    """Writes each ConfigMap volume's files under `workdir`; mount path -> where they are."""
    mounts: dict[str, Path] = {}
    for mount in pod["containers"][0].get("volumeMounts", []):
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
        config_map = next(
            o
            for o in rendered
            if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]
        )
        where = workdir / mount["mountPath"].lstrip("/")
        where.mkdir(parents=True)
        for name, content in config_map["data"].items():
            (where / name).write_text(content)
        mounts[mount["mountPath"]] = where
    return mounts


@pytest.fixture(scope="package")
def running(
    image_root: Path, rendered: list[dict[str, Any]], token_kubeconfig: Path, shared_dir: Path
) -> Iterator[Running]:
    """stalewatch from the image's install, with only the ServiceAccount's token."""
    workdir = shared_dir / "pod"
    workdir.mkdir()
    running = start_like_the_pod(
        image_root=image_root, rendered=rendered, kubeconfig=token_kubeconfig, workdir=workdir
    )
    try:
        yield running
    finally:
        running.stop()
