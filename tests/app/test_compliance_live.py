"""Policy compliance live: `stalewatch run` against the real API server finds the policy kinds by
their CRDs, reads a Gatekeeper constraint's audit and a PolicyReport, and serves the violations per
stack on /metrics and the page; an account that may not list policy reports is blind to them.

The CRDs are tests/cli/crds/policies.yaml (the upstream shapes' field names); the constraint's
status is written through its status subresource, as Gatekeeper's audit writes it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.test_rbac import ALLOWED
from tests.controlplane.harness import ControlPlane
from tests.kube.objects import deployment, deployment_status, flux, policy_report, read_access, ready
from tests.kube.support import metric, poll, settings_for
from tests.kube.support import running as stalewatch_running
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster

POLICY_CRDS = Path(__file__).parents[1] / "cli" / "crds" / "policies.yaml"
KS = "kustomize.toolkit.fluxcd.io"


@pytest.fixture
def policy_crds(control_plane: ControlPlane) -> Any:
    control_plane.install_crds(POLICY_CRDS)
    yield
    control_plane.kubectl("delete", "--ignore-not-found", f"--filename={POLICY_CRDS}")


async def create_violations(kube: Kube, ns: str) -> str:
    """Kustomization team-a installs Deployment web; a constraint's audit lists web among its 3
    violations; Kyverno's report for web fails one rule. Returns the constraint's name."""
    await kube.create(flux("Kustomization", ns, "team-a", status=ready()))
    web = deployment(ns, "web") | {"status": deployment_status(1)}
    web["metadata"]["labels"] = {f"{KS}/name": "team-a", f"{KS}/namespace": ns}
    await kube.create(web)
    name = f"deny-{ns}"
    constraint = {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": "K8sDenyServiceType",
        "metadata": {"name": name},
        "spec": {"enforcementAction": "dryrun"},
    }
    await kube.create(constraint)
    listed = {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": ns, "name": "web"}
    await kube.patch_status(
        constraint,
        {
            "auditTimestamp": "2026-11-30T11:59:12Z",
            "totalViolations": 3,
            "violations": [listed | {"message": "not allowed", "enforcementAction": "dryrun"}],
        },
    )
    await kube.create(policy_report(ns, "web", policy="require-run-as-non-root", rule="r"))
    return name


def gauge(samples: Any, policy: str, stack: tuple[str, str, str], **labels: str) -> float | None:
    kind, namespace, name = stack
    return metric(
        samples,
        "stalewatch_policy_violations",
        policy=policy,
        result="fail",
        stack_kind=kind,
        stack_namespace=namespace,
        stack_name=name,
        **labels,
    )


async def test_violations_per_stack_are_served_on_metrics_and_the_page(
    kube: Kube, namespace: str, control_plane: ControlPlane, policy_crds: Any
) -> None:
    constraint = await create_violations(kube, namespace)
    gk = {"engine": "gatekeeper", "policy_kind": "K8sDenyServiceType", "enforcement_action": "dryrun"}
    kyverno = {"engine": "kyverno", "policy_kind": "ClusterPolicy", "enforcement_action": "unknown"}
    stack = ("Kustomization", namespace, "team-a")
    async with stalewatch_running(
        settings_for(control_plane.kubeconfig, include_namespaces=[namespace])
    ) as service:

        async def counted() -> Any:
            samples = await service.metrics()
            both = gauge(samples, constraint, ("unattributed", "", ""), **gk) and gauge(
                samples, "require-run-as-non-root", stack, **kyverno
            )
            return samples if both else None

        samples = await poll(counted, within=20, what="the constraint's and the report's violations")
        status, page = await service.get(f"/?open={namespace}/team-a")
    try:
        assert gauge(samples, constraint, stack, **gk) == 1
        assert gauge(samples, constraint, ("unattributed", "", ""), **gk) == 2, "3 counted, 1 listed"
        assert gauge(samples, "require-run-as-non-root", stack, **kyverno) == 1
        assert status == 200
        assert f'<span class="violations">2</span>: {constraint}, require-run-as-non-root' in page
    finally:
        await kube.delete(
            {
                "apiVersion": "constraints.gatekeeper.sh/v1beta1",
                "kind": "K8sDenyServiceType",
                "metadata": {"name": constraint},
            }
        )


@pytest.fixture(params=[True, False], ids=["with-crds", "without-crds"])
async def without_reports(
    request: pytest.FixtureRequest, control_plane: ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> AsyncIterator[Path]:
    """A ServiceAccount that may list what stalewatch watches, constraints included, but no
    policy reports; (param) with or without CRD access: without, the policy kinds are found
    through API discovery."""
    name = f"stalewatch-{uuid.uuid4().hex[:8]}"
    allowed = {**ALLOWED, "apps": [*ALLOWED["apps"], "deployments"], "constraints.gatekeeper.sh": ["*"]}
    if not request.param:
        del allowed["apiextensions.k8s.io"]
    access = read_access(namespace, name, allowed)
    for obj in access:
        await kube.create(obj)
    token = control_plane.service_account_token(namespace, name)
    yield control_plane.write_kubeconfig(tmp_path / "limited", user={"token": token})
    for obj in reversed(access[1:]):  # the binding, then the role; the account goes with its namespace
        await kube.delete(obj)


async def test_policy_reports_the_account_may_not_list_are_blind_not_compliant(
    kube: Kube, namespace: str, without_reports: Path, policy_crds: Any
) -> None:
    constraint = await create_violations(kube, namespace)
    settings = settings_for(without_reports, include_namespaces=[namespace])
    try:
        async with stalewatch_running(settings) as service:

            async def constraints_read() -> Any:
                samples = await service.metrics()
                return samples if any(k[0] == "stalewatch_policy_violations" for k in samples) else None

            samples = await poll(constraints_read, within=20, what="the constraint's violations")
            status, page = await service.get("/")
        assert metric(samples, "stalewatch_kind_forbidden", group="wgpolicyk8s.io", kind="PolicyReport") == 1
        gk = {"engine": "gatekeeper", "policy_kind": "K8sDenyServiceType", "enforcement_action": "dryrun"}
        assert gauge(samples, constraint, ("Kustomization", namespace, "team-a"), **gk) == 1, (
            "the rest is read"
        )
        assert not [
            k for k in samples if k[0] == "stalewatch_policy_violations" and ("engine", "kyverno") in k[1]
        ]
        assert status == 200
        assert (
            "Policy violations not judged: stalewatch cannot list ClusterPolicyReport, PolicyReport" in page
        )
    finally:
        await kube.delete(
            {
                "apiVersion": "constraints.gatekeeper.sh/v1beta1",
                "kind": "K8sDenyServiceType",
                "metadata": {"name": constraint},
            }
        )
