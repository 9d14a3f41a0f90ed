"""A GitOps stack in the real API server, and `stalewatch wait` run on it as a subprocess.

No controller runs against the test API server, so the tests write the statuses Flux,
kube-controller-manager and kubelet would write, in the formats they write them (the sibling's
dry-run failure is kustomize-controller's, as in examples/sibling-revision-skew).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.app.test_rbac import ALLOWED
from tests.kube.objects import POD_HASH, cond, deployment, deployment_status, flux, pod, ready, running, stamp

Obj = dict[str, Any]
REV_A = "main@sha1:" + "a" * 40
REV_B = "main@sha1:" + "b" * 40
REV_C = "main@sha1:" + "c" * 40
SOURCE = {"kind": "GitRepository", "name": "fleet"}
CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller")
FORBIDDEN = (
    'ConfigMap/platform/feature-flags dry-run failed (Forbidden): configmaps "feature-flags" is forbidden: '
    'User "system:serviceaccount:flux-system:deploy-config" cannot patch resource "configmaps" in API '
    'group "" in the namespace "platform"'
)


def controllers(ns: str) -> list[Obj]:
    """The Flux controllers, running, in the test's namespace (the only one the wait watches)."""
    return [obj for name in CONTROLLERS for obj in (deployment(ns, name), pod(ns, name))]


def source(ns: str, revision: str) -> Obj:
    """The GitRepository, which has just fetched `revision` (the push)."""
    artifact = {"revision": revision, "lastUpdateTime": stamp()}
    return flux(
        "GitRepository",
        ns,
        "fleet",
        spec={"url": "https://git.example/fleet"},
        status=ready(artifact=artifact),
    )


def entry(ns: str, name: str, kind: str, group: str) -> Obj:
    return {"id": f"{ns}_{name}_{group}_{kind}", "v": "v1"}


def applied(revision: str, *entries: Obj) -> Obj:
    """What kustomize-controller writes after applying `revision`."""
    status = ready(
        f"Applied revision: {revision}", lastAppliedRevision=revision, lastAttemptedRevision=revision
    )
    return {**status, "inventory": {"entries": list(entries)}} if entries else status


def reconciling(applied_revision: str, attempted: str) -> Obj:
    """A reconcile of `attempted` in progress, `applied_revision` still applied."""
    return {
        "lastAppliedRevision": applied_revision,
        "lastAttemptedRevision": attempted,
        "conditions": [
            cond("Reconciling", "True", "Progressing", f"Building manifests for revision {attempted}"),
            cond("Ready", "Unknown", "Progressing", "Reconciliation in progress"),
        ],
    }


def dry_run_forbidden(applied_revision: str, attempted: str) -> Obj:
    """kustomize-controller after a server-side dry-run answered 403: it retries, and fails alike."""
    return {
        "lastAppliedRevision": applied_revision,
        "lastAttemptedRevision": attempted,
        "conditions": [
            cond("Ready", "False", "ReconciliationFailed", FORBIDDEN),
            cond("Reconciling", "True", "ProgressingWithRetry", f"Detecting drift for revision {attempted}"),
        ],
    }


def kustomization(ns: str, name: str, status: Obj) -> Obj:
    return flux("Kustomization", ns, name, spec={"sourceRef": SOURCE, "path": f"./{name}"}, status=status)


def rolled_out(available: int = 1) -> Obj:
    """A Deployment's status once its new ReplicaSet is (or is not) available: with the
    Progressing condition kstatus reads (NewReplicaSetAvailable once it is)."""
    status = deployment_status(available)
    reason = "NewReplicaSetAvailable" if available else "ReplicaSetUpdated"
    status["conditions"].append(cond("Progressing", "True", reason))
    return status


def workload(ns: str, name: str, *, available: int, labels: Obj | None = None) -> Obj:
    return {**deployment(ns, name, labels=labels), "status": rolled_out(available)}


def pod_name(workload_name: str) -> str:
    return f"{workload_name}-{POD_HASH}-x7k2p"


def app_pod(ns: str, name: str, status: Obj | None = None) -> Obj:
    return pod(ns, name, status=status or running())


@dataclass
class Waiting:
    """A running `stalewatch wait`: its progress lines as they come, then its exit code and stdout."""

    process: asyncio.subprocess.Process
    progress: list[str] = field(default_factory=list)
    closed: bool = False
    _news: asyncio.Event = field(default_factory=asyncio.Event)

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            self.progress.append(raw.decode().rstrip("\n"))
            self._news.set()
        self.closed = True
        self._news.set()

    async def said(self, check: Callable[[str], bool], *, within: float = 60) -> str:
        """The first stderr line that satisfies `check` (a deadline, not a measurement)."""
        seen = 0
        try:
            async with asyncio.timeout(within):
                while True:
                    for line in self.progress[seen:]:
                        if check(line):
                            return line
                    seen = len(self.progress)
                    if self.closed:
                        code, out = await self.result()
                        raise AssertionError(f"exited {code} first: {self.progress}; stdout: {out}")
                    self._news.clear()
                    await self._news.wait()
        except TimeoutError:
            raise AssertionError(f"not said within {within:g}s; stderr so far: {self.progress}") from None

    async def watching(self) -> str:
        """Once it judges the stack (its first progress line with a count of objects)."""
        return await self.said(lambda line: line.startswith("waiting:") and " current" in line)

    async def result(self, *, within: float = 60) -> tuple[int, str]:
        assert self.process.stdout is not None
        async with asyncio.timeout(within):
            out = await self.process.stdout.read()
            code = await self.process.wait()
        return code, out.decode()


@contextlib.asynccontextmanager
async def waiting(kubeconfig: Path, namespace: str, *args: str) -> AsyncIterator[Waiting]:
    """`python -m watcher wait ARGS`, watching only `namespace`; killed if still running at the end."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "watcher",
        "wait",
        *args,
        "--kubeconfig",
        str(kubeconfig),
        "--set",
        f"include_namespaces=[{namespace}]",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    run = Waiting(process)
    reader = asyncio.create_task(run._read_stderr())
    try:
        yield run
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


READ: dict[str, list[str]] = {
    **ALLOWED,
    "apps": [*ALLOWED["apps"], "deployments"],
    "infra.contrib.fluxcd.io": ["terraforms"],
}
"""Everything `wait` reads: get, list and watch, nothing else (a CI job's account)."""
