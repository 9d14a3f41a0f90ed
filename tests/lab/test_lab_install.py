"""stalewatch installed the way a platform team installs an add-on: the real source-controller
fetches this repository (the files as they are in the worktree, pushed to the lab's Git server at
the tag deploy/flux/git pins), the real kustomize-controller applies deploy/ from it and waits for
every object to be ready, and stalewatch, started as the Deployment starts it with nothing but its
ServiceAccount's token, becomes ready and sees the controllers that installed it.

The lab has no scheduler: the test binds the Deployment's Pod to the lab's node, as kube-scheduler
would, and kwok (the node's kubelet) then reports it Running and Ready, so `wait: true` waits for
a real rollout (Deployment Available) and not for nothing."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.controlplane.harness import free_port
from tests.lab.lab import Lab, condition, wait_for
from tests.lab.manifests import CONTROLLERS, NAMESPACE, NODE
from tests.lab.test_lab import GITREPOSITORIES, KUSTOMIZATIONS, ready

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "deploy" / "flux" / "git"
PROMETHEUS_OPERATOR_GROUP = "monitoring.coreos.com"
INSTALLED_KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Deployment",
    "Service",
    "ConfigMap",
}


def worktree_files() -> dict[str, str | bytes | None]:
    """Every file Git would commit from the worktree as it is now (tracked or new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return {rel: (REPO / rel).read_bytes() for rel in listed if rel and (REPO / rel).is_file()}


def example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLE / name).read_text())
    return document


def install_prometheus_operator_crds(lab: Lab) -> None:
    """deploy/ holds a ServiceMonitor and a PrometheusRule, and its ClusterRole reads PodMonitors
    too: their kinds must be served. The deploy tests' permissive CRDs of that group (only those:
    the file's Flux ones would replace the real ones the lab runs)."""
    crds = yaml.safe_load_all((REPO / "tests" / "deploy" / "crds.yaml").read_text())
    chosen = [crd for crd in crds if crd and crd["spec"]["group"] == PROMETHEUS_OPERATOR_GROUP]
    assert {crd["spec"]["names"]["kind"] for crd in chosen} == {
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
    }
    path = lab.workdir / "prometheus-operator-crds.yaml"
    path.write_text(yaml.safe_dump_all(chosen))
    lab.plane.install_crds(path)


def bind_pending_pods(lab: Lab, namespace: str) -> None:
    """kube-scheduler's part: binds every unscheduled Pod of `namespace` to the lab's node."""
    pods = json.loads(lab.kubectl("get", "pods", f"--namespace={namespace}", "--output=json"))["items"]
    for pod in pods:
        if not pod["spec"].get("nodeName"):
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod["metadata"]["name"], "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
            }
            lab.kubectl("create", "-f", "-", stdin=json.dumps(binding))


def inventory(kustomization: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """(namespace, name, group, kind) of every object kustomize-controller applied and tracks."""
    entries = kustomization["status"]["inventory"]["entries"]
    return {tuple(entry["id"].split("_")) for entry in entries}


def identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    group = obj["apiVersion"].rpartition("/")[0]
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"], group, obj["kind"]


def token_status(lab: Lab, token: str, path: str) -> int:
    """The API server's answer to a GET of `path` with nothing but `token`."""
    assert lab.plane.pki is not None
    context = ssl.create_default_context(cafile=str(lab.plane.pki.ca_cert))
    request = urllib.request.Request(f"{lab.plane.url}{path}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def samples(stalewatch: str, family: str) -> list[Sample]:
    """One metric family of stalewatch's /metrics, as Prometheus scrapes it."""
    with urllib.request.urlopen(f"{stalewatch}/metrics", timeout=5) as response:
        exposition = response.read().decode()
    return [s for f in text_string_to_metric_families(exposition) if f.name == family for s in f.samples]


def controllers_up(stalewatch: str) -> dict[str, float]:
    """stalewatch_controller_up of the lab's Flux controllers."""
    return {
        s.labels["name"]: s.value
        for s in samples(stalewatch, "stalewatch_controller_up")
        if s.labels["namespace"] == NAMESPACE and s.labels["name"] in CONTROLLERS
    }


def test_flux_installs_stalewatch_from_git_and_it_runs_ready_as_its_own_service_account(lab: Lab) -> None:
    install_prometheus_operator_crds(lab)
    source, kustomization = example("gitrepository.yaml"), example("stalewatch.yaml")
    sha = lab.push(worktree_files(), "stalewatch as in the worktree", tag=source["spec"]["ref"]["tag"])
    source["spec"]["url"] = lab.git_url  # the only change to the example
    lab.apply(source, kustomization)
    name, target = kustomization["metadata"]["name"], "stalewatch"

    repo = wait_for("GitRepository Ready", lambda: ready(lab.get(GITREPOSITORIES, name)), timeout=120)
    assert repo["status"]["artifact"]["revision"] == f"{source['spec']['ref']['tag']}@sha1:{sha}"

    def applied_and_ready() -> dict[str, Any] | None:
        bind_pending_pods(lab, target)
        return ready(lab.get(KUSTOMIZATIONS, name))

    ks = wait_for(
        "Kustomization Ready (wait: every object ready)", applied_and_ready, timeout=360, interval=1
    )
    assert (condition(ks, "Ready") or {}).get("reason") == "ReconciliationSucceeded"
    assert (condition(ks, "Healthy") or {}).get("status") == "True"

    # What Flux applied is what `kubectl apply -k deploy/` applies: every object, none more.
    rendered = [doc for doc in yaml.safe_load_all(lab.kubectl("kustomize", str(REPO / "deploy"))) if doc]
    assert inventory(ks) == {identity(obj) for obj in rendered}
    installed = [obj for obj in rendered if obj["kind"] in INSTALLED_KINDS]
    assert {obj["kind"] for obj in installed} == INSTALLED_KINDS
    for obj in installed:  # in the cluster: kubectl get fails on a missing one
        lab.get(obj["kind"].lower(), obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    deployment = lab.get("deployment", "stalewatch", namespace=target)
    assert (condition(deployment, "Available") or {}).get("status") == "True"
    assert deployment["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == name

    # stalewatch started as its Deployment starts it (args, the ConfigMap Flux applied), with
    # only the token the kubelet would mint for its ServiceAccount.
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [mount] = container["volumeMounts"]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    config = lab.get("configmap", volume["configMap"]["name"], namespace=target)
    etc = lab.workdir / "stalewatch-etc"
    etc.mkdir()
    for file, content in config["data"].items():
        (etc / file).write_text(content)
    args = [arg.replace(mount["mountPath"], str(etc)) for arg in container["args"]]
    token = lab.plane.service_account_token(target, pod["serviceAccountName"])
    kubeconfig = lab.plane.write_kubeconfig(lab.workdir / "stalewatch.kubeconfig", user={"token": token})
    listen = f"127.0.0.1:{free_port()}"
    lab.start_stalewatch(listen, kubeconfig=kubeconfig, args=args)  # returns once /readyz is 200

    stalewatch = f"http://{listen}"
    wait_for(
        "stalewatch sees every lab controller up",
        lambda: controllers_up(stalewatch) == dict.fromkeys(CONTROLLERS, 1.0),
    )
    # Its own Kustomization's inventory lists deploy/'s ServiceMonitor and PrometheusRule, custom
    # kinds stalewatch watches while an inventory lists them: the ClusterRole grants reading them,
    # so none is forbidden (StalewatchKindForbidden would page on every install otherwise).
    operator_kinds = {
        (group, kind) for _, _, group, kind in inventory(ks) if group == PROMETHEUS_OPERATOR_GROUP
    }
    assert operator_kinds == {
        (PROMETHEUS_OPERATOR_GROUP, "ServiceMonitor"),
        (PROMETHEUS_OPERATOR_GROUP, "PrometheusRule"),
    }
    forbidden = samples(stalewatch, "stalewatch_kind_forbidden")
    assert {(s.labels["group"], s.labels["kind"]) for s in forbidden if s.value} == set()
    wait_for(
        "stalewatch watching the install's Prometheus Operator kinds",
        lambda: (
            operator_kinds
            <= {
                (s.labels["group"], s.labels["kind"])
                for s in samples(stalewatch, "stalewatch_kind_synced")
                if s.value
            }
            or None
        ),
    )
    kustomizations = f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{NAMESPACE}/kustomizations"
    assert token_status(lab, token, kustomizations) == 200
    assert token_status(lab, token, "/api/v1/secrets") == 403
    assert token_status(lab, token, f"/api/v1/namespaces/{target}/secrets") == 403
