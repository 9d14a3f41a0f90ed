"""Namespace mode on the real API server, as a tenant: deploy/overlays/tenant's ServiceAccount
with a Role and RoleBinding in team-a and team-b only, its token minted by TokenRequest.

`stalewatch run --namespaces team-a,team-b` with nothing but that token becomes ready, judges
the tenant's own stacks, calls the Flux controllers (in flux-system, which it may not read)
unknown, never up nor down, and names what it cannot see. The API server's audit log shows
what it asked for: only the tenant's namespaces, never a Secret.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.controlplane.harness import CRDS, ControlPlane, binaries_dir, free_port
from tests.deploy.conftest import DEPLOY, HERE, REPO, Running, render
from tests.deploy.test_manifests import assert_accepted_without_warnings
from tests.kube.objects import ago, cond, deployment, flux, ready
from tests.wait.stack import REV_A, SOURCE, applied, source

pytestmark = pytest.mark.cluster

TENANT = DEPLOY / "overlays" / "tenant"
MINE, OTHER = ("team-a", "team-b"), "team-c"
ACCOUNT = "system:serviceaccount:team-a:stalewatch"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "users": [ACCOUNT]}, {"level": "None"}],
}
RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding")


def stalled(namespace: str, name: str) -> dict[str, Any]:
    status = {
        "conditions": [
            cond("Ready", "False", "BuildFailed", "kustomize build failed", since=ago(minutes=30)),
            cond("Stalled", "True", "BuildFailed", "kustomize build failed", since=ago(minutes=30)),
        ]
    }
    return flux("Kustomization", namespace, name, spec={"path": "./", "prune": True}, status=status)


def healthy(namespace: str, name: str) -> dict[str, Any]:
    return flux("Kustomization", namespace, name, spec={"path": "./", "prune": True}, status=ready())


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of its own that audits every request of the tenant's account."""
    workdir = tmp_path_factory.mktemp("audit")
    policy = workdir / "policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    audit = [f"--audit-policy-file={policy}", f"--audit-log-path={workdir / 'audit.log'}"]
    plane = ControlPlane(bin_dir=binaries_dir(), apiserver_args=audit)
    plane.start()
    try:
        plane.install_crds(CRDS, HERE / "crds.yaml")
        yield plane
    finally:
        plane.stop()


def audited(plane: ControlPlane) -> list[dict[str, Any]]:
    log = next(a for a in plane.apiserver_args if a.startswith("--audit-log-path=")).split("=", 1)[1]
    return [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]


def apply(plane: ControlPlane, *objects: dict[str, Any]) -> None:
    """As an admin, with each object's status written through /status as its controller would."""
    for obj in objects:
        status = obj.pop("status", None)
        plane.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(obj))
        if status is not None:
            meta = obj["metadata"]
            plane.kubectl(
                *("patch", obj["kind"].lower(), meta["name"], "-n", meta["namespace"]),
                *("--subresource=status", "--type=merge", "-p", json.dumps({"status": status})),
            )


@pytest.fixture(scope="module")
def tenant(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tenant overlay's RBAC applied, the stacks created; a kubeconfig with only its token."""
    for namespace in (*MINE, OTHER, "flux-system"):
        plane.kubectl("create", "namespace", namespace)
    rbac = [o for o in render(plane, TENANT) if o["kind"] in RBAC_KINDS]
    plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(rbac))
    apply(
        plane,
        stalled("team-a", "failing"),
        healthy("team-b", "fine"),
        stalled(OTHER, "not-mine"),
        deployment("flux-system", "kustomize-controller", available=0),  # down, but not the tenant's to see
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "team-a"}},
        flux(
            "Kustomization",
            "team-b",
            "spans",
            spec={"path": "./", "prune": True},
            status={**ready(), "inventory": {"entries": [{"id": "team-c_web_apps_Deployment", "v": "v1"}]}},
        ),
        source("team-b", REV_A),
        flux(
            "Kustomization",
            "team-b",
            "shipped",
            spec={"sourceRef": SOURCE, "path": "./"},
            status=applied(REV_A),
        ),
    )
    token = plane.service_account_token("team-a", "stalewatch")
    return plane.write_kubeconfig(tmp_path_factory.mktemp("tenant") / "kubeconfig", user={"token": token})


@pytest.fixture(scope="module")
def running(tenant: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    port = free_port()
    log = tmp_path_factory.mktemp("run") / "stalewatch.log"
    command = [sys.executable, "-m", "watcher", "run", f"--kubeconfig={tenant}", "--namespaces=team-a,team-b"]
    command += [f"--listen=127.0.0.1:{port}", "--log-format=text"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=out, stderr=subprocess.STDOUT
        )
    running = Running(process=process, url=f"http://127.0.0.1:{port}", log=log)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def ready_body(running: Running) -> str:
    status, body = running.wait_for("/readyz")
    assert status == 200, f"/readyz answered {status}: {body}\n{running.logs()}"
    return body


def test_as_the_tenant_it_gets_ready_and_says_its_scope_and_what_it_cannot_see(
    ready_body: str, running: Running
) -> None:
    assert "watching namespaces team-a, team-b (namespace-scoped)" in ready_body
    assert "cannot see: every other namespace (controllers there, such as Flux's: liveness unknown)" in (
        ready_body
    )
    assert "403 Forbidden, not judged: CustomResourceDefinition.apiextensions.k8s.io" in ready_body
    assert "watching namespaces team-a, team-b (namespace-scoped)" in running.logs()
    page = running.get("/")[1]
    assert "Watching namespaces team-a, team-b (namespace-scoped)" in page
    assert "<strong>unknown</strong>, never taken as up" in page


def test_its_403_on_cluster_scoped_kinds_is_counted_as_its_scope_not_a_fault_to_page_about(
    ready_body: str, running: Running
) -> None:
    """CustomResourceDefinitions are refused to a tenant (no ClusterRole): forbidden and named,
    and marked out of its scope, which StalewatchKindForbidden leaves alone (tests/alerts)."""
    families = {f.name: f for f in text_string_to_metric_families(running.get("/metrics")[1])}
    crd = {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition"}
    forbidden = {
        (s.labels["group"], s.labels["kind"])
        for s in families["stalewatch_kind_forbidden"].samples
        if s.value
    }
    scoped = {(s.labels["group"], s.labels["kind"]) for s in families["stalewatch_kind_out_of_scope"].samples}
    assert (crd["group"], crd["kind"]) in forbidden
    assert (crd["group"], crd["kind"]) in scoped
    assert all(group != "kustomize.toolkit.fluxcd.io" for group, _ in scoped), "namespaced kinds are in scope"


def test_it_judges_the_tenants_stacks_and_nothing_outside_them(ready_body: str, running: Running) -> None:
    findings = json.loads(running.get("/api/v1/findings")[1])["findings"]
    judged = {(f["type"], f["subject"]["namespace"], f["subject"]["name"]) for f in findings}
    assert ("Stalled", "team-a", "failing") in judged
    assert {ns for _, ns, _ in judged} == {"team-a"}, "team-b's is healthy, team-c's not the tenant's"
    assert {t for t, _, _ in judged}.isdisjoint({"ControllerDown", "StatusStale"})


def test_what_a_stack_applies_in_a_namespace_it_does_not_watch_is_not_judged_never_missing(
    ready_body: str, running: Running
) -> None:
    status, page = running.get("/stacks/team-b/spans")
    assert status == 200, page
    assert "not judged: stalewatch does not watch namespace team-c" in page
    assert "but not in the cluster" not in page


def test_the_flux_controllers_it_may_not_read_are_never_up(ready_body: str, running: Running) -> None:
    families = {f.name: f for f in text_string_to_metric_families(running.get("/metrics")[1])}
    assert [s.value for s in families["stalewatch_controller_up"].samples] == []
    assert [(s.labels, s.value) for s in families["stalewatch_scope_info"].samples] == [
        ({"mode": "namespaces"}, 1.0)
    ]
    assert families["stalewatch_scope_namespaces"].samples[0].value == 2.0
    stacks = running.get("/")[1]
    assert 'kustomize-controller <span class="down">unknown</span>' in stacks


def test_it_asked_only_for_its_namespaces_and_never_for_a_secret(
    plane: ControlPlane, ready_body: str
) -> None:
    events = [e for e in audited(plane) if e["user"]["username"] == ACCOUNT and "objectRef" in e]
    assert events, "the audit log recorded none of stalewatch's requests"
    assert [e["requestURI"] for e in events if e["objectRef"].get("resource") == "secrets"] == []
    namespaced = {e["objectRef"].get("namespace") for e in events} - {None}
    assert namespaced == set(MINE)
    refused = {e["objectRef"]["resource"] for e in events if e["responseStatus"]["code"] == 403}
    assert refused <= {"customresourcedefinitions", "namespaces", "persistentvolumes", "apiservices"}


@pytest.mark.parametrize(
    "what",
    [
        pytest.param(("get", "secrets", "-n", "team-a"), id="secrets-in-its-own-namespace"),
        pytest.param(("get", "kustomizations", "-n", OTHER), id="another-tenants-namespace"),
        pytest.param(("get", "pods", "-n", "flux-system"), id="the-flux-controllers"),
        pytest.param(("get", "kustomizations", "--all-namespaces"), id="cluster-wide"),
    ],
)
def test_the_api_server_refuses_the_tenants_token_outside_its_scope(
    plane: ControlPlane, tenant: Path, what: tuple[str, ...]
) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        plane.kubectl(*what, kubeconfig=tenant)
    assert "Forbidden" in refused.value.stderr


def test_the_tenant_overlays_roles_are_generated_from_the_cluster_role_and_up_to_date() -> None:
    """deploy/overlays/tenant/rbac.yaml: the base ClusterRole's namespaced rules
    (watcher/kube/rbac.py), a Role and RoleBinding in each of config.yaml's namespaces."""
    result = subprocess.run(
        [sys.executable, str(TENANT / "generate.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"run `python deploy/overlays/tenant/generate.py`:\n{result.stderr}"


def test_the_whole_tenant_overlay_is_accepted_and_creates_nothing_cluster_wide(
    plane: ControlPlane, tenant: Path
) -> None:
    rendered = render(plane, TENANT)
    assert_accepted_without_warnings(plane, rendered)
    assert {o["metadata"].get("namespace") for o in rendered} == set(MINE)
    config = next(o for o in rendered if o["kind"] == "ConfigMap")["data"]["config.yaml"]
    assert yaml.safe_load(config)["namespaces"] == list(MINE)


def test_the_tenant_can_wait_for_its_own_stack_in_namespace_mode(tenant: Path) -> None:
    command = [sys.executable, "-m", "watcher", "wait", "ks/team-b/shipped", f"--revision={REV_A}"]
    command += [f"--kubeconfig={tenant}", "--namespaces=team-a,team-b", "--timeout=60s", "-o", "json"]
    done = subprocess.run(
        command, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout)["message"]
    assert said.endswith("; no controller seen (namespace mode): judged from the objects' own status"), said
