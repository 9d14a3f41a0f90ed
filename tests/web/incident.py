"""Hand-made Evaluations for the web tests: an incident as the model would report it.

tofu-controller is down (critical root) and drags its Terraforms (StatusStale) and a
Kustomization that depends on them (DependencyBlocked); separately a Kustomization in another
namespace lags its source (a warning root) and its message was written by an attacker.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from watcher.model.evaluation import Evaluation
from watcher.model.types import (
    ControllerHealth,
    Finding,
    FindingType,
    ObjectHealth,
    RevisionInfo,
    Severity,
    Status,
    Subject,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DOWN_SINCE = NOW - timedelta(hours=3, minutes=12)
HOSTILE = "<script>alert(1)</script>\"><img src=x onerror=alert(2)> & 'quoted'"
REV_A = "main@sha1:" + "a" * 40
REV_B = "main@sha1:" + "b" * 40
TOFU_GROUP = "infra.contrib.fluxcd.io"


def subject(kind: str, namespace: str, name: str) -> Subject:
    api = {
        "Deployment": "apps/v1",
        "Terraform": f"{TOFU_GROUP}/v1alpha2",
        "Kustomization": "kustomize.toolkit.fluxcd.io/v1",
        "GitRepository": "source.toolkit.fluxcd.io/v1",
    }[kind]
    return {"apiVersion": api, "kind": kind, "namespace": namespace, "name": name}


TOFU = subject("Deployment", "flux-system", "tofu-controller")
VPC = subject("Terraform", "flux-system", "vpc")
DNS = subject("Terraform", "flux-system", "dns")
APPS = subject("Kustomization", "flux-system", "apps")
WEB = subject("Kustomization", "web", "frontend")
FLEET = subject("GitRepository", "web", "fleet")


def finding(
    type_: FindingType,
    severity: Severity,
    on: Subject,
    message: str,
    *,
    root: str | None = None,
    affected: list[Subject] | None = None,
    evidence: dict[str, object] | None = None,
) -> Finding:
    return Finding(
        id=f"{type_}/{on['kind']}/{on['namespace']}/{on['name']}",
        type=type_,
        severity=severity,
        subject=on,
        message=message,
        since=DOWN_SINCE,
        evidence=dict(evidence or {}),
        root_cause=root,
        affected=affected or [],
    )


def incident(*, skew_message: str = HOSTILE) -> Evaluation:
    """Findings in a deliberately wrong order (warning root, symptom, critical root, ...) so the
    page has to do the ordering itself."""
    down = finding(
        FindingType.CONTROLLER_DOWN,
        Severity.CRITICAL,
        TOFU,
        "tofu-controller in flux-system is down: pod is in ImagePullBackOff.\nFix the image.",
        affected=[VPC, DNS, APPS],
        evidence={"reason": "ImagePullBackOff", "groups": [TOFU_GROUP], "message": HOSTILE},
    )
    skew = finding(
        FindingType.REVISION_SKEW,
        Severity.WARNING,
        WEB,
        skew_message,
        evidence={"revision": REV_B, "applied_revision": REV_A},
    )
    symptoms = [
        finding(FindingType.STATUS_STALE, Severity.INFO, VPC, "cached status", root=down.id),
        finding(FindingType.STATUS_STALE, Severity.INFO, DNS, "cached status", root=down.id),
        finding(FindingType.DEPENDENCY_BLOCKED, Severity.WARNING, APPS, "waits for vpc", root=down.id),
        finding(FindingType.STUCK_RECONCILING, Severity.WARNING, APPS, "reconciling", root=down.id),
    ]
    return Evaluation(
        now=NOW,
        findings=[skew, symptoms[0], down, *symptoms[1:]],
        objects=[
            health(VPC, stale=True, controller="tofu-controller"),
            health(DNS, stale=True, controller="tofu-controller"),
            ObjectHealth(APPS, Status.IN_PROGRESS, "DependencyNotReady", False, "kustomize-controller", NOW),
            health(WEB, controller="kustomize-controller"),
            health(FLEET, controller="source-controller"),
        ],
        controllers=[
            ControllerHealth(TOFU, False, "ImagePullBackOff", (TOFU_GROUP,), DOWN_SINCE, "tofu-controller"),
            ControllerHealth(
                subject("Deployment", "flux-system", "kustomize-controller"),
                True,
                "Available",
                ("kustomize.toolkit.fluxcd.io",),
                NOW - timedelta(days=2),
                "kustomize-controller",
            ),
        ],
        revisions=[
            RevisionInfo(WEB, "GitRepository/web/fleet", REV_B, REV_A),
            RevisionInfo(APPS, "GitRepository/flux-system/infra", REV_A, REV_A),
        ],
    )


def health(on: Subject, *, stale: bool = False, controller: str | None = None) -> ObjectHealth:
    return ObjectHealth(on, Status.CURRENT, "Ready", stale, controller, DOWN_SINCE)


def healthy(count: int = 3) -> Evaluation:
    objects = [health(subject("Kustomization", "flux-system", f"ks-{i}")) for i in range(count)]
    return Evaluation(now=NOW, findings=[], objects=objects, controllers=[], revisions=[])
