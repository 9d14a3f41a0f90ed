"""The real stack for the end-to-end tests, started once per module.

kube-apiserver + etcd (the session's control plane) <- `stalewatch run` (a subprocess, small
thresholds) <- Prometheus (scrapes it every second, evaluates the generated rules) ->
Alertmanager (alerts/alertmanager.example.yaml, receivers rewritten to a local webhook).

Each incident is enacted once, in its own namespace, by writing objects and their status as
the controllers would (and serving a controller's /metrics from the test process, which
stalewatch reads every second: stuck_controller.py); whichever test needs it first enacts it, so
any one test can run alone.
"""

from __future__ import annotations

import math
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.app.test_incidents import THRESHOLDS
from tests.e2e.proxy import Proxy
from tests.e2e.scenarios import INCIDENTS, Alert, Incident
from tests.export.promstack import PromStack, get_json
from tests.kube.support import poll, until_no_problem
from tests.kubeclient import Kube
from watcher.export.dashboards import PanelQuery, panel_queries
from watcher.model.ingest.kinds import FLUX_GROUPS

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "stalewatch.rules.yaml"
ALERTMANAGER_EXAMPLE = REPO / "alerts" / "alertmanager.example.yaml"
CLUSTER = "e2e"
"""Prometheus' external label: it reaches Alertmanager on every alert, as in production."""

WATCH_ERRORS = "sum by (kind) (stalewatch_watch_errors_total)"
WATCHES_OPENED = 'sum by (kind) (stalewatch_watch_requests_total{result="ok"})'
Counts = dict[str, float]
"""A counter's value per watched kind."""

FOR = "2s"
ALERT_WITHIN = 30.0
"""Deadline for a finding to travel stalewatch -> scrape -> rule `for:` -> Alertmanager -> webhook."""


def fast_rules(workdir: Path) -> Path:
    """A copy of the generated rules whose finding alerts wait FOR instead of minutes.

    Only the `for:` durations of the finding group are rewritten (promtool's unit tests in
    tests/alerts cover the real ones); the expressions, labels and annotations are the shipped
    ones. The self-monitoring group keeps its real durations, so it stays quiet here.
    """
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        if group["name"] == "stalewatch-findings":
            for rule in group["rules"]:
                rule["for"] = FOR
    path = workdir / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    return path


def run_args(*, kubeconfig: Path, listen: str, namespaces: Sequence[str]) -> list[str]:
    """`stalewatch run` watching only our namespaces (the API server is shared with other
    tests), with the incident tests' small thresholds."""
    args = [
        sys.executable, "-m", "watcher", "run", "--kubeconfig", str(kubeconfig), "--listen", listen,
        "--set", "include_namespaces=" + ",".join(namespaces),
    ]  # fmt: skip
    for name, value in THRESHOLDS.items():
        args += ["--set", f"thresholds.{name}={value}"]
    return args


def tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def has_data(result: list[dict[str, Any]]) -> bool:
    """A query result a panel can show: at least one sample that is a number (NaN is not)."""
    return any(not math.isnan(float(r["value"][1])) for r in result)


@dataclass
class Rig:
    kube: Kube
    stack: PromStack
    proxy: Proxy
    """stalewatch's only way to the API server."""
    stalewatch_url: str
    log: Path
    namespaces: dict[str, str]
    """Incident id -> its namespace."""
    running: ExitStack
    """The module's: what an incident runs in the test process stops with the stack."""
    enacted: dict[str, Incident] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    panels_with_data: dict[PanelQuery, list[str]] = field(default_factory=dict)
    """Each dashboard panel query -> the incidents (or the connection reset) it returned data in."""
    connections_reset: bool = False

    # -- Enacting -----------------------------------------------------------------------------

    async def enact(self, incident_id: str) -> tuple[str, Incident]:
        """Healthy objects first (seen by Prometheus as Current, without findings), then what
        goes wrong, until the root alert fires; then every dashboard query is run once."""
        ns = self.namespaces[incident_id]
        if incident_id in self.enacted:
            return ns, self.enacted[incident_id]
        self._begin(f"enacting {incident_id} in {ns}")
        incident = INCIDENTS[incident_id](ns)
        for run in incident.running:
            self.running.enter_context(run())
        objects = incident.setup(ns)
        for obj in objects:
            await self.kube.create(obj)
        gitops = {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in FLUX_GROUPS}
        await poll(
            lambda: self._healthy(ns, gitops),
            within=ALERT_WITHIN,
            what=f"Prometheus to scrape {sorted(gitops)} in {ns} as Current, without findings",
        )
        for act in incident.acts:
            await act(self.kube, ns)
        await poll(
            lambda: self.prometheus_alerts(ns, incident.root),
            within=ALERT_WITHIN,
            what=f"Prometheus to fire {incident.root} in {ns}",
        )
        self._run_panel_queries(incident_id)
        self.enacted[incident_id] = incident
        return ns, incident

    async def reset_connections(self) -> None:
        """Resets stalewatch's connections to the API server twice, each time until Prometheus
        has seen every watch break and reopen; then every dashboard query is run once.

        Twice, because the first errors of a kind only create its counter series, and rate()
        counts no increase into a series' first sample: only the second reset shows as a rate.
        """
        if self.connections_reset:
            return
        self._begin("resetting the API server connections")
        for attempt in ("first", "second"):
            errors, opened = self._by_kind(WATCH_ERRORS), self._by_kind(WATCHES_OPENED)
            self.proxy.reset_all()

            async def lagging(errors: Counts = errors, opened: Counts = opened) -> str:
                errors_now, opened_now = self._by_kind(WATCH_ERRORS), self._by_kind(WATCHES_OPENED)
                unbroken = [k for k in opened if errors_now.get(k, 0) <= errors.get(k, 0)]
                unopened = [k for k in opened if opened_now.get(k, 0) <= opened[k]]
                if unbroken or unopened:
                    return f"no watch error yet: {unbroken}; not watching again: {unopened}"
                return ""

            await until_no_problem(
                lagging, within=ALERT_WITHIN, what=f"every watch to break and reopen at the {attempt} reset"
            )
        self._run_panel_queries("api-server-connections-reset")
        self.connections_reset = True

    def _begin(self, what: str) -> None:
        """Each disturbance happens once per module; one that failed is not tried again."""
        if what in self.started:
            raise AssertionError(f"{what} failed earlier in this module")
        self.started.add(what)

    def _by_kind(self, expr: str) -> Counts:
        return {r["metric"]["kind"]: float(r["value"][1]) for r in self.stack.query(expr)}

    def _run_panel_queries(self, during: str) -> None:
        for query in panel_queries():
            if has_data(self.stack.query(query.resolved())):
                self.panels_with_data.setdefault(query, []).append(during)

    def _healthy(self, ns: str, gitops: set[tuple[str, str]]) -> bool:
        current = self.stack.query(f'stalewatch_object_status{{namespace="{ns}",status="Current"}} == 1')
        seen = {(r["metric"]["kind"], r["metric"]["name"]) for r in current}
        return gitops <= seen and not self.stack.query(f'stalewatch_finding{{namespace="{ns}"}}')

    # -- Reading the stack --------------------------------------------------------------------

    def prometheus_alerts(self, ns: str, alert: Alert) -> list[dict[str, Any]]:
        """Prometheus' firing alerts for that object."""
        return [a for a in self.stack.firing(alert.alertname) if alert.matches(a["labels"], ns)]

    def alertmanager_alerts(self, ns: str, alert: Alert) -> list[dict[str, Any]]:
        return [a for a in self.stack.alertmanager_alerts(alert.alertname) if alert.matches(a["labels"], ns)]

    def suppressed(self, ns: str, alert: Alert) -> list[dict[str, Any]]:
        """Alertmanager's alerts for that object that it suppresses (inhibited or silenced)."""
        return [a for a in self.alertmanager_alerts(ns, alert) if a["status"]["state"] == "suppressed"]

    def notifications_about(self, ns: str, root: Alert) -> list[tuple[str, dict[str, Any]]]:
        """(receiver, payload) of every webhook notification carrying an alert of that root."""
        about = {"root_kind": root.kind, "root_namespace": root.namespace_in(ns), "root_name": root.name}
        return [
            (receiver, payload)
            for receiver, payload in list(self.stack.webhook.notifications)
            if any(all(a["labels"].get(k, "") == v for k, v in about.items()) for a in payload["alerts"])
        ]

    # -- Explaining failures ------------------------------------------------------------------

    @asynccontextmanager
    async def explained(self) -> AsyncIterator[None]:
        """Any failure inside gets what each stage saw attached, so it explains itself."""
        try:
            yield
        except Exception as error:
            error.add_note(self.diagnosis())
            raise

    def diagnosis(self) -> str:
        parts = [f"namespaces: {self.namespaces}"]
        for title, read in (
            ("stalewatch /api/v1/findings", self._findings_brief),
            ("Prometheus ALERTS", self._alerts_brief),
            ("Alertmanager /api/v2/alerts", self._alertmanager_brief),
            ("webhook notifications", self._notifications_brief),
        ):
            try:
                parts.append(f"{title}:\n" + "\n".join(f"  {line}" for line in read()))
            except (OSError, ValueError, KeyError) as error:
                parts.append(f"{title}: unreadable: {error!r}")
        parts.append(f"stalewatch log (last lines):\n{tail(self.log)}")
        return "\n".join(parts)

    def _findings_brief(self) -> list[str]:
        findings = get_json(f"{self.stalewatch_url}/api/v1/findings")["findings"]
        return [f"{f['id']} <- {f['root_cause']}" for f in findings]

    def _alerts_brief(self) -> list[str]:
        return [f"{_who(r['metric'])} {r['metric']['alertstate']}" for r in self.stack.query("ALERTS")]

    def _alertmanager_brief(self) -> list[str]:
        alerts = get_json(f"{self.stack.alertmanager_url}/api/v2/alerts")
        return [
            f"{_who(a['labels'])} {a['status']['state']} inhibitedBy={len(a['status']['inhibitedBy'])}"
            for a in alerts
        ]

    def _notifications_brief(self) -> list[str]:
        return [
            f"{receiver}: {payload['groupLabels']} -> {[_who(a['labels']) for a in payload['alerts']]}"
            for receiver, payload in list(self.stack.webhook.notifications)
        ]


def _who(labels: dict[str, str]) -> str:
    where = "/".join(filter(None, (labels.get("namespace"), labels.get("name"))))
    return f"{labels.get('alertname')} {labels.get('kind', '')} {where} root={labels.get('root', '')}"
