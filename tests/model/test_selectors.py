"""Label selectors as Flux's --watch-label-selector writes them (ingest/selectors.py)."""

from __future__ import annotations

import pytest

from watcher.model.ingest.selectors import SelectorError, parse_selector

KEY = "sharding.fluxcd.io/key"

MATCHES = [
    # (case, selector, labels, matches)
    ("equals_matches_the_value", "app=a", {"app": "a"}, True),
    ("equals_refuses_another_value", "app=a", {"app": "b"}, False),
    ("equals_refuses_a_missing_label", "app=a", {}, False),
    ("double_equals_is_equals", "app==a", {"app": "a"}, True),
    ("not_equals_matches_a_missing_label", "app!=a", {}, True),
    ("not_equals_refuses_the_value", "app!=a", {"app": "a"}, False),
    ("in_matches_a_member", f"{KEY} in (shard1, shard2)", {KEY: "shard2"}, True),
    ("in_refuses_a_missing_label", f"{KEY} in (shard1)", {}, False),
    ("notin_matches_a_missing_label", f"{KEY} notin (shard1)", {}, True),
    ("notin_refuses_a_member", f"{KEY} notin (shard1)", {KEY: "shard1"}, False),
    ("exists_matches_any_value", KEY, {KEY: ""}, True),
    ("exists_refuses_a_missing_label", KEY, {}, False),
    ("not_exists_matches_a_missing_label (flux main controller)", f"!{KEY}", {"app": "a"}, True),
    ("not_exists_refuses_any_value", f"!{KEY}", {KEY: "shard9"}, False),
    ("comma_is_and", "a=1,b!=2", {"a": "1", "b": "3"}, True),
    ("comma_is_and_refused", "a=1,b!=2", {"a": "1", "b": "2"}, False),
    ("empty_selects_everything", "", {"x": "y"}, True),
    ("empty_value_matches_the_empty_value", "a=", {"a": ""}, True),
    ("spaces_around_tokens", " a = 1 , ! b ", {"a": "1"}, True),
]


@pytest.mark.parametrize(
    ("selector", "labels", "expected"), [c[1:] for c in MATCHES], ids=[c[0] for c in MATCHES]
)
def test_a_selector_matches_labels_as_kubernetes_does(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert parse_selector(selector).matches(labels) is expected


UNREADABLE = [
    ("greater_than (ParseToLabelSelector refuses it)", "a>1"),
    ("empty_set", "a in ()"),
    ("unclosed_set", "a in (x"),
    ("set_without_commas", "a in (x y)"),
    ("trailing_comma", "a=1,"),
    ("two_operators", "a=1=2"),
    ("no_key", "=1"),
    ("bad_key", "-a=1"),
    ("bad_value", "a=-x-"),
    ("value_too_long", "a=" + "x" * 64),
    ("not_without_key", "!"),
    ("words_without_operator", "a b"),
    ("in_without_set", "a in x"),
]


@pytest.mark.parametrize("selector", [c[1] for c in UNREADABLE], ids=[c[0] for c in UNREADABLE])
def test_a_selector_that_cannot_be_read_is_an_error_never_everything(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(selector)


def test_a_set_with_an_empty_entry_holds_the_empty_value() -> None:
    assert parse_selector("a in (x,)").matches({"a": ""})
