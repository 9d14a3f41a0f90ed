"""The engine's sorted tables: values in key order, the same list handed out until a change."""

from __future__ import annotations

import pytest

from watcher.model.store.table import SortedTable


def table(*pairs: tuple[int, str]) -> SortedTable[tuple[int], str]:
    found: SortedTable[tuple[int], str] = SortedTable()
    for key, value in pairs:
        found.set((key,), value)
    return found


def test_values_come_in_key_order_whatever_the_order_they_were_set_in() -> None:
    assert table((3, "c"), (1, "a"), (2, "b")).values() == ["a", "b", "c"]


def test_setting_a_key_again_replaces_its_value_and_none_removes_it() -> None:
    found = table((1, "a"), (2, "b"))
    found.set((1,), "A")
    found.set((2,), None)
    found.set((9,), None)
    assert found.values() == ["A"]


def test_the_same_list_is_handed_out_until_something_changes() -> None:
    found = table((1, "a"))
    first = found.values()
    found.set((1,), "a")
    assert found.values() is first
    found.set((2,), "b")
    assert found.values() is not first
    assert first == ["a"]


@pytest.mark.parametrize(
    ("placed", "added"),
    [
        pytest.param(range(0, 200, 2), [51, 7, 199], id="new-keys-between-and-after-the-placed-ones"),
        pytest.param(
            range(0, 20, 2), [*range(19, 0, -2), 40], id="more-new-keys-than-placed-ones-in-reverse-order"
        ),
        pytest.param(range(0), [3, 1, 2], id="new-keys-into-an-empty-table"),
    ],
)
def test_keys_added_after_an_output_take_their_place_in_key_order(placed: range, added: list[int]) -> None:
    found = table(*((key, str(key)) for key in placed))
    found.values()
    for key in added:
        found.set((key,), str(key))
    found.set((added[0],), "changed before the output")
    found.set((added[-1],), None)
    expected = {key: str(key) for key in [*placed, *added[:-1]]} | {added[0]: "changed before the output"}
    assert found.values() == [expected[key] for key in sorted(expected)]
    assert found.keys() == sorted((key,) for key in expected)
    assert len(found) == len(expected)


OUTPUT = None
"""A step that reads the table's output (placing the keys added since the last one)."""


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([(1, "a"), OUTPUT, (1, None), (1, "b")], id="a-placed-key-removed-then-set-again"),
        pytest.param([(1, "a"), (1, None), (1, "b")], id="a-new-key-removed-then-set-again-before-an-output"),
        pytest.param([(1, "a"), OUTPUT, (1, "b"), (1, "a")], id="a-placed-value-changed-and-changed-back"),
        pytest.param(
            [(1, "a"), (1, "b"), OUTPUT, (1, "b")], id="a-new-value-replaced-before-its-first-output"
        ),
        pytest.param(
            [(2, "b"), OUTPUT, (1, "a"), (2, None), (3, "c")], id="a-placed-key-removed-among-new-ones"
        ),
        pytest.param([(1, None), OUTPUT, (1, None), (2, "b"), (2, None)], id="absent-keys-removed"),
    ],
)
def test_the_output_holds_the_last_value_set_at_each_key(steps: list[tuple[int, str | None] | None]) -> None:
    found: SortedTable[tuple[int], str] = SortedTable()
    expected: dict[int, str] = {}
    for step in [*steps, OUTPUT]:
        if step is OUTPUT:
            assert found.values() == [expected[key] for key in sorted(expected)]
            continue
        key, value = step
        found.set((key,), value)
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = value
