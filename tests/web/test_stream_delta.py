"""The live stream's deltas: applied the way the page's script applies them, a delta turns the
page of the last evaluation into the page of this one (same parts, same order, same places)."""

from __future__ import annotations

import random

import pytest

from watcher.web.delta import Delta, delta, full
from watcher.web.parts import Part


def parts(*specs: str) -> list[Part]:
    """ "roots:a=1" is the part `a` in container `roots` with HTML `1`."""
    made = []
    for spec in specs:
        container, _, rest = spec.partition(":")
        ident, _, html = rest.partition("=")
        made.append(Part(ident, container, f'<p id="{ident}">{html}</p>'))
    return made


def applied(page: list[Part], change: Delta) -> list[Part]:
    """What live.js does: remove, replace in place, then insert from last to first, each before
    the part it names (or at its container's end). Returns the page in document order, its
    containers in the order they first appear."""
    containers: dict[str, list[Part]] = {}
    for part in page:
        containers.setdefault(part.container, []).append(part)
    gone = set(change.removed)
    for container, held in containers.items():
        containers[container] = [p for p in held if p.id not in gone]
    fresh = {p.id: p for p in change.changed}
    for container, held in containers.items():
        assert all(p.id in {h.id for h in held} for p in change.changed if p.container == container)
        containers[container] = [fresh.get(p.id, p) for p in held]
    for added in reversed(change.added):
        held = containers.setdefault(added.part.container, [])
        ids = [p.id for p in held]
        assert added.part.id not in ids, f"{added.part.id} inserted twice"
        held.insert(ids.index(added.before) if added.before is not None else len(held), added.part)
    return [p for held in containers.values() for p in held]


def by_container(page: list[Part]) -> dict[str, list[Part]]:
    grouped: dict[str, list[Part]] = {}
    for part in page:
        grouped.setdefault(part.container, []).append(part)
    return grouped


CASES = [
    pytest.param(["roots:a=1", "roots:b=1"], ["roots:a=1", "roots:b=1"], ([], [], []), id="nothing_changed"),
    pytest.param(["roots:a=1", "roots:b=1"], ["roots:a=1", "roots:b=2"], (["b"], [], []), id="html_changed"),
    pytest.param(["roots:a=1"], ["roots:a=1", "roots:b=1"], ([], [("b", None)], []), id="added_at_the_end"),
    pytest.param(["roots:b=1"], ["roots:a=1", "roots:b=1"], ([], [("a", "b")], []), id="added_before"),
    pytest.param(["roots:a=1", "roots:b=1"], ["roots:b=1"], ([], [], ["a"]), id="removed"),
    pytest.param(
        ["rows:a=1", "rows:b=1", "rows:c=1"],
        ["rows:c=2", "rows:a=1", "rows:b=1"],
        ([], [("c", "a")], ["c"]),
        id="a_row_that_turned_bad_sorts_first_one_move",
    ),
    pytest.param(
        ["stack-1:a=1", "stack-2:b=1"],
        ["stack-1:b=1", "stack-2:a=1"],
        ([], [("b", None), ("a", None)], ["a", "b"]),
        id="changed_container_is_a_move",
    ),
    pytest.param(
        ["roots:a=1", "rows:x=1"],
        ["roots:a=1", "rows:y=1", "rows:x=1"],
        ([], [("y", "x")], []),
        id="before_counts_only_its_own_container",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), CASES)
def test_a_delta_names_exactly_what_changed(
    old: list[str], new: list[str], expected: tuple[list[str], list[tuple[str, str | None]], list[str]]
) -> None:
    before, after = parts(*old), parts(*new)
    change = delta(before, after)
    changed, added, removed = expected
    assert [p.id for p in change.changed] == changed
    assert [(a.part.id, a.before) for a in change.added] == added
    assert change.removed == removed
    assert by_container(applied(before, change)) == by_container(after)


def test_the_full_state_builds_the_page_from_nothing() -> None:
    page = parts("roots:a=1", "rows:x=1", "roots:b=1", "rows:y=1")
    assert by_container(applied([], full(page))) == by_container(page)


def test_random_evaluations_always_apply_to_the_next_page() -> None:
    """Rows appear, vanish, change, re-sort and change stack, many times over."""
    chance = random.Random(17)
    page: list[Part] = []
    for _ in range(300):
        ids = chance.sample(range(40), chance.randint(0, 25))
        after = [Part(f"p{i}", f"c{chance.randint(0, 3)}", f"<tr>{chance.randint(0, 2)}</tr>") for i in ids]
        assert by_container(applied(page, delta(page, after))) == by_container(after)
        page = after


def test_a_re_sort_of_many_rows_moves_only_the_ones_out_of_order() -> None:
    before = parts(*(f"rows:r{i}=1" for i in range(1000)))
    after = [before[500], *before[:500], *before[501:]]
    change = delta(before, after)
    assert (change.removed, [a.part.id for a in change.added], change.changed) == (["r500"], ["r500"], [])
