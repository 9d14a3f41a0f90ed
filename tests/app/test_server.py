"""The HTTP layer on its own: probes say why, findings carry the watch status, /metrics has both
collectors. Served for real (aiohttp's test server on a local port), fed by the real model."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.kube.objects import cond, flux
from watcher.export.metrics import build_registry
from watcher.export.watcher_metrics import WatcherCollector
from watcher.model.engine import evaluate
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig
from watcher.telemetry import Telemetry
from watcher.web.server import create_app, parse_listen

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def stuck_evaluation() -> Evaluation:
    status = {
        "conditions": [
            cond(
                "Ready",
                "True",
                "ReconciliationSucceeded",
                "Applied",
                since=datetime(2026, 11, 30, 9, tzinfo=UTC),
            ),
            cond(
                "Reconciling",
                "True",
                "Progressing",
                "In progress",
                since=datetime(2026, 11, 30, 10, tzinfo=UTC),
            ),
        ]
    }
    return evaluate(
        [project(flux("Kustomization", "apps", "web", status=status))], now=NOW, config=ModelConfig()
    )


Serve = Callable[[Telemetry, Evaluation | None], Awaitable[TestClient]]

JUDGED_ALL = Evaluation(NOW, [], [], [], [])
"""An evaluation made with every kind listed: blind to none."""


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    clients: list[TestClient] = []

    async def make(telemetry: Telemetry, evaluation: Evaluation | None) -> TestClient:
        registry = build_registry(lambda: evaluation)
        registry.register(WatcherCollector(telemetry))
        app = create_app(telemetry=telemetry, source=lambda: evaluation, registry=registry)
        client = TestClient(TestServer(app))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


def synced(*, up: bool = True, broken: bool = False, forbidden: int = 0, unauthorized: str = "") -> Telemetry:
    """Pods and Kustomizations listed; `broken`: the Kustomizations' watch is down since; the
    first `forbidden` of the two kinds answer 403."""
    telemetry = Telemetry(up=up, started=True, unauthorized=unauthorized)
    for i, (group, kind) in enumerate([("", "Pod"), ("kustomize.toolkit.fluxcd.io", "Kustomization")]):
        stats = telemetry.kind(group, kind)
        stats.synced = stats.live = True
        stats.forbidden = i < forbidden
    telemetry.kind("kustomize.toolkit.fluxcd.io", "Kustomization").live = not broken
    return telemetry


@pytest.mark.parametrize(
    ("telemetry", "status", "says"),
    [
        pytest.param(synced(), 200, "ok", id="synced-and-up"),
        pytest.param(synced(up=False), 503, "the Kubernetes API server is unreachable", id="unreachable"),
        pytest.param(Telemetry(up=True), 503, "discovering the kinds to watch", id="starting"),
        pytest.param(
            synced(broken=True),
            503,
            "watch broken, serving the last known objects as stale: "
            "Kustomization.kustomize.toolkit.fluxcd.io",
            id="a-watch-down-or-relisting",
        ),
        pytest.param(
            synced(unauthorized="401 Unauthorized: the API server rejects stalewatch's credentials (x)"),
            503,
            "401 Unauthorized: the API server rejects stalewatch's credentials (x)",
            id="credentials-rejected",
        ),
        pytest.param(
            synced(forbidden=2),
            503,
            "403 Forbidden: stalewatch may not list any kind it watches: "
            "Pod, Kustomization.kustomize.toolkit.fluxcd.io",
            id="every-kind-forbidden",
        ),
        pytest.param(
            synced(forbidden=1), 200, "ok; 403 Forbidden, not judged: Pod", id="some-kinds-forbidden"
        ),
    ],
)
async def test_readyz_says_why_it_is_not_ready(
    serve: Serve, telemetry: Telemetry, status: int, says: str
) -> None:
    client = await serve(telemetry, JUDGED_ALL)
    response = await client.get("/readyz")
    assert (response.status, (await response.text()).strip()) == (status, says)
    assert (await client.get("/healthz")).status == 200


@pytest.mark.parametrize(
    ("evaluation", "status", "says"),
    [
        pytest.param(
            dataclasses.replace(JUDGED_ALL, blind=frozenset({"Kustomization"})),
            503,
            "initial list finished; the next evaluation judges Kustomization.kustomize.toolkit.fluxcd.io",
            id="a-kind-listed-since-the-evaluation-served",
        ),
        pytest.param(
            None,
            503,
            "initial list finished; the next evaluation judges "
            "Kustomization.kustomize.toolkit.fluxcd.io, Pod",
            id="listed-before-the-first-evaluation",
        ),
        pytest.param(
            dataclasses.replace(JUDGED_ALL, blind=frozenset({"Pod"})),
            200,
            "ok; 403 Forbidden, not judged: Pod",
            id="blind-to-a-kind-it-may-not-see",
        ),
    ],
)
async def test_readyz_waits_for_an_evaluation_that_judged_every_listed_kind(
    serve: Serve, evaluation: Evaluation | None, status: int, says: str
) -> None:
    telemetry = synced(forbidden=1 if status == 200 else 0)
    client = await serve(telemetry, evaluation)
    response = await client.get("/readyz")
    assert (response.status, (await response.text()).strip()) == (status, says)


async def test_a_findings_document_made_before_a_kind_was_judged_says_stale_and_names_it(
    serve: Serve,
) -> None:
    evaluation = dataclasses.replace(JUDGED_ALL, blind=frozenset({"Kustomization"}))
    client = await serve(synced(), evaluation)
    summary = orjson.loads(await (await client.get("/api/v1/findings")).read())["summary"]
    assert (summary["synced"], summary["stale"], summary["findings"]) == (True, True, 0)
    assert summary["unjudged_kinds"] == ["Kustomization.kustomize.toolkit.fluxcd.io"]
    page = await (await client.get("/")).text()
    assert "Not yet judged: initial list finished for Kustomization.kustomize.toolkit.fluxcd.io" in page
    assert "Live: every watch is synced" not in page


async def test_readyz_names_the_kinds_whose_initial_list_is_not_done(serve: Serve) -> None:
    telemetry = synced()
    telemetry.kind("helm.toolkit.fluxcd.io", "HelmRelease")
    forbidden = telemetry.kind("infra.contrib.fluxcd.io", "Terraform")
    forbidden.forbidden = True
    client = await serve(telemetry, None)
    response = await client.get("/readyz")
    assert response.status == 503
    assert (
        await response.text()
    ).strip() == "initial list not finished for HelmRelease.helm.toolkit.fluxcd.io"


@pytest.mark.parametrize(
    ("published", "load_errors"),
    [
        pytest.param(2, 2, id="those-its-evaluation-lists-not-one-read-since"),
        pytest.param(None, 3, id="before-the-first-evaluation-as-the-reflectors-count"),
    ],
)
async def test_a_findings_document_counts_the_malformed_objects_it_lists(
    serve: Serve, published: int | None, load_errors: int
) -> None:
    telemetry = synced()
    telemetry.kind("", "Pod").malformed_now = 3
    evaluation = None if published is None else dataclasses.replace(stuck_evaluation(), unreadable=published)
    client = await serve(telemetry, evaluation)
    document = orjson.loads(await (await client.get("/api/v1/findings")).read())
    assert document["summary"]["load_errors"] == load_errors


async def test_findings_are_the_analyze_json_plus_the_watch_status(serve: Serve) -> None:
    telemetry = synced()
    telemetry.kind("", "Pod").objects = 7
    telemetry.kind("", "Pod").malformed_now = 2
    evaluation = dataclasses.replace(stuck_evaluation(), unreadable=2)
    client = await serve(telemetry, evaluation)
    response = await client.get("/api/v1/findings")
    assert response.content_type == "application/json"
    document = orjson.loads(await response.read())
    assert document["findings"] == [f.to_dict() for f in evaluation.findings]
    summary = document["summary"]
    assert (summary["objects"], summary["load_errors"], summary["findings"]) == (7, 2, 1)
    assert summary["now"] == "2026-11-30T12:00:00Z"
    watch = ("up", "synced", "stale", "forbidden_kinds", "unsynced_kinds", "unjudged_kinds", "unauthorized")
    assert {k: summary[k] for k in watch} == {
        "up": True,
        "synced": True,
        "stale": False,
        "forbidden_kinds": [],
        "unsynced_kinds": [],
        "unjudged_kinds": [],
        "unauthorized": "",
    }


async def test_findings_follow_each_new_evaluation_and_watch_status_though_the_body_is_reused() -> None:
    telemetry, served = synced(), [stuck_evaluation()]
    app = create_app(telemetry=telemetry, source=lambda: served[-1], registry=build_registry(lambda: None))
    async with TestClient(TestServer(app)) as client:

        async def document() -> dict[str, Any]:
            return dict(orjson.loads(await (await client.get("/api/v1/findings")).read()))

        first = await document()
        assert await document() == first
        telemetry.up = False
        assert (await document())["summary"]["up"] is False
        served.append(evaluate([], now=NOW, config=ModelConfig()))
        assert (await document())["findings"] == [] != first["findings"]


async def test_before_the_first_evaluation_findings_are_empty_and_flagged_stale(serve: Serve) -> None:
    client = await serve(Telemetry(), None)
    summary = orjson.loads(await (await client.get("/api/v1/findings")).read())["summary"]
    assert (summary["findings"], summary["up"], summary["stale"], summary["synced"]) == (
        0,
        False,
        True,
        False,
    )


@pytest.mark.parametrize(
    ("accept", "content_type", "ending"),
    [
        pytest.param(None, "text/plain; version=0.0.4; charset=utf-8", "", id="prometheus-text"),
        pytest.param(
            "application/openmetrics-text; version=1.0.0",
            "application/openmetrics-text; version=1.0.0",
            "# EOF\n",
            id="openmetrics",
        ),
    ],
)
async def test_metrics_serve_the_model_and_the_watcher_from_one_registry(
    serve: Serve, accept: str | None, content_type: str, ending: str
) -> None:
    client = await serve(synced(), stuck_evaluation())
    response = await client.get("/metrics", headers={"Accept": accept} if accept else {})
    text = await response.text()
    assert response.headers["Content-Type"].startswith(content_type)
    finding = next(line for line in text.splitlines() if line.startswith("stalewatch_finding{"))
    assert 'type="StuckReconciling"' in finding
    assert "\nstalewatch_up 1.0\n" in text
    assert 'stalewatch_kind_synced{group="",kind="Pod"} 1.0' in text
    assert text.endswith(ending)


@pytest.mark.parametrize(
    ("listen", "expected"),
    [(":8080", (None, 8080)), ("127.0.0.1:9090", ("127.0.0.1", 9090)), ("[::1]:8080", ("::1", 8080))],
)
def test_listen_addresses_parse_like_go_host_port(listen: str, expected: tuple[str | None, int]) -> None:
    assert parse_listen(listen) == expected


UNREAD = (("cert-manager.io", "Certificate", 2),)


def listing(*, state: str) -> Telemetry:
    """Synced, the Certificates that inventories list in `state`: not watched yet, listing,
    forbidden, or left out (over listed_kinds_limit, or no CRD serves them)."""
    telemetry = synced()
    if state in ("listing", "forbidden"):
        stats = telemetry.kind("cert-manager.io", "Certificate")
        stats.forbidden = state == "forbidden"
    if state == "left-out":
        telemetry.listed_kinds = {"over_limit": frozenset({("cert-manager.io", "Certificate")})}
    return telemetry


@pytest.mark.parametrize(
    ("state", "status", "says"),
    [
        pytest.param(
            "not-watched-yet",
            503,
            "inventories list kinds not read yet (their watch is starting): Certificate.cert-manager.io",
            id="watch-not-started",
        ),
        pytest.param(
            "listing", 503, "initial list not finished for Certificate.cert-manager.io", id="watch-listing"
        ),
        pytest.param(
            "forbidden", 200, "ok; 403 Forbidden, not judged: Certificate.cert-manager.io", id="403"
        ),
        pytest.param("left-out", 200, "ok", id="over-the-limit-or-unserved"),
    ],
)
async def test_readyz_waits_for_the_kinds_inventories_list_unless_they_cannot_be_read(
    serve: Serve, state: str, status: int, says: str
) -> None:
    """Their objects are counted as not read either way; readiness waits only for what is coming."""
    evaluation = dataclasses.replace(JUDGED_ALL, unread=UNREAD)
    client = await serve(listing(state=state), evaluation)
    response = await client.get("/readyz")
    assert (response.status, (await response.text()).strip()) == (status, says)
    summary = orjson.loads(await (await client.get("/api/v1/findings")).read())["summary"]
    assert summary["unread"] == {"Certificate.cert-manager.io": 2}
    assert summary["stale"] is (status == 503)


def test_a_findings_document_is_the_bytes_orjson_writes_whole_and_reuses_each_unchanged_finding() -> None:
    """Each finding is written once while the model hands out the same Finding (an incident's
    satellites), and the document stays exactly what orjson writes for it whole."""
    from tests.model.builders import MIN
    from tests.model.builders import NOW as MODEL_NOW
    from tests.model.test_incidents import tofu_incident
    from watcher.model.engine import HealthModel
    from watcher.model.types import Rejection, RejectReason
    from watcher.web.server import Fragments, findings_document

    model = HealthModel(ModelConfig())
    for obj in tofu_incident():
        model.upsert(project(obj), now=MODEL_NOW)
    first = model.evaluate(MODEL_NOW + 10 * MIN)
    assert any(f.affected for f in first.findings)
    assert any(f.root_cause for f in first.findings)
    pod = {"apiVersion": "v1", "kind": "Pod", "namespace": "a", "name": "p"}
    rejected = [Rejection(pod, RejectReason.NOT_AN_INTEGER, "spec.x", 'x\n"y"', evaluated=True, message="é")]
    evaluation = dataclasses.replace(first, rejected=rejected)
    status = {"synced": True, "note": 'ünïcode \n and quotes "'}

    written: Fragments = {}
    body = findings_document(evaluation, status, objects=3, load_errors=1, written=written)
    whole = {
        "findings": [f.to_dict() for f in evaluation.findings],
        "summary": orjson.loads(findings_document(evaluation, status, objects=3, load_errors=1))["summary"],
        "rejected": [r.to_dict() for r in rejected],
    }
    assert body == orjson.dumps(whole, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    again: Fragments = {}
    findings_document(evaluation, status, objects=3, load_errors=1, kept=written, written=again)
    assert all(again[key][1] is written[key][1] for key in written)
    empty = dataclasses.replace(evaluation, findings=[])
    assert orjson.loads(findings_document(empty, status, objects=0, load_errors=0))["findings"] == []
