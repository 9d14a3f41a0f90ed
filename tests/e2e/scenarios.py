"""The incidents the end-to-end tests enact, and the alerts each one must (and must not) send.

The stuck-Reconciling and sibling-skew incidents are the ones tests/app/test_incidents.py
enacts step by step (imported, not copied). The tofu-controller incident follows
examples/tofu-controller-down: a Kustomization deploys the Terraforms and waits for them, and
an app Kustomization dependsOn it, so the blast radius has every kind of symptom. The policy
incident is a Kustomization whose dry-run a Kyverno policy denies (PolicyDenied, its
ReconcileFailed a symptom); Kyverno's background scan also reports the running Deployment
failing that policy, which feeds the dashboard's denied and violations panels. The prune incident
is a Terraform its Kustomization's new inventory no longer lists, left in place (PruneOrphan).
In the writers incident two field managers PUT the same Kustomization in turn
(ConflictingWriters, its own root), which feeds the dashboard's writers panel. In the CRD
incident one Kustomization's inventory starts listing the Terraform CRD while tofu-controller
was deployed by another (CRDOwnershipRisk, about a cluster-scoped object), which feeds the
dashboard's CRD panels. In the helm-controller incident the controller is up and stops
reconciling (ControllerStuck; stuck_controller.py serves its /metrics from the test process), which
feeds the dashboard's heartbeat panels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tests.app.test_incidents import (
    POD,
    REV_A,
    TOFU_IMAGE,
    Act,
    Scenario,
    both,
    patch,
    reconciling_and_ready,
    sibling_skew,
    stuck_reconciling,
)
from tests.app.test_incidents import tofu_setup as tofu_and_terraforms
from tests.e2e.stuck_controller import HC, RELEASES, StuckHelmController
from tests.kube.objects import (
    API,
    ago,
    cond,
    deployment,
    deployment_status,
    flux,
    policy_report,
    ready,
    stamp,
    waiting,
)
from tests.kubeclient import Kube

Obj = dict[str, Any]
TERRAFORMS = ("vpc", "dns")
"""The Terraforms test_incidents.tofu_setup creates."""
CHART_DIGEST = "sha256:" + "c" * 64


@dataclass(frozen=True)
class Alert:
    """A finding alert as Alertmanager sees it: alertname, and the object it is about."""

    alertname: str
    kind: str
    name: str
    cluster_scoped: bool = False
    """About an object of no namespace (a CRD): its alert has none, whatever the incident's."""

    def namespace_in(self, namespace: str) -> str:
        """The object's namespace label when the incident runs in `namespace`."""
        return "" if self.cluster_scoped else namespace

    def matches(self, labels: dict[str, str], namespace: str) -> bool:
        """A label with no value is no label: a cluster-scoped object's alert has no namespace."""
        wanted = {"alertname": self.alertname, "kind": self.kind, "name": self.name}
        where = labels.get("namespace", "")
        return wanted.items() <= labels.items() and where == self.namespace_in(namespace)

    def __str__(self) -> str:
        return f"{self.alertname} {self.kind}/{self.name}"


@dataclass(frozen=True)
class Incident:
    """Healthy objects, what goes wrong (in the order it happens), and what must be alerted.

    `receiver` is the Alertmanager receiver the example config routes the root alert to
    (by its severity). `symptoms` must reach Alertmanager and stay suppressed there.
    """

    setup: Callable[[str], list[Obj]]
    acts: Sequence[Act]
    root: Alert
    receiver: str
    summary: str
    """The root alert's summary annotation, with {ns} for the namespace."""
    symptoms: Sequence[Alert] = ()
    running: Sequence[Callable[[], AbstractContextManager[object]]] = ()
    """What must run in the test process from before setup to the module's end (a controller's
    /metrics server)."""


def _inventory(ns: str, names: Sequence[str]) -> Obj:
    return {
        "entries": [{"id": f"{ns}_{n}_infra.contrib.fluxcd.io_Terraform", "v": "v1alpha2"} for n in names]
    }


def tofu_setup(ns: str) -> list[Obj]:
    """test_incidents' tofu-controller, GitRepository and Terraforms; its Kustomization names a
    Terraform in dependsOn, so it is replaced by the example's pair: one that deploys the
    Terraforms and waits for them, and one that dependsOn it."""
    source = {"kind": "GitRepository", "name": "infra"}
    return [
        *(obj for obj in tofu_and_terraforms(ns) if obj["kind"] != "Kustomization"),
        flux(
            "Kustomization",
            ns,
            "infra-terraform",
            spec={"sourceRef": source, "path": "./terraform", "wait": True},
            status=ready(lastAppliedRevision=REV_A, inventory=_inventory(ns, TERRAFORMS)),
        ),
        flux(
            "Kustomization",
            ns,
            "apps",
            spec={"sourceRef": source, "path": "./apps", "dependsOn": [{"name": "infra-terraform"}]},
            status=ready(lastAppliedRevision=REV_A),
        ),
    ]


def _health_check_failing(ns: str) -> Act:
    """kustomize-controller's wait on the Terraforms times out: they are InProgress to kstatus."""
    waited = ", ".join(f"Terraform/{ns}/{n} status: 'InProgress'" for n in TERRAFORMS)
    failed = f"health check failed after 5m0s: timeout waiting for: [{waited}]"
    return patch(
        "Kustomization",
        "infra-terraform",
        {
            "conditions": [
                cond("Ready", "False", "HealthCheckFailed", failed, since=ago(minutes=15)),
                cond(
                    "Reconciling",
                    "True",
                    "ProgressingWithRetry",
                    "Running health checks",
                    since=ago(minutes=20),
                ),
            ]
        },
    )


def tofu_controller_down(ns: str) -> Incident:
    return Incident(
        setup=tofu_setup,
        acts=[
            both(
                patch(
                    "Pod",
                    "tofu-controller" + POD,
                    waiting("ImagePullBackOff", f'Back-off pulling image "{TOFU_IMAGE}"', image=TOFU_IMAGE),
                ),
                patch("Deployment", "tofu-controller", deployment_status(0)),
            ),
            both(*(patch("Terraform", name, reconciling_and_ready()) for name in TERRAFORMS)),
            _health_check_failing(ns),
            patch(
                "Kustomization",
                "apps",
                {
                    "conditions": [
                        cond(
                            "Ready",
                            "False",
                            "DependencyNotReady",
                            f"dependency '{ns}/infra-terraform' is not ready",
                            since=ago(minutes=10),
                        )
                    ]
                },
            ),
        ],
        root=Alert("StalewatchControllerDown", "Deployment", "tofu-controller"),
        receiver="pager",
        summary="Deployment {ns}/tofu-controller is down (ImagePullBackOff)",
        symptoms=[
            *(Alert("StalewatchStatusStale", "Terraform", name) for name in TERRAFORMS),
            Alert("StalewatchDependencyBlocked", "Kustomization", "infra-terraform"),
            Alert("StalewatchDependencyBlocked", "Kustomization", "apps"),
        ],
    )


def _incident_steps(scenario: Scenario) -> list[Act]:
    """Every step of a test_incidents scenario but the last, which is the fix."""
    return [step.act for step in scenario.steps[:-1]]


def reconciling_left_true(ns: str) -> Incident:
    scenario = stuck_reconciling()
    return Incident(
        setup=scenario.setup,
        acts=_incident_steps(scenario),
        root=Alert("StalewatchStuckReconciling", "Kustomization", "apps"),
        receiver="chat",
        summary="Kustomization {ns}/apps is stuck reconciling",
    )


def chart_release(ns: str) -> list[Obj]:
    """A healthy HelmRelease next to the Kustomizations, its chart from an OCIRepository:
    the stack dashboard shows chart versions, which only a HelmRelease has."""
    return [
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "OCIRepository",
            "metadata": {"name": "podinfo", "namespace": ns},
            "spec": {
                "interval": "10m",
                "url": "oci://ghcr.io/stefanprodan/charts/podinfo",
                "ref": {"tag": "6.5.0"},
            },
            "status": {
                "observedGeneration": 1,
                **ready(
                    artifact={"revision": f"6.5.0@{CHART_DIGEST}", "lastUpdateTime": "2026-01-01T00:00:00Z"}
                ),
            },
        },
        flux(
            "HelmRelease",
            ns,
            "podinfo",
            spec={"chartRef": {"kind": "OCIRepository", "name": "podinfo"}},
            status=ready(
                "Helm install succeeded",
                history=[
                    {
                        "name": "podinfo",
                        "namespace": ns,
                        "version": 1,
                        "status": "deployed",
                        "chartName": "podinfo",
                        "chartVersion": "6.5.0",
                        "ociDigest": CHART_DIGEST,
                    }
                ],
            ),
        ),
    ]


def sibling_revision_skew(ns: str) -> Incident:
    scenario = sibling_skew()
    return Incident(
        setup=lambda ns: [*scenario.setup(ns), *chart_release(ns)],
        acts=_incident_steps(scenario),
        root=Alert("StalewatchRevisionSkew", "Kustomization", "apps"),
        receiver="chat",
        summary="Kustomization {ns}/apps lags behind its source",
        symptoms=[Alert("StalewatchReconcileFailed", "Kustomization", "apps")],
    )


def _dry_run_denied(ns: str) -> str:
    """kustomize-controller's Ready message when Kyverno denies its server-side dry-run (fluxcd/pkg
    ssa/errors/errors.go wrapping the API server's webhook error; kyverno/kyverno
    pkg/webhooks/utils/block.go for the answer)."""
    return (
        f'Deployment/{ns}/web dry-run failed (Forbidden): admission webhook "validate.kyverno.svc-fail" '
        f"denied the request: \n\nresource Deployment/{ns}/web was blocked due to the following policies "
        "\n\ndisallow-privilege-escalation:\n  autogen-privilege-escalation: 'validation error: Privilege "
        "escalation is disallowed.'\n"
    )


def _audited(ns: str) -> list[Obj]:
    """The running Deployment web, which Kustomization apps applied, and Kyverno's background
    scan report failing it on the policy that denies its update (wgpolicyk8s.io/v1alpha2)."""
    web = _owned(deployment(ns, "web") | {"status": deployment_status(1)}, "apps")
    report = policy_report(
        ns,
        "web",
        policy="disallow-privilege-escalation",
        rule="autogen-privilege-escalation",
        severity="medium",
    )
    return [web, report]


def policy_denied_dry_run(ns: str) -> Incident:
    """Another stack's Kyverno policy denies what the Kustomization applies, at every retry."""
    return Incident(
        setup=lambda ns: [*stuck_reconciling().setup(ns), *_audited(ns)],
        acts=[
            patch(
                "Kustomization",
                "apps",
                {
                    "conditions": [
                        cond(
                            "Ready",
                            "False",
                            "ReconciliationFailed",
                            _dry_run_denied(ns),
                            since=ago(minutes=40),
                        )
                    ]
                },
            )
        ],
        root=Alert("StalewatchPolicyDenied", "Kustomization", "apps"),
        receiver="chat",
        summary="Kustomization {ns}/apps keeps being denied by a policy",
        symptoms=[Alert("StalewatchReconcileFailed", "Kustomization", "apps")],
    )


def _owned(obj: Obj, kustomization: str) -> Obj:
    """As kustomize-controller labels what a Kustomization applied."""
    obj["metadata"]["labels"] = {
        "kustomize.toolkit.fluxcd.io/name": kustomization,
        "kustomize.toolkit.fluxcd.io/namespace": obj["metadata"]["namespace"],
    }
    return obj


def _built(ns: str, names: Sequence[str], *, digest: str, first: datetime) -> Obj:
    """infra-terraform's status after applying a build of `names`, first at `first`."""
    snapshot = {
        "digest": digest,
        "firstReconciled": stamp(first),
        "lastReconciled": stamp(ago(minutes=1)),
        "lastReconciledDuration": "5.2s",
        "lastReconciledStatus": "ReconciliationSucceeded",
        "totalReconciliations": 3,
        "metadata": {"revision": REV_A},
    }
    return ready(lastAppliedRevision=REV_A, inventory=_inventory(ns, names), history=[snapshot])


def prune_orphan(ns: str) -> Incident:
    """A Terraform removed from the Kustomization's build whose prune did not happen: the new
    inventory lists vpc only, and dns stays (PruneOrphan), which also feeds the dashboard's
    left-behind panel."""

    def setup(ns: str) -> list[Obj]:
        objects = [obj for obj in tofu_and_terraforms(ns) if obj["kind"] != "Kustomization"]
        for obj in objects:
            if obj["kind"] == "Terraform":
                _owned(obj, "infra-terraform")
        source = {"kind": "GitRepository", "name": "infra"}
        built = _built(ns, TERRAFORMS, digest="sha256:" + "1" * 64, first=ago(hours=2))
        spec = {"sourceRef": source, "prune": True}
        return [*objects, flux("Kustomization", ns, "infra-terraform", spec=spec, status=built)]

    dropped = _built(ns, ("vpc",), digest="sha256:" + "2" * 64, first=ago(minutes=30))
    return Incident(
        setup=setup,
        acts=[patch("Kustomization", "infra-terraform", dropped)],
        root=Alert("StalewatchPruneOrphan", "Terraform", "dns"),
        receiver="chat",
        summary="Terraform {ns}/dns was left behind by prune",
    )


def _writers_fight(rounds: int) -> Act:
    """tenant-controller adds a substitution to the Kustomization (GET, then a PUT of it all);
    platform-operator PUTs its typed struct, which has no postBuild: `rounds` times each."""

    async def act(kube: Kube, namespace: str) -> None:
        ref = {"apiVersion": API["Kustomization"], "kind": "Kustomization"}
        ref["metadata"] = {"name": "apps", "namespace": namespace}
        path = await kube.object_path(ref)
        for _ in range(rounds):
            current = await kube.get(ref)
            current["spec"]["postBuild"] = {"substitute": {"cluster_env": "prod"}}
            await kube.request("PUT", path, body=current, query={"fieldManager": "tenant-controller"})
            current = await kube.get(ref)
            current["spec"].pop("postBuild")
            await kube.request("PUT", path, body=current, query={"fieldManager": "platform-operator"})

    return act


def conflicting_writers(ns: str) -> Incident:
    """Two managers PUT the same Kustomization in turn, one erasing what the other adds."""
    return Incident(
        setup=stuck_reconciling().setup,
        acts=[_writers_fight(3)],
        root=Alert("StalewatchConflictingWriters", "Kustomization", "apps"),
        receiver="chat",
        summary="Kustomization {ns}/apps is rewritten in turn by writers that undo each other",
    )


TERRAFORM_CRD = "terraforms.infra.contrib.fluxcd.io"


def crd_ownership_risk(ns: str) -> Incident:
    """Kustomization platform starts installing the Terraform CRD (its inventory lists it), while
    tofu-controller, which reconciles Terraforms, was deployed by Kustomization tofu: pruning
    platform, or it no longer building the CRD, would delete every Terraform."""

    def setup(ns: str) -> list[Obj]:
        controller = [obj for obj in tofu_and_terraforms(ns) if obj["kind"] in ("Deployment", "Pod")]
        _owned(controller[0], "tofu")
        return [
            *controller,
            flux("Kustomization", ns, "tofu", status=ready(lastAppliedRevision=REV_A)),
            flux("Kustomization", ns, "platform", status=ready(lastAppliedRevision=REV_A)),
        ]

    crd_entry = {"id": f"_{TERRAFORM_CRD}_apiextensions.k8s.io_CustomResourceDefinition", "v": "v1"}
    return Incident(
        setup=setup,
        acts=[
            patch(
                "Kustomization",
                "platform",
                ready(lastAppliedRevision=REV_A, inventory={"entries": [crd_entry]}),
            )
        ],
        root=Alert(
            "StalewatchCRDOwnershipRisk", "CustomResourceDefinition", TERRAFORM_CRD, cluster_scoped=True
        ),
        receiver="chat",
        summary=f"CustomResourceDefinition {TERRAFORM_CRD} is installed by one stack and needed by another",
    )


def replicaset_cannot_create_pods(ns: str) -> Incident:
    """A ReplicaSet applied by a Job runner, its Pods refused by a ResourceQuota for 20 minutes:
    ReplicaFailure=True FailedCreate, the message the replicaset controller writes."""

    def setup(ns: str) -> list[Obj]:
        labels = {"app": "batch"}
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "batch-7f9c", "namespace": ns},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "batch", "image": "ghcr.io/acme/batch:1.4.0"}]},
                    },
                },
            }
        ]

    refused = (
        'pods "batch-7f9c-" is forbidden: exceeded quota: compute, requested: cpu=2, used: cpu=8, '
        "limited: cpu=8"
    )
    return Incident(
        setup=setup,
        acts=[
            patch(
                "ReplicaSet",
                "batch-7f9c",
                {
                    "replicas": 0,
                    "conditions": [
                        cond("ReplicaFailure", "True", "FailedCreate", refused, since=ago(minutes=20))
                    ],
                },
            )
        ],
        root=Alert("StalewatchObjectFailing", "ReplicaSet", "batch-7f9c"),
        receiver="chat",
        summary="ReplicaSet {ns}/batch-7f9c reports that it fails",
    )


def helm_controller_stuck(ns: str) -> Incident:
    """helm-controller up (Deployment available, Pod Ready, Lease held) and seen reconciling, then
    reconciling nothing (stuck_controller.py): ControllerStuck, both HelmReleases NotReconciling
    under it. Its heartbeat feeds the dashboard's heartbeat-age and overdue panels."""
    controller = StuckHelmController(ns)
    return Incident(
        setup=controller.setup,
        acts=[controller.reconciling, controller.stuck],
        root=Alert("StalewatchControllerStuck", "Deployment", HC),
        receiver="pager",
        summary=f"Deployment {{ns}}/{HC} is up but not reconciling",
        symptoms=[Alert("StalewatchNotReconciling", "HelmRelease", name) for name in RELEASES],
        running=[controller.serving],
    )


INCIDENTS: dict[str, Callable[[str], Incident]] = {
    "tofu-controller-image-pull-backoff": tofu_controller_down,
    "reconciling-left-true-on-a-live-controller": reconciling_left_true,
    "sibling-revision-skew": sibling_revision_skew,
    "policy-denied-dry-run": policy_denied_dry_run,
    "prune-orphan-left-behind": prune_orphan,
    "conflicting-writers": conflicting_writers,
    "crd-ownership-risk": crd_ownership_risk,
    "replicaset-cannot-create-pods": replicaset_cannot_create_pods,
    "helm-controller-stuck": helm_controller_stuck,
}
"""Built when enacted, so every timestamp in them is of the test's own time."""
