"""The fleet builder, one named case per rule: answers as the query API returns them, a clock,
and what each cluster, root group and matrix cell must then say."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from watcher.fleet.model import Fleet, build
from watcher.fleet.prom import parse_answer
from watcher.fleet.queries import MAX_ROWS, Answer, Filters, matrix_query, queries

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
REV_A, REV_B = "main@sha1:" + "a" * 40, "main@sha1:" + "b" * 40
TOFU = {"kind": "Deployment", "namespace": "flux-system", "name": "tofu-controller"}


def s(value: float, **labels: str) -> dict[str, Any]:
    """A sample as /api/v1/query returns it."""
    return {"metric": labels, "value": [NOW.timestamp(), repr(float(value))]}


def reporting(*clusters: str, age: float = 1.0, up: float = 1, synced: float = 1) -> dict[str, Answer]:
    """Answers of clusters whose stalewatch reports, up and synced, its last sample `age` old."""
    at = NOW.timestamp() - age
    return {
        "up": Answer(tuple(s(up, cluster=c) for c in clusters)),
        "synced": Answer(tuple(s(synced, cluster=c) for c in clusters)),
        "last_sample": Answer(tuple(s(at, cluster=c) for c in clusters)),
    }


def rows_of(series: Sequence[dict[str, Any]]) -> Answer:
    """What `matrix_rows` answers for the objects of these revision series."""
    keys = sorted({tuple(m["metric"][k] for k in ("kind", "namespace", "name")) for m in series})
    return Answer(tuple(s(1, kind=k, namespace=ns, name=n) for k, ns, n in keys))


def fleet(answers: dict[str, Answer], *, urls: dict[str, str] | None = None) -> Fleet:
    """The fleet from these answers, the others empty; `matrix_rows` as the store would give it
    for the `matrix` answer unless given."""
    asked = dict.fromkeys(queries(cluster_label="cluster", filters=Filters()), Answer())
    if "matrix" in answers and "matrix_rows" not in answers:
        asked["matrix_rows"] = rows_of(answers["matrix"].result)
    return build(
        {**asked, **answers},
        now=NOW,
        cluster_label="cluster",
        prometheus="http://prometheus:9090",
        filters=Filters(),
        stale_after=120,
        urls=urls or {},
    )


def state(f: Fleet, cluster: str) -> tuple[str, str]:
    [c] = [c for c in f.clusters if c.name == cluster]
    return c.state, c.why


def critical_root(cluster: str, **subject: str) -> dict[str, Any]:
    labels = {"type": "ControllerDown", "severity": "critical", "root": "true", **(subject or TOFU)}
    return s(3, cluster=cluster, **labels)


CLUSTER_CASES = [
    pytest.param(reporting("a"), ("healthy", "up, synced, no root cause"), id="up-synced-clean-is-healthy"),
    pytest.param(
        {"last_sample": Answer((s(NOW.timestamp() - 300, cluster="a"),))},
        ("unknown", "not reporting: last sample 5m ago"),
        id="stopped-reporting-is-unknown-never-green",
    ),
    pytest.param(
        reporting("a", age=600),
        ("unknown", "last sample 10m ago, older than 120s"),
        id="last-sample-too-old-is-unknown",
    ),
    pytest.param(
        {**reporting("a"), "up": Answer(error="unreachable: connection refused")},
        ("unknown", "the store did not answer (unreachable: connection refused)"),
        id="store-error-is-unknown",
    ),
    pytest.param(
        reporting("a", up=float("nan")),
        ("unknown", 'its samples cannot be read: up "nan", not a finite number'),
        id="unreadable-sample-is-unknown-never-green",
    ),
    pytest.param(
        reporting("a", up=0),
        ("stale", "its stalewatch cannot reach the Kubernetes API server: last known state"),
        id="api-server-unreachable-is-stale",
    ),
    pytest.param(
        reporting("a", synced=0),
        ("stale", "its stalewatch has not finished listing the cluster"),
        id="not-synced-is-stale",
    ),
    pytest.param(
        {**reporting("a"), "root_counts": Answer(error="timeout: query timed out")},
        ("unknown", "its root causes could not be read (timeout: query timed out)"),
        id="roots-unreadable-is-unknown",
    ),
    pytest.param(
        {
            **reporting("a"),
            "root_counts": Answer(
                (s(1, cluster="a", severity="critical"), s(2, cluster="a", severity="info"))
            ),
        },
        ("critical", "root causes: 1 critical, 2 info"),
        id="worst-root-gives-the-state",
    ),
    pytest.param(
        {**reporting("a"), "controllers_down": Answer((s(0, cluster="a", **TOFU),))},
        ("warning", "controllers down: flux-system/tofu-controller"),
        id="controller-down-without-root-is-not-healthy",
    ),
]


@pytest.mark.parametrize(("answers", "expected"), CLUSTER_CASES)
def test_a_clusters_state_is_the_first_rule_that_applies(
    answers: dict[str, Answer], expected: tuple[str, str]
) -> None:
    f = fleet(answers)
    assert state(f, "a") == expected
    assert f.healthy == (expected[0] == "healthy")


def test_a_cluster_named_by_a_flag_but_never_seen_is_listed_unknown_with_its_link() -> None:
    f = fleet(reporting("a"), urls={"b": "https://stalewatch.b.example/"})
    assert state(f, "b") == ("unknown", "not reporting: no sample in the last 1h")
    assert [c.name for c in f.clusters] == ["b", "a"], "unknown sorts first"
    assert f.clusters[0].url == "https://stalewatch.b.example/"
    assert not f.healthy


def test_a_store_that_cannot_be_reached_shows_no_cluster_and_nothing_healthy() -> None:
    down = Answer(error="unreachable: Cannot connect to host")
    f = fleet({name: down for name in queries(cluster_label="cluster", filters=Filters())})
    assert f.clusters == []
    assert not f.healthy
    assert set(f.errors) == set(queries(cluster_label="cluster", filters=Filters()))
    assert f.to_dict()["healthy"] is False


def test_the_same_root_in_several_clusters_is_one_line_with_each_cluster_its_reason_and_blast_radius() -> (
    None
):
    blast = {"root_kind": "Deployment", "root_namespace": "flux-system", "root_name": "tofu-controller"}
    f = fleet(
        {
            **reporting("a", "b", "c"),
            "roots": Answer(
                (
                    critical_root("a"),
                    critical_root("b"),
                    critical_root("c"),
                    s(
                        2,
                        cluster="a",
                        type="RevisionSkew",
                        severity="warning",
                        root="true",
                        kind="Kustomization",
                        namespace="apps",
                        name="web",
                    ),
                )
            ),
            "down_reasons": Answer(
                (
                    s(
                        1,
                        cluster="a",
                        namespace="flux-system",
                        name="tofu-controller",
                        reason="ImagePullBackOff",
                    ),
                    s(
                        1,
                        cluster="b",
                        namespace="flux-system",
                        name="tofu-controller",
                        reason="ImagePullBackOff",
                    ),
                    s(1, cluster="c", namespace="flux-system", name="tofu-controller", reason="OOMKilled"),
                )
            ),
            "blast_radius": Answer((s(10, cluster="a", **blast), s(4, cluster="b", **blast))),
        },
        urls={"a": "https://a.example/"},
    )
    lines = [
        (g.severity, g.type, g.name, g.reason, [(w.cluster, w.url, w.blast_radius) for w in g.clusters])
        for g in f.roots
    ]
    assert lines == [
        (
            "critical",
            "ControllerDown",
            "tofu-controller",
            "ImagePullBackOff",
            [("a", "https://a.example/", 10), ("b", None, 4)],
        ),
        ("critical", "ControllerDown", "tofu-controller", "OOMKilled", [("c", None, 0)]),
        ("warning", "RevisionSkew", "web", "", [("a", "https://a.example/", 0)]),
    ]


def revision(cluster: str, applied: str, offered: str, name: str = "apps") -> dict[str, Any]:
    labels = {"kind": "Kustomization", "namespace": "flux-system", "name": name}
    return s(
        1,
        cluster=cluster,
        source="GitRepository/flux-system/infra",
        revision=offered,
        applied_revision=applied,
        **labels,
    )


MATRIX_CASES = [
    pytest.param(
        [revision("a", REV_A, REV_A), revision("b", REV_A, REV_A), revision("c", REV_B, REV_B)],
        REV_A,
        {"a": (False, False), "b": (False, False), "c": (True, False)},
        id="majority-skew-marks-the-odd-cluster",
    ),
    pytest.param(
        [revision("a", REV_A, REV_A), revision("b", REV_B, REV_B)],
        None,
        {"a": (True, False), "b": (True, False)},
        id="a-tie-has-no-majority-and-marks-every-cell",
    ),
    pytest.param(
        [revision("a", REV_A, REV_B), revision("b", REV_A, REV_B)],
        REV_A,
        {"a": (False, True), "b": (False, True)},
        id="source-lag-marks-cells-behind-their-source",
    ),
    pytest.param(
        [revision("a", "", REV_A), revision("b", REV_A, REV_A)],
        REV_A,
        {"a": (False, True), "b": (False, False)},
        id="not-yet-applied-lags-but-is-no-revision-of-its-own",
    ),
]


@pytest.mark.parametrize(("series", "majority", "marks"), MATRIX_CASES)
def test_the_version_matrix_marks_cells_off_the_majority_or_behind_their_source(
    series: list[dict[str, Any]], majority: str | None, marks: dict[str, tuple[bool, bool]]
) -> None:
    f = fleet({"matrix": Answer(tuple(series))})
    [row] = f.rows
    assert row.majority == majority
    assert {c: (cell.off_majority, cell.lags_source) for c, cell in row.cells.items()} == marks


def test_the_matrix_lists_skewed_rows_first_then_lagging_then_by_name() -> None:
    series = [
        revision("a", REV_A, REV_A, "agreeing"),
        revision("b", REV_A, REV_A, "agreeing"),
        revision("a", REV_A, REV_B, "lagging"),
        revision("b", REV_A, REV_B, "lagging"),
        revision("a", REV_A, REV_A, "skewed"),
        revision("b", REV_B, REV_B, "skewed"),
        revision("a", REV_A, REV_A, "only-in-a"),
    ]
    f = fleet({"matrix": Answer(tuple(series))})
    assert [r.name for r in f.rows] == ["skewed", "lagging", "agreeing", "only-in-a"]
    assert f.columns == ["a", "b"]
    assert "b" not in f.rows[-1].cells
    assert not f.matrix_bounded


def test_the_matrix_holds_only_the_rows_asked_for_and_says_when_it_is_bounded() -> None:
    """The cells query selects by names and namespaces, so it may bring an object of one row's
    name in another row's namespace: not a row that was asked for."""
    asked = [revision("a", REV_A, REV_A, f"app-{i:03d}") for i in range(MAX_ROWS)]
    other = {
        **revision("a", REV_A, REV_A, "app-000"),
        "metric": {**asked[0]["metric"], "namespace": "elsewhere"},
    }
    f = fleet({"matrix": Answer((*asked, other)), "matrix_rows": rows_of(asked)})
    assert len(f.rows) == MAX_ROWS
    assert {r.namespace for r in f.rows} == {"flux-system"}
    assert f.matrix_bounded


ANSWER_CASES = [
    pytest.param(
        422,
        b'{"status":"error","errorType":"execution","error":"query processing would load too many samples"}',
        Answer(error="execution: query processing would load too many samples"),
        id="prometheus-error-envelope",
    ),
    pytest.param(
        502,
        b"<html>Bad Gateway</html>",
        Answer(error="HTTP 502, not a query API answer: <html>Bad Gateway</html>"),
        id="a-proxy-page",
    ),
    pytest.param(
        200,
        b'{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}',
        Answer(error="expected an instant vector, got scalar"),
        id="not-a-vector",
    ),
    pytest.param(
        200,
        b'{"status":"success","warnings":["partial response: store eu-1 unavailable"],'
        b'"data":{"resultType":"vector","result":[{"metric":{"cluster":"a"},"value":[1,"1"]}]}}',
        Answer(
            ({"metric": {"cluster": "a"}, "value": [1, "1"]},),
            warnings=("partial response: store eu-1 unavailable",),
        ),
        id="warnings-are-kept",
    ),
]


@pytest.mark.parametrize(("status", "body", "expected"), ANSWER_CASES)
def test_an_answer_is_read_strictly_and_every_failure_says_what_came_back(
    status: int, body: bytes, expected: Answer
) -> None:
    assert parse_answer(status, body) == expected


def test_a_store_warning_reaches_the_fleet_and_it_is_not_healthy() -> None:
    f = fleet({**reporting("a"), "roots": Answer(warnings=("partial response",))})
    assert f.warnings == ["partial response"]
    assert state(f, "a")[0] == "healthy"
    assert not f.healthy, "a partial answer may be missing clusters"


def test_the_cells_query_selects_each_row_by_its_name_literally() -> None:
    rows = [
        s(2, kind="Kustomization", namespace="a.b", name="x(y) z|w+"),
        s(1, kind="Terraform", namespace="c", name="d"),
    ]
    query = matrix_query(rows, cluster_label="cluster", filters=Filters(cluster="prod"))
    matchers = dict(re.findall(r'(\w+)=~"((?:[^"\\]|\\.)*)"', query))
    regex = {label: value.replace("\\\\", "\\") for label, value in matchers.items()}
    assert re.fullmatch(regex["name"], "x(y) z|w+")
    assert re.fullmatch(regex["name"], "d")
    assert not re.fullmatch(regex["name"], "x(y) z")
    assert re.fullmatch(regex["namespace"], "a.b")
    assert not re.fullmatch(regex["namespace"], "axb")
    assert regex["cluster"] == "prod"
