"""Hand-made Evaluations, shaped like what the model produces, for the renderers' tests.

The scene: kustomize-controller cannot pull its image, so the Kustomizations it owns
still say Ready but nobody is reconciling them (StatusStale symptoms of one root),
while helm-controller is fine and one HelmRelease is independently stuck.
"""

from __future__ import annotations

from datetime import UTC, datetime

from watcher.model.cluster.audits import Audit, Policy
from watcher.model.cluster.compliance import ComplianceReport, StackViolations, Unread
from watcher.model.evaluation import Evaluation
from watcher.model.ingest.objects import Key
from watcher.model.types import (
    ControllerHealth,
    Finding,
    FindingType,
    Heartbeat,
    HeartbeatState,
    ObjectHealth,
    RevisionInfo,
    Severity,
    Status,
    Subject,
)

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
DOWN_SINCE = datetime(2025, 3, 1, 11, 40, 0, tzinfo=UTC)
READY_SINCE = datetime(2025, 3, 1, 9, 15, 30, tzinfo=UTC)


def subject(kind: str, namespace: str, name: str, api_version: str = "v1") -> Subject:
    return {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name}


def ks(namespace: str, name: str) -> Subject:
    return subject("Kustomization", namespace, name, "kustomize.toolkit.fluxcd.io/v1")


def hr(namespace: str, name: str) -> Subject:
    return subject("HelmRelease", namespace, name, "helm.toolkit.fluxcd.io/v2")


def deployment(name: str, namespace: str = "flux-system") -> Subject:
    return subject("Deployment", namespace, name, "apps/v1")


def finding(
    id: str,
    type: FindingType,
    about: Subject,
    *,
    severity: Severity = Severity.WARNING,
    since: datetime | None = DOWN_SINCE,
    root_cause: str | None = None,
    affected: list[Subject] | None = None,
) -> Finding:
    return Finding(
        id=id,
        type=type,
        severity=severity,
        subject=about,
        message=f"{type} on {about['kind']} {about['namespace']}/{about['name']}",
        since=since,
        evidence={},
        root_cause=root_cause,
        affected=affected or [],
    )


def at_risk(
    id: str, crd: Subject, installed_by: list[str], controllers: dict[str, str | None], *, objects: int | None
) -> Finding:
    """A CRDOwnershipRisk with the evidence its metrics read: installers, the foreign controllers
    (name: the installer that deployed it) and how many objects would go with the CRD."""
    found = finding(id, FindingType.CRD_OWNERSHIP_RISK, crd, since=None)
    found.evidence = {
        "installed_by": installed_by,
        "controllers": [{"name": n, "deployed_by": by} for n, by in controllers.items()],
        "objects": objects,
    }
    return found


def denied(id: str, about: Subject, engine: str, policies: list[str]) -> Finding:
    """A PolicyDenied with the evidence its metric reads (engine, policies)."""
    found = finding(id, FindingType.POLICY_DENIED, about)
    found.evidence = {"engine": engine, "policies": policies}
    return found


def policy_denied() -> Evaluation:
    """A Gatekeeper constraint and a Kyverno policy each deny a write some object keeps retrying;
    the Kyverno one names two policies; a RetryLoop on the same object is the first one's symptom."""
    gateway = subject("EdgeGateway", "checkout", "storefront", "edge.acme.io/v1alpha1")
    apps = ks("flux-system", "apps")
    root = denied(
        "PolicyDenied/EdgeGateway/checkout/storefront", gateway, "gatekeeper", ["deny-public-loadbalancers"]
    )
    return Evaluation(
        now=NOW,
        findings=[
            root,
            denied(
                "PolicyDenied/Kustomization/flux-system/apps",
                apps,
                "kyverno",
                ["disallow-privilege-escalation", "require-labels"],
            ),
            finding(
                "RetryLoop/EdgeGateway/checkout/storefront/Failed",
                FindingType.RETRY_LOOP,
                gateway,
                root_cause=root.id,
            ),
        ],
        objects=[],
        controllers=[],
        revisions=[],
    )


def empty() -> Evaluation:
    return Evaluation(now=NOW, findings=[], objects=[], controllers=[], revisions=[])


def controller_down() -> Evaluation:
    """kustomize-controller down (root), two stale Kustomizations (symptoms), an unrelated stuck release."""
    kc = deployment("kustomize-controller")
    apps, infra, podinfo = ks("flux-system", "apps"), ks("flux-system", "infra"), hr("podinfo", "podinfo")
    root = finding(
        "ControllerDown/flux-system/kustomize-controller",
        FindingType.CONTROLLER_DOWN,
        kc,
        severity=Severity.CRITICAL,
        affected=[apps, infra],
    )
    return Evaluation(
        now=NOW,
        findings=[
            root,
            finding(
                "StatusStale/apps", FindingType.STATUS_STALE, apps, severity=Severity.INFO, root_cause=root.id
            ),
            finding(
                "StatusStale/infra",
                FindingType.STATUS_STALE,
                infra,
                severity=Severity.INFO,
                since=None,
                root_cause=root.id,
            ),
            finding("StuckReconciling/podinfo", FindingType.STUCK_RECONCILING, podinfo),
        ],
        objects=[
            ObjectHealth(
                apps,
                Status.CURRENT,
                "ReconciliationSucceeded",
                stale=True,
                controller="kustomize-controller",
                last_transition=READY_SINCE,
            ),
            ObjectHealth(
                infra,
                Status.CURRENT,
                "ReconciliationSucceeded",
                stale=True,
                controller="kustomize-controller",
                last_transition=None,
            ),
            ObjectHealth(
                podinfo,
                Status.IN_PROGRESS,
                "Progressing",
                stale=False,
                controller="helm-controller",
                last_transition=READY_SINCE,
            ),
        ],
        controllers=[
            ControllerHealth(
                kc,
                up=False,
                reason="ImagePullBackOff",
                groups=("kustomize.toolkit.fluxcd.io",),
                since=DOWN_SINCE,
            ),
            ControllerHealth(
                deployment("helm-controller"),
                up=True,
                reason="",
                groups=("helm.toolkit.fluxcd.io",),
                since=None,
            ),
            ControllerHealth(
                deployment("source-controller"),
                up=True,
                reason="",
                groups=("source.toolkit.fluxcd.io", "image.toolkit.fluxcd.io"),
                since=None,
            ),
        ],
        revisions=[
            RevisionInfo(apps, "GitRepository/flux-system/flux-system", "main@sha1:2b3c", "main@sha1:1a2b"),
            RevisionInfo(infra, "GitRepository/flux-system/flux-system", "main@sha1:2b3c", "main@sha1:2b3c"),
            RevisionInfo(podinfo, "HelmChart/flux-system/podinfo-podinfo", "6.7.1", "6.7.0"),
        ],
    )


def controller_stuck() -> Evaluation:
    """kustomize-controller up but stuck (root) with two overdue Kustomizations; helm-controller
    reconciling; source-controller's metrics unreadable (unknown: no overdue count, never 0);
    notification-controller's heartbeat not read at all (no heartbeat series)."""
    kc = deployment("kustomize-controller")
    apps, infra = ks("flux-system", "apps"), ks("flux-system", "infra")
    root = finding(
        "ControllerStuck/Deployment/flux-system/kustomize-controller",
        FindingType.CONTROLLER_STUCK,
        kc,
        severity=Severity.CRITICAL,
        affected=[apps, infra],
    )
    symptoms = [
        finding(f"NotReconciling/{s['name']}", FindingType.NOT_RECONCILING, s, root_cause=root.id)
        for s in (apps, infra)
    ]

    def up(name: str, group: str, heartbeat: Heartbeat | None) -> ControllerHealth:
        return ControllerHealth(deployment(name), True, "Available", (group,), None, name, heartbeat)

    return Evaluation(
        now=NOW,
        findings=[root, *symptoms],
        objects=[],
        controllers=[
            up(
                "kustomize-controller",
                "kustomize.toolkit.fluxcd.io",
                Heartbeat(HeartbeatState.STUCK, "no counter moved", READY_SINCE, DOWN_SINCE, overdue=2),
            ),
            up(
                "helm-controller",
                "helm.toolkit.fluxcd.io",
                Heartbeat(HeartbeatState.RECONCILING, "", DOWN_SINCE),
            ),
            up(
                "source-controller",
                "source.toolkit.fluxcd.io",
                Heartbeat(HeartbeatState.UNKNOWN, "connection refused", None),
            ),
            up("notification-controller", "notification.toolkit.fluxcd.io", None),
        ],
        revisions=[],
    )


def odd_names() -> Evaluation:
    """Values that need escaping in the exposition, a cluster-scoped subject and non-ASCII text."""
    weird = ks("team-ä", 'quote"back\\slash')
    crd = subject(
        "CustomResourceDefinition",
        "",
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "apiextensions.k8s.io/v1",
    )
    return Evaluation(
        now=NOW,
        findings=[
            finding(
                "CRDRemoved/kustomizations",
                FindingType.CRD_REMOVED,
                crd,
                severity=Severity.CRITICAL,
                since=None,
            )
        ],
        objects=[ObjectHealth(weird, Status.UNKNOWN, "", stale=False, controller=None, last_transition=None)],
        controllers=[],
        revisions=[RevisionInfo(weird, "GitRepository/team-ä/repo", 'tag "v1"\nline two', "")],
    )


IMAGE_API = "image.toolkit.fluxcd.io/v1"


def crd_ownership_risk() -> Evaluation:
    """A CRD one release installs and another stack's controller needs: a root before any incident,
    cluster-scoped and with no moment it started (no since series); and a CRD two installers claim,
    with no foreign controller and its instances not counted (no objects series)."""
    crd = subject(
        "CustomResourceDefinition", "", "imagepolicies.image.toolkit.fluxcd.io", "apiextensions.k8s.io/v1"
    )
    risk = at_risk(
        "CRDOwnershipRisk/imagepolicies",
        crd,
        ["HelmRelease team-platform/platform-base"],
        {"image-reflector-controller": "HelmRelease team-delivery/image-automation"},
        objects=1,
    )
    risk.affected = [subject("ImagePolicy", "team-apps", "podinfo", IMAGE_API)]
    two = subject("CustomResourceDefinition", "", "buckets.example.io", "apiextensions.k8s.io/v1")
    claimed = at_risk(
        "CRDOwnershipRisk/buckets",
        two,
        ["Helm release a/one", "Kustomization flux-system/two"],
        {},
        objects=None,
    )
    return Evaluation(
        now=NOW,
        findings=[risk, claimed],
        objects=[],
        controllers=[],
        revisions=[],
    )


TF_API = "infra.contrib.fluxcd.io/v1alpha2"


def orphan(about: Subject, kustomization: str, reason: str) -> Finding:
    """A PruneOrphan with the evidence its metric reads (its Kustomization, why)."""
    found = finding(
        f"PruneOrphan/{about['kind']}/{about['namespace']}/{about['name']}", FindingType.PRUNE_ORPHAN, about
    )
    found.evidence = {"kustomization": kustomization, "reason": reason}
    return found


def prune_orphan() -> Evaluation:
    """Two Terraforms data-infra no longer lists and did not prune (one retried by its controller,
    a RetryLoop symptom), and a Deployment a spec.prune: false Kustomization left by design (info)."""
    reports = subject("Terraform", "data", "reports-replica", TF_API)
    infra, apps = "Kustomization/flux-system/data-infra", "Kustomization/flux-system/data-apps"
    root = orphan(reports, infra, "NotInInventory")
    legacy = orphan(deployment("legacy-exporter", "data"), apps, "PruneDisabled")
    legacy.severity = Severity.INFO
    return Evaluation(
        now=NOW,
        findings=[
            root,
            orphan(subject("Terraform", "data", "reports-bucket", TF_API), infra, "NotInInventory"),
            legacy,
            finding(
                "RetryLoop/Terraform/data/reports-replica/ArtifactFailed",
                FindingType.RETRY_LOOP,
                reports,
                root_cause=root.id,
            ),
        ],
        objects=[],
        controllers=[],
        revisions=[],
    )


def fight(id: str, about: Subject, managers: list[str], flips: int = 5) -> Finding:
    """A ConflictingWriters with the evidence its metric reads (managers, flips)."""
    found = finding(id, FindingType.CONFLICTING_WRITERS, about)
    found.evidence = {"managers": managers, "flips": flips}
    return found


def conflicting_writers() -> Evaluation:
    """A platform operator's PUTs erase the sidecar a mesh controller adds to a shared Widget:
    one root, one series per manager with the flips in the window."""
    widget = subject("Widget", "team-a", "shop", "example.com/v1")
    found = fight("ConflictingWriters/Widget/team-a/shop", widget, ["mesh-controller", "platform-operator"])
    return Evaluation(now=NOW, findings=[found], objects=[], controllers=[], revisions=[])


HOSTILE = (
    'back\\slash "quoted" new\nline tab\tcr\r nul\x00 esc\x1b del\x7f nel\x85 ls\u2028 '
    "ä 🚀 %s %(x)s {0} }{ \\n \\"
)
"""Everything a label value can carry that an encoder must escape or leave alone: the text format
escapes backslash, double quote and newline, and passes every other character through as UTF-8."""

EACH_ESCAPE = ('only "quotes"', "only\nnewline", "only\\backslash")
"""One character to escape in each, so no check for one of them can hide behind another."""


def hostile() -> Evaluation:
    """Every model family with series, their free-text label values (revisions, sources, groups,
    names from other tools) set to HOSTILE variants, a root chain through them and times to render."""
    odd = ks(f"ns-{HOSTILE}", f"name-{HOSTILE}")
    controller = subject("Deployment", f"ctl-{HOSTILE}", f"controller-{HOSTILE}", "apps/v1")
    root = finding(f"root-{HOSTILE}", FindingType.CONTROLLER_DOWN, controller, severity=Severity.CRITICAL)
    return Evaluation(
        now=datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC),
        findings=[
            root,
            finding(
                f"stale-{HOSTILE}", FindingType.STATUS_STALE, odd, severity=Severity.INFO, root_cause=root.id
            ),
            finding("unknown-since", FindingType.STUCK_RECONCILING, odd, since=None),
            denied(f"denied-{HOSTILE}", odd, "kyverno", [f"policy-{HOSTILE}", *EACH_ESCAPE]),
            at_risk(
                f"risk-{HOSTILE}",
                subject("CustomResourceDefinition", "", f"crd-{HOSTILE}", "v1"),
                [f"HelmRelease a/{HOSTILE}", *EACH_ESCAPE],
                {f"ctl-{HOSTILE}": None},
                objects=3,
            ),
            orphan(odd, f"Kustomization/ns-{HOSTILE}/name-{HOSTILE}", "NotInInventory"),
            fight(f"writers-{HOSTILE}", odd, [f"manager-{HOSTILE}", *EACH_ESCAPE]),
        ],
        objects=[
            ObjectHealth(
                odd, Status.FAILED, HOSTILE, stale=True, controller=None, last_transition=READY_SINCE
            ),
            *(
                ObjectHealth(
                    ks("a", each), Status.TERMINATING, "", stale=False, controller=None, last_transition=None
                )
                for each in EACH_ESCAPE
            ),
        ],
        controllers=[
            ControllerHealth(
                controller, up=False, reason="LeaseExpired", groups=(f"g-{HOSTILE}", "a.io"), since=DOWN_SINCE
            ),
            ControllerHealth(
                deployment("up"),
                up=True,
                reason="",
                groups=(),
                since=None,
                heartbeat=Heartbeat(HeartbeatState.STUCK, HOSTILE, READY_SINCE, DOWN_SINCE, overdue=3),
            ),
        ],
        revisions=[
            RevisionInfo(odd, f"GitRepository/{HOSTILE}", f"main@{HOSTILE}", HOSTILE),
            *(RevisionInfo(ks("a", each), "GitRepository/a/b", each, "v1") for each in EACH_ESCAPE),
        ],
        compliance=ComplianceReport(
            tuple(
                StackViolations(
                    Policy("kyverno", "Policy", f"ns/policy-{each}"),
                    "audit",
                    "fail",
                    Key("kustomize.toolkit.fluxcd.io", "Kustomization", f"ns-{HOSTILE}", f"name-{each}"),
                    1,
                    (),
                )
                for each in (HOSTILE, *EACH_ESCAPE)
            ),
            unread=tuple(
                Unread(Key("wgpolicyk8s.io", "PolicyReport", f"ns-{HOSTILE}", f"report-{each}"), each)
                for each in (HOSTILE, *EACH_ESCAPE)
            ),
        ),
        unjudged=(
            (f"g-{HOSTILE}.io", f"Kind{HOSTILE}", 2),
            *((f"{each}.io", "Widget", 1) for each in EACH_ESCAPE),
        ),
        unread=(
            (f"g-{HOSTILE}.io", f"Listed{HOSTILE}", 3),
            *((f"{each}.io", "Gadget", 1) for each in EACH_ESCAPE),
        ),
    )


def policy_compliance() -> Evaluation:
    """A dryrun Gatekeeper constraint whose audit lists 20 of its 23 violations, 20 in one
    Kustomization's stack, the other 3 unlisted; a Kyverno ClusterPolicy in Audit mode failing
    and warning on a HelmRelease's Deployment; a namespaced Policy failing on an object no stack owns;
    a policy report whose summary.fail is a string: not judged."""
    labels = Policy("gatekeeper", "K8sRequiredLabels", "must-have-owner")
    owner = Policy("kyverno", "ClusterPolicy", "require-owner")
    local = Policy("kyverno", "Policy", "team-c/require-limits")
    team_a = Key("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "team-a")
    api = Key("helm.toolkit.fluxcd.io", "HelmRelease", "team-b", "api")
    web = Key("apps", "Deployment", "team-a", "web")
    deploy = Key("apps", "Deployment", "team-b", "api")
    rows = (
        StackViolations(labels, "dryrun", "fail", team_a, 20, (web,)),
        StackViolations(labels, "dryrun", "fail", None, 3, ()),
        StackViolations(owner, "audit", "fail", api, 1, (deploy,)),
        StackViolations(owner, "audit", "warn", api, 2, (deploy,)),
        StackViolations(local, "unknown", "fail", None, 1, (Key("apps", "Deployment", "team-c", "x"),)),
    )
    audits = (Audit(labels, "dryrun", READY_SINCE, 23, 20),)
    return Evaluation(
        now=NOW,
        findings=[],
        objects=[],
        controllers=[],
        revisions=[],
        compliance=ComplianceReport(
            rows,
            audits,
            reports=3,
            unread=(
                Unread(
                    Key("wgpolicyk8s.io", "PolicyReport", "team-c", "uid-db"),
                    "summary.fail is not an integer ('3')",
                ),
            ),
        ),
    )
