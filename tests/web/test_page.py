"""The page's promises, checked on its structure: what on-call sees first, what is grouped under
what, and that nothing written into the cluster can become markup."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.model.builders import MIN, event, flux, run
from tests.model.builders import NOW as MODEL_NOW
from tests.web.dom import Node, parse
from tests.web.incident import (
    APPS,
    HOSTILE,
    NOW,
    TOFU,
    finding,
    health,
    healthy,
    incident,
    subject,
)
from watcher.model.evaluation import Evaluation
from watcher.model.types import FindingType, Heartbeat, HeartbeatState, Severity
from watcher.web.freshness import SCRIPT_HASH
from watcher.web.page import MAX_AFFECTED, MAX_ROWS, SECURITY_HEADERS, PageState, render_page
from watcher.web.query import Query

LIVE: dict[str, Any] = {
    "up": True,
    "synced": True,
    "stale": False,
    "forbidden_kinds": [],
    "unsynced_kinds": [],
}


def page(
    evaluation: Evaluation | None,
    status: dict[str, Any] = LIVE,
    *,
    objects: int = 4,
    namespace: str | None = None,
    load_errors: int = 0,
) -> Node:
    state = PageState(evaluation, status, objects=objects, load_errors=load_errors)
    html = render_page(state, Query(namespace=namespace), now=NOW + timedelta(seconds=30))
    return parse(html.decode())


def headings(doc: Node) -> list[str]:
    return [h3.text for h3 in doc.by_id("roots").all("h3")]


def rows(doc: Node, section: str) -> list[list[str]]:
    return [[td.text for td in tr.all("td")] for tr in doc.by_id(section).all("tr")[1:]]


def test_roots_come_most_severe_first_and_symptoms_only_inside_their_root() -> None:
    doc = page(incident())
    assert headings(doc) == [
        "critical ControllerDown: Deployment flux-system/tofu-controller",
        "warning RevisionSkew: Kustomization web/frontend",
    ]
    assert [a.attrs["class"] for a in doc.all("article")] == ["finding critical", "finding warning"]
    assert doc.one("title").text == "stalewatch: 2 root causes"
    summary = doc.by_id("roots").all("p")[0].text
    assert summary == "2 root causes (1 critical, 1 warning), 4 symptoms; 4 objects evaluated."


def test_a_root_says_since_when_and_what_to_do() -> None:
    root = page(incident()).all("article")[0]
    assert root.one("p", "since").text == "since 2026-11-30T08:48:00Z (3h12m ago)"
    assert root.one("p", "message").text == (
        "tofu-controller in flux-system is down: pod is in ImagePullBackOff.\nFix the image."
    )


def test_the_blast_radius_groups_affected_objects_by_kind_with_the_symptoms_found_on_each() -> None:
    root = page(incident()).all("article")[0]
    assert root.one("h4").text == "Blast radius: 3 objects"
    blast = root.one("dl", "blast")
    kinds = [dt.text for dt in blast.all("dt")]
    entries = [[li.text for li in dd.all("li")] for dd in blast.all("dd")]
    assert dict(zip(kinds, entries, strict=True)) == {
        "Kustomization (1)": ["flux-system/apps DependencyBlocked, StuckReconciling"],
        "Terraform (2)": ["flux-system/dns StatusStale", "flux-system/vpc StatusStale"],
    }


def test_the_evidence_is_a_collapsed_definition_list() -> None:
    details = page(incident()).all("article")[0].one("details")
    assert "open" not in details.attrs
    evidence = details.one("dl", "evidence")
    pairs = dict(
        zip([dt.text for dt in evidence.all("dt")], [dd.text for dd in evidence.all("dd")], strict=True)
    )
    assert pairs == {
        "reason": "ImagePullBackOff",
        "groups": '["infra.contrib.fluxcd.io"]',
        "message": HOSTILE,
    }


@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param("<script>alert(1)</script>", id="script-tag"),
        pytest.param('"><img src=x onerror=alert(1)>', id="attribute-breakout"),
        pytest.param("</p></article><style>body{display:none}</style>", id="closing-tags-and-style"),
        pytest.param("&lt;b&gt; already escaped &amp;", id="entities-stay-literal"),
    ],
)
def test_a_hostile_message_is_shown_as_its_own_text_and_adds_no_element(hostile: str) -> None:
    evaluation = incident(skew_message=hostile)
    evaluation.objects[0] = replace(evaluation.objects[0], reason=hostile)
    clean = page(incident(skew_message="plain"))
    doc = page(evaluation)
    assert doc.all("article")[1].one("p", "message").text == hostile
    assert {r[2]: r[4] for r in rows(doc, "objects")}["vpc"] == hostile
    assert [n.tag for n in doc.walk()] == [n.tag for n in clean.walk()]


def test_a_hostile_namespace_filter_is_text_too() -> None:
    doc = page(incident(), namespace=HOSTILE)
    assert doc.by_id("objects").all("p")[-1].text == f"No GitOps objects in namespace {HOSTILE}."
    assert [n.tag for n in doc.walk()] == [n.tag for n in page(incident(), namespace="nowhere").walk()]


def test_a_clean_cluster_says_how_many_objects_were_found_healthy() -> None:
    doc = page(healthy(3), objects=3)
    assert doc.one("p", "healthy").text == "No findings: 3 objects evaluated, all healthy."
    assert not doc.all("article")
    assert doc.one("title").text == "stalewatch"
    empty = page(healthy(0), objects=0)
    assert [p.text for p in empty.by_id("roots").all("p")] == ["No objects seen yet."]


def test_a_clean_cluster_whose_controller_heartbeat_is_unknown_is_not_said_healthy() -> None:
    """No finding, but one controller's metrics could not be read: its objects may be overdue unseen."""
    evaluation = healthy(3)
    kc = incident().controllers[-1]
    unknown = Heartbeat(HeartbeatState.UNKNOWN, "its metrics could not be read: connection refused", None)
    evaluation.controllers = [replace(kc, heartbeat=unknown)]
    doc = page(evaluation, objects=3)
    assert not doc.all("p", "healthy")
    assert doc.one("p", "stale").text == (
        "No findings: 3 objects evaluated, 1 controller not seen reconciling (see below)."
    )


@pytest.mark.parametrize(
    ("status", "banners"),
    [
        pytest.param(LIVE, [("live", "Live: every watch is synced and the API server answers.")], id="live"),
        pytest.param(
            {**LIVE, "up": False, "stale": True},
            [("stale", "STALE: the Kubernetes API server is unreachable; this is the last known state.")],
            id="api-server-unreachable",
        ),
        pytest.param(
            {**LIVE, "synced": False, "stale": True, "unsynced_kinds": ["Terraform.infra.contrib.fluxcd.io"]},
            [("pending", "Not yet synced: initial list not finished for Terraform.infra.contrib.fluxcd.io.")],
            id="not-yet-synced",
        ),
        pytest.param(
            {**LIVE, "stale": True},
            [("stale", "STALE: a watch is broken; what follows may lag the cluster.")],
            id="a-watch-is-broken",
        ),
        pytest.param(
            {
                **LIVE,
                "forbidden_kinds": [
                    {"group": "", "kind": "Pod"},
                    {"group": "helm.toolkit.fluxcd.io", "kind": "HelmRelease"},
                ],
            },
            [
                ("live", "Live: every watch is synced and the API server answers."),
                ("stale", "Cannot see (403 Forbidden, not judged): Pod, HelmRelease.helm.toolkit.fluxcd.io"),
            ],
            id="forbidden-kinds",
        ),
    ],
)
def test_the_banner_says_whether_the_data_can_be_trusted(
    status: dict[str, Any], banners: list[tuple[str, str]]
) -> None:
    doc = page(incident(), status)
    found = [(" ".join(sorted(p.classes - {"banner"})), p.text) for p in doc.all("p", "banner")]
    assert found == banners
    assert "Evaluated at 2026-11-30T12:00:00Z (30s ago)." in [p.text for p in doc.one("header").all("p")]


def test_before_the_first_evaluation_the_page_says_it_is_waiting() -> None:
    doc = page(None, {**LIVE, "up": False, "synced": False, "stale": True})
    banners = [p.text for p in doc.all("p", "banner")]
    assert banners[-1] == "No evaluation yet: waiting for the first list of the cluster."
    assert not doc.all("section")


def test_the_namespace_filter_narrows_objects_and_revisions_but_never_the_roots() -> None:
    doc = page(incident(), namespace="web")
    assert [r[2] for r in rows(doc, "objects")] == ["frontend", "fleet"]
    assert [r[0] for r in rows(doc, "revisions")] == ["Kustomization web/frontend"]
    assert len(headings(doc)) == 2
    links = {a.text: a.attrs["href"] for a in doc.one("p", "filter").all("a")}
    assert links == {"all": "/#objects", "flux-system": "/?namespace=flux-system#objects"}
    assert doc.one("p", "filter").one("strong").text == "web"


def test_objects_with_findings_or_a_stale_status_come_first_and_say_so() -> None:
    table = rows(page(incident()), "objects")
    assert [(r[2], r[3], r[5]) for r in table] == [
        ("apps", "InProgress", "DependencyBlocked, StuckReconciling"),
        ("frontend", "Current", "RevisionSkew"),
        ("dns", "Current stale", "StatusStale"),
        ("vpc", "Current stale", "StatusStale"),
        ("fleet", "Current", ""),
    ]


def test_down_controllers_come_first() -> None:
    assert [r[:4] for r in rows(page(incident()), "controllers")] == [
        ["tofu-controller", "Deployment flux-system/tofu-controller", "down", "ImagePullBackOff"],
        ["kustomize-controller", "Deployment flux-system/kustomize-controller", "up", "Available"],
    ]


def test_a_controller_row_says_what_its_heartbeat_says_and_a_stuck_one_comes_after_the_down() -> None:
    evaluation = incident()
    tofu, kc = sorted(evaluation.controllers, key=lambda c: c.up)
    stuck = Heartbeat(HeartbeatState.STUCK, "no counter moved", None, NOW - 12 * timedelta(minutes=1), 3)
    unknown = Heartbeat(HeartbeatState.UNKNOWN, "its metrics could not be read: connection refused", None)
    evaluation.controllers = [
        tofu,
        replace(kc, heartbeat=stuck),
        replace(kc, name="helm-controller", heartbeat=unknown),
        replace(kc, name="source-controller", heartbeat=Heartbeat(HeartbeatState.RECONCILING, "", NOW)),
    ]
    table = rows(page(evaluation), "controllers")
    assert [r[2:4] for r in table] == [
        ["down", "ImagePullBackOff"],
        ["up, not reconciling since 2026-11-30T11:48:00Z (12m ago)", "no counter moved"],
        ["up, heartbeat unknown", "its metrics could not be read: connection refused"],
        ["up, reconciling", "Available"],
    ]


def test_a_controller_whose_selector_cannot_be_read_says_whom_it_serves_is_unknown() -> None:
    evaluation = incident()
    kc = next(c for c in evaluation.controllers if c.up)
    problem = "its --watch-label-selector='a in (x' cannot be read: a: unclosed '('"
    evaluation.controllers = [replace(kc, scope=problem)]
    assert [r[2:4] for r in rows(page(evaluation), "controllers")] == [
        ["up, serves unknown objects", f"Available; {problem}"]
    ]


def test_a_revision_skew_is_highlighted() -> None:
    table = page(incident()).by_id("revisions").all("tr")[1:]
    assert [(tr.attrs.get("class"), tr.all("td")[0].text) for tr in table] == [
        ("skew", "Kustomization web/frontend"),
        (None, "Kustomization flux-system/apps"),
    ]


def test_a_big_cluster_is_bounded_with_how_many_more() -> None:
    evaluation = healthy(MAX_ROWS + 7)
    many = [subject("Terraform", "flux-system", f"tf-{i:04}") for i in range(MAX_AFFECTED + 3)]
    down = finding(FindingType.CONTROLLER_DOWN, Severity.CRITICAL, TOFU, "down", affected=many)
    evaluation.findings.append(down)
    doc = page(evaluation, objects=MAX_ROWS + 7)
    assert len(rows(doc, "objects")) == MAX_ROWS
    assert doc.by_id("objects").one("p", "more").text == "and 7 more objects"
    assert len(doc.one("dl", "blast").all("li")) == MAX_AFFECTED
    assert doc.one("article").one("p", "more").text == "and 3 more affected objects"
    assert doc.one("h4").text == f"Blast radius: {MAX_AFFECTED + 3} objects"


def test_a_symptom_on_the_root_object_itself_is_named_not_counted_in_the_blast_radius() -> None:
    root = finding(FindingType.CONTROLLER_DOWN, Severity.CRITICAL, APPS, "down")
    same = finding(FindingType.STUCK_RECONCILING, Severity.WARNING, APPS, "stuck", root=root.id)
    evaluation = Evaluation(NOW, [root, same], [health(APPS)], [], [])
    article = page(evaluation).one("article")
    assert [p.text for p in article.all("p")][-1] == "Also on this object: StuckReconciling"
    assert not article.all("dl", "blast")


def test_load_errors_are_pointed_at() -> None:
    texts = [p.text for p in page(healthy(), load_errors=2).one("header").all("p")]
    assert "2 objects skipped as malformed (see the log): not evaluated." in texts


def test_the_policy_allows_only_the_pages_own_style_and_script_and_its_stream() -> None:
    policy = dict(d.strip().split(" ", 1) for d in SECURITY_HEADERS["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == f"'{SCRIPT_HASH}'"
    assert policy["connect-src"] == "'self'"
    assert policy["style-src"].startswith("'sha256-")
    assert (SECURITY_HEADERS["X-Content-Type-Options"], SECURITY_HEADERS["Referrer-Policy"]) == (
        "nosniff",
        "no-referrer",
    )


def test_the_page_refreshes_itself_without_javascript_and_links_the_machine_readable_views() -> None:
    doc = page(healthy())
    refresh = [m.attrs for m in doc.one("noscript").all("meta") if m.attrs.get("http-equiv") == "refresh"]
    assert refresh == [{"http-equiv": "refresh", "content": "10"}]
    assert len([m for m in doc.all("meta") if m.attrs.get("http-equiv") == "refresh"]) == 1
    assert [a.attrs["href"] for a in doc.one("nav").all("a")] == ["/api/v1/findings", "/metrics"]


def policy_denied(message: str) -> Evaluation:
    """The model's own PolicyDenied: a controller's Warning Event says a Gatekeeper constraint denies it."""
    denial = (
        'admission webhook "validation.gatekeeper.sh" denied the request: [deny-public-loadbalancers] '
        + message
    )
    objects = [
        *flux(leases=False),
        event(
            "storefront.1",
            "checkout",
            kind="EdgeGateway",
            involved="storefront",
            reason="ReconcileError",
            message=denial,
            count=40,
            first=30 * MIN,
            last=MIN,
        ),
    ]
    return run(objects, now=MODEL_NOW)


@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param("<script>alert(1)</script>", id="script-tag"),
        pytest.param('"><img src=x onerror=alert(1)>', id="attribute-breakout"),
        pytest.param("&lt;b&gt; already escaped &amp; ä 🚀", id="entities-and-unicode-stay-literal"),
    ],
)
def test_a_policy_denial_shows_its_policy_and_evidence_as_text(hostile: str) -> None:
    doc = page(policy_denied(hostile))

    [article] = doc.all("article")
    assert "PolicyDenied" in article.one("h3").text
    assert f"gatekeeper policy deny-public-loadbalancers: the write of an object is refused ({hostile})" in (
        article.one("p", "message").text
    )
    evidence = article.one("dl", "evidence")
    pairs = dict(
        zip([dt.text for dt in evidence.all("dt")], [dd.text for dd in evidence.all("dd")], strict=True)
    )
    assert pairs["engine"] == "gatekeeper"
    assert hostile in pairs["denials"]
    assert [n.tag for n in doc.walk()] == [n.tag for n in page(policy_denied("plain")).walk()]
