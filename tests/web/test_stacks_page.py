"""The stacks on the page, the stack and object pages, and the search: read on their structure."""

from __future__ import annotations

from typing import Any

import pytest

from tests.model.builders import (
    controller,
    crd,
    deployment,
    flux,
    git_repository,
    kustomization,
    pod,
    terraform,
)
from tests.model.test_compliance import constraint, ks_labels, violation
from tests.web.cluster import HOSTILE, TOFU_IMAGE, Cluster, cluster, incident
from tests.web.dom import Node
from watcher.web.stacks import STACKS_PER_PAGE


def heads(doc: Node) -> list[str]:
    return [tr.all("td")[0].text.strip(" ▸▾") for tr in doc.by_id("stacks-rows").all("tr", "stackhead")]


def table(doc: Node) -> list[list[str]]:
    """The stacks table's rows below the headers, cell texts."""
    rows = doc.by_id("stacks-rows").all("tr")
    return [[td.text for td in tr.all("td")] for tr in rows if "stackhead" not in tr.classes]


def by_name(doc: Node) -> dict[str, list[str]]:
    return {r[0].split("/")[-1]: r for r in table(doc)}


@pytest.fixture
def tofu() -> Cluster:
    return cluster(incident())


def test_stacks_are_collapsed_by_default_one_header_each_with_its_rollup(tofu: Cluster) -> None:
    doc = tofu.page()
    assert heads(doc) == ["Kustomization flux-system/flux-system"]
    assert table(doc) == []
    head = doc.by_id("stacks-rows").one("tr", "stackhead").all("td")
    assert head[1].text == "failing"
    assert head[2].text == "6 rows: 2 failing, 2 stale, 2 current"


def test_opening_a_stack_shows_its_tree_with_each_row_as_stalewatch_judges_it(tofu: Cluster) -> None:
    doc = tofu.page({"open": "flux-system/flux-system"})
    rows = by_name(doc)
    assert list(rows) == ["flux-system", "apps", "podinfo", "infra", "dns", "vpc"]
    assert rows["vpc"][1] == "stale (cached: InProgress)"
    assert rows["vpc"][6].startswith("tofu-controller down since ")
    assert rows["vpc"][6].endswith(": ImagePullBackOff")
    assert rows["podinfo"][3:6] == ["6.6.0", "6.5.0 skew", "6.6.0"], (
        "source chart, chart deployed, chart attempted"
    )
    toggle = doc.by_id("stacks-rows").one("tr", "stackhead").one("a", "toggle")
    assert toggle.text == "▾"
    assert toggle.attrs["href"].startswith("/#stack-")


def test_the_tree_is_indented_parents_first(tofu: Cluster) -> None:
    doc = tofu.page({"open": "flux-system/flux-system"})
    spans = [
        tr.all("td")[0].all("span")[0]
        for tr in doc.by_id("stacks-rows").all("tr")
        if "stackhead" not in tr.classes
    ]
    assert [(s.attrs["class"], s.text) for s in spans] == [
        ("d0", "Kustomization flux-system/flux-system"),
        ("d1", "Kustomization flux-system/apps"),
        ("d2", "HelmRelease flux-system/podinfo"),
        ("d1", "Kustomization flux-system/infra"),
        ("d2", "Terraform flux-system/dns"),
        ("d2", "Terraform flux-system/vpc"),
    ]


def test_an_applied_revision_behind_its_source_is_marked_skew(tofu: Cluster) -> None:
    rows = by_name(tofu.page({"open": "flux-system/flux-system"}))
    assert rows["apps"][4] == "main@aaaaaaaaaaaa skew"
    doc = tofu.page({"open": "flux-system/flux-system"})
    skewed = [tr.all("td")[0].text for tr in doc.by_id("stacks-rows").all("tr", "skew")]
    assert skewed == ["Kustomization flux-system/apps", "HelmRelease flux-system/podinfo"]


@pytest.mark.parametrize(
    ("query", "rows"),
    [
        pytest.param(
            {"q": "aaaaaaa"}, ["flux-system", "apps", "infra", "dns", "vpc"], id="revision-digest-prefix"
        ),
        pytest.param(
            {"q": "rev:main@sha1:aaaa"},
            ["flux-system", "apps", "infra", "dns", "vpc"],
            id="revision-as-written",
        ),
        pytest.param(
            {"q": "kind:terraform"},
            ["flux-system", "infra", "dns", "vpc"],
            id="kind-any-case-with-its-parents",
        ),
        pytest.param({"q": "StatusStale"}, ["flux-system", "infra", "dns", "vpc"], id="finding-type"),
        pytest.param({"q": "vp"}, ["flux-system", "infra", "vpc"], id="part-of-a-name"),
        pytest.param(
            {"q": "kind:Terraform vpc"}, ["flux-system", "infra", "vpc"], id="every-word-must-match"
        ),
        pytest.param({"status": "stale"}, ["flux-system", "infra", "dns", "vpc"], id="status-filter"),
        pytest.param(
            {"status": ["failing", "stale"], "q": "podinfo"},
            ["flux-system", "apps", "podinfo"],
            id="statuses-and-words",
        ),
        pytest.param({"q": "ns:elsewhere"}, [], id="nothing-matches"),
    ],
)
def test_the_search_opens_the_stacks_it_matches_and_shows_the_rows_with_their_parents(
    tofu: Cluster, query: dict[str, Any], rows: list[str]
) -> None:
    doc = tofu.page(query)
    assert [r[0].split("/")[-1] for r in table(doc)] == rows
    if not rows:
        assert "Nothing matches this search." in doc.by_id("stacks-summary").text


def test_the_search_box_shows_the_query_back_and_submits_to_the_page(tofu: Cluster) -> None:
    form = tofu.page({"q": "vpc", "status": "stale"}).by_id("search")
    assert (form.attrs["method"], form.attrs["action"]) == ("get", "/")
    assert form.all("input")[0].attrs["value"] == "vpc"
    assert [i.attrs["value"] for i in form.all("input")[1:] if "checked" in i.attrs] == ["stale"]


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        pytest.param({"status": "broken"}, "status='broken' is not one of", id="unknown-status"),
        pytest.param({"page": "-3"}, "page='-3' is not a page number", id="negative-page"),
        pytest.param({"page": "x" * 40}, "is not a page number", id="garbage-page"),
        pytest.param({"open": "no-slash"}, "open='no-slash' is not NAMESPACE/NAME", id="bad-open"),
        pytest.param({"q": "kind:"}, "names no value after the colon", id="empty-field"),
        pytest.param({"q": "x" * 300}, "q is longer than 256 characters", id="too-long"),
        pytest.param({"status": HOSTILE}, "is not one of", id="hostile-value"),
    ],
)
def test_a_bad_query_value_is_named_on_the_page_and_the_rest_still_renders(
    tofu: Cluster, query: dict[str, Any], problem: str
) -> None:
    doc = tofu.page(query)
    problems = doc.by_id("query-problems")
    assert problem in problems.text
    assert doc.by_id("stacks-summary").text.startswith("1 stack, 6 rows")
    assert not doc.all("img")


def test_many_stacks_are_paginated() -> None:
    many = cluster(
        *flux(leases=False),
        git_repository(),
        *(kustomization(f"ks-{i:03}") for i in range(STACKS_PER_PAGE + 5)),
    )
    first, second = many.page(), many.page({"page": "2"})
    assert len(heads(first)) == STACKS_PER_PAGE
    assert heads(second) == [
        f"Kustomization flux-system/ks-{i:03}" for i in range(STACKS_PER_PAGE, STACKS_PER_PAGE + 5)
    ]
    links = {a.text: a.attrs["href"] for a in first.by_id("stacks-summary").all("a")}
    assert links == {"2": "/?page=2#stacks"}
    assert "page=3" not in str(many.page({"page": "3"}).by_id("stacks-summary").text)


def test_hostile_messages_and_revisions_stay_text_everywhere() -> None:
    hostile = cluster(incident(message=HOSTILE, revision=f"main@sha1:{HOSTILE}"))
    clean = cluster(incident(message="fine", revision="main@sha1:fine"))
    for doc, plain in (
        (hostile.page({"open": "flux-system/flux-system"}), clean.page({"open": "flux-system/flux-system"})),
        (hostile.page({"q": HOSTILE}), clean.page({"q": "fine"})),
    ):
        assert not doc.all("img")
        assert [n.tag for n in doc.walk()] == [n.tag for n in plain.walk()]
    page = hostile.object("Terraform", "flux-system", "vpc")
    assert page is not None
    assert not page.all("img")
    messages = [td.text for td in page.by_id("object-conditions").all("td", "message")]
    assert f"{HOSTILE}: main@sha1:{HOSTILE}" in messages
    assert HOSTILE in [td.text for td in page.by_id("object-events").all("td", "message")]


def test_the_stack_page_shows_the_whole_stack(tofu: Cluster) -> None:
    doc = tofu.page(stack=("flux-system", "flux-system"))
    assert heads(doc) == ["Kustomization flux-system/flux-system"]
    assert len(table(doc)) == 6
    assert not doc.by_id("stacks-rows").one("tr", "stackhead").all("a", "toggle")
    assert doc.one("title").text.endswith("· stack flux-system/flux-system")


def test_an_unknown_stack_says_so(tofu: Cluster) -> None:
    doc = tofu.page(stack=("flux-system", "infra"))
    assert "another Kustomization applied it" in doc.by_id("stacks-summary").text
    assert table(doc) == []


def test_the_object_page_shows_conditions_chain_findings_events_and_commands(tofu: Cluster) -> None:
    doc = tofu.object("Terraform", "flux-system", "vpc")
    assert doc is not None
    assert doc.one("h2").text == "Terraform flux-system/vpc"
    conditions = [[td.text for td in tr.all("td")][:3] for tr in doc.by_id("object-conditions").all("tr")[1:]]
    assert conditions == [
        ["Ready", "True", "TerraformAppliedSucceed"],
        ["Reconciling", "True", "Progressing"],
    ]
    chain = [a.text for a in doc.by_id("object-chain").all("a")]
    assert chain == [
        "Terraform flux-system/vpc",
        "Kustomization flux-system/infra",
        "Kustomization flux-system/flux-system",
        "stack flux-system/flux-system",
    ]
    findings = [[td.text for td in tr.all("td")][:2] for tr in doc.by_id("object-findings").all("tr")[1:]]
    assert sorted(findings) == [["RetryLoop", "warning"], ["StatusStale", "info"]]
    assert doc.by_id("object-events").all("tr")[1].all("td")[1].text == "ReconciliationFailed"
    commands = doc.by_id("object-commands").one("pre").text.splitlines()
    assert commands == [
        "kubectl describe terraform.infra.contrib.fluxcd.io vpc -n flux-system",
        "kubectl events -n flux-system --for terraform.infra.contrib.fluxcd.io/vpc",
        "kubectl get terraform.infra.contrib.fluxcd.io vpc -n flux-system -o yaml",
        "kubectl describe deployment tofu-controller -n flux-system",
        "kubectl logs -n flux-system deployment/tofu-controller --since=1h",
    ]
    assert TOFU_IMAGE not in commands


def test_an_object_stalewatch_does_not_hold_has_no_page(tofu: Cluster) -> None:
    assert tofu.object("Terraform", "flux-system", "nowhere") is None


def test_a_cluster_scoped_object_has_a_page() -> None:
    crds = cluster(crd("terraforms", "infra.contrib.fluxcd.io", "Terraform"))
    doc = crds.object("CustomResourceDefinition", "", "terraforms.infra.contrib.fluxcd.io")
    assert doc is not None
    assert doc.one("h2").text == "CustomResourceDefinition terraforms.infra.contrib.fluxcd.io"
    commands = doc.by_id("object-commands").one("pre").text.splitlines()
    assert (
        commands[0]
        == "kubectl describe customresourcedefinition.apiextensions.k8s.io terraforms.infra.contrib.fluxcd.io"
    )


def test_a_pods_page_chains_it_through_its_workload_up_to_the_stack() -> None:
    shop = cluster(
        *flux(leases=False),
        git_repository(),
        kustomization("apps", inventory=["flux-system_web_apps_Deployment"]),
        deployment("web"),
        pod("web-7d9f-x2x4z", app="web"),
    )
    doc = shop.object("Pod", "flux-system", "web-7d9f-x2x4z")
    assert doc is not None
    assert [a.text for a in doc.by_id("object-chain").all("a")] == [
        "Pod flux-system/web-7d9f-x2x4z",
        "Deployment flux-system/web",
        "Kustomization flux-system/apps",
        "stack flux-system/apps",
    ]
    commands = doc.by_id("object-commands").one("pre").text.splitlines()
    assert commands[0] == "kubectl describe pod web-7d9f-x2x4z -n flux-system"
    assert commands[-1] == "kubectl logs -n flux-system web-7d9f-x2x4z --all-containers --previous"


KS = "kustomize.toolkit.fluxcd.io"


def test_an_object_prune_left_behind_is_shown_under_its_former_kustomization_and_says_so() -> None:
    dns = terraform("dns")
    dns["metadata"]["labels"] = {
        f"{KS}/name": "infra",
        f"{KS}/namespace": "flux-system",
    }
    orphaned = cluster(
        *flux(),
        controller("tofu-controller"),
        git_repository("flux-system"),
        kustomization("flux-system", inventory=[f"flux-system_infra_{KS}_Kustomization"]),
        kustomization("infra", inventory=["flux-system_vpc_infra.contrib.fluxcd.io_Terraform"]),
        terraform("vpc"),
        dns,
    )
    rows = table(orphaned.page({"open": "flux-system/flux-system"}))
    assert [r[0] for r in rows] == [
        "Kustomization flux-system/flux-system",
        "Kustomization flux-system/infra",
        "Terraform flux-system/dns (left behind by prune)",
        "Terraform flux-system/vpc",
    ]
    assert rows[2][1:3] == ["failing", "PruneOrphan"]


def test_a_stack_row_shows_the_policy_violations_of_what_it_owns_and_the_header_their_sum() -> None:
    page = cluster(
        flux(),
        git_repository("flux-system"),
        kustomization(
            "flux-system", inventory=["flux-system_team-a_kustomize.toolkit.fluxcd.io_Kustomization"]
        ),
        kustomization("team-a", inventory=["team-a_web_apps_Deployment"]),
        deployment("web", "team-a", labels=ks_labels("team-a")),
        constraint(violations=[violation("Deployment", "team-a", "web")] * 20, total=23),
    )
    doc = page.page({"open": "flux-system/flux-system"})
    assert by_name(doc)["team-a"][-1] == "20: must-have-owner"
    assert by_name(doc)["web"][-1] == ""
    head = doc.by_id("stacks-rows").one("tr", "stackhead").all("td")
    assert head[-1].text == "20: must-have-owner", "the 3 unlisted are no stack's: not in any row"


def test_policy_violations_stalewatch_cannot_list_are_said_not_judged() -> None:
    page = cluster(flux(), git_repository("flux-system"), kustomization("flux-system"))
    page.model.set_blind({"PolicyReport"})
    doc = page.page()
    assert (
        "Policy violations not judged: stalewatch cannot list PolicyReport"
        in doc.by_id("stacks-summary").text
    )
