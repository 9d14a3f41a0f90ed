"""Creates the benchmark cluster in a real API server, then churns its statuses at a fixed rate.

Objects are created the way their controllers would: a POST (with the field manager that
would own the spec), then the status written through /status (with the manager that owns
the status), so managedFields, resourceVersions and watch events are what a real cluster
produces. Creation is concurrent with a bounded number of requests in flight.

Usage: python -m bench.generate --kubeconfig FILE --size 1000 [--churn-seconds 30 --churn-rate 50]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration

from bench.kinds import CONTROLLERS, FLUX_NS, Obj, rfc3339, sha
from bench.workload import FIELD_MANAGERS, FLUX_MANAGER, PHASES, Cluster
from tests.kubeclient import Kube, KubeError

CONCURRENCY = 48


async def client_for(kubeconfig: Path, *, pool: int = CONCURRENCY) -> ApiClient:
    """A kubernetes-asyncio client whose connection pool allows `pool` requests in flight."""
    configuration = Configuration()
    await kube_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return ApiClient(configuration=configuration)


async def bounded(jobs: Iterable[Awaitable[Any]], *, limit: int = CONCURRENCY) -> None:
    """Runs the jobs with at most `limit` in flight (a sliding window, not batches)."""
    pending: set[asyncio.Future[Any]] = set()
    try:
        for job in jobs:
            if len(pending) >= limit:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    finished.result()
            pending.add(asyncio.ensure_future(job))
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            for finished in done:
                finished.result()
    finally:
        for task in pending:
            task.cancel()


async def create(kube: Kube, obj: Obj) -> dict[str, Any]:
    """POST the object, then write its status as its controller would; 409 means it is there."""
    creator, writer = FIELD_MANAGERS.get(obj["kind"], FLUX_MANAGER)
    meta = obj["metadata"]
    body = {k: v for k, v in obj.items() if k != "status"}
    path = await kube.path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
    try:
        created: dict[str, Any] = await kube.request("POST", path, body=body, query={"fieldManager": creator})
    except KubeError as error:
        if error.status != 409:
            raise
        created = await kube.get(obj)
    if "status" in obj:
        created = await kube.request(
            "PATCH",
            await kube.object_path(obj) + "/status",
            body={"status": obj["status"]},
            query={"fieldManager": writer},
            content_type="application/merge-patch+json",
        )
    return created


async def populate(kube: Kube, cluster: Cluster, *, limit: int = CONCURRENCY) -> dict[str, int]:
    """Creates every object of the cluster, phase by phase; returns how many of each kind."""
    created: dict[str, int] = {}

    async def one(obj: Obj) -> None:
        result = await create(kube, obj)
        meta = result["metadata"]
        cluster.uids[(obj["kind"], meta.get("namespace", ""), meta["name"])] = meta["uid"]
        created[obj["kind"]] = created.get(obj["kind"], 0) + 1

    for phase in PHASES:
        await bounded((one(obj) for obj in cluster.phase(phase)), limit=limit)
    return created


@dataclass
class Churn:
    """Status changes at a fixed rate, each one what a controller or kubelet really writes.

    Four kinds of change, in turn: a Pod goes into ImagePullBackOff (and back the next time
    it is picked), a Kustomization starts Reconciling (and finishes), a GitRepository's
    revision advances with its Kustomizations applying it, and a Certificate a Kustomization
    lists starts its renewal (and finishes it). The controllers' leader Leases are renewed
    every 10 s throughout, as live leaders do.
    """

    kube: Kube
    cluster: Cluster
    seed: int = 11
    writes: int = 0
    failures: int = 0
    broken_pods: set[tuple[str, str]] = field(default_factory=set)
    probed: set[tuple[str, str]] = field(default_factory=set)
    """Pods and Certificates a detection probe broke and waits on: churn leaves them alone
    (flipping one back to healthy before its finding was served made the probe wait in vain)."""
    reconciling: set[tuple[str, str]] = field(default_factory=set)
    renewing: set[tuple[str, str]] = field(default_factory=set)
    steps: dict[str, int] = field(default_factory=dict)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    """The time the changes are written at (bench/synthetic.py writes them on a clock of its own)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        apps = self.cluster.app_pods()
        self.pods = apps
        self.kustomizations = [
            (k["metadata"]["namespace"], k["metadata"]["name"])
            for k in self.cluster.phase(("Kustomization",))
        ]
        self.repos: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for k in self.cluster.phase(("Kustomization",)):
            ref, meta = k["spec"]["sourceRef"], k["metadata"]
            self.repos.setdefault((ref["namespace"], ref["name"]), []).append(
                (meta["namespace"], meta["name"])
            )
        self.certificates = [
            (c["metadata"]["namespace"], c["metadata"]["name"])
            for c in self.cluster.phase(("Certificate",))
            if c["status"]["conditions"][0]["status"] == "True"
        ]
        self.ops: list[Callable[[], Coroutine[Any, Any, None]]] = [
            self.flip_pod,
            self.flip_reconciling,
            self.advance_revision,
            self.renew_certificate,
        ]

    async def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: Obj, *, manager: str
    ) -> None:
        path = await self.kube.path(api_version, kind, namespace, name)
        await self.kube.request(
            "PATCH",
            path + "/status",
            body={"status": status},
            query={"fieldManager": manager},
            content_type="application/merge-patch+json",
        )
        self.writes += 1

    async def set_pod(self, namespace: str, name: str, *, broken: bool) -> tuple[float, float]:
        """Writes the Pod's status; returns (sent, accepted): the time just before the PATCH
        was sent and the time its 200 answer arrived (the API server had committed it)."""
        app = name.rsplit("-", 2)[0]
        now = self.clock()
        status = self.cluster.pod_status(
            f"ghcr.io/acme/{app}:v1.{sha(app)[:2]}.0", ready=not broken, since=rfc3339(now)
        )
        sent = time.time()
        await self.patch_status("v1", "Pod", namespace, name, status, manager="kubelet")
        accepted = time.time()
        (self.broken_pods.add if broken else self.broken_pods.discard)((namespace, name))
        return sent, accepted

    async def flip_pod(self) -> None:
        namespace, name = self.rng.choice(self.pods)
        if (namespace, name) in self.probed:
            return
        await self.set_pod(namespace, name, broken=(namespace, name) not in self.broken_pods)

    async def flip_reconciling(self) -> None:
        key = self.rng.choice(self.kustomizations)
        namespace, name = key
        now = rfc3339(self.clock())
        if key in self.reconciling:
            self.reconciling.discard(key)
            conditions = [self._cond("Ready", "True", "ReconciliationSucceeded", "Applied revision", now)]
        else:
            self.reconciling.add(key)
            conditions = [
                self._cond("Reconciling", "True", "Progressing", "Running health checks", now),
                self._cond("Ready", "Unknown", "Progressing", "Reconciliation in progress", now),
            ]
        await self.patch_status(
            "kustomize.toolkit.fluxcd.io/v1",
            "Kustomization",
            namespace,
            name,
            {"conditions": conditions},
            manager="kustomize-controller",
        )

    async def advance_revision(self) -> None:
        (namespace, repo), users = self.rng.choice(sorted(self.repos.items()))
        step = self.steps[repo] = self.steps.get(repo, 0) + 1
        revision = self.cluster.git_revision(repo, step)
        now = rfc3339(self.clock())
        artifact = {
            "revision": revision,
            "digest": f"sha256:{sha(revision)}{sha(repo)[:24]}",
            "lastUpdateTime": now,
        }
        await self.patch_status(
            "source.toolkit.fluxcd.io/v1",
            "GitRepository",
            namespace,
            repo,
            {"artifact": artifact},
            manager="source-controller",
        )
        for user_ns, name in users:
            status = {
                "lastAppliedRevision": revision,
                "lastAttemptedRevision": revision,
                "conditions": [
                    self._cond(
                        "Ready", "True", "ReconciliationSucceeded", f"Applied revision: {revision}", now
                    )
                ],
            }
            await self.patch_status(
                "kustomize.toolkit.fluxcd.io/v1",
                "Kustomization",
                user_ns,
                name,
                status,
                manager="kustomize-controller",
            )

    async def set_certificate(self, namespace: str, name: str, *, failing: bool) -> tuple[float, float]:
        """Writes a Certificate's issuance failed (or issued again), as set_pod writes a Pod;
        returns (sent, accepted)."""
        now = rfc3339(self.clock())
        status = self.cluster.certificate_status(name, failing=failing, since=now)
        if not failing:
            status |= {"failedIssuanceAttempts": None, "lastFailureTime": None}
        sent = time.time()
        manager = "cert-manager-certificates-issuing" if failing else "cert-manager-certificates-readiness"
        await self.patch_status(
            "certs.bench.example/v1", "Certificate", namespace, name, status, manager=manager
        )
        return sent, time.time()

    async def renew_certificate(self) -> None:
        """cert-manager renewing a Certificate: Issuing=True Renewing, then (the next time it is
        picked) Ready alone again with the next revision. Ready stays True throughout."""
        key = self.rng.choice(self.certificates)
        if key in self.probed:
            return
        namespace, name = key
        renewing = key not in self.renewing
        (self.renewing.add if renewing else self.renewing.discard)(key)
        renewals = f"Certificate/{namespace}/{name}"
        if not renewing:
            self.steps[renewals] = self.steps.get(renewals, 0) + 1
        revision = 3 + self.steps.get(renewals, 0)
        status = self.cluster.certificate_status(
            name, renewing=renewing, revision=revision, since=rfc3339(self.clock())
        )
        await self.patch_status(
            "certs.bench.example/v1",
            "Certificate",
            namespace,
            name,
            status,
            manager="cert-manager-certificates-trigger"
            if renewing
            else "cert-manager-certificates-readiness",
        )

    @staticmethod
    def _cond(kind: str, status: str, reason: str, message: str, when: str) -> Obj:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": when,
            "observedGeneration": 1,
        }

    async def renew_leases(self) -> None:
        renewed = self.clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for name in CONTROLLERS:
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": f"{name}-leader-election", "namespace": FLUX_NS},
            }
            await self.kube.patch(lease, {"spec": {"renewTime": renewed}})

    async def keep_leases(self) -> None:
        """Renews the controllers' leader Leases every 10 s until cancelled."""
        while True:
            await self.renew_leases()
            await asyncio.sleep(10)

    def _count_failure(self, task: asyncio.Task[None]) -> None:
        """A change the API server refused is counted (and reported), not fatal."""
        if not task.cancelled() and task.exception() is not None:
            self.failures += 1

    async def run(self, *, rate: float, seconds: float) -> int:
        """Applies changes at `rate` per second for `seconds`; returns how many status writes.

        At most CONCURRENCY changes are in flight: when the API server cannot keep up, the
        rate achieved drops (callers report writes/s) instead of a backlog piling up.
        """
        start, before = time.monotonic(), self.writes
        tasks: set[asyncio.Task[None]] = set()
        for tick in itertools.count():
            due = start + tick / rate
            if due - start >= seconds or time.monotonic() - start >= seconds:
                break
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if len(tasks) >= CONCURRENCY:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            task = asyncio.create_task(self.ops[tick % len(self.ops)]())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            task.add_done_callback(self._count_failure)
        if tasks:
            await asyncio.wait(tasks)
        return self.writes - before


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--churn-seconds", type=float, default=0.0)
    parser.add_argument("--churn-rate", type=float, default=50.0)
    args = parser.parse_args(argv)
    cluster = Cluster(args.size, datetime.now(UTC))
    async with await client_for(args.kubeconfig) as api:
        kube = Kube(api)
        start = time.monotonic()
        created = await populate(kube, cluster)
        total = sum(created.values())
        elapsed = time.monotonic() - start
        print(f"created {total} objects in {elapsed:.1f}s ({total / elapsed:.0f}/s): {created}")
        if args.churn_seconds:
            writes = await Churn(kube, cluster).run(rate=args.churn_rate, seconds=args.churn_seconds)
            print(f"churn: {writes} status writes in {args.churn_seconds:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
