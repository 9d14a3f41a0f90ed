"""analyze reads what a real `kubectl get -o yaml|json` prints, not just our hand-written files.

The example objects are stored in a real kube-apiserver (in a fresh namespace, status written
through the /status subresource as a controller would), read back with the real kubectl, and
analysed: the findings must be the example's own, namespace aside.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.controlplane.harness import ControlPlane
from watcher.cli import main

pytestmark = pytest.mark.cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = "2026-11-30T12:00:00Z"
KINDS = ",".join(
    (
        "deployments,replicasets,pods,leases,events",
        "gitrepositories,helmrepositories,helmcharts",
        "kustomizations,helmreleases,terraforms",
    )
)
CRDS = Path(__file__).parent / "crds"
EXAMPLE_KINDS = {
    "policy-denied-loadbalancer": (
        (CRDS / "edgegateways.yaml", CRDS / "policies.yaml"),
        "edgegateways,k8sdenyservicetypes,policyreports",
    ),
    "conflicting-writers": ((CRDS / "edgegateways.yaml",), "edgegateways"),
}
"""Examples with custom resources of their own: their CRDs, installed first, and their plurals."""
EXTRA_KINDS = {
    "crd-ownership-risk": "customresourcedefinitions,imagerepositories,imagepolicies",
    "healthy-multi-stack": "customresourcedefinitions,imagerepositories,imagepolicies",
}
"""Kinds an example holds beyond KINDS whose CRDs are in the example itself (a snapshot of them)."""
CRD = "CustomResourceDefinition"


@pytest.fixture
def renames(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A fresh namespace in the real server for each namespace the example uses."""
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    names = example_namespaces(request.node.callspec.params["example"])
    number = {ns: i for i, ns in enumerate(sorted(names))}  # in name order: findings list them the same
    mapping = {ns: f"{prefix}-{number[ns]}" for ns in names}
    for name in mapping.values():
        control_plane.kubectl("create", "namespace", name)
    yield mapping
    for name in mapping.values():
        control_plane.kubectl("delete", "namespace", name, "--wait=false")


def example_namespaces(example: str) -> list[str]:
    names = {
        item["metadata"]["namespace"]
        for file in (EXAMPLES / example).glob("*.yaml")
        for item in yaml.safe_load(file.read_text())["items"]
        if item["metadata"].get("namespace")
    }
    return sorted(names, key=lambda n: (-len(n), n))


def moved(value: Any, renames: dict[str, str]) -> Any:
    """The example moved into the test's namespaces: every mention of each namespace is renamed,
    so names, references, inventory ids and messages stay consistent with each other."""
    text = orjson.dumps(value)
    for old, new in renames.items():
        text = text.replace(old.encode(), new.encode())
    return orjson.loads(text)


def store(control_plane: ControlPlane, example: str, renames: dict[str, str]) -> list[str]:
    """Create each object as a user would, then write its status as its controller would. A new
    object's generation is 1, so the observed generations follow it. The example's CRDs come
    first, usable before any object of their kinds (the API server writes their status itself);
    returns their names."""
    specs, statuses, crds = [], [], []
    for file in sorted((EXAMPLES / example).glob("*.yaml")):
        for item in yaml.safe_load(file.read_text())["items"]:
            obj = moved(item, renames)
            for server_owned in ("uid", "resourceVersion", "creationTimestamp", "generation"):
                obj["metadata"].pop(server_owned, None)
            status = obj.pop("status", None)
            if obj["kind"] == CRD:
                crds.append(obj)
                continue
            if any(crd["spec"]["names"]["kind"] == obj["kind"] for crd in crds):
                # no controller here removes their finalizers: the CRD could not be deleted after
                obj["metadata"].pop("finalizers", None)
            specs.append(obj)
            if status is not None:
                for holder in (status, *status.get("conditions", [])):
                    if "observedGeneration" in holder:
                        holder["observedGeneration"] = 1
                statuses.append({**{k: obj[k] for k in ("apiVersion", "kind", "metadata")}, "status": status})
    names = [crd["metadata"]["name"] for crd in crds]
    if crds:
        listed = orjson.dumps({"apiVersion": "v1", "kind": "List", "items": crds}).decode()
        control_plane.kubectl("apply", "--server-side", "-f", "-", stdin=listed)
        control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", *names)
        control_plane.wait_listable(names)
    for subresource, objects in (([], specs), (["--subresource=status"], statuses)):
        listed = orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}).decode()
        control_plane.kubectl("apply", "--server-side", *subresource, "-f", "-", stdin=listed)
    return names


def findings(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict[str, Any]]:
    main(["analyze", "--now", NOW, "--output", "json", str(path)])
    result: list[dict[str, Any]] = orjson.loads(capsys.readouterr().out)["findings"]
    return result


@pytest.mark.parametrize(
    ("example", "output"),
    [
        pytest.param("tofu-controller-down", "yaml", id="tofu-controller-down-from-kubectl-yaml"),
        pytest.param("reconciling-left-true", "json", id="reconciling-left-true-from-kubectl-json"),
        pytest.param("sibling-revision-skew", "yaml", id="sibling-revision-skew-from-kubectl-yaml"),
        pytest.param(
            "helmrelease-ready-workload-failing",
            "json",
            id="helmrelease-ready-workload-failing-from-kubectl-json",
        ),
        pytest.param(
            "gitrepository-clone-failing", "json", id="gitrepository-clone-failing-from-kubectl-json"
        ),
        pytest.param("policy-denied-loadbalancer", "yaml", id="policy-denied-loadbalancer-from-kubectl-yaml"),
        pytest.param("healthy", "yaml", id="healthy-from-kubectl-yaml"),
        pytest.param("crd-ownership-risk", "yaml", id="crd-ownership-risk-from-kubectl-yaml"),
        pytest.param("healthy-multi-stack", "json", id="healthy-multi-stack-from-kubectl-json"),
        pytest.param("prune-orphan", "json", id="prune-orphan-from-kubectl-json"),
    ],
)
def test_real_kubectl_output_gives_the_examples_findings(
    control_plane: ControlPlane,
    renames: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    example: str,
    output: str,
) -> None:
    kinds = KINDS
    if example in EXAMPLE_KINDS:
        files, plural = EXAMPLE_KINDS[example]
        control_plane.install_crds(*files)
        kinds += f",{plural}"
    crds = store(control_plane, example, renames)
    try:
        kinds = ",".join(filter(None, (kinds, EXTRA_KINDS.get(example))))
        for namespace in renames.values():
            listed = control_plane.kubectl("get", kinds, "-n", namespace, "-o", output)
            (tmp_path / f"{namespace}.{output}").write_text(listed)
        assert findings(capsys, tmp_path) == moved(findings(capsys, EXAMPLES / example), renames)
    finally:
        if crds:  # cluster-scoped: they would outlive the test's namespaces
            control_plane.kubectl("delete", "crd", *crds)
        if example in EXAMPLE_KINDS:  # policy kinds left there would be watched (and forbidden) later
            control_plane.kubectl("delete", "--ignore-not-found", f"--filename={CRDS / 'policies.yaml'}")


SERIES = "conflicting-writers"
SIDECAR_MANAGER, STRUCT_MANAGER = "mesh-controller", "edge-operator"
COMPARED = ("managers", "writers", "fields", "fields_total", "flips")
"""What the series' finding says that does not depend on when it was played: the times (since,
last, per_hour, the span in the message) are the real server's, seconds apart, not the example's."""


@pytest.mark.parametrize("example", [pytest.param(SERIES, id="conflicting-writers-series-played-in-turn")])
def test_a_snapshot_series_played_in_turn_gives_the_examples_fight(
    control_plane: ControlPlane,
    renames: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    example: str,
) -> None:
    """The example's seven versions of one EdgeGateway, played in the real API server in their
    order, each by its writer: the create and every version without the sidecar by edge-operator
    (a PUT of its typed struct), every version with it by mesh-controller (a PUT of what it read,
    the sidecar added). The API server computes managedFields itself; the object is saved after
    each write, as the example's files were, and analyzed as a series. The finding must name the
    same object, managers, writers, fields and number of flips as the example's; its times are
    when the test ran, so `analyze` runs at the moment of the last write plus the example's
    distance from its --now (8m), which keeps every flip within the window as in the example."""
    crds, plural = EXAMPLE_KINDS[example]
    control_plane.install_crds(*crds)
    (namespace,) = renames.values()
    versions = [
        moved(yaml.safe_load(file.read_text())["items"][0], renames)
        for file in sorted((EXAMPLES / example).glob("*.yaml"), key=lambda f: int(f.suffixes[0][1:]))
    ]
    for index, version in enumerate(versions):
        obj = {k: version[k] for k in ("apiVersion", "kind", "spec")}
        obj["metadata"] = {k: version["metadata"][k] for k in ("name", "namespace", "labels")}
        manager = SIDECAR_MANAGER if "sidecar" in obj["spec"] else STRUCT_MANAGER
        verb = "create" if index == 0 else "replace"
        control_plane.kubectl(verb, f"--field-manager={manager}", "-f", "-", stdin=orjson.dumps(obj).decode())
        listed = control_plane.kubectl("get", plural, "-n", namespace, "-o", "yaml", "--show-managed-fields")
        (tmp_path / f"storefront.{index + 1}.yaml").write_text(listed)
    last = max(
        entry["time"]
        for file in tmp_path.glob("*.yaml")
        for entry in yaml.safe_load(file.read_text())["items"][0]["metadata"]["managedFields"]
    )
    now = datetime.fromisoformat(last) + timedelta(minutes=8)
    main(["analyze", "--now", now.isoformat(), "--output", "json", str(tmp_path)])
    played = orjson.loads(capsys.readouterr().out)["findings"]
    expected = moved(findings(capsys, EXAMPLES / example), renames)
    assert [(f["id"], f["type"], f["subject"]) for f in played] == [
        (f["id"], f["type"], f["subject"]) for f in expected
    ]
    assert [{k: f["evidence"][k] for k in COMPARED} for f in played] == [
        {k: f["evidence"][k] for k in COMPARED} for f in expected
    ]
