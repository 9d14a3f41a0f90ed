"""What changed, on the page: the recent changes, and on each root card the changes that preceded
it on its subject and its controller. Evaluations come from the real model; the timeline entries
are the kind the live model records (test_timeline.py checks how they are derived)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.model.builders import (
    MIN,
    NOW,
    cond,
    controller,
    deployment,
    flux,
    kustomization,
    pod,
    run,
    terraform,
)
from tests.web.dom import Node, parse
from watcher.model.evaluation import Evaluation
from watcher.model.types import Subject
from watcher.model.views.timeline import Change, Entry, Snapshot
from watcher.web.changes import MAX_RECENT
from watcher.web.page import PageState, render_page
from watcher.web.query import Query

TOFU_OLD = "ghcr.io/flux-iac/tofu-controller:v0.15.1"
TOFU_NEW = "ghcr.io/flux-iac/tofu-controller:v0.16.0-rc.5"
UNDO = "kubectl rollout undo deployment/tofu-controller -n flux-system"
LIVE = {"up": True, "synced": True, "stale": False, "forbidden_kinds": [], "unsynced_kinds": []}
HOSTILE = '<img src=x onerror=alert(1)>"><script>alert(2)</script>'


def incident() -> Evaluation:
    """tofu-controller down (its new image does not pull), and, apart from it, a Kustomization
    whose build fails while kustomize-controller runs."""
    return run(
        flux(leases=False),
        controller("tofu-controller", image=TOFU_NEW, lease_renewed=None),
        deployment("tofu-controller", image=TOFU_NEW, available=0),
        pod(
            "tofu-controller-7d9f-x2x4z",
            app="tofu-controller",
            image=TOFU_NEW,
            ready=False,
            waiting="ImagePullBackOff",
        ),
        terraform("vpc"),
        kustomization(
            "apps", conditions=[cond("Ready", "False", "BuildFailed", "kustomize build failed", ago=60 * MIN)]
        ),
    )


def on(kind: str, name: str) -> Subject:
    api = {"Deployment": "apps/v1", "Kustomization": "kustomize.toolkit.fluxcd.io/v1"}.get(kind, "v1")
    return Subject(apiVersion=api, kind=kind, namespace="flux-system", name=name)


def change(minutes_ago: int, what: Change, subject: Subject, message: str, **details: str) -> Entry:
    controller = details.pop("controller", None)
    return Entry(NOW - minutes_ago * MIN, what, subject, controller, "a", "b", message, details)


def timeline() -> list[Entry]:
    """Newest first, as a Snapshot holds them."""
    return [
        change(1, Change.READY_CHANGED, on("Kustomization", "apps"), "apps: Ready True -> False"),
        change(
            5,
            Change.CONTROLLER_DOWN,
            on("Deployment", "tofu-controller"),
            "controller tofu-controller is down (ImagePullBackOff)",
            controller="tofu-controller",
        ),
        change(
            8,
            Change.IMAGE_CHANGED,
            on("Deployment", "tofu-controller"),
            f"Deployment flux-system/tofu-controller: image {TOFU_OLD} -> v0.16.0-rc.5 "
            "(ReplicaSet revision 7)",
            controller="tofu-controller",
            undo=UNDO,
            revision="7",
        ),
        change(
            30,
            Change.IMAGE_CHANGED,
            on("Deployment", "kustomize-controller"),
            "Deployment flux-system/kustomize-controller: image v1.3.0 -> v1.4.0",
            controller="kustomize-controller",
        ),
        change(40, Change.REVISION_APPLIED, on("Kustomization", "other"), "other: applied main@abc"),
    ]


def page(evaluation: Evaluation, snapshot: Snapshot | None) -> Node:
    state = PageState(evaluation, LIVE, objects=20, changes=snapshot)
    return parse(render_page(state, Query(), now=NOW + timedelta(seconds=30)).decode())


def card(doc: Node, title: str) -> Node:
    return next(a for a in doc.all("article") if title in a.one("h3").text)


def items(node: Node) -> list[str]:
    return [li.text for li in node.all("li", "change")]


def test_the_tofu_card_shows_the_image_change_before_it_with_the_undo_command() -> None:
    doc = page(incident(), Snapshot(timeline(), comparing_since=NOW - 60 * MIN))
    tofu = card(doc, "ControllerDown")
    assert items(tofu) == [
        "11:55:00 (5m ago) controller tofu-controller is down (ImagePullBackOff)",
        f"11:52:00 (8m ago) Deployment flux-system/tofu-controller: image {TOFU_OLD} -> v0.16.0-rc.5 "
        f"(ReplicaSet revision 7); {UNDO}",
    ]
    assert tofu.one("code").text == UNDO


def test_a_card_links_its_subject_and_the_controller_reconciling_it() -> None:
    """The failing Kustomization's card: its own Ready flip and kustomize-controller's rollout,
    read from the model's object health (its finding's evidence names no controller)."""
    doc = page(incident(), Snapshot(timeline(), comparing_since=NOW - 60 * MIN))
    apps = card(doc, "Kustomization flux-system/apps")
    assert [text.split(") ", 1)[1] for text in items(apps)] == [
        "apps: Ready True -> False",
        "Deployment flux-system/kustomize-controller: image v1.3.0 -> v1.4.0",
    ]


def test_recent_changes_come_newest_first_bounded_and_say_what_they_cover() -> None:
    entries = [
        change(i, Change.READY_CHANGED, on("Kustomization", f"ks-{i}"), f"ks-{i} flipped") for i in range(30)
    ]
    doc = page(incident(), Snapshot(entries, dropped=7, comparing_since=NOW - 60 * MIN))
    recent = doc.by_id("changes-recent")
    assert [text.rsplit(" ", 2)[-2] for text in items(recent)] == [f"ks-{i}" for i in range(MAX_RECENT)]
    said = recent.all("p")[0].text
    assert "30 changes recorded since 11:00:00 UTC" in said
    assert "7 older changes dropped" in said
    assert recent.one("a").attrs["href"] == "/api/v1/timeline"
    assert recent.all("p")[-1].text == f"and {30 - MAX_RECENT} more changes (all in the timeline JSON)"


@pytest.mark.parametrize(
    ("snapshot", "said"),
    [
        pytest.param(Snapshot([]), "not known yet (the watches are still listing)", id="not comparing yet"),
        pytest.param(
            Snapshot([], comparing_since=NOW - 60 * MIN),
            "none recorded on it or its controller since 11:00:00 UTC.",
            id="nothing recorded",
        ),
        pytest.param(
            Snapshot([], dropped=3, comparing_since=NOW - 60 * MIN),
            "none recorded on it or its controller since 11:00:00 UTC (older changes were dropped).",
            id="nothing left after dropping",
        ),
    ],
)
def test_a_card_without_changes_says_why_never_just_nothing(snapshot: Snapshot, said: str) -> None:
    tofu = card(page(incident(), snapshot), "ControllerDown")
    assert f"Changes before it: {said}" in tofu.text


def test_a_hostile_message_is_its_own_text_and_adds_no_element() -> None:
    hostile = [change(1, Change.READY_CHANGED, on("Deployment", "tofu-controller"), HOSTILE, undo=HOSTILE)]
    plain = [change(1, Change.READY_CHANGED, on("Deployment", "tofu-controller"), "plain", undo="plain")]
    doc = page(incident(), Snapshot(hostile, comparing_since=NOW))
    clean = page(incident(), Snapshot(plain, comparing_since=NOW))
    assert items(doc.by_id("changes-recent")) == [f"11:59:00 (1m30s ago) {HOSTILE}; {HOSTILE}"]
    assert [n.tag for n in doc.walk()] == [n.tag for n in clean.walk()]


def test_without_a_timeline_the_page_claims_no_changes_at_all() -> None:
    doc = page(incident(), None)
    assert "Recent changes" not in doc.text
    assert "Changes before it" not in doc.text
