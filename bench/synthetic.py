"""A recorded watch stream at Kubernetes' published scalability envelope, written without an API server.

The API server here creates about 220 objects/s, so 150,000 Pods and 50,000 GitOps objects would
take hours to create; this writes the stream a recording of such a cluster would hold (bench/
pipeline.py's format: one watch event per line, every object ADDED, then churn as MODIFIED).

Nothing about the objects is declared twice:
  * their shapes are bench/workload.py's and bench/gitops.py's (Cluster with envelope() counts and
    `failing`: some Pods in ImagePullBackOff, CrashLoopBackOff, OOMKilled or Unschedulable, some
    GitOps objects Ready=False with their controllers' reasons);
  * what the API server adds to an object is taken from a real recording (`served_from`): per kind,
    the first object it served supplies the fields its defaulting wrote (spec defaults, top-level
    fields such as an Event's eventTime) and its managedFields; uid, resourceVersion and
    creationTimestamp are made per object. The CustomResourceDefinitions are copied as recorded;
  * the churn is bench/generate.py's Churn (the same changes, in the same proportions, from the
    same seed), its status writes applied as JSON merge patches to the written objects.

The watches' field selectors are applied as the recording would: Normal Events are not written
(only Warning ones are watched), nor Namespaces (not watched). A sidecar file (`<stream>.json`)
says when the churn starts, each churn line's time after its start, and which lines break a
healthy Pod (the detection probes).

Usage: python -m bench.synthetic OUT --served-from RECORDING [--pods 150000 --gitops 50000]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from bench.generate import Churn
from bench.kinds import CONTROLLERS, FLUX_NS, Obj, rfc3339, sha
from bench.workload import PHASES, Cluster, envelope

PODS, GITOPS = 150_000, 50_000
"""Kubernetes' published envelope: 150,000 Pods; and 50,000 GitOps objects."""
CHURN_SECONDS = 40.0
CHURN_RATE = 50.0
"""Changes per second in the churn tail: bench/run.py's CHURN_RATE."""
LEASE_EVERY = 10.0
"""Seconds between the controllers' Lease renewals, as live leaders renew them."""
PER_OBJECT = frozenset({"nodeName"})
"""Fields of a served object that are its own, not defaults: never copied to another."""
IDENTITY = frozenset({"name", "namespace", "uid", "resourceVersion", "creationTimestamp", "generation"})

Key = tuple[str, str, str]
"""(kind, namespace, name)."""


def served_from(recording: Path) -> tuple[dict[str, Obj], list[bytes]]:
    """Per kind, the first object of the real recording in one of the cluster's team namespaces
    (else anywhere), as the API server served it; and the recording's CustomResourceDefinition
    lines, as they are."""
    served: dict[str, Obj] = {}
    anywhere: dict[str, Obj] = {}
    crds: list[bytes] = []
    with recording.open("rb") as lines:
        for line in lines:
            if not line.startswith(b'{"type":"ADDED"'):
                continue
            obj = orjson.loads(line)["object"]
            if obj["kind"] == "CustomResourceDefinition":
                crds.append(line.rstrip(b"\n"))
            elif obj["metadata"].get("namespace", "").startswith("team-"):
                served.setdefault(obj["kind"], obj)
            else:
                anywhere.setdefault(obj["kind"], obj)
    return anywhere | served, crds


_TYPE_KIND = re.compile(rb'^\{"type":"(\w+)","object":\{.*?"kind":"(\w+)"')


def sizes(stream: Path) -> dict[str, list[int]]:
    """'TYPE Kind' -> [events, bytes] of a stream: to hold the synthetic one to a real recording."""
    out: dict[str, list[int]] = {}
    with stream.open("rb") as lines:
        for line in lines:
            found = _TYPE_KIND.match(line[:400])
            name = f"{found[1].decode()} {found[2].decode()}" if found else "other"
            tally = out.setdefault(name, [0, 0])
            tally[0] += 1
            tally[1] += len(line) - 1
    return out


def with_defaults(ours: Any, served: Any, *, nulls: bool = False) -> Any:
    """`ours` with the fields the API server's copy has and ours lacks (its defaulting), in its
    order. Lists of objects are matched item by item, and items the server appended (admission's
    default tolerations) are kept. With `nulls`, only the fields it writes as null are added (a
    condition's lastProbeTime): in a status, anything else is the object's own."""
    if isinstance(ours, dict) and isinstance(served, dict):
        out = {
            k: with_defaults(ours[k], v, nulls=nulls) if k in ours else v
            for k, v in served.items()
            if k in ours or (v is None if nulls else k not in PER_OBJECT)
        }
        return out | {k: v for k, v in ours.items() if k not in out}
    if not (isinstance(ours, list) and isinstance(served, list)):
        return ours
    appended = not nulls and all(isinstance(item, dict) for item in served)
    if len(ours) == len(served) or appended:
        merged = [with_defaults(a, b, nulls=nulls) for a, b in zip(ours, served, strict=False)]
        return merged + served[len(merged) :]
    return ours


def fields_of(value: Any) -> Any:
    """managedFields' FieldsV1 for a value as written: lists of conditions keyed by type."""
    if isinstance(value, dict):
        return {".": {}, **{f"f:{k}": fields_of(v) for k, v in value.items()}}
    if isinstance(value, list) and all(isinstance(v, dict) and "type" in v for v in value):
        return {".": {}, **{f'k:{{"type":"{v["type"]}"}}': fields_of(v) for v in value}}
    return {}


def as_served(obj: Obj, served: Obj, *, uid: str, version: int, created: str) -> Obj:
    """The object as the API server would return it: identity made for it, the rest of the
    metadata ours, managedFields and defaults from the kind's served object."""
    meta, theirs = obj["metadata"], served["metadata"]
    out_meta: Obj = {"name": meta["name"]}
    if "namespace" in meta:
        out_meta["namespace"] = meta["namespace"]
    out_meta |= {"uid": uid, "resourceVersion": str(version)}
    if "generation" in theirs or "generation" in meta:
        out_meta["generation"] = meta.get("generation", theirs.get("generation"))
    out_meta["creationTimestamp"] = created
    out_meta |= {k: v for k, v in meta.items() if k not in IDENTITY}
    out_meta["managedFields"] = [{**m, "time": created} for m in theirs.get("managedFields", ())]
    body = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    defaults = {k: v for k, v in served.items() if k not in ("metadata", "status")}
    out = {"kind": obj["kind"], "apiVersion": obj["apiVersion"], "metadata": out_meta}
    out |= with_defaults(body, defaults)
    if "status" in obj:
        out["status"] = with_defaults(obj["status"], served.get("status"), nulls=True)
    if obj["kind"] == "Job":
        _job_selector(out, uid)
    return out


def _job_selector(job: Obj, uid: str) -> None:
    """What the API server writes into a Job it creates with a generated selector: labels naming
    the Job and its uid on it and its Pod template, and a selector on that uid (per object, so
    not copied from the kind's served object)."""
    name = job["metadata"]["name"]
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    job["metadata"]["labels"] = {**labels, **job["metadata"].get("labels", {})}
    job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = job["spec"]["template"].setdefault("metadata", {})
    template["labels"] = {**labels, **template.get("labels", {})}


def merge_patch(target: Obj, patch: Obj) -> None:
    """RFC 7386, as the API server applies a merge-patch+json."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = value


def uid_of(key: Key) -> str:
    return str(uuid.UUID(sha(*key)[:32]))


def watched(obj: Obj) -> bool:
    """What the recording's watches see: no Namespaces, only Warning Events."""
    return obj["kind"] != "Namespace" and (obj["kind"] != "Event" or obj.get("type") == "Warning")


@dataclass
class Touched(Churn):
    """Churn that only notes which objects it writes (a first pass, so the writer keeps just those)."""

    keys: set[Key] = field(default_factory=set)

    async def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: Obj, *, manager: str
    ) -> None:
        self.keys.add((kind, namespace, name))

    async def renew_leases(self) -> None:
        self.keys.update(("Lease", FLUX_NS, f"{name}-leader-election") for name in CONTROLLERS)


class Stream:
    """Writes the lines, numbering resourceVersions; keeps the churn's times and probes."""

    def __init__(self, out: Any) -> None:
        self.out, self.version, self.lines = out, 1000, 0
        self.at = 0.0
        self.tail: list[float] = []
        self.probes: list[list[Any]] = []
        """[line index, namespace, name] of each line that breaks a healthy Pod."""
        self.heals: list[list[Any]] = []
        """... and of each line that heals a probed Pod (a probe not seen by then never will be)."""

    def line(self, event: str, obj: Obj) -> None:
        self.out.write(orjson.dumps({"type": event, "object": obj}) + b"\n")
        self.lines += 1

    def modified(self, obj: Obj) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.tail.append(self.at)
        self.line("MODIFIED", obj)


@dataclass
class Written(Churn):
    """Churn whose status writes become MODIFIED lines of the stream."""

    stream: Stream | None = None
    objects: dict[Key, Obj] = field(default_factory=dict)
    """The objects the churn writes (Touched found them), as written so far."""
    failing: set[tuple[str, str]] = field(default_factory=set)
    """Pods failing from the start: breaking one again is no probe."""
    probed: set[tuple[str, str]] = field(default_factory=set)
    """Pods broken by a probe line and not healed since."""

    async def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: Obj, *, manager: str
    ) -> None:
        obj = self.objects[(kind, namespace, name)]
        merge_patch(obj.setdefault("status", {}), status)
        managed = obj["metadata"]["managedFields"]
        if not any(m["manager"] == manager and m.get("subresource") == "status" for m in managed):
            managed.append(
                {
                    "manager": manager,
                    "operation": "Update",
                    "apiVersion": api_version,
                    "time": rfc3339(self.clock()),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": fields_of(status)},
                    "subresource": "status",
                }
            )
        assert self.stream is not None
        self.stream.modified(obj)
        self.writes += 1

    async def set_pod(self, namespace: str, name: str, *, broken: bool) -> tuple[float, float]:
        pod = (namespace, name)
        healthy = pod not in self.broken_pods | self.failing
        written = await super().set_pod(namespace, name, broken=broken)
        assert self.stream is not None
        if broken and healthy:
            self.stream.probes.append([self.stream.lines - 1, namespace, name])
            self.probed.add(pod)
        elif not broken and pod in self.probed:
            self.stream.heals.append([self.stream.lines - 1, namespace, name])
            self.probed.discard(pod)
        return written

    async def renew_leases(self) -> None:
        renewed = self.clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for name in CONTROLLERS:
            lease = self.objects[("Lease", FLUX_NS, f"{name}-leader-election")]
            lease["spec"]["renewTime"] = renewed
            assert self.stream is not None
            self.stream.modified(lease)


def objects(cluster: Cluster) -> Iterator[tuple[Key, Obj]]:
    """Every object in creation order, each owner's uid known before its dependents."""
    for phase in PHASES:
        for obj in cluster.phase(phase):
            meta = obj["metadata"]
            key = (obj["kind"], meta.get("namespace", ""), meta["name"])
            cluster.uids[key] = uid_of(key)
            yield key, obj


async def _churn(churn: Churn, stream: Stream | None, *, now: datetime, seconds: float, rate: float) -> None:
    """Churn's changes in turn, `rate` per second of stream time, the Leases renewed on time."""
    ticks, every = round(seconds * rate), round(LEASE_EVERY * rate)
    for tick in range(ticks):
        at = tick / rate
        churn.clock = lambda at=at: now + timedelta(seconds=at)  # type: ignore[misc]
        if stream is not None:
            stream.at = at
        if tick % every == 0:
            await churn.renew_leases()
        await churn.ops[tick % len(churn.ops)]()


def write(
    path: Path,
    *,
    served: dict[str, Obj],
    crds: list[bytes],
    pods: int = PODS,
    gitops: int = GITOPS,
    seconds: float = CHURN_SECONDS,
    rate: float = CHURN_RATE,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Writes the stream to `path` and its sidecar to `<path>.json`; returns the sidecar."""
    now = now or datetime.now(UTC)
    mix = envelope(pods, gitops)

    def cluster() -> Cluster:
        return Cluster(sum(mix.values()), now, mix=mix, failing=True)

    touched = Touched(kube=None, cluster=cluster())  # type: ignore[arg-type]
    asyncio.run(_churn(touched, None, now=now, seconds=seconds, rate=rate))
    built = cluster()
    created = rfc3339(now - timedelta(hours=21))
    kept: dict[Key, Obj] = {}
    failing: set[tuple[str, str]] = set()
    counted: dict[str, int] = {}
    with path.open("wb") as out:
        stream = Stream(out)
        for line in crds:
            out.write(line + b"\n")
            stream.lines += 1
        for key, obj in objects(built):
            if not watched(obj):
                continue
            stream.version += 1
            obj = as_served(
                obj, served[obj["kind"]], uid=uid_of(key), version=stream.version, created=created
            )
            stream.line("ADDED", obj)
            counted[key[0]] = counted.get(key[0], 0) + 1
            if key in touched.keys:
                kept[key] = obj
            if key[0] == "Pod" and not _healthy(obj):
                failing.add(key[1:])
        tail_start = stream.lines
        churn = Written(kube=None, cluster=built, stream=stream, objects=kept, failing=failing)  # type: ignore[arg-type]
        asyncio.run(_churn(churn, stream, now=now, seconds=seconds, rate=rate))
    sidecar = {
        "now": now.isoformat(),
        "pods": pods,
        "gitops": gitops,
        "objects": counted,
        "failing_pods": len(failing),
        "churn_rate": rate,
        "churn_seconds": seconds,
        "tail_start": tail_start,
        "tail_times": stream.tail,
        "probes": stream.probes,
        "heals": stream.heals,
        "lines": stream.lines,
    }
    path.with_suffix(".json").write_bytes(orjson.dumps(sidecar))
    return sidecar


def _healthy(pod: Obj) -> bool:
    ready = [c for c in pod["status"].get("conditions", ()) if c["type"] == "Ready"]
    return pod["status"].get("phase") == "Running" and bool(ready) and ready[0]["status"] == "True"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--served-from", type=Path, required=True, help="a recording bench.run made")
    parser.add_argument("--pods", type=int, default=PODS)
    parser.add_argument("--gitops", type=int, default=GITOPS)
    parser.add_argument("--seconds", type=float, default=CHURN_SECONDS)
    args = parser.parse_args(argv)
    served, crds = served_from(args.served_from)
    sidecar = write(
        args.out, served=served, crds=crds, pods=args.pods, gitops=args.gitops, seconds=args.seconds
    )
    summary = {k: v for k, v in sidecar.items() if k not in ("tail_times", "probes", "heals")}
    sys.stdout.write(orjson.dumps({**summary, "probes": len(sidecar["probes"])}).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
