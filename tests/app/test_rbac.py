"""A ServiceAccount that may list and watch only some kinds: stalewatch degrades per kind.

Real RBAC on the real API server: the account may not see Deployments (so it cannot tell
whether helm-controller is up) nor Terraforms. stalewatch must say so (log line, metric,
findings summary), stay ready, evaluate what it can see, and never report a controller it
cannot see as down.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.harness import ControlPlane
from tests.kube.objects import (
    ALWAYS_READ,
    ago,
    cond,
    deployment,
    deployment_status,
    flux,
    pod,
    read_access,
    ready,
    waiting,
)
from tests.kube.support import metric, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

ALLOWED: dict[str, list[str]] = {
    group: [r for r in resources if r != "deployments"]
    for group, resources in ALWAYS_READ.items()
    if group != "infra.contrib.fluxcd.io"
}
"""Everything stalewatch watches except apps/deployments and infra.contrib.fluxcd.io/terraforms.
Without CRD access, the custom kinds are found through API discovery instead."""


@pytest.fixture(params=[True, False], ids=["with-crds", "without-crds"])
async def limited_kubeconfig(
    request: pytest.FixtureRequest, control_plane: ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> AsyncIterator[Path]:
    """A ServiceAccount's kubeconfig with ALLOWED, and (param) with or without CRD access."""
    allowed = {g: r for g, r in ALLOWED.items() if request.param or g != "apiextensions.k8s.io"}
    name = f"stalewatch-{uuid.uuid4().hex[:8]}"
    access = read_access(namespace, name, allowed)
    for obj in access:
        await kube.create(obj)
    token = control_plane.service_account_token(namespace, name)
    yield control_plane.write_kubeconfig(tmp_path / "limited", user={"token": token})
    for obj in reversed(access[1:]):  # the binding, then the role; the account goes with its namespace
        await kube.delete(obj)


def cluster(ns: str) -> list[dict[str, Any]]:
    """helm-controller is down (but only its Deployment would tell us it is the controller), a
    HelmRelease it reconciles still says Ready, and a Kustomization is stuck reconciling."""
    return [
        deployment(ns, "helm-controller") | {"status": deployment_status(0)},
        pod(ns, "helm-controller", status=waiting("ImagePullBackOff", "Back-off pulling image")),
        flux("HelmRelease", ns, "podinfo", status=ready("Helm install succeeded")),
        flux("Terraform", ns, "vpc", status=ready()),
        flux(
            "Kustomization",
            ns,
            "apps",
            status={
                "conditions": [
                    cond("Ready", "True", "ReconciliationSucceeded", "Applied", since=ago(hours=2)),
                    cond(
                        "Reconciling", "True", "Progressing", "Reconciliation in progress", since=ago(hours=1)
                    ),
                ]
            },
        ),
    ]


async def test_kinds_the_account_cannot_list_are_reported_and_the_rest_is_evaluated(
    kube: Kube, namespace: str, limited_kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for obj in cluster(namespace):
        await kube.create(obj)
    settings = settings_for(
        limited_kubeconfig,
        include_namespaces=[namespace],
        thresholds={"stuck_reconciling_min": "1s", "stuck_reconciling_interval_factor": 0.0001},
    )
    with caplog.at_level(logging.WARNING, logger="stalewatch"):
        async with stalewatch_running(settings) as service:
            document = await poll(lambda: _with_findings(service), within=5, what="findings")
            samples = await service.metrics()

    summary = document["summary"]
    crds = {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition"}
    assert [kind for kind in summary["forbidden_kinds"] if kind != crds] == [
        {"group": "apps", "kind": "Deployment"},
        {"group": "infra.contrib.fluxcd.io", "kind": "Terraform"},
    ]
    assert summary["up"] is True
    assert summary["synced"] is True
    assert [(f["type"], f["subject"]["name"]) for f in document["findings"]] == [("StuckReconciling", "apps")]

    forbidden = {
        (group, kind): metric(samples, "stalewatch_kind_forbidden", group=group, kind=kind)
        for group, kind in [("apps", "Deployment"), ("infra.contrib.fluxcd.io", "Terraform"), ("", "Pod")]
    }
    assert forbidden == {
        ("apps", "Deployment"): 1,
        ("infra.contrib.fluxcd.io", "Terraform"): 1,
        ("", "Pod"): 0,
    }
    assert metric(
        samples, "stalewatch_list_requests_total", group="apps", kind="Deployment", result="forbidden"
    )

    denied = sorted(
        r.stalewatch_fields["kind"]  # type: ignore[attr-defined]
        for r in caplog.records
        if "403 Forbidden" in r.getMessage()
    )
    assert [kind for kind in denied if kind != "CustomResourceDefinition"] == ["Deployment", "Terraform"]
    assert len(denied) == len(summary["forbidden_kinds"]), "one clear line per kind it cannot see"


async def _with_findings(service: Any) -> dict[str, Any] | None:
    document: dict[str, Any] = await service.findings()
    return document if document["findings"] else None


REFUSALS = {
    "401-a-token-the-api-server-does-not-accept": (
        "401 Unauthorized: the API server rejects stalewatch's credentials",
        "rejects stalewatch's credentials (401 Unauthorized)",
        "401 Unauthorized",
    ),
    "403-an-account-without-list-rights": (
        "403 Forbidden: stalewatch may not list any kind it watches: ",
        "403 Forbidden",
        "Cannot see (403 Forbidden, not judged)",
    ),
}
"""How each refusal is named: (/readyz reason prefix, log line, on the page)."""


@pytest.fixture(params=list(REFUSALS), ids=list(REFUSALS))
async def refused(
    request: pytest.FixtureRequest, control_plane: ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> tuple[Path, tuple[str, str, str]]:
    """A kubeconfig the API server refuses: a token it never issued (401), or a ServiceAccount
    bound to nothing (every list 403)."""
    if request.param.startswith("401"):
        user = {"token": "not-a-token-it-issued"}
    else:
        name = f"nobody-{uuid.uuid4().hex[:8]}"
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        }
        await kube.create(account)
        user = {"token": control_plane.service_account_token(namespace, name)}
    return control_plane.write_kubeconfig(tmp_path / "refused", user=user), REFUSALS[request.param]


async def test_credentials_the_api_server_refuses_are_named_on_readyz_the_page_and_the_log(
    refused: tuple[Path, tuple[str, str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    kubeconfig, (reason, logged, on_page) = refused
    with caplog.at_level(logging.INFO, logger="stalewatch"):
        async with stalewatch_running(settings_for(kubeconfig), wait_ready=False) as service:

            async def named() -> str:
                status, body = await service.get("/readyz")
                return body if status == 503 and body.startswith(reason) else ""

            await poll(named, within=20, what=f"/readyz names {reason!r}")
            page = (await service.get("/"))[1]
    assert on_page in page
    lines = [r for r in caplog.records if logged in r.getMessage()]
    assert lines, f"no log line says {logged!r}"
    if "401" in logged:
        assert [r.levelname for r in lines] == ["ERROR"], "said once, not per request"
