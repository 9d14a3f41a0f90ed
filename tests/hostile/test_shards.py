"""Hostile controller args and selectors: whatever a Deployment's args hold, the projection keeps at
most one string per kept flag, bounded; a selector that cannot be read is unknown (never every
object), with no traceback; and an object of such a workload is neither served nor unserved."""

from __future__ import annotations

import pytest

from tests.model.builders import controller, kustomization, run
from tests.model.test_shards import KC, SHARD_KEY, others, shard, with_args
from watcher.model.ingest.projection import project
from watcher.model.ingest.selectors import SelectorError, parse_selector
from watcher.model.rules.shards import watch_scope


def kept_args(obj: dict[str, object]) -> list[str]:
    projected = project(obj)
    args: list[str] = projected["spec"]["template"]["spec"]["containers"][0].get("args", [])
    return args


def test_a_hundred_thousand_args_keep_one_string() -> None:
    args = [f"--watch-label-selector=a{i}=x" for i in range(100_000)]
    assert kept_args(with_args(controller(KC), *args)[0]) == ["--watch-label-selector=a99999=x"]


def test_a_megabyte_selector_is_kept_as_the_bare_flag_and_read_as_unknown() -> None:
    obj = with_args(controller(KC), "--watch-label-selector=" + "a" * 1_000_000)[0]
    assert kept_args(obj) == ["--watch-label-selector"]
    assert watch_scope(project(obj)).selects({}) is None


def test_the_flag_last_with_no_value_is_unknown_never_every_object() -> None:
    obj = with_args(controller(KC), "--watch-label-selector")[0]
    scope = watch_scope(project(obj))
    assert scope.problem == "its --watch-label-selector has no value stalewatch could keep"


def test_args_that_are_not_strings_are_rejected_by_name_and_the_flag_still_kept() -> None:
    obj = with_args(controller(KC), "--watch-label-selector=a=1")[0]
    obj["spec"]["template"]["spec"]["containers"][0]["args"].append({"not": "a string"})
    projected = project(obj)
    assert projected["spec"]["template"]["spec"]["containers"][0]["args"] == ["--watch-label-selector=a=1"]
    assert [r["field"] for r in projected["rejected"]] == ["spec.template.spec.containers[0].args[2]"]


HOSTILE_SELECTORS = {
    "control_characters": "a=\x00",
    "unicode_key": "ключ=1",
    "unicode_value": "a=значение",
    "only_commas": ",,,",
    "nested_parentheses": "a in ((x))",
    "operators_only": "!= == =",
    "a_long_run_of_bangs": "!" * 10_000,
    "a_key_too_long": "a" * 64 + "=1",
    "a_prefix_too_long": "a" * 254 + "/k=1",
}


@pytest.mark.parametrize("selector", HOSTILE_SELECTORS.values(), ids=HOSTILE_SELECTORS.keys())
def test_a_hostile_selector_is_a_selector_error(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(selector)


def test_a_shard_with_an_unreadable_selector_leaves_its_objects_unjudged_not_stale() -> None:
    evaluation = run(
        others(),
        with_args(controller(KC, lease_renewed=None), f"--watch-label-selector=!{SHARD_KEY}"),
        shard(selector="!" * 10_000),
        kustomization("tenants", labels={SHARD_KEY: "shard1"}),
    )
    assert evaluation.findings == []
    assert not next(o for o in evaluation.objects if o.subject["name"] == "tenants").stale
