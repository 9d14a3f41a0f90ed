"""The dashboards about the cluster's GitOps objects: Overview (what is broken and why) and Stack.

Both scope their panels by cluster and namespace (grafana.SCOPE) and show objects with the
same columns. The panel builders are in watcher/export/grafana.py; watcher/export/dashboards.py
lists, numbers and renders the dashboards.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from watcher.export.grafana import (
    CLUSTER,
    SCOPE,
    label_variable,
    stat_panel,
    table_panel,
    timeseries_panel,
    variables,
)

NAMESPACE = label_variable("namespace", f"stalewatch_object_status{{{CLUSTER}}}", "Namespace")


OBJECT_COLUMNS = {"kind": "Kind", "namespace": "Namespace", "name": "Name"}
ROOT_COLUMNS = {
    "root_type": "Root cause",
    "root_kind": "Kind",
    "root_namespace": "Namespace",
    "root_name": "Name",
}


def overview() -> dashboard.Dashboard:
    """What is broken now, and why: root causes with their blast radius, controllers, staleness."""
    return (
        dashboard.Dashboard("stalewatch / Overview")
        .uid("stalewatch-overview")
        .tags(["stalewatch", "gitops"])
        .refresh("30s")
        .time("now-6h", "now")
        .variables(variables(NAMESPACE))
        .with_row(dashboard.Row("Now"))
        .with_panel(
            stat_panel(
                "Root causes",
                f'count(stalewatch_finding{{root="true",{SCOPE}}}) or vector(0)',
                description="Findings that nothing else explains. Fix these; their symptoms follow.",
            )
        )
        .with_panel(
            stat_panel(
                "Controllers down",
                f"count(stalewatch_controller_up{{{CLUSTER}}} == 0) or vector(0)",
                description="GitOps controllers that are not available or do not hold their Lease.",
            )
        )
        .with_panel(
            stat_panel(
                "Stale objects",
                f"sum(stalewatch_object_stale{{{SCOPE}}}) or vector(0)",
                description="Objects whose controller is down: their Ready condition is a cached report.",
            )
        )
        .with_panel(
            stat_panel(
                "Revision skew",
                f'count(stalewatch_finding{{type="RevisionSkew",{SCOPE}}}) or vector(0)',
                description="Objects that have not applied their source's latest revision in time.",
            )
        )
        .with_panel(
            table_panel(
                "Root causes and their blast radius",
                f"count by (root_type, root_kind, root_namespace, root_name) "
                f'(stalewatch_finding{{root_kind!="",{CLUSTER}}}) - 1',
                description="Each root cause and how many other findings are its symptoms.",
                rename={**ROOT_COLUMNS, "Value": "Symptoms"},
            )
        )
        .with_panel(
            table_panel(
                "Symptoms and the root they point at",
                f'stalewatch_finding{{root="false",{SCOPE}}}',
                description="Findings explained by a root cause; they clear when it is fixed.",
                rename={
                    "type": "Finding",
                    **OBJECT_COLUMNS,
                    "root_type": "Root cause",
                    "root_kind": "Root kind",
                    "root_namespace": "Root namespace",
                    "root_name": "Root name",
                },
            )
        )
        .with_row(dashboard.Row("Controllers"))
        .with_panel(
            table_panel(
                "Controllers down and why",
                f"stalewatch_controller_down_reason{{{CLUSTER}}} == 1",
                description="From a fixed set: ImagePullBackOff, CrashLoopBackOff, LeaseExpired, ...",
                rename={"namespace": "Namespace", "name": "Controller", "reason": "Reason"},
                width=12,
            )
        )
        .with_panel(
            timeseries_panel(
                "Controllers up",
                f"stalewatch_controller_up{{{CLUSTER}}}",
                legend="{{namespace}}/{{name}}",
                description="1 while the controller is available and leading.",
            )
        )
        .with_panel(
            table_panel(
                "Controllers up but not reconciling, or not known to be",
                f'stalewatch_controller_heartbeat{{state!="Reconciling",{CLUSTER}}} == 1',
                description="What each controller's own metrics say (its heartbeat): Stuck is a"
                " ControllerStuck (up, Lease renewed, reconciling nothing); Unknown: its metrics were"
                " not read, could not be read or are stale, never healthy. Only controllers whose"
                " heartbeat is read are listed.",
                rename={"namespace": "Namespace", "name": "Controller", "state": "Heartbeat"},
                width=12,
            )
        )
        .with_panel(
            timeseries_panel(
                "Heartbeat age and overdue objects",
                f"time() - stalewatch_controller_last_reconcile_timestamp_seconds{{{CLUSTER}}}",
                legend="{{namespace}}/{{name}}",
                description="Seconds since one of the controller's reconcile counters last moved. A line"
                " that climbs past its objects' intervals is a controller reconciling nothing; its objects"
                " past their interval + timeout are counted in stalewatch_controller_overdue_objects"
                " (NotReconciling).",
                unit="s",
            )
        )
        .with_panel(
            table_panel(
                "Objects not reconciled (overdue) per controller",
                f"stalewatch_controller_overdue_objects{{{CLUSTER}}} > 0",
                description="Objects the controller is up for but has not reconciled within their interval +"
                " timeout + slack (NotReconciling findings). Absent, not 0, while its heartbeat is Unknown.",
                rename={"namespace": "Namespace", "name": "Controller", "Value": "Overdue"},
                width=12,
            )
        )
        .with_row(dashboard.Row("Objects"))
        .with_panel(
            table_panel(
                "Objects with a stale status",
                f"stalewatch_object_stale{{{SCOPE}}} == 1",
                description="Their status is not being updated: do not trust their Ready condition.",
                rename=OBJECT_COLUMNS,
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "Revision skew: source revision vs applied",
                f"stalewatch_revision_info{{{SCOPE}}} and on (cluster, kind, namespace, name) "
                f'stalewatch_finding{{type="RevisionSkew"}}',
                description="What the source has versus what the object last applied.",
                rename={
                    **OBJECT_COLUMNS,
                    "revision": "Source revision",
                    "applied_revision": "Applied revision",
                },
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "Failing to reconcile, longest first",
                "sort_desc(time() - stalewatch_finding_since_timestamp_seconds"
                f'{{type="ReconcileFailed",{SCOPE}}})',
                description="Objects whose controller keeps reporting Ready=False (ReconcileFailed)."
                " A source among them is usually the root of the others.",
                rename={**OBJECT_COLUMNS, "Value": "Seconds failing"},
            )
        )
        .with_panel(
            table_panel(
                "Other objects failing, longest first",
                "sort_desc(time() - stalewatch_finding_since_timestamp_seconds"
                f'{{type="ObjectFailing",{SCOPE}}})',
                description="Objects of every other kind a stack applies (Certificates, ExternalSecrets,"
                " Jobs, CRDs, custom resources) that say they fail (ObjectFailing), while the Kustomization"
                " that applied them may say Ready=True: without health checks Flux does not look at them.",
                rename={**OBJECT_COLUMNS, "Value": "Seconds failing"},
            )
        )
        .with_panel(
            table_panel(
                "Denied by a policy",
                f"stalewatch_policy_denied{{{SCOPE}}}",
                description="Objects whose controller keeps retrying a write an admission policy denies"
                " (PolicyDenied), with the policy and its engine: retries will not help.",
                rename={"engine": "Engine", "policy": "Policy", **OBJECT_COLUMNS},
            )
        )
        .with_panel(
            table_panel(
                "Left behind by prune",
                f"stalewatch_prune_orphans{{{SCOPE}}}",
                description="Per Kustomization, objects it applied, no longer lists and did not prune"
                " (PruneOrphan): nothing manages them, while their controllers may still act on them."
                " PruneDisabled: spec.prune: false left them by design.",
                rename={
                    "namespace": "Namespace",
                    "name": "Kustomization",
                    "reason": "Reason",
                    "Value": "Objects",
                },
            )
        )
        .with_panel(
            table_panel(
                "Writers fighting over an object",
                f"stalewatch_conflicting_writers{{{SCOPE}}}",
                description="Objects two or more field managers rewrite in turn, each undoing the other's"
                " fields (ConflictingWriters): one row per manager, with its flips in the window.",
                rename={"manager": "Manager", **OBJECT_COLUMNS, "Value": "Flips"},
            )
        )
        .with_panel(
            table_panel(
                "Policy violations by stack",
                "sum by (engine, policy, result, stack_kind, stack_namespace, stack_name)"
                f' (stalewatch_policy_violations{{{CLUSTER},stack_namespace=~"$namespace"}})',
                description="What policy audits report (Gatekeeper constraints' status, policy reports),"
                " per policy and the stack that installed the objects; unattributed: no stack owns them,"
                " or the audit counts more than it lists. A backlog for the stack's team, not a page:"
                " no alert.",
                rename={
                    "engine": "Engine",
                    "policy": "Policy",
                    "result": "Result",
                    "stack_kind": "Stack kind",
                    "stack_namespace": "Stack namespace",
                    "stack_name": "Stack",
                    "Value": "Violations",
                },
            )
        )
        .with_panel(
            table_panel(
                "CRDs another stack's removal would delete",
                f"stalewatch_crd_ownership_risk{{{CLUSTER}}}",
                description="CRDs installed by one release or Kustomization while a controller another"
                " stack deployed reconciles their objects (CRDOwnershipRisk): removing or upgrading"
                " the installer deletes the CRD and every object of its kind. Cluster-scoped: the"
                " namespace filter does not apply.",
                rename={
                    "crd": "CRD",
                    "installer": "Installed by",
                    "controller": "Controller",
                    "controller_installer": "Controller deployed by",
                },
                width=16,
            )
        )
        .with_panel(
            table_panel(
                "Objects each CRD at risk would take with it",
                f"stalewatch_crd_ownership_risk_objects{{{CLUSTER}}}",
                description="Custom resources of each CRD at risk, which the API server deletes with it.",
                rename={"crd": "CRD", "Value": "Objects"},
                width=8,
            )
        )
        .with_panel(
            table_panel(
                "Time since last change",
                f"sort(time() - stalewatch_object_last_transition_timestamp_seconds{{{SCOPE}}})",
                description="Since each object's Ready condition last changed, most recent first.",
                rename={**OBJECT_COLUMNS, "Value": "Seconds since Ready changed"},
            )
        )
    )


def stack() -> dashboard.Dashboard:
    """One stack: every object built from one source, what it should run versus what it applied."""
    in_source = 'on (cluster, kind, namespace, name) stalewatch_revision_info{source=~"$source"}'
    source = label_variable("source", f"stalewatch_revision_info{{{CLUSTER}}}", "Source")
    return (
        dashboard.Dashboard("stalewatch / Stack")
        .uid("stalewatch-stack")
        .tags(["stalewatch", "gitops"])
        .refresh("30s")
        .time("now-6h", "now")
        .variables(variables(source, NAMESPACE))
        .with_panel(
            table_panel(
                "Source revision vs applied revision",
                f'stalewatch_revision_info{{source=~"$source",{SCOPE}}}',
                description="Every Kustomization/HelmRelease/Terraform built from the chosen source(s).",
                rename={
                    "source": "Source",
                    **OBJECT_COLUMNS,
                    "revision": "Source revision",
                    "applied_revision": "Applied revision",
                },
            )
        )
        .with_panel(
            table_panel(
                "Status",
                f"stalewatch_object_status{{{SCOPE}}} == 1 and {in_source}",
                description="kstatus of each object in the stack.",
                rename={**OBJECT_COLUMNS, "status": "Status"},
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "Findings in this stack",
                f"stalewatch_finding{{{SCOPE}}} and {in_source}",
                description="What is wrong with objects of this stack, and the root cause it belongs to.",
                rename={
                    "type": "Finding",
                    **OBJECT_COLUMNS,
                    "root_type": "Root cause",
                    "root_name": "Root name",
                },
                width=12,
            )
        )
        .with_panel(
            table_panel(
                "HelmRelease chart versions",
                f'stalewatch_revision_info{{kind="HelmRelease",{SCOPE}}}',
                description="The chart version the HelmChart offers versus the one the release runs.",
                rename={
                    "namespace": "Namespace",
                    "name": "HelmRelease",
                    "revision": "Chart version available",
                    "applied_revision": "Chart version applied",
                },
            )
        )
        .with_panel(
            timeseries_panel(
                "Controller liveness",
                f"stalewatch_controller_up{{{CLUSTER}}}",
                legend="{{namespace}}/{{name}}",
                description="1 while the controller is available and leading.",
            )
        )
        .with_panel(
            timeseries_panel(
                "Stale objects in this stack",
                f"sum(stalewatch_object_stale{{{SCOPE}}} and {in_source})",
                legend="stale",
                description="Objects of this stack whose controller is down.",
            )
        )
    )
