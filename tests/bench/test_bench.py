"""The benchmark scripts keep working: a tiny cluster through every step but kube-state-metrics.

Nothing here asserts a number from the benchmark (those are measured, not promised); the
tests assert that each step does what it claims: the generator creates the cluster it
describes, churn really breaks and heals Pods, the recorded stream holds every watched
object and feeds the pipeline, stalewatch syncs it and serves a broken Pod as a finding,
the CPU windows measure a running process idle and under churn while only scraping it,
the live profile's stacks are attributed to the job they belong to, and the report renders
results into BENCHMARKS.md's tables.

The API server, the tiny cluster and a recording from it are tests/bench/conftest.py's.
"""

from __future__ import annotations

import asyncio
import fcntl
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import orjson
import pytest
import yaml

from bench import cpu, liveprofile, pipeline, procs, report, run, scaling_kinds, steady
from bench.barelist import main as barelist_main
from bench.generate import Churn
from bench.kinds import API_VERSIONS, CONTROLLERS, STACK_KINDS
from bench.workload import MIX, Cluster, counts
from tests.bench.conftest import SIZE
from tests.controlplane.harness import ControlPlane, free_port
from tests.kubeclient import Kube

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("size", [pytest.param(s, id=f"{s}-objects") for s in (1000, 10_000, 50_000)])
def test_the_mix_is_mostly_pods_and_adds_up_to_the_size(size: int) -> None:
    mix = counts(size)
    assert sum(mix.values()) == pytest.approx(size, rel=0.01)
    assert mix["Pod"] / size == pytest.approx(0.74, abs=0.005)
    assert sum(mix[kind] for kind in STACK_KINDS) / size == pytest.approx(0.06, abs=0.005)
    assert sum(MIX.values()) == pytest.approx(1.0, abs=0.001)


async def test_generator_creates_every_object_with_its_status_and_owner(kube: Kube, cluster: Cluster) -> None:
    expected = counts(SIZE)
    for kind in ("Pod", "Kustomization", "HelmRelease", "Terraform", "Event"):
        listed = await kube.list(API_VERSIONS[kind], kind)
        assert len(listed) == expected[kind], kind
    pods = await kube.list("v1", "Pod")
    replicasets = {rs["metadata"]["uid"] for rs in await kube.list("apps/v1", "ReplicaSet")}
    assert all(p["metadata"]["ownerReferences"][0]["uid"] in replicasets for p in pods)
    assert all(c["status"] == "True" for p in pods for c in p["status"]["conditions"] if c["type"] == "Ready")
    managers = {m["manager"] for p in pods for m in p["metadata"]["managedFields"]}
    assert managers == {"kube-controller-manager", "kubelet"}
    ks = await kube.list("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
    assert all(k["status"]["inventory"]["entries"] for k in ks)


async def test_the_stacks_certificates_and_jobs_are_created_finished_and_listed_in_inventories(
    kube: Kube, cluster: Cluster
) -> None:
    entries = {
        e["id"]
        for k in await kube.list("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
        for e in k["status"]["inventory"]["entries"]
    }
    for kind in STACK_KINDS:
        objects = await kube.list(API_VERSIONS[kind], kind)
        assert len(objects) == counts(SIZE)[kind], kind
        group = API_VERSIONS[kind].rpartition("/")[0]
        for obj in objects:
            meta = obj["metadata"]
            assert f"{meta['namespace']}_{meta['name']}_{group}_{kind}" in entries
            assert obj["status"]["conditions"][-1]["status"] == "True"
    jobs = await kube.list("batch/v1", "Job")
    assert {c["type"] for j in jobs for c in j["status"]["conditions"]} == {"SuccessCriteriaMet", "Complete"}


def test_a_failing_cluster_has_failed_jobs_and_certificates_that_never_issued() -> None:
    built = Cluster(20_000, datetime.now(UTC), failing=True)
    jobs = [j for j in built.phase(("Job",)) if j["status"].get("failed")]
    certificates = [
        c for c in built.phase(("Certificate",)) if c["status"]["conditions"][0]["status"] == "False"
    ]
    assert len(jobs) == len(certificates) == counts(20_000)["Job"] // 100
    assert [c["type"] for c in jobs[0]["status"]["conditions"]] == ["FailureTarget", "Failed"]
    assert [c["reason"] for c in certificates[0]["status"]["conditions"]] == ["DoesNotExist", "Failed"]


async def test_churn_breaks_a_pod_into_image_pull_back_off_and_heals_it(kube: Kube, cluster: Cluster) -> None:
    churn = Churn(kube, cluster)
    namespace, name = churn.pods[0]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name}}
    await churn.set_pod(namespace, name, broken=True)
    waiting = (await kube.get(pod))["status"]["containerStatuses"][0]["state"]
    assert waiting["waiting"]["reason"] == "ImagePullBackOff"
    await churn.set_pod(namespace, name, broken=False)
    assert "running" in (await kube.get(pod))["status"]["containerStatuses"][0]["state"]
    assert await churn.run(rate=30, seconds=1) >= 30


async def test_churn_renews_a_listed_certificate_ready_throughout(kube: Kube, cluster: Cluster) -> None:
    churn = Churn(kube, cluster)
    churn.certificates = churn.certificates[:1]
    namespace, name = churn.certificates[0]
    certificate = {"apiVersion": API_VERSIONS["Certificate"], "kind": "Certificate"}
    certificate["metadata"] = {"namespace": namespace, "name": name}
    seen = []
    for _ in range(2):
        await churn.renew_certificate()
        status = (await kube.get(certificate))["status"]
        seen.append(([(c["type"], c["status"]) for c in status["conditions"]], status["revision"]))
    assert seen == [([("Ready", "True"), ("Issuing", "True")], 3), ([("Ready", "True")], 4)]


async def test_the_recorded_stream_holds_every_watched_object_and_feeds_the_pipeline(
    kube: Kube, cluster: Cluster, tmp_path: Path
) -> None:
    stream, stop = tmp_path / "stream.jsonl", asyncio.Event()
    recorder = asyncio.create_task(pipeline.record(kube.api, stream, stop=stop))
    await asyncio.sleep(2)
    await Churn(kube, cluster).run(rate=30, seconds=1)
    await asyncio.sleep(1)
    stop.set()
    events = await recorder
    result = await asyncio.to_thread(pipeline.measure, stream)
    assert result["events"] == events
    watched = SIZE - counts(SIZE)["Event"] * 4 // 5  # only Warning Events are watched
    assert result["event_types"]["ADDED"] >= watched - len(cluster.namespaces) - 1
    assert result["event_types"]["MODIFIED"] >= 30
    assert result["churn_events"] == result["event_types"]["MODIFIED"]
    for key in (
        "stalewatch_events_per_s",
        "stalewatch_each_events_per_s",
        "stalewatch_ingest_events_per_s",
        "k8s_asyncio_events_per_s",
    ):
        assert result[key] > 0
    kinds = await asyncio.to_thread(scaling_kinds.by_kind, stream)
    played = min(scaling_kinds.INCIDENT, result["churn_events"])
    assert sum(k["events"] for k in kinds["kinds"].values()) == played
    assert kinds["incident_findings"] > 0  # every controller's Lease expired by then
    day = await asyncio.to_thread(steady.measure, stream, batch=4)
    assert day["passes"] > 0
    assert day["evaluate_ms_mean"] > 0
    assert day["controllers_down"] == 0  # the Leases renewed at its clock: a normal day


async def test_stalewatch_syncs_the_cluster_and_serves_a_broken_pod_and_a_failing_certificate_as_findings(
    plane: ControlPlane, kube: Kube, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await barelist_main(str(plane.kubeconfig))
    listed = orjson.loads(capsys.readouterr().out)["objects"]
    port = free_port()
    proc = procs.stalewatch(plane.kubeconfig, port, tmp_path / "stalewatch.log").start()
    base = f"http://127.0.0.1:{port}"
    churn = Churn(kube, cluster)
    try:
        async with aiohttp.ClientSession() as session:
            assert await procs.wait_until_ok(session, f"{base}/readyz", proc, within=120) > 0
            await churn.renew_leases()
            namespace, pod = churn.pods[1]
            await churn.set_pod(namespace, pod, broken=True)
            for _ in range(200):
                _, body, _ = await procs.fetch(session, f"{base}/api/v1/findings")
                if run.has_finding(body, pod):
                    break
                await asyncio.sleep(0.05)
            assert run.has_finding(body, pod)
            summary = orjson.loads(body)["summary"]
            assert summary["objects"] == listed  # the listed Certificates and Jobs among them
            assert summary["unread"] == {}
            certificates = await run.certificate_detection(session, base, churn)  # ObjectFailing served
            assert certificates["certificate_probes"] == run.CERTIFICATE_PROBES
            assert not churn.probed
            scraped = await run.scrape(session, base, times=1)
            assert scraped["metrics_bytes"] > 0
        assert proc.rss() > 0
        assert proc.cpu() > 0
    finally:
        proc.stop()


async def test_the_cpu_windows_measure_a_process_idle_then_under_churn_scraped_at_the_cadence(
    plane: ControlPlane, kube: Kube, cluster: Cluster, tmp_path: Path
) -> None:
    port = free_port()
    proc = procs.stalewatch(plane.kubeconfig, port, tmp_path / "stalewatch.log").start()
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await procs.wait_until_ok(session, f"{base}/readyz", proc, within=120)
            target = cpu.Target("stalewatch", proc, f"{base}/metrics")
            measured = await cpu.windows(
                session, [target], churn=Churn(kube, cluster), rate=30, seconds=2, scrape_every=1
            )
    finally:
        proc.stop()
    assert measured["scrape_every_seconds"] == 1
    assert measured["idle"]["writes_per_s"] == 0
    assert measured["churn"]["writes_per_s"] > 0
    for name in ("idle", "churn"):
        spent = measured[name]["stalewatch"]
        assert spent["scrapes"] >= 2, name  # at 0 s and 1 s of a 2 s window
        assert spent["cpu_seconds"] == spent["cpu_user_seconds"] + spent["cpu_system_seconds"]
        assert spent["cpu_cores"] == pytest.approx(spent["cpu_seconds"] / measured[name]["seconds"])
        assert spent["rss_bytes"] > 0
    assert measured["churn"]["stalewatch"]["cpu_seconds"] > 0  # it decoded and judged the churn


def _frame(function: str, path: str) -> str:
    return f"{function} ({path}:1)"


LOOP = [
    _frame("_run_module_as_main", "<frozen runpy>"),
    _frame("BaseEventLoop._run_once", "/py/lib/python3.11/asyncio/base_events.py"),
    _frame("Handle._run", "/py/lib/python3.11/asyncio/events.py"),
]
SITE = "/work/.venv/lib/python3.11/site-packages"


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        pytest.param(
            [
                _frame("LiveModel._evaluate", "/w/watcher/kube/live.py"),
                _frame("correlate", "/w/watcher/model/correlate/correlator.py"),
            ],
            "correlation",
            id="correlating-inside-an-evaluation-is-correlation",
        ),
        pytest.param(
            [
                _frame("HealthModel.evaluate", "/w/watcher/model/engine.py"),
                _frame("dig", "/w/watcher/model/ingest/objects.py"),
            ],
            "evaluation (rules, kstatus, health rows)",
            id="reading-objects-inside-an-evaluation-is-evaluation",
        ),
        pytest.param(
            [
                _frame("Reflector._event", "/w/watcher/kube/reflector.py"),
                _frame("FastPath.event", "/w/watcher/model/ingest/fastpath/__init__.py"),
            ],
            "decode (fast path, projection)",
            id="the-fast-path-is-decode",
        ),
        pytest.param(
            [
                _frame("Reflector._event", "/w/watcher/kube/reflector.py"),
                _frame("HealthModel.upsert", "/w/watcher/model/engine.py"),
            ],
            "model upsert",
            id="the-engine-outside-an-evaluation-is-upsert",
        ),
        pytest.param(
            [
                _frame("Reflector._stream", "/w/watcher/kube/reflector.py"),
                _frame("StreamReader.readline", f"{SITE}/aiohttp/streams.py"),
            ],
            "watch stream reading (reflector, aiohttp client)",
            id="reading-the-watch-stream",
        ),
        pytest.param(
            [_frame("metrics", "/w/watcher/web/server.py"), _frame("render", "/w/watcher/export/metrics.py")],
            "/metrics render",
            id="rendering-metrics-under-the-handler-is-the-render",
        ),
        pytest.param(
            [_frame("RequestHandler.start", f"{SITE}/aiohttp/web_protocol.py")],
            "aiohttp server (requests, protocol)",
            id="the-http-server-outside-any-handler",
        ),
        pytest.param(
            [_frame("Logger.warning", "/py/lib/python3.11/logging/__init__.py")],
            "logging",
            id="logging-wherever-it-is-called",
        ),
        pytest.param(
            [_frame("_collection", "/w/bench/traced.py")],
            "garbage collection (seen in the timing hook)",
            id="the-collection-hook",
        ),
        pytest.param([], "asyncio event loop (timers, callbacks, selector)", id="the-loop-alone"),
    ],
)
def test_a_live_profile_stack_is_attributed_to_the_job_it_belongs_to(
    frames: list[str], expected: str
) -> None:
    raw = ";".join(LOOP + frames) + " 3\n"
    ((stack, count),) = liveprofile.parse_raw(raw)
    assert (liveprofile.job(stack), count) == (expected, 3)
    assert liveprofile.breakdown([(stack, count)])["jobs"] == {expected: 1.0}


def test_ksm_config_exports_one_info_series_per_flux_kind_with_ready_and_revision() -> None:
    config = yaml.safe_load(yaml.safe_dump(procs.ksm_config()))
    resources = config["spec"]["resources"]
    assert [r["groupVersionKind"]["kind"] for r in resources] == list(procs.FLUX_KINDS)
    for resource in resources:
        (metric,) = resource["metrics"]
        assert (resource["metricNamePrefix"], metric["name"], metric["each"]["type"]) == (
            "gotk",
            "resource_info",
            "Info",
        )
        assert {"ready", "suspended", "revision", "exported_namespace"} <= metric["labelsFromPath"].keys()


def test_report_renders_results_into_the_tables_between_the_markers() -> None:
    machine = orjson.loads((GOLDEN / "machine.json").read_bytes())
    results = [orjson.loads((GOLDEN / "size-1000.json").read_bytes())]
    envelope = orjson.loads((GOLDEN / "envelope.json").read_bytes())
    block = report.render(machine, results, envelope)
    assert block == (GOLDEN / "report.md").read_text().rstrip("\n")
    document = "# Benchmarks\n\nprose\n\n" + report.BEGIN + "\nold\n" + report.END + "\n\nmore prose\n"
    assert report.splice(document, block) == "# Benchmarks\n\nprose\n\n" + block + "\n\nmore prose\n"


def test_every_controller_has_a_leader_lease_in_the_cluster() -> None:
    leases = [lease["metadata"]["name"] for lease in Cluster(SIZE, datetime.now(UTC)).phase(("Lease",))]
    assert {f"{name}-leader-election" for name in CONTROLLERS} <= set(leases)


async def test_a_second_benchmark_on_the_same_workdir_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs sharing --workdir interleave their recorded watch streams (seen once: corrupt lines)."""
    with (tmp_path / ".lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        refused = await run.main(
            ["--workdir", str(tmp_path), "--out", str(tmp_path / "out"), "--sizes", "1000"]
        )
    assert refused == 1
    assert "another benchmark is running" in capsys.readouterr().err
    assert not (tmp_path / "out" / "machine.json").exists()


def test_the_replay_ends_when_every_kind_has_replayed_though_the_watches_interleave() -> None:
    def line(kind: str, event: str) -> pipeline.Line:
        return (b'{"type":"' + event.encode() + b'","object":{}}', "v1", kind)

    lines = [
        line("Lease", "ADDED"),
        line("Pod", "ADDED"),
        line("Lease", "MODIFIED"),  # the Leases replayed already: churn
        line("Pod", "ADDED"),  # the Pods still replay: the index the watcher is synced after
        line("Pod", "MODIFIED"),
        line("Lease", "ADDED"),  # a Lease created later
    ]
    assert pipeline.synced_at(lines) == 3
