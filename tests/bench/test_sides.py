"""The old code beside the new on one recording, and the maximum-size cluster from a synthetic stream.

At a tiny size, with no number asserted: the comparison measures every pipeline target for both
trees and leaves no worktree behind; the synthetic stream holds the envelope's mix in the shape
the real API server served (its fields, its defaults), its failing objects are what stalewatch
reports, and the live harness holds it and sees every Pod the churn breaks; during each incident
(bench/incidents.py) the outage is what the model and a real `stalewatch run` call ControllerDown.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench import compare, incidents, pipeline, procs, run, synthetic
from bench import envelope as envelope_bench
from bench import served as served_bench
from bench.kinds import API_VERSIONS, CONTROLLERS
from bench.workload import FAILING_PODS, Cluster, envelope
from watcher.model.engine import HealthModel
from watcher.model.types import ModelConfig

PODS, GITOPS = 600, 2000
"""Enough for every failing Pod state and a failing object of every kind in gitops.FAILURES."""


@pytest.fixture(scope="module")
async def stream(recording: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synthetic") / "stream.jsonl"
    made = ["--pods", str(PODS), "--gitops", str(GITOPS), "--seconds", "3"]
    await run.python("bench.synthetic", str(out), "--served-from", str(recording), *made)
    return out


def events(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open("rb") as lines:
        for line in lines:
            event = orjson.loads(line)
            yield event["type"], event["object"]


def paths(value: Any, prefix: str = "") -> set[str]:
    """Every field path of a value (the items of a list under one path)."""
    if isinstance(value, dict):
        return {prefix} | {p for k, v in value.items() for p in paths(v, f"{prefix}/{k}")}
    if isinstance(value, list):
        return {prefix} | {p for v in value for p in paths(v, f"{prefix}[]")}
    return {prefix}


async def test_old_and_new_code_measure_every_pipeline_target_on_the_same_recording(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Path] = []  # this comparison's own worktree: other runs of the bench may have theirs
    checkout = compare.worktree

    @contextmanager
    def recorded(ref: str) -> Iterator[Path]:
        with checkout(ref) as tree:
            made.append(tree)
            yield tree

    monkeypatch.setattr(compare, "worktree", recorded)
    result = await asyncio.to_thread(compare.compare, recording, rounds=1)
    assert result["old"]["commit"].startswith(compare.OLD_REF)
    assert result["new"]["commit"].startswith(procs.commit()[:40])
    for side in ("old", "new"):
        assert all(result[side][key] > 0 for key in compare.TARGETS), side
    assert set(result["change"]) == set(compare.TARGETS)
    trees = await asyncio.to_thread(
        subprocess.run, ["git", "worktree", "list"], cwd=procs.ROOT, capture_output=True, text=True
    )
    assert len(made) == 1
    assert str(made[0]) not in trees.stdout
    assert not made[0].exists()


async def test_the_synthetic_stream_holds_the_envelope_mix_with_the_fields_the_api_server_wrote(
    recording: Path, stream: Path
) -> None:
    sidecar = orjson.loads(stream.with_suffix(".json").read_bytes())
    mix = envelope(PODS, GITOPS)
    controllers = {kind: mix[kind] + len(CONTROLLERS) for kind in ("Deployment", "ReplicaSet")}
    warning = {"Event": len(range(0, mix["Event"], 5))}  # Normal Events are not watched, so not recorded
    assert sidecar["objects"] == mix | controllers | warning

    def key(obj: dict[str, Any]) -> tuple[str, str, str]:
        return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

    served = {key(obj): obj for kind, obj in events(recording) if kind == "ADDED"}
    made = {key(obj): obj for kind, obj in events(stream) if kind == "ADDED" and key(obj) in served}
    assert {kind for kind, _, _ in made} >= {"Pod", "Deployment", "Kustomization", "HelmRelease", "Lease"}
    for name, ours in made.items():  # the same object, written by the API server and by synthetic.py
        # managedFields are the kind's first object's; a status is the churn's (other tests break Pods)
        fields = [
            {p for p in paths(obj) if "/managedFields[]/" not in p and not p.startswith("/status")}
            for obj in (ours, served[name])
        ]
        assert fields[0] == fields[1], name
    modified = [obj for kind, obj in events(stream) if kind == "MODIFIED"]
    assert len(modified) == len(sidecar["tail_times"]) == sidecar["lines"] - sidecar["tail_start"]
    assert sidecar["probes"]


def test_the_synthetic_failures_are_what_stalewatch_reports(stream: Path) -> None:
    sidecar = orjson.loads(stream.with_suffix(".json").read_bytes())
    now = datetime.fromisoformat(sidecar["now"])
    model = HealthModel(ModelConfig())
    lines = stream.read_bytes().splitlines()[: sidecar["tail_start"]]
    for line in pipeline.watch_lines(lines):
        model.upsert(pipeline.decode(line)[1], now=now)
    failing = {
        (obj["metadata"]["namespace"], obj["metadata"]["name"])
        for kind, obj in events(stream)
        if kind == "ADDED" and obj["kind"] == "Pod" and not synthetic._healthy(obj)
    }
    named = {
        (s["kind"], s.get("namespace", ""), s["name"])
        for f in model.evaluate(now).findings
        for s in (f.subject, *f.affected)
    }
    assert {(ns, name) for kind, ns, name in named if kind == "Pod"} >= failing
    assert len(failing) == sidecar["failing_pods"] >= len(FAILING_PODS)
    assert {"GitRepository", "Kustomization", "HelmRelease", "Terraform"} <= {kind for kind, _, _ in named}


async def test_the_envelope_is_held_by_the_live_model_which_sees_every_pod_the_churn_breaks(
    stream: Path,
) -> None:
    sidecar = orjson.loads(stream.with_suffix(".json").read_bytes())
    held = await run.python("bench.envelope", "live", str(stream))
    assert held["objects"] == sidecar["tail_start"]
    assert held["rss_bytes"] > held["rss_bytes_imports"] > 0
    assert held["detection"]["probes"] == len(sidecar["probes"]) > 0
    detection = held["detection"]
    assert detection["seen"] + detection["healed_before_seen"] == detection["probes"]
    assert held["churn"]["events"] == len(sidecar["tail_times"])
    measured = await run.python("bench.envelope", "pipeline", str(stream))
    assert measured["events"] == sidecar["lines"]
    assert measured["stalewatch_events_per_s"] > 0
    assert measured["churn_events"] == min(envelope_bench.SAMPLE, len(sidecar["tail_times"]))


async def test_a_real_stalewatch_run_syncs_the_served_stream_and_serves_every_pod_the_churn_breaks(
    stream: Path, tmp_path: Path
) -> None:
    sidecar = orjson.loads(stream.with_suffix(".json").read_bytes())
    served = await run.python("bench.served", str(stream), "--workdir", str(tmp_path))
    assert served["objects_held"] == sidecar["tail_start"]
    assert served["first_scrape"]["status"] == 200
    assert served["rss_bytes_scraped"] >= served["rss_bytes_synced"] > 0
    detection = served["detection"]
    assert (
        detection["seen"] + detection["healed_before_seen"]
        == detection["probes"]
        == len(sidecar["probes"])
        > 0
    )
    assert detection["seen"] > 0
    assert served["churn"]["scrapes"] >= 1


def test_an_outage_crash_loops_the_controllers_pods_and_leaves_their_leases_and_statuses_unwritten() -> None:
    built = Cluster(200, datetime.now(UTC))
    objects = [
        obj
        for _, obj in synthetic.objects(built)
        if obj["kind"] in ("Deployment", "ReplicaSet", "Pod", "Lease")
    ]
    down = incidents.SCENARIOS["source-controller"]
    written = {
        (obj["kind"], obj["metadata"]["name"]): made
        for obj in objects
        if (made := incidents.outage(obj, down, since="2026-12-07T16:00:00Z"))
    }
    assert {kind for kind, name in written} == {"Deployment", "ReplicaSet", "Pod"}
    assert all(name.startswith("source-controller") for _, name in written)
    (pod,) = (obj for (kind, _), obj in written.items() if kind == "Pod")
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    deployment = written["Deployment", "source-controller"]
    assert "availableReplicas" not in deployment["status"]
    assert [c["status"] for c in deployment["status"]["conditions"] if c["type"] == "Available"] == ["False"]
    leases = [obj for obj in objects if incidents.leader_lease(obj, down)]
    assert [lease["metadata"]["name"] for lease in leases] == ["source-controller-leader-election"]
    git = {"apiVersion": API_VERSIONS["GitRepository"], "kind": "GitRepository", "metadata": {"name": "a"}}
    kustomization = {**git, "apiVersion": API_VERSIONS["Kustomization"], "kind": "Kustomization"}
    assert incidents.silenced(git, down)
    assert incidents.silenced(leases[0], down)
    assert not incidents.silenced(kustomization, down)


@pytest.mark.parametrize("scenario", incidents.SCENARIOS)
async def test_each_incident_in_process_names_every_down_controller_and_times_the_churn_still_written(
    stream: Path, scenario: str
) -> None:
    measured = await run.python("bench.envelope", "incident", str(stream), scenario)
    down = incidents.SCENARIOS[scenario]
    assert measured["controller_down"] == sorted(down)
    assert measured["findings"] > measured["findings_healthy"]
    assert measured["first_evaluate_ms"] > 0
    still = [
        obj
        for kind, obj in events(stream)
        if kind == "MODIFIED"
        and not incidents.silenced(obj, down)
        and not incidents.leader_lease(obj, CONTROLLERS)
    ]
    assert measured["churn_events"] == min(envelope_bench.OUTAGE_SAMPLE, len(still)) > 0


async def test_a_real_stalewatch_run_names_source_controller_down_then_serves_the_incident_through_the_churn(
    stream: Path, tmp_path: Path
) -> None:
    sidecar = orjson.loads(stream.with_suffix(".json").read_bytes())
    made = ["--workdir", str(tmp_path), "--down", "source-controller"]
    served = await run.python("bench.served", str(stream), *made)
    assert served["outage"]["down"] == ["source-controller"]
    assert 0 < served["outage"]["leases_expired_after_seconds"] <= 40  # the Lease's duration
    detection = served["detection"]
    assert (
        detection["seen"] + detection["healed_before_seen"] == detection["probes"] == len(sidecar["probes"])
    )
    pages = served["pages"]
    assert pages["fetches"] == served_bench.PAGES
    assert pages["findings_served"] > 0
    assert pages["findings"]["bytes"] > 0
    assert pages["page"]["bytes"] > 0
