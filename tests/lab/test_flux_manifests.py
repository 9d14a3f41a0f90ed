"""deploy/flux/: every object the Flux example creates is accepted by the real kube-apiserver
under the CRDs the real Flux controllers ship (the lab's, not tests/crds/' hand-written ones), with
strict field validation, so a misspelt or invented field is refused rather than dropped."""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, one, template
from tests.chart.conftest import NAMESPACE as CHART_NAMESPACE
from tests.controlplane.harness import ControlPlane, running_control_plane
from tests.lab.lab import lab_dir
from tests.lab.manifests import NAMESPACE, namespace

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
FLUX = REPO / "deploy" / "flux"
VARIANTS = [pytest.param(FLUX / "oci", id="oci"), pytest.param(FLUX / "git", id="git")]


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """An API server with the Flux CRDs the lab's controllers were built with, and flux-system."""
    with running_control_plane(lab_dir() / "crds") as plane:
        plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(namespace(NAMESPACE)))
        yield plane


def render(plane: ControlPlane, variant: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(plane.kubectl("kustomize", str(variant))) if doc]


def identity(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {o["kind"]: o for o in objects}
    assert len(found) == len(objects), "one object of each kind"
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_renders_every_manifest_file_in_its_directory(
    plane: ControlPlane, variant: Path
) -> None:
    """`kubectl apply -k` of the directory applies all of it: no file is left out of its list."""
    files = [p for p in sorted(variant.glob("*.yaml")) if p.name != "kustomization.yaml"]
    written = [doc for path in files for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert sorted(render(plane, variant), key=identity) == sorted(written, key=identity)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_object_is_accepted_by_the_api_server_under_the_real_flux_crds(
    plane: ControlPlane, variant: Path
) -> None:
    objects = render(plane, variant)
    done = plane.server_side_apply(objects, "--dry-run=server", "--validate=strict")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(objects), done.stdout
    assert done.stderr == ""


def test_a_field_flux_does_not_know_is_refused_so_the_acceptance_above_means_something(
    plane: ControlPlane,
) -> None:
    release = by_kind(render(plane, FLUX / "oci"))["HelmRelease"]
    release["spec"]["install"]["createNamespaces"] = True
    done = plane.server_side_apply([release], "--dry-run=server", "--validate=strict")
    assert done.returncode != 0
    assert ".spec.install.createNamespaces: field not declared in schema" in done.stderr


def test_the_helm_release_installs_the_chart_the_oci_repository_fetches_into_its_own_namespace(
    plane: ControlPlane,
) -> None:
    objects = by_kind(render(plane, FLUX / "oci"))
    source, release = objects["OCIRepository"], objects["HelmRelease"]
    assert source["metadata"]["namespace"] == release["metadata"]["namespace"] == NAMESPACE
    assert release["spec"]["chartRef"] == {"kind": "OCIRepository", "name": source["metadata"]["name"]}
    assert source["spec"]["url"] == "oci://ghcr.io/stalewatch/charts/stalewatch"
    assert source["spec"]["layerSelector"] == {
        "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
        "operation": "copy",
    }
    assert (release["spec"]["targetNamespace"], release["spec"]["install"]["createNamespace"]) == (
        "stalewatch",
        True,
    )


def test_the_kustomization_applies_this_repositorys_kustomize_install_from_the_git_repository(
    plane: ControlPlane,
) -> None:
    """The lab test (test_lab_install.py) shows the real controllers doing it."""
    objects = by_kind(render(plane, FLUX / "git"))
    source, kustomization = objects["GitRepository"], objects["Kustomization"]
    spec = kustomization["spec"]
    assert spec["sourceRef"] == {"kind": "GitRepository", "name": source["metadata"]["name"]}
    assert source["metadata"]["namespace"] == kustomization["metadata"]["namespace"] == NAMESPACE
    assert (REPO / spec["path"] / "kustomization.yaml").is_file()
    assert (spec["prune"], spec["wait"]) == (True, True)


def readme_spec() -> dict[str, Any]:
    """The Kustomization `spec:` snippets of deploy/flux/README.md (images, patches), merged."""
    blocks = re.findall(r"```yaml\n(.*?)```", (FLUX / "README.md").read_text(), re.DOTALL)
    spec: dict[str, Any] = {}
    for block in blocks:
        spec |= yaml.safe_load(textwrap.dedent(block))["spec"]
    assert set(spec) == {"images", "patches"}
    return spec


def test_the_readmes_kustomization_snippets_are_accepted_and_drop_only_the_operator_kinds(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """What kustomize-controller does with spec.images and spec.patches: an overlay of the path."""
    kustomization = by_kind(render(plane, FLUX / "git"))["Kustomization"]
    kustomization["spec"] |= readme_spec()
    done = plane.server_side_apply([kustomization], "--dry-run=server", "--validate=strict")
    assert done.returncode == 0, done.stderr

    shutil.copytree(REPO / "deploy", tmp_path / "deploy", ignore=shutil.ignore_patterns("flux"))
    shutil.copytree(REPO / "alerts", tmp_path / "alerts")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    spec = kustomization["spec"]
    overlay_file = {"resources": [f"../{spec['path']}"], "images": spec["images"], "patches": spec["patches"]}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(overlay_file))
    installed = render(plane, overlay)
    operator_kinds = {"ServiceMonitor", "PrometheusRule"}
    plain = [o["kind"] for o in render(plane, tmp_path / "deploy") if o["kind"] not in operator_kinds]
    assert sorted(o["kind"] for o in installed) == sorted(plain)
    [deployment] = [o for o in installed if o["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.example.com/platform/stalewatch:0.1.0"


def test_the_helm_releases_values_pass_the_charts_schema_and_install_what_they_say(tmp_path: Path) -> None:
    """helm-controller renders the chart with spec.values as `helm template` does (the chart's
    values schema included), under spec.releaseName into spec.targetNamespace."""
    release = yaml.safe_load((FLUX / "oci" / "helmrelease.yaml").read_text())["spec"]
    assert release["targetNamespace"] == CHART_NAMESPACE
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(release["values"]))
    objects = template("--values", values, release=release["releaseName"])
    assert {o["kind"] for o in objects} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
    }
    assert one(objects, "Deployment")["metadata"]["name"] == "stalewatch"
    config = yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])
    assert config["heartbeat_interval"] == release["values"]["settings"]["heartbeat_interval"]


def test_the_oci_repositorys_semver_range_holds_the_charts_version() -> None:
    ref = by_kind([yaml.safe_load((FLUX / "oci" / "ocirepository.yaml").read_text())])["OCIRepository"]
    low, high = (bound.lstrip("><=") for bound in ref["spec"]["ref"]["semver"].split())
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]

    def parsed(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))

    assert parsed(low) <= parsed(version) < parsed(high)
