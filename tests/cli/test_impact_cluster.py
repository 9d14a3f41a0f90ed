"""`stalewatch impact --kubeconfig` against the real kube-apiserver + etcd: an example stored there
(as tests/cli/test_kubectl_output.py stores them), impact run as a subprocess, its answer the same
as on the example's snapshot, namespaces aside."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli.test_kubectl_output import EXAMPLES, example_namespaces, moved, store
from tests.controlplane.harness import ControlPlane
from tests.kube.objects import read_access
from watcher.cli import main

pytestmark = pytest.mark.cluster
IMPACT = (sys.executable, "-m", "watcher", "impact")


def on(control_plane: ControlPlane, namespaces: list[str]) -> list[str]:
    """The flags that read the test's cluster, in only these namespaces."""
    return [
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--set",
        f"include_namespaces=[{','.join(namespaces)}]",
    ]


@pytest.fixture
def renames(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    prefix = f"i-{uuid.uuid4().hex[:8]}"
    names = example_namespaces(request.node.callspec.params["example"])
    mapping = {ns: f"{prefix}-{i}" for i, ns in enumerate(sorted(names))}
    for name in mapping.values():
        control_plane.kubectl("create", "namespace", name)
    yield mapping
    for name in mapping.values():
        control_plane.kubectl("delete", "namespace", name, "--wait=false")


def live_impact(
    control_plane: ControlPlane, target: str, namespaces: list[str]
) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [*IMPACT, target, "-o", "json", *on(control_plane, namespaces)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stderr == ""
    return done.returncode, orjson.loads(done.stdout)


@pytest.mark.parametrize(
    ("example", "target", "code"),
    [
        pytest.param(
            "crd-ownership-risk", "crd/imagepolicies.image.toolkit.fluxcd.io", 1, id="crd-ownership-risk-crd"
        ),
        pytest.param(
            "healthy-multi-stack", "ks/flux-system/platform", 1, id="healthy-multi-stack-dependsOn-chain"
        ),
        pytest.param(
            "healthy-multi-stack", "hr/team-platform/platform-base", 0, id="healthy-multi-stack-kept-crds"
        ),
    ],
)
def test_impact_on_the_cluster_is_the_impact_on_its_snapshot(
    control_plane: ControlPlane,
    renames: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    example: str,
    target: str,
    code: int,
) -> None:
    crds = store(control_plane, example, renames)
    try:
        live_code, live = live_impact(control_plane, moved(target, renames), list(renames.values()))
    finally:
        if crds:
            control_plane.kubectl("delete", "crd", *crds)
    assert main(["impact", "-o", "json", target, str(EXAMPLES / example)]) == code
    snapshot = orjson.loads(capsys.readouterr().out)
    assert live_code == code
    assert live == moved(snapshot, renames)


def test_an_unknown_object_in_the_cluster_is_bad_input(control_plane: ControlPlane, tmp_path: Path) -> None:
    done = subprocess.run(
        [*IMPACT, "ks/no-such-namespace/apps", *on(control_plane, ["no-such-namespace"])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "stalewatch impact: Kustomization no-such-namespace/apps not found in the cluster\n"


def test_an_unreachable_api_server_is_said_in_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: x, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
    )
    done = subprocess.run(
        [*IMPACT, "ks/flux-system/apps", "--kubeconfig", str(kubeconfig), "--timeout", "2s"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "stalewatch impact: the Kubernetes API server did not answer within 2s\n"


READ = {
    "apps": ["deployments", "statefulsets", "daemonsets"],
    "apiextensions.k8s.io": ["customresourcedefinitions"],
    "source.toolkit.fluxcd.io": ["gitrepositories", "ocirepositories", "helmrepositories", "buckets"],
    "kustomize.toolkit.fluxcd.io": ["kustomizations"],
    "helm.toolkit.fluxcd.io": ["helmreleases"],
    "infra.contrib.fluxcd.io": ["terraforms"],
}
"""What impact lists, but HelmCharts."""


def test_a_kind_it_needs_but_may_not_list_is_named_and_never_answered_as_safe(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    namespace = f"i-{uuid.uuid4().hex[:8]}"
    account = f"{namespace}-reader"
    repository = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmRepository",
        "metadata": {"name": "charts", "namespace": namespace},
        "spec": {"interval": "1h", "url": "https://charts.example"},
    }
    control_plane.kubectl("create", "namespace", namespace)
    try:
        listed = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [*read_access(namespace, account, READ), repository],
        }
        control_plane.kubectl("apply", "-f", "-", stdin=orjson.dumps(listed).decode())
        token = control_plane.service_account_token(namespace, account)
        kubeconfig = control_plane.write_kubeconfig(tmp_path / "reader", user={"token": token})
        done = subprocess.run(
            [*IMPACT, f"helmrepo/{namespace}/charts", "-o", "json", "--kubeconfig", str(kubeconfig)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")
        control_plane.kubectl("delete", "clusterrole,clusterrolebinding", account)
    found = orjson.loads(done.stdout)
    assert (done.returncode, found["outcome"]) == (4, "unknown")
    assert found["not_looked_at"] == ["HelmChart: 403 Forbidden: may not list it"]
