"""The alerting rules: ONE definition rendered as a Prometheus rules file and a PrometheusRule.

`python alerts/generate.py` writes both files; a test fails when they are out of date, so
neither is ever edited by hand.

Every finding alert keeps the labels of its stalewatch_finding series: severity (the
model's, so a user's severity override reaches routing), the object's kind/namespace/name
and root/root_type/root_kind/root_namespace/root_name. A root alert names itself in the
root_* labels, so Alertmanager can inhibit symptoms (root="false") while the root alert
with the same root_kind/root_namespace/root_name fires (see alerts/alertmanager.example.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from watcher.model.types import FindingType

RUNBOOK_BASE = "https://github.com/stalewatch/stalewatch/blob/main/docs/runbooks/"
"""Where docs/runbooks/ is published; every alert links <RUNBOOK_BASE><AlertName>.md."""

SELF_JOB = "stalewatch"
"""The scrape job name of stalewatch itself, used to notice when it is not scraped at all."""

HA_LABELS = "instance, pod"
"""Labels that differ between two stalewatch replicas; dropped so a pair alerts once."""

OBJECT = "{{ $labels.kind }} {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.name }}"
ROOT_OBJECT = (
    "{{ $labels.root_kind }} {{ with $labels.root_namespace }}{{ . }}/{{ end }}{{ $labels.root_name }}"
)
BLAST_RADIUS = (
    '{{ with query (printf "count(stalewatch_finding{root=\\"false\\",root_kind=%q,root_namespace=%q,'
    'root_name=%q})" $labels.root_kind $labels.root_namespace $labels.root_name) }}'
    "{{ . | first | value }}{{ else }}none{{ end }}"
)
ROOT_CAUSE = (
    '{{ if eq $labels.root "true" }}This is a root cause. Symptoms it explains (suppressed while it'
    " fires): " + BLAST_RADIUS + "."
    "{{ else if $labels.root_kind }}Root cause: {{ $labels.root_type }} on " + ROOT_OBJECT + "."
    " This alert is suppressed while that root-cause alert fires."
    "{{ else }}No root cause is known for it: it is a problem of its own.{{ end }}"
)


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    expr: str
    for_: str
    summary: str
    description: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def rule(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": self.name, "expr": self.expr, "for": self.for_}
        if self.labels:
            rule["labels"] = dict(self.labels)
        rule["annotations"] = {
            "summary": self.summary,
            "description": self.description,
            "runbook_url": f"{RUNBOOK_BASE}{self.name}.md",
        }
        return rule


DOWN_REASON = (
    '{{ with query (printf "stalewatch_controller_down_reason{namespace=%q,name=%q} == 1"'
    ' $labels.namespace $labels.name) }}{{ . | first | label "reason" }}{{ else }}reason unknown{{ end }}'
)

# Per finding type: the summary after the object's name, and what it means for on-call.
FINDING_TEXTS: Mapping[FindingType, tuple[str, str]] = {
    FindingType.CONTROLLER_DOWN: (
        f"is down ({DOWN_REASON})",
        "The controller is not running or not leading, so nothing reconciles the objects it owns"
        " and their status is a cached report.",
    ),
    FindingType.CRD_REMOVED: (
        "was removed",
        "The CustomResourceDefinition is gone: the API server deleted every object of its kind"
        " and nothing reconciles them any more.",
    ),
    FindingType.STATUS_STALE: (
        "shows a stale status",
        "Its status is a cached report: the controller that writes it is down, so Ready proves nothing.",
    ),
    FindingType.STUCK_RECONCILING: (
        "is stuck reconciling",
        "It has been Reconciling far longer than its reconcile interval allows.",
    ),
    FindingType.GENERATION_NOT_OBSERVED: (
        "ignores its new spec",
        "Its spec changed (metadata.generation) but status.observedGeneration has not caught up:"
        " its controller has not picked the change up.",
    ),
    FindingType.RECONCILE_REQUEST_IGNORED: (
        "ignored a reconcile request",
        "A reconcile was requested (reconcile.fluxcd.io/requestedAt) but status.lastHandledReconcileAt"
        " shows it was not handled.",
    ),
    FindingType.REVISION_SKEW: (
        "lags behind its source",
        "Its source has a newer revision than the one it last applied.",
    ),
    FindingType.DEPENDENCY_BLOCKED: (
        "is blocked by a dependency",
        "It waits on a dependsOn dependency that is not ready.",
    ),
    FindingType.RELEASE_READY_WORKLOAD_FAILING: (
        "is Ready but its workload fails",
        "The HelmRelease reports Ready, yet a workload it deployed is failing.",
    ),
    FindingType.STALLED: (
        "is stalled",
        "Its controller gave up retrying (Stalled=True): the spec or the source needs a fix.",
    ),
    FindingType.RECONCILE_FAILED: (
        "keeps failing to reconcile",
        "It has said Ready=False (or Unknown, with nothing reconciling) for longer than its retries"
        " take, while its controller runs: the reason is in its Ready condition.",
    ),
    FindingType.RETRY_LOOP: (
        "is in a retry loop",
        "It keeps failing and retrying with the same error.",
    ),
    FindingType.POLICY_DENIED: (
        "keeps being denied by a policy",
        "An admission policy (Gatekeeper, Kyverno or a ValidatingAdmissionPolicy) denies a write it"
        " keeps retrying: retries will not help until the object or the policy changes.",
    ),
    FindingType.WORKLOAD_UNHEALTHY: (
        "is unhealthy",
        "Its Pods are failing (crash loop, image pull, config error, unschedulable, failed) or it has"
        " fewer available replicas than it wants.",
    ),
    FindingType.CRD_OWNERSHIP_RISK: (
        "is installed by one stack and needed by another",
        "Removing or upgrading the release or Kustomization that installed this CRD deletes it, and"
        " with it every object of its kind, while a controller another stack deployed reconciles them"
        " (or another installer claims it too). Nothing is broken yet.",
    ),
    FindingType.PRUNE_ORPHAN: (
        "was left behind by prune",
        "Its Kustomization no longer lists it (removed from Git, or the Kustomization is gone) but it"
        " was not pruned and never will be: nothing manages it, while its controller may still act on"
        " it. Severity info when the Kustomization has spec.prune: false (left by design).",
    ),
    FindingType.OBJECT_FAILING: (
        "reports that it fails",
        "An object of a kind no other rule judges (a Certificate, an ExternalSecret, a Job, a CRD, an"
        " operator's custom resource) says it failed (Stalled, Failed) or has said Ready=False for"
        " longer than its threshold. The Kustomization or HelmRelease that applied it may still say"
        " Ready=True: without health checks Flux does not look at it.",
    ),
    FindingType.CONTROLLER_STUCK: (
        "is up but not reconciling",
        "The controller runs and renews its Lease, but its own metrics show it reconciles nothing:"
        " no reconcile counter moved while objects were due, its work queue does not drain, or one"
        " reconcile runs far past any timeout. Nothing it owns is reconciled meanwhile.",
    ),
    FindingType.NOT_RECONCILING: (
        "is not being reconciled",
        "Its controller is up, but the object's reconcile counter has not moved for longer than its"
        " interval + timeout + slack (or it has no counter at all while the controller reports"
        " others: a shard, label selector or watched namespace that excludes it). Its status is"
        " as old as its last reconcile.",
    ),
    FindingType.SHARD_NOT_SERVED: (
        "is served by no controller workload",
        "Objects carry a sharding.fluxcd.io/key value (or none) that no running workload of their"
        " controller selects with its --watch-label-selector: no shard of that key runs, and the"
        " main controller excludes keyed objects. Nothing reconciles them; their status is a cached"
        " report.",
    ),
    FindingType.CONFLICTING_WRITERS: (
        "is rewritten in turn by writers that undo each other",
        "Two or more field managers keep rewriting it, each erasing or taking over fields another"
        " owns (managedFields): typically one does full-object Updates (PUT) of a typed struct that"
        " lacks the other's fields. Each write changes the spec, so neither's change sticks.",
    ),
}


def finding_alert(finding: FindingType, *, for_: str = "1m") -> Alert:
    """One alert per finding type over stalewatch_finding; the model already waited its threshold."""
    summary, detail = FINDING_TEXTS[finding]
    return Alert(
        name=f"Stalewatch{finding}",
        expr=f'max without ({HA_LABELS}) (stalewatch_finding{{type="{finding}"}}) == 1',
        for_=for_,
        summary=f"{OBJECT} {summary}",
        description=f"{OBJECT}: {detail} {ROOT_CAUSE}",
    )


FINDING_ALERTS: tuple[Alert, ...] = tuple(finding_alert(t) for t in FindingType)

REVISION_SKEW_ACROSS_CLUSTERS = Alert(
    name="StalewatchRevisionSkewAcrossClusters",
    expr=(
        "count by (kind, namespace, name, source) ("
        "count by (kind, namespace, name, source, applied_revision) "
        '(stalewatch_revision_info{applied_revision!=""})) > 1'
    ),
    for_="1h",
    summary=f"{OBJECT} runs {{{{ $value }}}} different revisions across clusters",
    description=(
        f"{OBJECT} applied different revisions of {{{{ $labels.source }}}} in different clusters:"
        '{{ range query (printf "count by (cluster, applied_revision) (stalewatch_revision_info{'
        'kind=%q,namespace=%q,name=%q})" $labels.kind $labels.namespace $labels.name)'
        ' | sortByLabel "cluster" }}'
        " {{ .Labels.cluster }}={{ .Labels.applied_revision }}{{ end }}."
    ),
    labels={"severity": "info"},
)

SELF_ALERTS: tuple[Alert, ...] = (
    Alert(
        name="StalewatchDown",
        expr=f'stalewatch_up == 0 or up{{job="{SELF_JOB}"}} == 0',
        for_="5m",
        summary="stalewatch {{ $labels.instance }} cannot see the cluster",
        description=(
            "stalewatch {{ $labels.instance }} is not scraped or cannot reach the Kubernetes API server:"
            " its findings are frozen, so controller outages go unreported."
        ),
        labels={"severity": "warning"},
    ),
    Alert(
        name="StalewatchAbsent",
        expr=f'absent(up{{job="{SELF_JOB}"}})',
        for_="10m",
        summary="No stalewatch target is scraped",
        description=(
            f'Prometheus has no target in job "{SELF_JOB}": stalewatch is not deployed, its pods are'
            " gone, or its ServiceMonitor is not selected. Nothing watches whether controllers are alive."
        ),
        labels={"severity": "warning"},
    ),
    Alert(
        name="StalewatchNotSynced",
        expr="max without (" + HA_LABELS + ") (stalewatch_kind_synced) == 0",
        for_="10m",
        summary="stalewatch has not finished listing {{ $labels.kind }}.{{ $labels.group }}",
        description=(
            "stalewatch has not completed its initial list of {{ $labels.kind }}.{{ $labels.group }}:"
            " it does not know those objects, so it cannot report on them."
        ),
        labels={"severity": "warning"},
    ),
    Alert(
        name="StalewatchWatchErrors",
        expr="sum without (" + HA_LABELS + ", reason) (increase(stalewatch_watch_errors_total[10m])) > 5",
        for_="10m",
        summary="stalewatch keeps failing to watch {{ $labels.kind }}.{{ $labels.group }}",
        description=(
            "{{ $value | humanize }} watch errors on {{ $labels.kind }}.{{ $labels.group }} in 10 minutes:"
            " stalewatch's view of those objects may lag behind the cluster."
        ),
        labels={"severity": "warning"},
    ),
    Alert(
        name="StalewatchKindForbidden",
        # A tenant's 403 on a cluster-scoped kind is its scope (namespace mode), not a fault.
        expr=(
            "max without (" + HA_LABELS + ") (stalewatch_kind_forbidden == 1"
            " unless on (job, instance, group, kind) stalewatch_kind_out_of_scope == 1)"
        ),
        for_="5m",
        summary="stalewatch is forbidden to list {{ $labels.kind }}.{{ $labels.group }}",
        description=(
            "The API server answers 403 Forbidden when stalewatch lists"
            " {{ $labels.kind }}.{{ $labels.group }}: its RBAC lacks that resource, so those objects"
            " are invisible to it."
        ),
        labels={"severity": "warning"},
    ),
    Alert(
        name="StalewatchEvaluationFailing",
        expr="rate(stalewatch_evaluation_failures_total[2m]) > 0",
        for_="5m",
        summary="stalewatch {{ $labels.instance }} cannot evaluate the health model",
        description=(
            "Every evaluation of stalewatch {{ $labels.instance }} fails: it serves its last good"
            " evaluation, marked stale, and /readyz says why. Findings that arose since are not"
            " reported and findings that cleared are still shown."
        ),
        labels={"severity": "warning"},
    ),
    Alert(
        name="StalewatchObjectsRejected",
        expr="max without (" + HA_LABELS + ") (stalewatch_objects_rejected) > 0",
        for_="15m",
        summary=(
            "stalewatch sets aside {{ $value }} {{ $labels.kind }}.{{ $labels.group }} objects"
            " ({{ $labels.reason }})"
        ),
        description=(
            "{{ $value }} {{ $labels.kind }}.{{ $labels.group }} objects could not be judged in full"
            " ({{ $labels.reason }}): a field with a wrong value was left out, a rule failed on"
            " the object, or it could not be read. /api/v1/findings lists them under rejected."
        ),
        labels={"severity": "warning"},
    ),
)

GROUPS: Mapping[str, tuple[Alert, ...]] = {
    "stalewatch-findings": (*FINDING_ALERTS, REVISION_SKEW_ACROSS_CLUSTERS),
    "stalewatch-self": SELF_ALERTS,
}

ALERTS: tuple[Alert, ...] = tuple(a for group in GROUPS.values() for a in group)

HEADER = "# Generated by `python alerts/generate.py` from watcher/export/alerts.py. Do not edit.\n"


def rule_groups() -> list[dict[str, Any]]:
    return [{"name": name, "rules": [a.rule() for a in alerts]} for name, alerts in GROUPS.items()]


def rules_file() -> str:
    """The Prometheus rules file (rule_files: in prometheus.yml)."""
    return HEADER + dump_yaml({"groups": rule_groups()})


def prometheus_rule(*, name: str = "stalewatch") -> str:
    """The same rules as a prometheus-operator PrometheusRule object."""
    manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "stalewatch"}},
        "spec": {"groups": rule_groups()},
    }
    return HEADER + dump_yaml(manifest)


class _Dumper(yaml.SafeDumper):
    """Block-literal strings for templates with newlines; otherwise PyYAML's defaults."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(document: Any) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=10_000, allow_unicode=True)
