"""A CRDOwnershipRisk on the page: names read from a CRD's annotations (free text, unlike labels)
are shown as text in its message and evidence, and add no element."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.model.builders import NOW, controller, crd, flux, run, terraform
from tests.web.dom import Node, parse
from tests.web.incident import HOSTILE
from watcher.model.evaluation import Evaluation
from watcher.model.types import FindingType
from watcher.web.page import PageState, render_page
from watcher.web.query import Query

LIVE = {"up": True, "synced": True, "stale": False, "forbidden_kinds": [], "unsynced_kinds": []}


def risky(release: str) -> Evaluation:
    """A plain Helm release named `release` installs the Terraform CRD; helm-controller's
    release `tofu` runs tofu-controller, which reconciles it."""
    definition = crd("terraforms", "infra.contrib.fluxcd.io", "Terraform")
    definition["metadata"]["annotations"] = {
        "meta.helm.sh/release-name": release,
        "meta.helm.sh/release-namespace": "team-a",
    }
    workload, *rest = controller("tofu-controller")
    workload["metadata"]["labels"] = {
        "helm.toolkit.fluxcd.io/name": "tofu",
        "helm.toolkit.fluxcd.io/namespace": "team-b",
    }
    return run(*flux(), workload, *rest, definition, terraform("vpc", "data"))


def page(evaluation: Evaluation) -> Node:
    state = PageState(evaluation, LIVE, objects=10, load_errors=0)
    return parse(render_page(state, Query(), now=NOW + timedelta(seconds=30)).decode())


@pytest.mark.parametrize(
    "release",
    [
        pytest.param(HOSTILE, id="markup-in-the-release-name-annotation"),
        pytest.param("&lt;b&gt; already escaped &amp;", id="entities-stay-literal"),
    ],
)
def test_a_crd_ownership_risk_shows_annotation_text_as_text(release: str) -> None:
    evaluation = risky(release)
    [risk] = [f for f in evaluation.findings if f.type is FindingType.CRD_OWNERSHIP_RISK]
    assert f"Helm release team-a/{release}" in risk.message

    doc, clean = page(evaluation), page(risky("platform"))

    [article] = [a for a in doc.all("article") if "CRDOwnershipRisk" in a.one("h3").text]
    assert article.one("p", "message").text == risk.message
    evidence = article.one("dl", "evidence")
    pairs = dict(
        zip([dt.text for dt in evidence.all("dt")], [dd.text for dd in evidence.all("dd")], strict=True)
    )
    assert json.loads(pairs["installed_by"]) == [f"Helm release team-a/{release}"]
    assert [n.tag for n in doc.walk()] == [n.tag for n in clean.walk()]
