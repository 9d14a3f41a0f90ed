"""ReconcileFailed: a GitOps object that says Ready=False (or Unknown, with nothing reconciling)
for longer than its retries take, while its controller runs.

Reasons and messages are the ones the controllers write: source-controller's GitOperationFailed
("failed to checkout and determine revision: unable to clone ..."), kustomize-controller's
ArtifactFailed ("Source artifact not found, retrying in 30s") and BuildFailed, helm-controller's
HelmChartNotReady ("HelmChart 'ns/name' is not ready"), image-automation-controller's
GitOperationFailed ("failed to checkout source: ..."), tofu-controller's TFExecApplyFailed; a
failing reconcile also keeps Reconciling=True with reason ProgressingWithRetry (fluxcd/pkg).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    SEC,
    Obj,
    by_id,
    cond,
    deployment,
    flux,
    git_repository,
    helm_release,
    kustomization,
    run,
    terraform,
    ts,
    waiting_on,
)
from watcher.model.types import FindingType, ModelConfig, Severity, Thresholds

HOUR = 60 * MIN
KS = "Kustomization/flux-system"
GIT = "GitRepository/flux-system"
CLONE_FAILED = (
    "failed to checkout and determine revision: unable to clone 'ssh://git@github.com/acme/fleet': "
    "ssh: handshake failed: knownhosts: key mismatch"
)
NO_ARTIFACT = "Source artifact not found, retrying in 30s"


def retrying(ago: timedelta) -> Obj:
    return cond("Reconciling", "True", "ProgressingWithRetry", "Reconciliation in progress", ago=ago)


def clone_failing(
    name: str = "fleet",
    *,
    ago: timedelta = HOUR,
    interval: str = "1m",
    attempt: timedelta | None = None,
    ready: str = "False",
) -> Obj:
    """A GitRepository whose clone has failed since it was created (a wrong URL or deploy key):
    it has no artifact, so every Kustomization built from it says ArtifactFailed.

    As the lab's source-controller writes it: FetchFailed keeps the first failure's time, while
    Ready and Reconciling carry the last `attempt`'s (Ready=Unknown while one runs)."""
    repo = git_repository(name)
    repo["spec"]["interval"] = interval
    del repo["status"]["artifact"]
    last = ago if attempt is None else attempt
    ready_reason, ready_message = (
        ("GitOperationFailed", CLONE_FAILED) if ready == "False" else ("Progressing", "")
    )
    repo["status"]["conditions"] = [
        cond("Ready", ready, ready_reason, ready_message, ago=last),
        cond("FetchFailed", "True", "GitOperationFailed", CLONE_FAILED, ago=ago),
        retrying(last),
    ]
    return repo


def failing(
    name: str = "apps",
    *,
    ago: timedelta,
    reason: str = "ArtifactFailed",
    message: str = NO_ARTIFACT,
    status: str = "False",
    source: str = "fleet",
    **kwargs: object,
) -> Obj:
    retry_interval = kwargs.pop("retry_interval", None)
    obj = kustomization(
        name,
        source=source,
        conditions=[cond("Ready", status, reason, message, ago=ago)],
        **kwargs,  # type: ignore[arg-type]
    )
    if retry_interval is not None:
        obj["spec"]["retryInterval"] = retry_interval
    return obj


def image_automation(*, ago: timedelta) -> Obj:
    message = "failed to checkout source: unable to clone 'ssh://git@github.com/acme/fleet': EOF"
    return {
        "apiVersion": "image.toolkit.fluxcd.io/v1beta2",
        "kind": "ImageUpdateAutomation",
        "metadata": {"name": "fleet", "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "5m", "sourceRef": {"kind": "GitRepository", "name": "fleet"}},
        "status": {
            "observedGeneration": 1,
            "conditions": [cond("Ready", "False", "GitOperationFailed", message, ago=ago)],
        },
    }


APPLY_FAILED = [
    cond(
        "Ready",
        "False",
        "TFExecApplyFailed",
        "error running Apply: rpc error: code = Internal desc = exit status 1",
    )
]

CASES = [
    pytest.param(
        [clone_failing()],
        {f"ReconcileFailed/{GIT}/fleet"},
        id="git-repository-clone-failing-for-1h-and-retrying-is-reconcile-failed-not-stuck",
    ),
    pytest.param([clone_failing(ago=30 * SEC)], set(), id="30s-of-ready-false-is-a-retry-not-a-finding"),
    pytest.param(
        [clone_failing(ago=12 * MIN, attempt=20 * SEC)],
        {f"ReconcileFailed/{GIT}/fleet"},
        id="ready-rewritten-by-every-retry-is-dated-from-fetch-failed",
    ),
    pytest.param(
        [clone_failing(ago=12 * MIN, attempt=SEC, ready="Unknown")],
        {f"ReconcileFailed/{GIT}/fleet"},
        id="ready-unknown-during-a-retry-with-fetch-failed-standing-is-still-failing",
    ),
    pytest.param(
        [clone_failing(ago=5 * MIN, attempt=SEC, ready="Unknown")],
        set(),
        id="a-failure-younger-than-its-threshold-is-a-retry-not-a-finding",
    ),
    pytest.param(
        [git_repository("fleet"), failing(ago=HOUR, reason="BuildFailed", message="kustomize build failed")],
        {f"ReconcileFailed/{KS}/apps"},
        id="kustomization-build-failing-on-a-healthy-source",
    ),
    pytest.param(
        [git_repository("fleet"), failing(ago=HOUR, status="Unknown", reason="Progressing", message="")],
        {f"ReconcileFailed/{KS}/apps"},
        id="ready-unknown-with-nothing-reconciling",
    ),
    pytest.param(
        [
            git_repository("fleet"),
            kustomization(
                "apps",
                source="fleet",
                conditions=[
                    cond("Ready", "Unknown", "Progressing", "Reconciliation in progress", ago=15 * MIN),
                    cond("Reconciling", "True", "Progressing", "Building manifests", ago=15 * MIN),
                ],
            ),
        ],
        set(),
        id="ready-unknown-while-reconciling-is-a-reconcile-in-progress",
    ),
    pytest.param(
        [kustomization("infra"), waiting_on("apps", "infra", ago=HOUR)],
        {f"DependencyBlocked/{KS}/apps"},
        id="dependency-not-ready-is-dependency-blocked",
    ),
    pytest.param(
        [
            git_repository("fleet"),
            failing(
                ago=HOUR, reason="HealthCheckFailed", message="timeout waiting for: [Deployment/apps/web]"
            ),
        ],
        {f"ReconcileFailed/{KS}/apps"},
        id="health-check-failed-with-no-inventory-to-blame",
    ),
    pytest.param(
        [
            git_repository("fleet"),
            failing(
                ago=HOUR,
                reason="HealthCheckFailed",
                message="timeout waiting for: [Deployment/apps/web]",
                inventory=["apps_web_apps_Deployment"],
            ),
        ],
        {f"DependencyBlocked/{KS}/apps"},
        id="health-check-failed-on-its-inventory-is-dependency-blocked",
    ),
    pytest.param(
        [
            kustomization(
                "apps",
                conditions=[
                    cond("Ready", "False", "InvalidPath", "path not found", ago=HOUR),
                    cond("Stalled", "True", "InvalidPath", "path not found", ago=HOUR),
                ],
            )
        ],
        {f"Stalled/{KS}/apps"},
        id="stalled-is-stalled-not-also-failed",
    ),
    pytest.param(
        [git_repository("fleet"), failing(ago=HOUR, suspend=True)], set(), id="suspended-object-is-left-alone"
    ),
    pytest.param(
        [git_repository("fleet"), failing(ago=90 * MIN, interval="1h", reason="BuildFailed", message="x")],
        set(),
        id="2x-a-1h-interval-is-longer-than-10m",
    ),
    pytest.param(
        [git_repository("fleet"), failing(ago=150 * MIN, interval="1h", reason="BuildFailed", message="x")],
        {f"ReconcileFailed/{KS}/apps"},
        id="past-2x-a-1h-interval",
    ),
    pytest.param(
        [clone_failing(ago=HOUR, attempt=MIN, interval="24h")],
        {f"ReconcileFailed/{GIT}/fleet"},
        id="a-source-with-a-24h-interval-retries-on-backoff-so-an-hour-of-failure-is-reported",
    ),
    pytest.param(
        [
            git_repository("fleet"),
            failing(ago=15 * MIN, interval="1h", reason="BuildFailed", message="x", retry_interval="2m"),
        ],
        {f"ReconcileFailed/{KS}/apps"},
        id="retry-interval-not-interval-sets-the-threshold",
    ),
    pytest.param(
        [git_repository("fleet"), image_automation(ago=HOUR)],
        {"ReconcileFailed/ImageUpdateAutomation/flux-system/fleet"},
        id="image-update-automation-failing",
    ),
    pytest.param(
        [git_repository("infra"), terraform("vpc", conditions=APPLY_FAILED)],
        {"ReconcileFailed/Terraform/flux-system/vpc"},
        id="terraform-apply-failing",
    ),
]


@pytest.mark.parametrize(("objs", "expected"), CASES)
def test_reconcile_failed_fires_only_past_its_threshold_and_only_when_no_other_type_says_more(
    objs: list[Obj], expected: set[str]
) -> None:
    assert set(by_id(run(flux(), objs))) == expected


def test_controller_down_makes_the_failure_a_stale_report() -> None:
    down = deployment("kustomize-controller", available=0)

    findings = by_id(run(down, git_repository("fleet"), failing(ago=HOUR)))

    assert set(findings) == {
        "ControllerDown/Deployment/flux-system/kustomize-controller",
        f"StatusStale/{KS}/apps",
    }


def test_message_names_the_controllers_reason_and_the_commands_to_see_it_in_full() -> None:
    findings = by_id(run(flux(), clone_failing()))

    finding = findings[f"ReconcileFailed/{GIT}/fleet"]
    assert finding.is_root
    assert f"StuckReconciling/{GIT}/fleet" not in findings  # Flux retrying is not stuck
    assert finding.severity is Severity.WARNING
    assert finding.since == NOW - HOUR
    assert finding.message == (
        f"GitRepository flux-system/fleet has said Ready=False since {ts(HOUR)} (GitOperationFailed: "
        f"{CLONE_FAILED}). Fix the cause its controller reports; see it in full with "
        "`flux logs --kind=GitRepository --name=fleet --namespace=flux-system` and "
        "`kubectl describe gitrepository fleet -n flux-system`."
    )
    assert finding.evidence["Ready"]["reason"] == "GitOperationFailed"
    assert finding.evidence["Reconciling"]["reason"] == "ProgressingWithRetry"
    assert finding.evidence["threshold"] == "10m"


def test_a_failure_ready_no_longer_dates_is_dated_from_its_standing_failed_condition() -> None:
    findings = by_id(run(flux(), clone_failing(ago=HOUR, attempt=20 * SEC)))

    finding = findings[f"ReconcileFailed/{GIT}/fleet"]
    assert finding.since == NOW - HOUR
    assert finding.message.startswith(
        f"GitRepository flux-system/fleet has said Ready=False since {ts(20 * SEC)} (GitOperationFailed: "
        f"{CLONE_FAILED}), and has failed since {ts(HOUR)} (FetchFailed=True). "
    )
    assert finding.evidence["FetchFailed"]["lastTransitionTime"] == ts(HOUR)


def test_severity_and_threshold_are_configurable() -> None:
    config = ModelConfig(
        thresholds=Thresholds(reconcile_failed=2 * HOUR),
        severities={FindingType.RECONCILE_FAILED: Severity.CRITICAL},
    )
    assert f"ReconcileFailed/{GIT}/fleet" not in by_id(run(flux(), clone_failing(), config=config))

    later = by_id(run(flux(), clone_failing(ago=3 * HOUR), config=config))
    assert later[f"ReconcileFailed/{GIT}/fleet"].severity is Severity.CRITICAL


def test_kustomizations_failing_on_a_failing_git_repository_are_its_symptoms() -> None:
    appliers = [failing(name, ago=50 * MIN) for name in ("apps", "infra", "monitoring", "tenants")]

    evaluation = run(flux(), clone_failing(), appliers)

    [root] = evaluation.roots
    assert root.id == f"ReconcileFailed/{GIT}/fleet"
    assert {s["name"] for s in root.affected} == {"apps", "infra", "monitoring", "tenants"}
    findings = by_id(evaluation)
    for name in ("apps", "infra", "monitoring", "tenants"):
        symptom = findings[f"ReconcileFailed/{KS}/{name}"]
        assert symptom.root_cause == root.id
        assert symptom.message.endswith(
            "Its source GitRepository flux-system/fleet has ReconcileFailed: fix that first."
        )


def test_a_helm_release_folds_under_its_failing_chart_and_that_under_its_repository() -> None:
    repository = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmRepository",
        "metadata": {"name": "podinfo", "namespace": "apps", "generation": 1},
        "spec": {"interval": "5m", "url": "https://stefanprodan.github.io/podinfo"},
        "status": {
            "observedGeneration": 1,
            "conditions": [
                cond(
                    "Ready",
                    "False",
                    "IndexationFailed",
                    "failed to fetch Helm repository index: 404",
                    ago=HOUR,
                )
            ],
        },
    }
    chart = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmChart",
        "metadata": {"name": "apps-web", "namespace": "apps", "generation": 1},
        "spec": {
            "interval": "5m",
            "chart": "podinfo",
            "sourceRef": {"kind": "HelmRepository", "name": "podinfo"},
        },
        "status": {
            "observedGeneration": 1,
            "conditions": [cond("Ready", "False", "ChartPullError", "chart not found in index", ago=HOUR)],
        },
    }
    release = helm_release(
        "web",
        "apps",
        conditions=[
            cond("Ready", "False", "HelmChartNotReady", "HelmChart 'apps/apps-web' is not ready", ago=HOUR)
        ],
    )

    evaluation = run(flux(), repository, chart, release)

    [root] = evaluation.roots
    assert root.id == "ReconcileFailed/HelmRepository/apps/podinfo"
    assert {(s["kind"], s["name"]) for s in root.affected} == {
        ("HelmChart", "apps-web"),
        ("HelmRelease", "web"),
    }


def test_kustomizations_fold_under_the_source_controller_when_it_is_down() -> None:
    """source-controller down: its GitRepository is a stale report and the Kustomizations
    that cannot fetch its artifact are blocked behind it, one root in all."""
    objs = [
        *(o for o in flux() if "source-controller" not in o["metadata"]["name"]),
        deployment("source-controller", available=0),
        git_repository("fleet"),
        failing(
            "apps",
            ago=HOUR,
            reason="ArtifactFailed",
            message="failed to download archive: connection refused",
        ),
    ]

    evaluation = run(objs)

    [root] = evaluation.roots
    assert root.id == "ControllerDown/Deployment/flux-system/source-controller"
    assert {s["name"] for s in root.affected} == {"fleet", "apps"}
    assert by_id(evaluation)[f"ReconcileFailed/{KS}/apps"].message.endswith(
        "Its source GitRepository flux-system/fleet has StatusStale: fix that first."
        " Root cause: ControllerDown of Deployment flux-system/source-controller."
    )


def test_a_failing_applier_on_a_healthy_source_is_its_own_root() -> None:
    evaluation = run(flux(), git_repository("fleet"), failing(ago=HOUR, reason="BuildFailed", message="x"))

    [root] = evaluation.roots
    assert root.id == f"ReconcileFailed/{KS}/apps"


def test_a_retry_in_progress_names_the_standing_failure_in_full() -> None:
    findings = by_id(run(flux(), clone_failing(ago=HOUR, attempt=SEC, ready="Unknown")))

    finding = findings[f"ReconcileFailed/{GIT}/fleet"]
    assert finding.since == NOW - HOUR
    assert finding.message.startswith(
        f"GitRepository flux-system/fleet has said Ready=Unknown since {ts(SEC)} (Progressing), and has "
        f"failed since {ts(HOUR)}: FetchFailed=True (GitOperationFailed: {CLONE_FAILED}): it is retrying. "
    )
