"""The per-object families rendered block by block say what rendering every entry afresh says."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from watcher.export import itemized
from watcher.export.families import render_whole
from watcher.export.itemized import Itemized
from watcher.export.metrics import GROUPS, _unique, _where
from watcher.model.types import ObjectHealth, Status

OBJECTS = next(group for group in GROUPS if group.name == "objects")
START = datetime(2026, 12, 1, tzinfo=UTC)


def health(
    name: str, *, group: str = "kustomize.toolkit.fluxcd.io", status: Status = Status.CURRENT
) -> ObjectHealth:
    subject = {"apiVersion": f"{group}/v1", "kind": "Kustomization", "namespace": "apps", "name": name}
    return ObjectHealth(
        subject, status, "", False, "kustomize-controller", START + timedelta(seconds=len(name))
    )


def from_scratch(items: list[ObjectHealth]) -> list[str]:
    unique = _unique(items)
    return [render_whole(family, unique).text() for family in OBJECTS.families]


def step(rng: random.Random, items: list[ObjectHealth], serial: int) -> list[ObjectHealth]:
    """One churn pass: entries replaced (a new object, as the model hands out a changed one),
    inserted, removed, or a twin from another API group (the same labels) added or dropped."""
    items = list(items)
    for _ in range(rng.randint(1, 4)):
        move = rng.choice(("replace", "replace", "insert", "remove", "twin"))
        at = rng.randrange(len(items) + 1)
        if move == "insert" or not items:
            items.insert(at, health(f"new-{serial}-{at}"))
        elif move == "remove":
            del items[at % len(items)]
        elif move == "twin":
            original = items[at % len(items)].subject["name"]
            items.insert(rng.randrange(len(items) + 1), health(original, group="other.example.com"))
        else:
            old = items[at % len(items)]
            status = rng.choice(list(Status))
            items[at % len(items)] = health(
                old.subject["name"], group=old.subject["apiVersion"].split("/")[0], status=status
            )
    return items


@pytest.mark.parametrize("seed", range(20))
def test_blocks_render_as_every_entry_rendered_afresh_through_random_churn(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    monkeypatch.setattr(itemized, "BLOCK", 4)  # many blocks, so that shifts and twins cross them
    rng = random.Random(seed)
    items = [health(f"app-{index:03}") for index in range(40)]
    rendering = Itemized(OBJECTS.families, key=_where)
    for serial in range(60):
        rendered = rendering.render(items)
        assert [family.text() for family in rendered] == from_scratch(items), f"pass {serial}"
        assert all(family.items == _unique(items) for family in rendered)
        items = step(rng, items, serial)


def test_a_twin_in_a_later_block_is_exported_once_the_earlier_one_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(itemized, "BLOCK", 2)
    first, later = health("a"), health("a", group="other.example.com")
    items = [first, health("b"), health("c"), later]
    rendering = Itemized(OBJECTS.families, key=_where)
    assert rendering.render(items)[0].items == [first, items[1], items[2]]
    replaced = [health("z"), items[1], items[2], later]  # the last block's entries are the same ones
    assert rendering.render(replaced)[0].items == replaced
