"""End-to-end proof with the real programs: incidents in a real API server, seen by `stalewatch
run`, scraped by Prometheus, alerted by the shipped rules, routed and inhibited by the example
Alertmanager config, delivered to a webhook; and every dashboard query answered.

One stack for the module (see rig.py); one namespace per incident. Everything is polled with
a deadline; nothing asserts how long it took.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import pytest
import yaml

from tests.controlplane.harness import ControlPlane, free_port
from tests.e2e.proxy import Proxy
from tests.e2e.rig import (
    ALERT_WITHIN,
    ALERTMANAGER_EXAMPLE,
    CLUSTER,
    Rig,
    fast_rules,
    run_args,
)
from tests.e2e.scenarios import INCIDENTS
from tests.e2e.stuck_controller import heartbeat_args
from tests.export.promstack import process_running, prom_stack_running
from tests.kube.support import poll
from tests.kubeclient import Kube
from watcher.export.dashboards import panel_queries

pytestmark = pytest.mark.cluster

POLICY_CRDS = Path(__file__).parents[1] / "cli" / "crds" / "policies.yaml"
"""PolicyReport and friends (the upstream shapes' field names): the policy incident's audit."""


@pytest.fixture(scope="module")
async def rig(
    control_plane: ControlPlane, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Rig]:
    workdir = tmp_path_factory.mktemp("e2e")
    namespaces = {i: f"e2e-{i.split('-')[0]}-{uuid.uuid4().hex[:6]}" for i in INCIDENTS}
    refs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces.values()]
    for ref in refs:
        await kube.create(ref)
    control_plane.install_crds(POLICY_CRDS)
    listen, log = f"127.0.0.1:{free_port()}", workdir / "stalewatch.log"
    proxy = Proxy(("127.0.0.1", control_plane.apiserver_port))
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        control_plane.kubeconfig.read_text().replace(control_plane.url, f"https://127.0.0.1:{proxy.port}")
    )
    args = [
        *run_args(kubeconfig=kubeconfig, listen=listen, namespaces=list(namespaces.values())),
        *heartbeat_args(),
    ]
    try:
        with ExitStack() as running:
            running.enter_context(proxy.serving())
            running.enter_context(process_running(args, f"http://{listen}/readyz", log))
            stack = running.enter_context(
                prom_stack_running(
                    workdir,
                    targets=[listen],
                    rule_files=[fast_rules(workdir)],
                    alertmanager_config=yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text()),
                    external_labels={"cluster": CLUSTER},
                )
            )
            yield Rig(kube, stack, proxy, f"http://{listen}", log, namespaces, running)
    finally:
        for ref in refs:
            await kube.delete(ref)
        control_plane.kubectl("delete", "--ignore-not-found", f"--filename={POLICY_CRDS}")


@pytest.mark.parametrize("incident_id", list(INCIDENTS))
async def test_an_incident_notifies_once_for_its_root_cause_and_alertmanager_suppresses_its_symptoms(
    rig: Rig, incident_id: str
) -> None:
    async with rig.explained():
        ns, incident = await rig.enact(incident_id)
        root = incident.root

        [fired] = rig.prometheus_alerts(ns, root)
        assert fired["labels"]["root"] == "true"
        assert (fired["labels"]["root_kind"], fired["labels"]["root_name"]) == (root.kind, root.name)

        [active] = await poll(
            partial(rig.alertmanager_alerts, ns, root), within=ALERT_WITHIN, what=f"{root} in Alertmanager"
        )
        assert active["status"]["state"] == "active"
        for symptom in incident.symptoms:
            [suppressed] = await poll(
                partial(rig.suppressed, ns, symptom),
                within=ALERT_WITHIN,
                what=f"{symptom} in Alertmanager, suppressed",
            )
            assert suppressed["status"]["inhibitedBy"] == [active["fingerprint"]]

        notified = await poll(
            partial(rig.notifications_about, ns, root), within=ALERT_WITHIN, what=f"{root} notified"
        )
        assert len(notified) == 1, notified
        [(receiver, payload)] = notified
        assert receiver == incident.receiver
        grouped = {"cluster": CLUSTER, "root_kind": root.kind, "root_namespace": ns, "root_name": root.name}
        if root.cluster_scoped:  # a label with no value is no label
            del grouped["root_namespace"]
        assert payload["groupLabels"] == grouped
        [alert] = payload["alerts"]
        assert alert["labels"]["alertname"] == root.alertname
        assert alert["annotations"]["summary"] == incident.summary.format(ns=ns)
        explained = len(incident.symptoms) or "none"
        assert alert["annotations"]["description"].endswith(
            f"Symptoms it explains (suppressed while it fires): {explained}."
        )


async def test_reset_api_server_connections_show_as_watch_errors_and_stalewatch_recovers(rig: Rig) -> None:
    async with rig.explained():
        await rig.reset_connections()
        rates = rig.stack.query("sum by (group, kind, reason) (rate(stalewatch_watch_errors_total[5m])) > 0")
        assert {r["metric"]["kind"] for r in rates} >= {"Pod", "Kustomization"}, rates
        await poll(
            lambda: rig.stack.query("stalewatch_up == 1 and stalewatch_synced == 1"),
            within=ALERT_WITHIN,
            what="stalewatch reconnected and synced",
        )


async def test_over_the_whole_run_each_root_cause_was_notified_exactly_once_and_no_symptom_ever(
    rig: Rig,
) -> None:
    """Rechecked at the end: by now many group intervals have passed for the early incidents."""
    async with rig.explained():
        roots = [(ns, incident.root) for ns, incident in [await rig.enact(i) for i in INCIDENTS]]
        counts = {f"{ns} {root}": len(rig.notifications_about(ns, root)) for ns, root in roots}
        assert counts == dict.fromkeys(counts, 1)
        symptoms_notified = [
            alert["labels"]
            for _, payload in list(rig.stack.webhook.notifications)
            for alert in payload["alerts"]
            if alert["labels"].get("root") != "true"
        ]
        assert symptoms_notified == []


async def test_every_dashboard_panel_query_returns_data_during_some_incident(rig: Rig) -> None:
    async with rig.explained():
        for incident_id in INCIDENTS:
            await rig.enact(incident_id)
        await rig.reset_connections()
        never = [
            f"{q.dashboard} / {q.panel}: {q.resolved()}"
            for q in panel_queries()
            if q not in rig.panels_with_data
        ]
        assert never == [], "panel queries that never returned data:\n" + "\n".join(never)
