"""The fleet end to end, with the real programs (rig.py): two API servers, two `stalewatch run`,
one Prometheus scraping both with distinct `cluster` labels, and `stalewatch fleet` asking it.

Both clusters start on the same healthy stack, prod on revision A and staging on revision B, and
both are green in the fleet, beside a third, broken, whose series the fleet cannot read (it is
unknown throughout); then the tofu-controller incident happens in prod. Prometheus is
restarted once, for the skew alert's hour. Last, staging's stalewatch is stopped. Everything is
polled with a deadline; nothing asserts how long it took.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tests.app.test_incidents import REV_A, REV_B
from tests.conftest import client_for
from tests.controlplane.harness import CRDS, ControlPlane, free_port, running_control_plane
from tests.e2e.rig import RULES
from tests.e2e.scenarios import tofu_controller_down
from tests.fleet.rig import (
    BROKEN,
    PROD,
    RESTORED_WITHIN,
    STAGING,
    STALENESS_WINDOW,
    WITHIN,
    FleetRig,
    fleet_running,
    healthy_stack,
    new_cluster,
    prometheus_running,
    start_stalewatch,
    unreadable_exporter_running,
)
from tests.kube.support import poll
from tests.kubeclient import Kube
from tests.web.conftest import Watched
from tests.web.dom import parse
from watcher.fleet.prom import Prometheus
from watcher.fleet.server import FleetSource, create_fleet_app

pytestmark = pytest.mark.cluster

SKEW_ALERT = "StalewatchRevisionSkewAcrossClusters"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
"""Where the page's screenshot is kept (git ignores it)."""
CRITICAL_RED, HEALTHY_GREEN, OFF_PINK = "rgb(197, 34, 31)", "rgb(24, 128, 56)", "rgb(252, 232, 230)"
UNKNOWN_GREY = "rgb(95, 99, 104)"


def states(document: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["state"] for c in document["clusters"]}


@pytest.fixture(scope="module")
async def rig(
    control_plane: ControlPlane, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FleetRig]:
    workdir = tmp_path_factory.mktemp("fleet")
    ns = f"fleet-{uuid.uuid4().hex[:6]}"
    ref = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    with running_control_plane(CRDS) as second:
        async with await client_for(second.kubeconfig) as second_client:
            prod, staging = (
                new_cluster(PROD, kube, workdir),
                new_cluster(STAGING, Kube(second_client), workdir),
            )
            for cluster, revision in ((prod, REV_A), (staging, REV_B)):
                await cluster.kube.create(ref)
                for obj in healthy_stack(ns, revision):
                    await cluster.kube.create(obj)
            try:
                start_stalewatch(prod, control_plane.kubeconfig, ns)
                start_stalewatch(staging, second.kubeconfig, ns)
                with ExitStack() as running:
                    broken = running.enter_context(unreadable_exporter_running())
                    targets = {PROD: prod.stalewatch, STAGING: staging.stalewatch, BROKEN: broken}
                    store = running.enter_context(prometheus_running(workdir, targets))
                    fleet = running.enter_context(
                        fleet_running(workdir, store.url, {PROD: prod, STAGING: staging})
                    )
                    rig = FleetRig(ns, {PROD: prod, STAGING: staging}, store, fleet, workdir)
                    await rig.until_fleet(
                        lambda d: states(d) == {PROD: "healthy", STAGING: "healthy", BROKEN: "unknown"},
                        what="both clusters green before the incident, broken unknown",
                    )
                    for act in tofu_controller_down(ns).acts:
                        await act(kube, ns)
                    yield rig
            finally:
                prod.stop_stalewatch()
                staging.stop_stalewatch()
                await kube.delete(ref)


BLAST_RADIUS = 4
"""The two Terraforms and the two Kustomizations behind them, once every act is seen."""


async def incident_seen(rig: FleetRig) -> dict[str, Any]:
    """The whole incident in the fleet: its root appears at the first act's scrape, and its
    symptoms (so its blast radius) one scrape at a time after, as stalewatch sees each act."""
    return await rig.until_fleet(
        lambda d: (
            states(d) == {PROD: "critical", STAGING: "healthy", BROKEN: "unknown"}
            and any(
                g["type"] == "ControllerDown" and [w["blast_radius"] for w in g["clusters"]] == [BLAST_RADIUS]
                for g in d["roots"]
            )
        ),
        what=f"prod critical with its ControllerDown root over {BLAST_RADIUS} objects, staging healthy",
    )


async def test_the_fleet_shows_prod_down_on_its_controller_and_staging_green(rig: FleetRig) -> None:
    document = await incident_seen(rig)
    assert document["healthy"] is False
    assert document["errors"] == {}
    prod, staging = rig.cluster(PROD, document), rig.cluster(STAGING, document)
    assert prod["roots"] == {"critical": 1}
    assert prod["controllers_down"] == [
        {
            "namespace": rig.namespace,
            "name": "tofu-controller",
            "kind": "Deployment",
            "reason": "ImagePullBackOff",
        }
    ]
    assert (staging["roots"], staging["controllers_down"], staging["up"], staging["synced"]) == (
        {},
        [],
        True,
        True,
    )
    [root] = [g for g in document["roots"] if g["type"] == "ControllerDown"]
    assert (root["kind"], root["namespace"], root["name"], root["reason"]) == (
        "Deployment",
        rig.namespace,
        "tofu-controller",
        "ImagePullBackOff",
    )
    assert root["clusters"] == [
        {"cluster": PROD, "url": rig.clusters[PROD].url, "severity": "critical", "blast_radius": BLAST_RADIUS}
    ]


async def test_a_cluster_whose_series_cannot_be_read_is_unknown_in_the_page_and_the_api(
    rig: FleetRig,
) -> None:
    document = await incident_seen(rig)
    broken = rig.cluster(BROKEN, document)
    assert broken["state"] == "unknown"
    assert broken["why"] == (
        'its samples cannot be read: up "NaN", not a finite number; synced "0.5", not 0 or 1'
    )
    assert (broken["up"], broken["synced"]) == (None, None), "not false: not known"
    assert broken["last_sample"] is not None, "it reports: only its values cannot be read"
    rows = parse(rig.page()).by_id("clusters").all("tr")[1:]
    shown = {row.all("td")[0].text: (row.all("td")[1].text, row.all("td")[2].text) for row in rows}
    assert shown[BROKEN] == ("unknown", broken["why"])
    assert shown[PROD][0] == "critical"


async def test_the_version_matrix_shows_the_kustomization_on_different_revisions_per_cluster(
    rig: FleetRig,
) -> None:
    document = await rig.until_fleet(lambda d: len(d["rows"]) >= 4, what="the matrix rows of both clusters")
    rows = {(r["kind"], r["name"]): r for r in document["rows"]}
    apps = rows[("Kustomization", "apps")]
    assert apps["majority"] is None, "one cluster each: no majority"
    assert {c: (cell["applied_revision"], cell["off_majority"]) for c, cell in apps["cells"].items()} == {
        PROD: (REV_A, True),
        STAGING: (REV_B, True),
    }
    assert document["columns"] == [PROD, STAGING]
    filtered = rig.document("?name=apps&cluster=prod")
    assert [(r["name"], list(r["cells"])) for r in filtered["rows"]] == [("apps", [PROD])]
    assert [c["name"] for c in filtered["clusters"]] == [PROD]


async def test_a_filter_prometheus_rejects_is_shown_as_its_error_and_turns_nothing_green(
    rig: FleetRig,
) -> None:
    await incident_seen(rig)
    document = rig.document("?name=%28")  # "(": not a regular expression
    assert set(document["errors"]) == {"roots", "matrix_rows"}, document["errors"]
    assert all(error.startswith("bad_data:") for error in document["errors"].values())
    assert document["healthy"] is False
    hostile = rig.document("?name=" + "%22%7D%20or%20vector(1)%20%23")  # "} or vector(1) #
    assert (hostile["errors"], hostile["rows"], hostile["roots"]) == ({}, [], [])


async def test_a_prometheus_that_is_down_is_shown_as_down_never_as_green() -> None:
    async with Prometheus(f"http://127.0.0.1:{free_port()}", timeout=5) as down:
        app = create_fleet_app(FleetSource(down, "cluster", 120, {PROD: "http://prod.example/"}))
        async with TestServer(app) as server, aiohttp.ClientSession() as session:
            async with session.get(server.make_url("/api/v1/fleet")) as answer:
                document = await answer.json()
            async with session.get(server.make_url("/")) as answer:
                page = await answer.text()
    assert all(error.startswith("unreachable:") for error in document["errors"].values())
    assert [(c["name"], c["state"]) for c in document["clusters"]] == [(PROD, "unknown")]
    assert document["healthy"] is False
    assert "NOT KNOWN: the store at" in page
    assert 'class="banner live"' not in page
    assert 'class="state healthy"' not in page


async def test_revision_skew_across_clusters_fires_with_the_shipped_rule_once_it_has_held_its_hour(
    rig: FleetRig,
) -> None:
    """The shipped rule waits an hour (`for: 1h`) before it fires; this test does not wait that hour,
    nor change the rule: Prometheus loads alerts/stalewatch.rules.yaml from the repo, byte for byte.

    It enacts instead what happens when the skew has already held for more than the hour while
    Prometheus was restarted: Prometheus keeps each active alert's start in its `ALERTS_FOR_STATE`
    series (labels: the alert's own, value: its activeAt) and, after a restart, takes it back from
    the last sample within the outage tolerance for every alert active again, so an alert that had
    been active for its whole `for` when Prometheus went down fires again at once, instead of
    waiting its hour anew. (`--rules.alert.for-grace-period` does not come in: it is for an alert
    that had less than the grace left; one with more gets its remaining time plus the downtime.)
    So: the alert goes pending
    with the shipped rule; Prometheus is stopped; its data dir is given the series it would have
    written had that alert (its exact labels, read from /api/v1/alerts) been active for two hours;
    Prometheus starts again on that data dir, and fires it, from its own restore.

    Honest because the firing comes from Prometheus' own mechanism on the unchanged rule file;
    that the rule does NOT fire before its hour, and does after, is promtool's unit test
    (tests/alerts/clusters.test.yaml).
    """

    def about_apps(state: str) -> list[dict[str, Any]]:
        return [
            a
            for a in rig.alerts(SKEW_ALERT)
            if (a["labels"]["kind"], a["labels"]["namespace"], a["labels"]["name"], a["state"])
            == ("Kustomization", rig.namespace, "apps", state)
        ]

    [pending] = await poll(lambda: about_apps("pending"), within=WITHIN, what=f"{SKEW_ALERT} pending")
    assert pending["labels"]["source"] == f"GitRepository/{rig.namespace}/infra"
    since = int(time.time()) - 2 * 3600
    rig.restart_prometheus_remembering(pending["labels"], active_since=since)
    [firing] = await poll(
        lambda: about_apps("firing"), within=RESTORED_WITHIN, what=f"{SKEW_ALERT} firing after the restart"
    )
    assert firing["labels"] == pending["labels"]
    assert datetime.fromisoformat(firing["activeAt"]).timestamp() == since, "restored, not pending anew"
    assert firing["annotations"]["description"].endswith(
        f"in different clusters: prod={REV_A} staging={REV_B}."
    )
    matchers = ",".join(f'{k}="{v}"' for k, v in firing["labels"].items())
    assert await poll(
        lambda: rig.query(f'ALERTS{{alertstate="firing",{matchers}}}'),
        within=RESTORED_WITHIN,
        what="the firing alert in the ALERTS series",
    )
    assert {group["file"] for group in rig.rule_groups()} == {str(RULES)}, "the shipped file itself"


@pytest.fixture
def artifacts() -> Path:
    """test-artifacts/ in the clone, made if need be."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


async def test_the_fleet_page_in_chromium(rig: FleetRig, tab: Watched, artifacts: Path) -> None:
    await incident_seen(rig)
    response = await tab.page.goto(f"{rig.fleet}/")
    assert response is not None
    assert response.status == 200
    await tab.page.screenshot(path=str(artifacts / "fleet.png"), full_page=True)
    page = tab.page
    assert (await page.locator(".banner").first.inner_text()).startswith("Live: the store at")
    rows = [" | ".join(r.split("\t")) for r in await page.locator("#clusters tr").all_inner_texts()]
    assert rows[1].startswith(f"{BROKEN} | unknown | its samples cannot be read: up")
    assert rows[2].startswith(f"{PROD} | critical | root causes: 1 critical")
    assert rows[3].startswith(f"{STAGING} | healthy | up, synced, no root cause")
    assert await _color(page, "#clusters .state.critical") == CRITICAL_RED
    assert await _color(page, "#clusters .state.healthy") == HEALTHY_GREEN
    assert await _color(page, "#clusters .state.unknown") == UNKNOWN_GREY
    line = await page.locator("#roots article.critical h3").first.inner_text()
    assert line == (
        f"CRITICAL ControllerDown Deployment {rig.namespace}/tofu-controller, ImagePullBackOff "
        f"— 1 cluster: {PROD} (4 objects affected)"
    )
    assert await page.locator("#roots a").first.get_attribute("href") == rig.clusters[PROD].url
    off = page.locator("#versions td.off").first
    assert await off.evaluate("e => getComputedStyle(e).backgroundColor") == OFF_PINK
    assert tab.dialogs == []
    assert tab.errors == [], "no CSP violation: the page's own stylesheet applies"
    assert set(tab.requests) == {f"{rig.fleet}/"}, "nothing but the page (and its own refresh)"


async def test_stopping_one_stalewatch_turns_its_cluster_unknown_within_the_staleness_window(
    rig: FleetRig,
) -> None:
    await incident_seen(rig)
    rig.clusters[STAGING].stop_stalewatch()
    document = await rig.until_fleet(
        lambda d: states(d).get(STAGING) == "unknown", what="staging unknown", within=STALENESS_WINDOW
    )
    staging = rig.cluster(STAGING, document)
    assert staging["why"].startswith("not reporting: last sample"), staging
    assert (staging["up"], staging["url"]) == (None, rig.clusters[STAGING].url)
    assert states(document)[PROD] == "critical"
    assert document["healthy"] is False


async def _color(page: Any, selector: str) -> str:
    color: str = await page.locator(selector).first.evaluate("e => getComputedStyle(e).color")
    return color
