"""`stalewatch impact` on the examples: what removing (or stopping) one object breaks, through the
real loader, the model's graph and the renderers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from watcher.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CRD_RISK = EXAMPLES / "crd-ownership-risk"
TOFU = EXAMPLES / "tofu-controller-down"
NOW = "2026-11-30T12:00:00Z"
TERRAFORMS = ["eks-cluster", "iam-roles", "rds-postgres", "route53-zones", "s3-artifacts", "vpc"]
Row = tuple[str, str, str, str]
"""(effect, kind, namespace, name) of one node of the tree."""


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("STALEWATCH_"):
            monkeypatch.delenv(name)


def impact_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["impact", "-o", "json", *args])
    return code, orjson.loads(capsys.readouterr().out)


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node] + [found for child in node["children"] for found in nodes(child)]


def rows(document: dict[str, Any], *effects: str) -> set[Row]:
    return {
        (n["effect"], n["kind"], n["namespace"], n["name"])
        for n in nodes(document["tree"])
        if not effects or n["effect"] in effects
    }


def stacks_of(document: dict[str, Any]) -> dict[tuple[str, str], str | None]:
    return {(n["kind"], n["name"]): n["stack"] for n in nodes(document["tree"])}


def test_a_crd_names_its_installer_the_controller_that_watches_it_and_every_instance_by_stack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, found = impact_json(capsys, "crd/imagepolicies.image.toolkit.fluxcd.io", str(CRD_RISK))
    assert code == 1
    assert found["installed_by"] == ["HelmRelease team-platform/platform-base"]
    assert rows(found, "deleted") == {
        ("deleted", "ImagePolicy", "team-apps", "podinfo"),
        ("deleted", "ImagePolicy", "team-web", "checkout"),
        ("deleted", "ImagePolicy", "team-web", "storefront"),
    }
    assert rows(found, "cannot_watch") == {
        ("cannot_watch", "Deployment", "team-delivery", "image-reflector-controller")
    }
    stacks = stacks_of(found)
    assert stacks["Deployment", "image-reflector-controller"] == "HelmRelease team-delivery/image-automation"
    assert stacks["ImagePolicy", "podinfo"] == "Kustomization flux-system/apps"
    assert stacks["ImagePolicy", "storefront"] == "Kustomization flux-system/web"
    # the controller cannot start, so the other kind it reconciles is not reconciled either
    assert {r[1] for r in rows(found, "not_reconciled")} == {"ImageRepository"}
    assert rows(found, "blocked") == {
        ("blocked", "Kustomization", "flux-system", "apps"),
        ("blocked", "Kustomization", "flux-system", "web"),
    }
    assert found["summary"] == {
        "removed": 0,
        "broken": 9,
        "stacks": [
            "Kustomization flux-system/apps",
            "Kustomization flux-system/web",
            "HelmRelease team-delivery/image-automation",
        ],
    }
    assert found["verdict"].startswith(
        "removing CustomResourceDefinition imagepolicies.image.toolkit.fluxcd.io breaks 9 objects in 3 stacks"
    )


def test_a_helmrelease_removes_what_it_installed_and_breaks_what_other_stacks_built_on_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, found = impact_json(capsys, "hr/team-platform/platform-base", str(CRD_RISK))
    assert code == 1
    assert rows(found, "removed") == {
        ("removed", "CustomResourceDefinition", "", "imagepolicies.image.toolkit.fluxcd.io"),
        ("removed", "CustomResourceDefinition", "", "imagerepositories.image.toolkit.fluxcd.io"),
        ("removed", "HelmChart", "flux-system", "team-platform-platform-base"),
    }
    assert {(r[1], r[3]) for r in rows(found, "deleted")} == {
        (kind, name)
        for kind in ("ImagePolicy", "ImageRepository")
        for name in ("podinfo", "checkout", "storefront")
    }
    assert ("cannot_watch", "Deployment", "team-delivery", "image-reflector-controller") in rows(found)
    assert found["verdict"].startswith(
        "removing HelmRelease team-platform/platform-base removes 3 objects it installed and breaks"
    )


def test_stopping_a_controller_breaks_what_it_reconciles_and_the_stacks_waiting_on_them_as_analyze_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, found = impact_json(capsys, "deploy/flux-system/tofu-controller", str(TOFU))
    assert code == 1
    assert found["action"] == "stopping"
    assert rows(found, "not_reconciled") == {
        ("not_reconciled", "Terraform", "flux-system", name) for name in TERRAFORMS
    }
    blocked = {r[3] for r in rows(found, "blocked")}
    assert blocked == {"infra-terraform", "apps-data", "apps-payments", "ingress-edge"}
    main(["analyze", "--now", NOW, "-o", "json", str(TOFU)])
    [root] = [f for f in orjson.loads(capsys.readouterr().out)["findings"] if f["type"] == "ControllerDown"]
    assert {a["name"] for a in root["affected"]} == {r[3] for r in rows(found) if r[0] != "target"}


def test_a_kustomization_blocks_what_depends_on_it_and_prunes_its_inventory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, found = impact_json(capsys, "kustomization/flux-system/infra-terraform", str(TOFU))
    assert code == 1
    assert rows(found, "removed") == {("removed", "Terraform", "flux-system", name) for name in TERRAFORMS}
    assert rows(found, "blocked") == {
        ("blocked", "Kustomization", "flux-system", name)
        for name in ("apps-data", "apps-payments", "ingress-edge")
    }
    [edge] = [n for n in nodes(found["tree"]) if n["name"] == "apps-data"]
    assert edge["why"] == "dependsOn Kustomization flux-system/infra-terraform, which is removed"


def test_a_leaf_nothing_depends_on_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["impact", "ks/flux-system/apps-data", str(TOFU)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[-1] == (
        "nothing depends on Kustomization flux-system/apps-data: "
        "removing Kustomization flux-system/apps-data breaks nothing"
    )


def test_nothing_found_but_a_kind_it_reads_missing_from_the_snapshot_is_unknown_never_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    charts = [i for i in _items(CRD_RISK / "gitops.yaml") if i["kind"] == "HelmRepository"]
    (tmp_path / "repos.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": charts}))
    code, found = impact_json(capsys, "helmrepo/flux-system/platform-charts", str(tmp_path))
    assert code == 4
    assert found["outcome"] == "unknown"
    assert found["not_looked_at"] == ["HelmChart: none in the snapshot"]
    assert "not known safe" in found["verdict"]


def _items(path: Path) -> list[dict[str, Any]]:
    import yaml

    items: list[dict[str, Any]] = yaml.safe_load(path.read_text())["items"]
    return items


@pytest.mark.parametrize(
    "typed",
    [
        pytest.param("ks/flux-system/apps", id="short-name"),
        pytest.param("Kustomization/flux-system/apps", id="kind-any-case"),
        pytest.param("KUSTOMIZATIONS/flux-system/apps", id="plural-upper-case"),
        pytest.param("kustomizations.kustomize.toolkit.fluxcd.io/flux-system/apps", id="plural-dot-group"),
        pytest.param(
            "kustomization.v1.kustomize.toolkit.fluxcd.io/flux-system/apps", id="kind-version-group"
        ),
    ],
)
def test_kind_is_read_as_kubectl_reads_it(capsys: pytest.CaptureFixture[str], typed: str) -> None:
    code, found = impact_json(capsys, typed, str(CRD_RISK))
    assert code == 0  # it prunes its own ImageRepository and ImagePolicy; nothing else builds on them
    assert found["target"] == {
        "group": "kustomize.toolkit.fluxcd.io",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": "apps",
    }


@pytest.mark.parametrize(
    ("typed", "kind"),
    [
        pytest.param("imagepolicies/team-web/checkout", "ImagePolicy", id="plural-from-its-crd"),
        pytest.param("imgpol/team-web/checkout", "ImagePolicy", id="upstream-short-name"),
        pytest.param(
            "ImageRepository.image.toolkit.fluxcd.io/team-web/checkout", "ImageRepository", id="kind-group"
        ),
        pytest.param("crds/imagepolicies.image.toolkit.fluxcd.io", "CustomResourceDefinition", id="crds"),
        pytest.param(
            "deployments.apps/team-delivery/image-reflector-controller", "Deployment", id="deployments-apps"
        ),
    ],
)
def test_custom_and_built_in_kinds_resolve(capsys: pytest.CaptureFixture[str], typed: str, kind: str) -> None:
    code, found = impact_json(capsys, typed, str(CRD_RISK))
    assert code in (0, 1)
    assert found["target"]["kind"] == kind


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["frobs/a/b", str(TOFU)],
            "stalewatch impact: unknown kind 'frobs': expected a kind",
            id="unknown-kind",
        ),
        pytest.param(
            ["deploy/tofu-controller", str(TOFU)],
            "stalewatch impact: 'deploy/tofu-controller': Deployment is namespaced: "
            "give deploy/NAMESPACE/tofu-controller",
            id="namespaced-without-namespace",
        ),
        pytest.param(
            ["crd/x/imagepolicies.image.toolkit.fluxcd.io", str(CRD_RISK)],
            "stalewatch impact: 'crd/x/imagepolicies.image.toolkit.fluxcd.io': CustomResourceDefinition is "
            "cluster-scoped: give crd/NAME",
            id="cluster-scoped-with-namespace",
        ),
        pytest.param(
            ["ks/flux-system/Apps", str(TOFU)],
            "stalewatch impact: 'ks/flux-system/Apps': name 'Apps' is not a Kubernetes object name",
            id="not-an-object-name",
        ),
        pytest.param(
            ["ks/flux-system/nope", str(TOFU)],
            "stalewatch impact: Kustomization flux-system/nope not found in the snapshot",
            id="not-found",
        ),
        pytest.param(
            ["ks/flux-system/apps", "/nonexistent/snapshot.yaml"],
            "stalewatch: /nonexistent/snapshot.yaml: no such file or directory",
            id="unreadable-file",
        ),
        pytest.param(
            ["ks/flux-system/apps", str(TOFU), "--kubeconfig", "/k"],
            "stalewatch impact: give snapshot PATHs or --kubeconfig/--context, not both",
            id="snapshot-and-cluster",
        ),
    ],
)
def test_bad_input_is_one_line_naming_it_and_exits_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["impact", *args]) == 2
    err = capsys.readouterr().err
    assert message in err.splitlines()[0]
    assert "Traceback" not in err


def test_an_unreadable_file_among_good_ones_is_named_and_the_rest_still_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["impact", "ks/flux-system/infra-terraform", str(TOFU), "/nonexistent.yaml"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == "stalewatch: /nonexistent.yaml: no such file or directory\n"
    assert "blocked" in captured.out


def test_the_json_document_is_the_text_trees_graph(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["crd/imagepolicies.image.toolkit.fluxcd.io", str(CRD_RISK)]
    code, found = impact_json(capsys, *args)
    assert set(found) == {
        "schema",
        "target",
        "action",
        "outcome",
        "exit_code",
        "verdict",
        "installed_by",
        "summary",
        "not_looked_at",
        "tree",
    }
    assert found["exit_code"] == code == 1
    assert {"group", "kind", "namespace", "name", "effect", "why", "stack", "children"} == set(found["tree"])
    assert found["summary"]["broken"] == len(
        [n for n in nodes(found["tree"]) if n["effect"] not in ("target", "removed", "kept")]
    )
    main(["impact", *args])
    text = capsys.readouterr().out.splitlines()
    assert text[-1] == found["verdict"]
    assert (
        len(text) == len(nodes(found["tree"])) + 2
    )  # the target's line, one per node below, a blank, the verdict


HEALTHY = EXAMPLES / "healthy-multi-stack"


def test_on_a_healthy_cluster_the_shared_crd_still_has_dependents(capsys: pytest.CaptureFixture[str]) -> None:
    code, found = impact_json(capsys, "crd/imagerepositories.image.toolkit.fluxcd.io", str(HEALTHY))
    assert code == 1
    assert rows(found, "cannot_watch") == {
        ("cannot_watch", "Deployment", "team-delivery", "image-reflector-controller")
    }
    assert found["summary"]["stacks"] == [
        "Kustomization flux-system/apps",
        "Kustomization flux-system/web-images",
        "HelmRelease team-delivery/image-automation",
    ]


def test_a_release_whose_crds_are_kept_breaks_nothing_when_removed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, found = impact_json(capsys, "hr/team-platform/platform-base", str(HEALTHY))
    assert code == 0
    assert rows(found, "kept") == {
        ("kept", "CustomResourceDefinition", "", f"{plural}.image.toolkit.fluxcd.io")
        for plural in ("imagepolicies", "imagerepositories")
    }
    assert found["verdict"] == (
        "nothing depends on HelmRelease team-platform/platform-base: removing HelmRelease "
        "team-platform/platform-base breaks nothing (it removes 1 object it installed)"
    )


def test_dependsOn_between_root_stacks_is_followed_transitively(capsys: pytest.CaptureFixture[str]) -> None:
    code, found = impact_json(capsys, "ks/flux-system/platform", str(HEALTHY))
    assert code == 1
    [delivery] = [n for n in found["tree"]["children"] if n["name"] == "delivery"]
    assert delivery["why"] == "dependsOn Kustomization flux-system/platform, which is removed"
    assert [(n["name"], n["why"]) for n in delivery["children"]] == [
        ("apps", "dependsOn Kustomization flux-system/delivery, which is blocked")
    ]
    assert rows(found, "blocked") == {
        ("blocked", "Kustomization", "flux-system", name) for name in ("delivery", "apps")
    }


def nested(node: dict[str, Any]) -> dict[str, Any]:
    return {**node, "children": [nested(child) for child in node["children"]]}


@pytest.mark.parametrize(
    "args",
    [
        ["crd/imagepolicies.image.toolkit.fluxcd.io", str(CRD_RISK)],
        ["ks/flux-system/platform", str(HEALTHY)],
        ["hr/team-platform/platform-base", str(HEALTHY)],
    ],
)
def test_the_tree_written_out_by_hand_is_laid_out_byte_for_byte_as_orjson_lays_out_the_document(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    main(["impact", "-o", "json", *args])
    out = capsys.readouterr().out
    document = orjson.loads(out)
    assert (
        out
        == orjson.dumps({**document, "tree": nested(document["tree"])}, option=orjson.OPT_INDENT_2).decode()
        + "\n"
    )
