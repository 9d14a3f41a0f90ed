"""Property: no sample, however mangled, makes the fleet raise or turns a cluster it could not
read healthy. The hypothesis fuzz test of snapshots (tests/cli/test_fuzz.py) carried over to the
fleet's sample parser, with its hostile values.

Hypothesis takes a fleet's healthy answers, as the query API writes them, and mangles them: a
sample's value replaced by what no stalewatch writes (NaN, Inf, 1e20, 0.5, other scripts'
digits, a bare JSON number, a list, null), a label by hostile text, a whole sample by anything.
Each mangled answer goes the whole way the fleet's server takes it: the envelope's parser, the
builder, the JSON document and the page. Derandomized, a fixed number of examples.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.test_fuzz import extreme_floats, extreme_integers, hostile_text, scalars, values
from tests.web.dom import parse
from watcher.fleet.model import build
from watcher.fleet.page import render_fleet
from watcher.fleet.prom import parse_answer
from watcher.fleet.queries import Filters, queries
from watcher.fleet.samples import Unreadable, count, flag, moment

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T = NOW.timestamp()
CLUSTERS = ("a", "b", "c")
STALE_AFTER = 120.0
DECIDING = ("up", "synced", "last_sample", "root_counts", "controllers_down")
"""The queries whose samples decide a cluster's state."""
NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
"""A number as the API may write one, spelled here independently of the parser."""

unwritten_values = st.one_of(
    st.sampled_from(
        [
            *("NaN", "+Inf", "-Inf", "nan", "inf", "Infinity", "garbage", "0.5", "1e20", "-1", " 1", "1 "),
            *(
                "1_0",
                "\u0661",
                "0x1",
                "",
                "1e400",
                "-0",
                "+1",
                "1.",
                ".5",
                "2",
                "0",
                "1",
                str(T - 1),
                str(T + 3600),
            ),
        ]
    ),
    extreme_floats.map(repr),
    extreme_integers,
    scalars,
    values,
)
"""What may stand where the API writes a sample's value: its string forms, others, any JSON."""


def sample(value: object, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [T, value]}


def healthy_results() -> dict[str, list[dict[str, Any]]]:
    """Every query's result for three healthy clusters, one Kustomization each in the matrix."""
    tofu = {"kind": "Deployment", "namespace": "flux-system", "name": "tofu-controller"}
    apps = {"kind": "Kustomization", "namespace": "flux-system", "name": "apps"}
    results: dict[str, list[dict[str, Any]]] = {
        name: [] for name in queries(cluster_label="cluster", filters=Filters())
    }
    for c in CLUSTERS:
        results["up"].append(sample("1", cluster=c))
        results["synced"].append(sample("1", cluster=c))
        results["last_sample"].append(sample(f"{T - 1:.3f}", cluster=c))
        results["root_counts"].append(sample("0", cluster=c, severity="critical"))
        results["controllers_down"].append(sample("1", cluster=c, **tofu))
        results["blast_radius"].append(
            sample("2", cluster=c, root_kind="Deployment", root_namespace="flux-system", root_name="tofu")
        )
        revision = {"applied_revision": "r1", "revision": "r1", "source": "GitRepository/flux-system/x"}
        results.setdefault("matrix", []).append(sample("1", cluster=c, **apps, **revision))
    results["matrix_rows"].append(sample("1", **apps))
    return results


@st.composite
def mangled(draw: st.DrawFn) -> tuple[dict[str, list[dict[str, Any]]], set[str]]:
    """Healthy results with 1-4 things mangled, and the clusters one of whose deciding values was
    replaced by something that does not read as the value it replaced."""
    results = healthy_results()
    unread: set[str] = set()
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        query = draw(st.sampled_from(sorted(results)))
        if not results[query]:
            continue
        index = draw(st.integers(min_value=0, max_value=len(results[query]) - 1))
        target, how = results[query][index], draw(st.sampled_from(["value", "value", "label", "sample"]))
        if how != "sample" and not (isinstance(target, dict) and isinstance(target.get("metric"), dict)):
            continue  # no longer a sample: mangled whole before
        if how == "value":
            was, now = target["value"][1], draw(unwritten_values)
            target["value"] = [T, now]
            if query in DECIDING and not _reads_the_same(now, was):
                unread.add(target["metric"].get("cluster"))
        elif how == "label":
            label = draw(
                st.sampled_from(["cluster", "severity", "namespace", "name", "kind", draw(hostile_text)])
            )
            target["metric"][label] = draw(hostile_text)
        else:
            results[query][index] = draw(values)
    return results, unread


def _reads_the_same(now: object, was: object) -> bool:
    """Whether `now` is a number as the API writes one, the same number `was` was."""
    return (
        isinstance(now, str)
        and isinstance(was, str)
        and NUMBER.fullmatch(now) is not None
        and NUMBER.fullmatch(was) is not None
        and float(now) == float(was)
    )


@settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=mangled())
def test_no_mangled_answer_makes_the_fleet_raise_or_a_cluster_it_could_not_read_healthy(
    case: tuple[dict[str, list[dict[str, Any]]], set[str]],
) -> None:
    results, unread = case
    # the standard library writes what orjson will not: integers past 64 bits, and NaN (which then
    # makes the answer JSON no store would send)
    answers = {
        name: parse_answer(
            200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": r}}).encode()
        )
        for name, r in results.items()
    }
    fleet = build(
        answers,
        now=NOW,
        cluster_label="cluster",
        prometheus="http://prometheus:9090",
        filters=Filters(),
        stale_after=STALE_AFTER,
        urls={},
    )
    document = orjson.loads(orjson.dumps(fleet.to_dict()))
    for cluster in document["clusters"]:
        if cluster["state"] == "healthy":
            assert cluster["name"] not in unread, cluster
            assert (cluster["up"], cluster["synced"], cluster["unreadable"]) == (True, True, {}), cluster
            assert 0 <= cluster["age_seconds"] <= STALE_AFTER, cluster
            assert not any(cluster["roots"].values()), cluster
    assert document["healthy"] == (
        not document["errors"]
        and bool(document["clusters"])
        and all(c["state"] == "healthy" for c in document["clusters"])
    )
    shown = parse(render_fleet(fleet).decode()).by_id("clusters").all("tr")[1:]
    assert [row.all("td")[1].text for row in shown] == [c["state"] for c in document["clusters"]]


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(value=unwritten_values)
def test_the_sample_readers_return_a_value_in_range_or_say_why_not(value: object) -> None:
    """Each reader gives what its query needs, in range, or Unreadable naming what came back."""
    one = sample(value)
    read_flag, read_count, read_moment = flag(one), count(one), moment(one, now=NOW)
    if not (isinstance(value, str) and NUMBER.fullmatch(value) and math.isfinite(float(value))):
        assert all(isinstance(r, Unreadable) for r in (read_flag, read_count, read_moment)), value
        return
    number = float(value)
    if number in (0, 1):
        assert read_flag is (number == 1)
    else:
        assert isinstance(read_flag, Unreadable)
    if isinstance(read_count, int):
        assert read_count == number >= 0
    else:
        assert not (number.is_integer() and 0 <= number <= 2**53)
    if isinstance(read_moment, datetime):
        assert read_moment.timestamp() == number
        assert 0 <= number <= T + 1
    else:
        assert not 0 <= number <= T + 1
