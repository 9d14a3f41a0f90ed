"""The page as keyed parts: what the live stream compares must be what the page renders."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from tests.web.dom import parse
from tests.web.incident import HOSTILE, NOW, incident
from watcher.web.html import part_id
from watcher.web.page import PageState, page_parts, render_page
from watcher.web.parts import Part
from watcher.web.query import Query

LIVE: dict[str, Any] = {"up": True, "synced": True, "stale": False}
LATER = NOW + timedelta(seconds=30)


def state(**changes: Any) -> PageState:
    return PageState(incident(), LIVE, objects=5, **changes)


def test_every_part_sits_in_its_container_in_the_rendered_page_in_order() -> None:
    parts = page_parts(state(), Query(), now=LATER)
    doc = parse(render_page(state(), Query(), now=LATER).decode())
    for part in parts:
        container = doc.by_id(part.container)
        assert part.id in {n.attrs.get("id") for n in container.children if not isinstance(n, str)}
    ids = [n.attrs["id"] for n in doc.walk() if n.attrs.get("id") in {p.id for p in parts}]
    assert ids == [p.id for p in parts]
    assert len(set(ids)) == len(ids)


def test_each_part_is_one_element_carrying_its_own_id() -> None:
    for part in page_parts(state(), Query(), now=LATER):
        doc = parse(part.html)
        (element,) = [n for n in doc.children if not isinstance(n, str)]
        assert element.attrs["id"] == part.id


def test_part_ids_stay_the_same_when_what_they_show_changes() -> None:
    before = {p.id for p in page_parts(state(), Query(), now=LATER)}
    evaluation = incident(skew_message="something else")
    after = page_parts(PageState(evaluation, {**LIVE, "up": False}, objects=5), Query(), now=LATER)
    assert {p.id for p in after} == before


def test_only_the_parts_whose_subject_changed_differ() -> None:
    before = {p.id: p for p in page_parts(state(), Query(), now=LATER)}
    evaluation = incident(skew_message="now another message")
    after = {p.id: p for p in page_parts(PageState(evaluation, LIVE, objects=5), Query(), now=LATER)}
    changed = [ident for ident, part in after.items() if part != before[ident]]
    skew = next(f for f in evaluation.roots if f.type == "RevisionSkew")
    assert changed == [part_id("root", skew.id)]


def test_a_hostile_name_makes_a_plain_id() -> None:
    ident = part_id("row", "Kustomization", "ns", HOSTILE)
    assert ident.startswith("row-")
    assert ident.replace("-", "").isalnum()
    assert ident == part_id("row", "Kustomization", "ns", HOSTILE)
    assert ident != part_id("row", "Kustomization", "ns", HOSTILE + " ")


def test_before_the_first_evaluation_only_the_trust_part_is_rendered() -> None:
    parts = page_parts(PageState(None, {**LIVE, "up": False}), Query(), now=LATER)
    assert [(p.id, p.container) for p in parts] == [("trust", "header")]
    assert isinstance(parts[0], Part)


def test_a_root_card_id_follows_its_finding_not_its_position() -> None:
    evaluation = incident()
    moved = replace(evaluation, findings=list(reversed(evaluation.findings)))
    ids = [p.id for p in page_parts(PageState(moved, LIVE, objects=5), Query(), now=LATER)]
    assert ids == [p.id for p in page_parts(state(), Query(), now=LATER)]
