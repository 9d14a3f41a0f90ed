"""A real kustomize-controller that is up and reconciling nothing (tests/lab/stuck.py): its one
worker (`--concurrent=1`) held by a Kustomization whose health check cannot finish, the others
queued behind it.

stalewatch (in-process, test-sized thresholds, reading the real controller's /metrics as in
test_lab_heartbeats.py) must say it once: one ControllerStuck root on the Deployment, with queue
depth, active workers and the last reconcile it completed, and every overdue Kustomization's
NotReconciling folded under it; no ControllerDown (the Pod is Ready, the Lease renewed). The page,
/api/v1/findings, /metrics, and a real Prometheus (the shipped rules) + Alertmanager (the example
config) notifying a webhook all show that one root. Restarted with every worker, it clears.

Windows with these thresholds: a queued Kustomization (interval 20s, never reconciled so not
Ready: gap max(20s, 1s cap), timeout floor 30s, slack 1s) is overdue 51s after its creation;
`apps` (1m, Ready) 1m32s after its last reconcile; the blocker (timeout 1h) never within the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.rig import ALERT_WITHIN, ALERTMANAGER_EXAMPLE, fast_rules
from tests.export.promstack import prom_stack_running
from tests.kube.support import Samples, Service, poll
from tests.lab.lab import Lab
from tests.lab.manifests import CONTROLLERS, NAMESPACE
from tests.lab.reading import reading_the_lab
from tests.lab.stuck import BLOCKER, KC, QUEUE, QUEUED, heal, hold, parsed, request_reconcile, start
from watcher.model.ingest.controller_metrics import ControllerMetrics
from watcher.web.cards import root_card_id

pytestmark = pytest.mark.cluster

THRESHOLDS = {"heartbeat_retry_backoff_cap": "1s", "queue_not_draining": "20s", "processor_floor": "30s"}
"""On top of the lab's test-sized heartbeat thresholds (tests/lab/reading.py)."""
STUCK = f"ControllerStuck/Deployment/{NAMESPACE}/{KC}"
OVERDUE = [f"NotReconciling/Kustomization/{NAMESPACE}/{name}" for name in ("apps", *QUEUED)]
CLUSTER = "lab"
OVERDUE_WITHIN = 240.0
"""The longest window (apps: 1m32s) after the hold, with room for a loaded machine."""


@dataclass
class Held:
    service: Service
    controller: ControllerMetrics
    """The real controller's metrics once the others were queued."""
    held_at: datetime
    """Once a reconcile of apps was seen completing, before the blocker was applied."""
    findings: dict[str, dict[str, Any]]
    """/api/v1/findings by id, once every overdue Kustomization was folded under the root."""


async def findings(service: Service) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in (await service.findings())["findings"]}


def controller_series(samples: Samples, family: str, controller: str = KC, **labels: str) -> float | None:
    """A per-controller series (its labels include `name`, which `metric` cannot take)."""
    wanted = {"namespace": NAMESPACE, "name": controller, **labels}
    return samples.get((family, frozenset(wanted.items())))


def heartbeat(samples: Samples, state: str, controller: str = KC) -> float | None:
    return controller_series(samples, "stalewatch_controller_heartbeat", controller, state=state)


@pytest.fixture(scope="module")
async def held(lab: Lab) -> AsyncIterator[Held]:
    await asyncio.to_thread(start, lab)
    async with reading_the_lab(lab, thresholds=THRESHOLDS) as service:

        async def moved() -> bool:
            samples = await service.metrics()
            return (
                controller_series(samples, "stalewatch_controller_last_reconcile_timestamp_seconds")
                is not None
            )

        await poll(lambda: _reconciling(service), within=60, what=f"{KC}'s heartbeat Reconciling")
        await asyncio.to_thread(request_reconcile, lab, "apps")
        await poll(moved, within=60, what=f"a reconcile of {KC} seen completing")
        held_at = datetime.now(UTC)
        controller = await asyncio.to_thread(hold, lab)

        async def folded() -> dict[str, dict[str, Any]] | None:
            found = await findings(service)
            under = all(found.get(o, {}).get("root_cause") == STUCK for o in OVERDUE)
            return found if STUCK in found and under else None

        found = await poll(folded, within=OVERDUE_WITHIN, what="ControllerStuck with every overdue object")
        yield Held(service, controller, held_at, found)


async def _reconciling(service: Service) -> bool:
    return heartbeat(await service.metrics(), "Reconciling") == 1


def test_the_real_controller_is_held_one_reconcile_running_longer_and_nothing_completing(
    lab: Lab, held: Held
) -> None:
    then, now = held.controller, parsed(lab)
    assert then.active_workers[QUEUE] == now.active_workers[QUEUE] == 1
    assert then.queues[QUEUE].depth == now.queues[QUEUE].depth == len(QUEUED) + 1  # and apps
    assert (then.queues[QUEUE].longest_running_seconds or 0) > 0
    assert (now.queues[QUEUE].longest_running_seconds or 0) > (
        then.queues[QUEUE].longest_running_seconds or 0
    )
    assert now.reconciles == then.reconciles
    assert now.objects == then.objects


def test_the_held_controller_is_one_controller_stuck_root_with_its_overdue_kustomizations_under_it(
    held: Held,
) -> None:
    found = held.findings
    roots = sorted(i for i, f in found.items() if f["root_cause"] is None)
    assert roots == [STUCK]
    root = found[STUCK]
    assert root["severity"] == "critical"
    assert root["subject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": NAMESPACE,
        "name": KC,
    }
    evidence = root["evidence"]
    assert (evidence["depth"], evidence["active_workers"]) == (len(QUEUED) + 1, 1)
    # The last one seen: apps' requested reconcile, or the blocker's first pass (its finalizer),
    # either way before it was stuck.
    last_completed = datetime.fromisoformat(evidence["last_completed"])
    assert held.held_at - timedelta(minutes=1) < last_completed < datetime.fromisoformat(root["since"])
    assert evidence["reason"] in ("QueueNotDraining", "NoReconcilesWhileDue")
    assert f"last completed a reconcile at {evidence['last_completed']}" in root["message"]
    assert {f"{a['kind']}/{a['name']}" for a in root["affected"]} >= {
        f"Kustomization/{o.rsplit('/', 1)[1]}" for o in OVERDUE
    }
    assert f"NotReconciling/Kustomization/{NAMESPACE}/{BLOCKER}" not in found  # its window is 1h
    assert sorted(i for i in found if i != STUCK) == sorted(OVERDUE)


async def test_metrics_say_the_controller_is_stuck_with_its_overdue_count(held: Held) -> None:
    samples = await held.service.metrics()
    assert (heartbeat(samples, "Stuck"), heartbeat(samples, "Reconciling")) == (1, 0)
    assert controller_series(samples, "stalewatch_controller_overdue_objects") == len(OVERDUE)
    for other in set(CONTROLLERS) - {KC}:
        assert heartbeat(samples, "Reconciling", other) == 1, other


async def test_the_page_shows_the_controller_up_not_reconciling_and_the_root_with_its_objects(
    held: Held,
) -> None:
    status, page = await held.service.get("/")
    assert status == 200
    rows = [line for line in page.split("<tr") if f"<td>{KC}</td>" in line]
    assert [r for r in rows if "up, not reconciling since" in r], rows
    card = page.split(f'id="{root_card_id(STUCK)}"', 1)[1].split("</article>", 1)[0]
    assert "ControllerStuck" in card
    for overdue in OVERDUE:
        assert f"{NAMESPACE}/{overdue.rsplit('/', 1)[1]}</span>" in card, overdue
    assert "NotReconciling" in card


async def test_alertmanager_notifies_the_stuck_controller_once_and_suppresses_its_objects_alerts(
    held: Held, tmp_path: Path
) -> None:
    listen = held.service.url.removeprefix("http://")
    with prom_stack_running(
        tmp_path,
        targets=[listen],
        rule_files=[fast_rules(tmp_path)],
        alertmanager_config=yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text()),
        external_labels={"cluster": CLUSTER},
    ) as stack:
        [fired] = await poll(
            partial(stack.firing, "StalewatchControllerStuck"), within=ALERT_WITHIN, what="the alert firing"
        )
        assert (fired["labels"]["root"], fired["labels"]["name"]) == ("true", KC)
        [active] = await poll(
            partial(stack.alertmanager_alerts, "StalewatchControllerStuck"),
            within=ALERT_WITHIN,
            what="ControllerStuck in Alertmanager",
        )
        assert active["status"]["state"] == "active"

        def suppressed() -> list[dict[str, Any]] | None:
            alerts = stack.alertmanager_alerts("StalewatchNotReconciling")
            done = len(alerts) == len(OVERDUE) and all(a["status"]["state"] == "suppressed" for a in alerts)
            return alerts if done else None

        symptoms = await poll(suppressed, within=ALERT_WITHIN, what="every NotReconciling suppressed")
        assert all(a["status"]["inhibitedBy"] == [active["fingerprint"]] for a in symptoms)
        assert all(a["labels"]["root_type"] == "ControllerStuck" for a in symptoms)

        def notified() -> list[tuple[str, dict[str, Any]]]:
            return list(stack.webhook.notifications)

        [(receiver, payload)] = await poll(notified, within=ALERT_WITHIN, what="the notification")
        assert receiver == "pager"
        grouped = {
            "cluster": CLUSTER,
            "root_kind": "Deployment",
            "root_namespace": NAMESPACE,
            "root_name": KC,
        }
        assert payload["groupLabels"] == grouped
        [alert] = payload["alerts"]
        assert alert["labels"]["alertname"] == "StalewatchControllerStuck"
        assert alert["annotations"]["summary"] == f"Deployment {NAMESPACE}/{KC} is up but not reconciling"
        assert alert["annotations"]["description"].endswith(
            f"Symptoms it explains (suppressed while it fires): {len(OVERDUE)}."
        )
        sent = [a["labels"]["alertname"] for _, p in stack.webhook.notifications for a in p["alerts"]]
        assert sent == ["StalewatchControllerStuck"]


async def test_restarted_with_every_worker_and_the_blocker_deleted_the_root_clears(
    lab: Lab, held: Held
) -> None:
    await asyncio.to_thread(heal, lab)

    async def cleared() -> bool:
        return not await findings(held.service)

    await poll(cleared, within=120, what="no finding once the controller reconciles again")
    await poll(lambda: _reconciling(held.service), within=30, what=f"{KC}'s heartbeat Reconciling")
