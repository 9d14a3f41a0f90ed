"""The scenario table, replayed from what real Flux controllers wrote (tests/lab/recordings/).

record.py ran every slow scenario of scenarios.py side by side in the lab for longer than the
default thresholds, then healed them, then took source-controller down; it kept the watch stream
and a `kubectl get` snapshot at each checkpoint. Here both are judged with default thresholds, at
each checkpoint's moment: the snapshot through `stalewatch analyze`, the stream through the live
watcher's own decoding and LiveModel, event by event at the times they arrived. Both must give
the findings a Flux SRE expects, and the same ones.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import redirect_stdout
from datetime import datetime, timedelta
from functools import cache
from io import StringIO
from pathlib import Path
from typing import Any

import orjson
import pytest

from watcher.cli import main
from watcher.kube.live import LiveModel
from watcher.kube.resources import Resource
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.objects import parse_time
from watcher.model.types import ModelConfig
from watcher.telemetry import Telemetry

RECORDINGS = Path(__file__).parent / "recordings"
CHECKPOINTS: dict[str, str] = json.loads((RECORDINGS / "checkpoints.json").read_text())
PLURALS = {
    "Pod": "pods",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "Event": "events",
    "Lease": "leases",
    "GitRepository": "gitrepositories",
    "HelmRepository": "helmrepositories",
    "HelmChart": "helmcharts",
    "OCIRepository": "ocirepositories",
    "Kustomization": "kustomizations",
    "HelmRelease": "helmreleases",
}

Found = dict[str, dict[str, Any]]
"""Findings by id, as /api/v1/findings and `analyze -o json` spell them."""


def at(checkpoint: str) -> datetime:
    moment = parse_time(CHECKPOINTS[checkpoint])
    assert moment is not None
    return moment


def snapshot(checkpoint: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((RECORDINGS / "snapshots" / f"{checkpoint}.json").read_text())[
        "items"
    ]
    return items


@cache
def analyzed(checkpoint: str) -> str:
    """`stalewatch analyze -o json --now <checkpoint>` of the checkpoint's snapshot (its stdout)."""
    out = StringIO()
    with redirect_stdout(out):
        code = main(
            [
                "analyze",
                "--output=json",
                f"--now={CHECKPOINTS[checkpoint]}",
                str(RECORDINGS / "snapshots" / f"{checkpoint}.json"),
            ]
        )
    assert code in (0, 1), out.getvalue()
    return out.getvalue()


def stream() -> Iterator[dict[str, Any]]:
    with gzip.open(RECORDINGS / "stream.jsonl.gz", "rt") as lines:
        for line in lines:
            yield json.loads(line)


def resource_of(obj: Mapping[str, Any]) -> Resource:
    group, _, version = obj["apiVersion"].rpartition("/")
    return Resource(group, version, obj["kind"], PLURALS[obj["kind"]])


@cache
def replayed() -> dict[str, str]:
    """The live watcher's findings (JSON, as /api/v1/findings has them) at every checkpoint: the
    recorded watch events decoded by the reflector's decoder and handed to a LiveModel whose
    clock reads each event's arrival, evaluated at each checkpoint's moment."""
    now = [min(at(name) for name in CHECKPOINTS)]
    telemetry = Telemetry(up=True, started=True)
    live = LiveModel(ModelConfig(), telemetry, clock=lambda: now[0])
    decoders: dict[tuple[str, str], Any] = {}
    pending = sorted(CHECKPOINTS.items(), key=lambda item: item[1])
    results: dict[str, str] = {}

    def evaluate_until(moment: datetime) -> None:
        while pending and at(pending[0][0]) <= moment:
            name, _ = pending.pop(0)
            now[0] = at(name)
            evaluation = live.evaluate()
            assert evaluation is not None
            results[name] = json.dumps([f.to_dict() for f in evaluation.findings], sort_keys=True)

    for event in stream():
        arrived = parse_time(event["at"])
        assert arrived is not None
        evaluate_until(arrived)
        now[0] = arrived
        obj = event["object"]
        resource = resource_of(obj)
        stats = telemetry.kind(resource.group, resource.kind)
        stats.synced = stats.live = True
        decoder = decoders.setdefault(resource.key, fast_path(resource.api_version, resource.kind))
        decoded = decoder.decode(orjson.dumps({"type": event["type"], "object": obj}))
        assert decoded.object is not None, decoded.problem
        if decoded.type == "DELETED":
            live.delete(resource, dict(decoded.object))
        else:
            live.upsert(resource, decoded.object)
    evaluate_until(datetime.max.replace(tzinfo=at("early").tzinfo))
    return results


def by_id(findings: list[dict[str, Any]]) -> Found:
    return {f["id"]: f for f in findings}


def judged(checkpoint: str) -> tuple[Found, Found]:
    """(analyze's, the live watcher's) findings at the checkpoint."""
    return (
        by_id(json.loads(analyzed(checkpoint))["findings"]),
        by_id(json.loads(replayed()[checkpoint])),
    )


def roots(found: Found) -> set[str]:
    return {fid for fid, f in found.items() if f["root_cause"] is None}


def created(checkpoint: str, kind: str, name: str) -> datetime:
    for obj in snapshot(checkpoint):
        if (obj["kind"], obj["metadata"]["name"]) == (kind, name):
            moment = parse_time(obj["metadata"]["creationTimestamp"])
            assert moment is not None
            return moment
    raise LookupError(f"{kind} {name} not in the {checkpoint} snapshot")


FIRST_ATTEMPT = timedelta(seconds=10)
"""How soon after its creation a broken object's first attempt fails (the controllers pick up a
new object at once)."""


@pytest.mark.parametrize("checkpoint", sorted(CHECKPOINTS))
def test_analyze_and_the_live_watcher_agree_on_every_checkpoint(checkpoint: str) -> None:
    from_snapshot, from_stream = judged(checkpoint)
    assert {fid: f["root_cause"] for fid, f in from_snapshot.items()} == {
        fid: f["root_cause"] for fid, f in from_stream.items()
    }
    assert {fid: f["since"] for fid, f in from_snapshot.items()} == {
        fid: f["since"] for fid, f in from_stream.items()
    }


# -- The scenario table, with default thresholds --------------------------------------------------

NS = "flux-system"
MISSING = f"ReconcileFailed/GitRepository/{NS}/missing"
ON_MISSING = f"ReconcileFailed/Kustomization/{NS}/on-missing"
PATH_MISSING = f"RetryLoop/Kustomization/{NS}/path-missing/ArtifactFailed"
REJECTED = f"RetryLoop/Kustomization/{NS}/rejected/ReconciliationFailed"
WAIT_FAILS = f"Stalled/HelmRelease/{NS}/wait-fails"
NO_WAIT = f"ReleaseReadyWorkloadFailing/HelmRelease/{NS}/no-wait"
SOURCE_DOWN = f"ControllerDown/Deployment/{NS}/source-controller"


@pytest.fixture(params=["analyze", "live"])
def findings_at(request: pytest.FixtureRequest) -> Callable[[str], Found]:
    """The findings at a checkpoint, from the snapshot (`analyze`) or from the stream (`live`)."""
    return lambda checkpoint: judged(checkpoint)[0 if request.param == "analyze" else 1]


def since(found: Found, finding_id: str) -> datetime:
    moment = parse_time(found[finding_id]["since"])
    assert moment is not None
    return moment


def test_three_minutes_in_only_the_release_helm_gave_up_on_is_reported(
    findings_at: Callable[[str], Found],
) -> None:
    """Below every threshold the failures are retries; a Stalled release is a verdict at once."""
    assert roots(findings_at("early")) == {WAIT_FAILS}


def test_past_the_thresholds_each_failure_is_one_root(findings_at: Callable[[str], Found]) -> None:
    assert roots(findings_at("failing")) == {MISSING, PATH_MISSING, REJECTED, WAIT_FAILS, NO_WAIT}


def test_a_gitrepository_whose_repository_is_missing_is_the_root_from_its_first_failure(
    findings_at: Callable[[str], Found],
) -> None:
    found = findings_at("failing")
    first = created("failing", "GitRepository", "missing")
    assert first <= since(found, MISSING) <= first + FIRST_ATTEMPT
    assert found[ON_MISSING]["root_cause"] == MISSING
    affected = {(a["kind"], a["name"]) for a in found[MISSING]["affected"]}
    assert ("Kustomization", "on-missing") in affected
    assert f"has failed since {found[MISSING]['since']} (FetchFailed=True)" in found[MISSING]["message"]


def test_kustomizations_failing_on_every_attempt_are_reported_from_their_first(
    findings_at: Callable[[str], Found],
) -> None:
    """Missing path: one Event per attempt (random temporary directory), each count 1. Rejected
    manifest: one Event the API server aggregates. Ready's time moves with every attempt."""
    found = findings_at("failing")
    for finding_id, name in ((PATH_MISSING, "path-missing"), (REJECTED, "rejected")):
        first = created("failing", "Kustomization", name)
        assert first <= since(found, finding_id) <= first + FIRST_ATTEMPT, finding_id
    assert found[PATH_MISSING]["evidence"]["events"] > 1
    assert "kustomization path not found" in found[PATH_MISSING]["message"]
    assert "dry-run failed (Invalid)" in found[REJECTED]["message"]


def test_a_release_that_waited_and_its_failing_deployment_are_one_root(
    findings_at: Callable[[str], Found],
) -> None:
    found = findings_at("failing")
    under = {fid for fid, f in found.items() if f["root_cause"] == WAIT_FAILS}
    assert "WorkloadUnhealthy/Deployment/default/default-wait-fails" in under
    assert "What it installed fails: Pod default/default-wait-fails-" in found[WAIT_FAILS]["message"]
    assert "is in ImagePullBackOff" in found[WAIT_FAILS]["message"]
    assert found[NO_WAIT]["evidence"]["workload"] == "Deployment/default/default-no-wait"


def test_objects_deleted_while_failing_leave_events_that_raise_nothing(
    findings_at: Callable[[str], Found],
) -> None:
    events = [
        o for o in snapshot("failing") if o["kind"] == "Event" and o["involvedObject"]["name"] == "gone"
    ]
    assert events, "the recording deleted `gone` with its Warning Events left behind"
    assert not [fid for fid in findings_at("failing") if "/gone" in fid]


def test_every_finding_clears_once_the_failures_are_fixed(findings_at: Callable[[str], Found]) -> None:
    assert findings_at("recovered") == {}


def test_source_controller_down_is_one_root_with_every_source_stale_under_it(
    findings_at: Callable[[str], Found],
) -> None:
    found = findings_at("source-controller-down")
    assert roots(found) == {SOURCE_DOWN}
    sources = {
        (o["kind"], o["metadata"]["name"])
        for o in snapshot("source-controller-down")
        if o["apiVersion"].startswith("source.toolkit.fluxcd.io/")
    }
    stale = {
        (f["subject"]["kind"], f["subject"]["name"]) for f in found.values() if f["type"] == "StatusStale"
    }
    assert stale == sources
    assert all(found[f"StatusStale/{k}/{NS}/{n}"]["root_cause"] == SOURCE_DOWN for k, n in sources)
