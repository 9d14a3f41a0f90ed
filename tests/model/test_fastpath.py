"""The fast path gives exactly project()'s projection, or steps aside so project() decides.

Every comparison is against the slow path the reflector ran before: orjson.loads of the
same bytes, apiVersion and kind set from the watched resource, then project().
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from bench.workload import PHASES, Cluster
from tests.model.builders import (
    MIN,
    cond,
    crd,
    deployment,
    event,
    helm_chart,
    helm_release,
    kustomization,
    lease,
    pod,
)
from watcher.model.ingest.decoded import Decoded, Unreadable
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.projection import MESSAGE_LIMIT, MalformedObject, project

Obj = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def watch_line(obj: Obj, kind: str = "ADDED") -> bytes:
    return orjson.dumps({"type": kind, "object": obj})


def slow(line: bytes) -> Obj:
    """What the reflector's slow path makes of a watch line."""
    obj = orjson.loads(line)["object"]
    return project(obj)


def outcome(decode: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "projected", decode()
    except MalformedObject as error:
        return "malformed", str(error)


def decoded_outcome(line: bytes, *, api_version: str, kind: str) -> tuple[str, Any]:
    """What the reflector's decoder (decode(): the fast path, else orjson + project()) makes of
    a watch line, in outcome()'s terms."""
    decoded = fast_path(api_version, kind).decode(line)
    if decoded.problem:
        return "malformed", decoded.problem
    return "projected", (decoded.type, decoded.object)


def assert_fast_and_equal(obj: Obj) -> None:
    """The fast path answers, for the watch line and as a list item, with project()'s result."""
    line = watch_line(obj)
    fast = fast_path(obj["apiVersion"], obj["kind"])
    decoded = fast.event(line)
    assert decoded is not None
    expected = slow(line)
    meta = obj["metadata"]
    assert decoded == Decoded(
        "ADDED", meta.get("resourceVersion", ""), (meta.get("namespace", ""), meta["name"]), expected
    )
    item = {k: v for k, v in orjson.loads(line)["object"].items() if k not in ("apiVersion", "kind")}
    page = fast.page(orjson.dumps({"metadata": {"resourceVersion": "42"}, "items": [item]}))
    assert page is not None
    assert page.items == [(decoded.key, expected)]


# -- Real shapes: the examples and the benchmark's cluster ---------------------------------------


def example_objects() -> Iterator[Any]:
    for file in sorted(EXAMPLES.glob("*/*.yaml")):
        for item in yaml.safe_load(file.read_text())["items"]:
            name = f"{file.parent.name}/{item['kind']}/{item['metadata']['name']}"
            yield pytest.param(item, id=name)


@pytest.mark.parametrize("obj", list(example_objects()))
def test_every_example_object_takes_the_fast_path_to_its_projection(obj: Obj) -> None:
    assert_fast_and_equal(orjson.loads(orjson.dumps(obj)))  # YAML timestamps spelled as JSON would


def benchmark_objects() -> Iterator[Obj]:
    """The benchmark cluster at its smallest size, owners' uids filled in phase by phase as the
    API server would, plus the shapes churn writes (a Pod in ImagePullBackOff)."""
    cluster = Cluster(1000, datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    for phase in PHASES:
        for index, obj in enumerate(cluster.phase(phase)):
            meta = obj["metadata"]
            meta["uid"], meta["resourceVersion"] = f"uid-{phase[0]}-{index}", str(index + 1)
            cluster.uids[(obj["kind"], meta.get("namespace", ""), meta["name"])] = meta["uid"]
            yield obj
            if obj["kind"] == "Pod" and index == 0:
                broken = copy.deepcopy(obj)
                image = obj["status"]["containerStatuses"][0]["image"]
                broken["status"] = cluster.pod_status(image, ready=False, since=cluster.ago(minutes=3))
                yield broken


def test_every_benchmark_object_takes_the_fast_path_to_its_projection() -> None:
    seen = set()
    for obj in benchmark_objects():
        if obj["kind"] != "Namespace":
            assert_fast_and_equal(obj)
            seen.add(obj["kind"])
    assert {"Pod", "Deployment", "ReplicaSet", "Lease", "Event", "Kustomization", "HelmRelease"} <= seen
    assert {"HelmChart", "Terraform", "GitRepository", "OCIRepository", "Bucket"} <= seen


# -- Edge cases: fast when it can be sure, the slow path's answer always -------------------------


def _set(obj: Obj, path: str, value: Any) -> Obj:
    target = obj
    *steps, last = path.split(".")
    for step in steps:
        target = target[int(step)] if isinstance(target, list) else target.setdefault(step, {})
    target[last] = value
    return obj


def _pod(**changes: Any) -> Obj:
    raw = pod("web-1", "apps", app="web", ready=False, waiting="CrashLoopBackOff", last_terminated="Error")
    for path, value in changes.items():
        _set(raw, path.replace("__", "."), value)
    return raw


def _ks(**changes: Any) -> Obj:
    raw = kustomization("apps", depends_on=["infra"], inventory=["apps_web_apps_Deployment"])
    for path, value in changes.items():
        _set(raw, path.replace("__", "."), value)
    return raw


def _events_v1(**fields: Any) -> Obj:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web-1.17a", "namespace": "apps", "resourceVersion": "9"},
        "regarding": {"kind": "Pod", "name": "web-1", "namespace": "apps"},
        "note": "Back-off restarting failed container",
        "reason": "BackOff",
        "type": "Warning",
        "deprecatedCount": 5,
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
        "eventTime": "2024-05-01T11:59:00.000000Z",
        "series": {"count": 9, "lastObservedTime": "2024-05-01T11:59:00.000000Z"},
        "reportingController": "kubelet",
        **fields,
    }


def _core_event(**fields: Any) -> Obj:
    raw = event(
        "web-1.17b",
        "apps",
        kind="Pod",
        involved="web-1",
        reason="BackOff",
        message="m",
        count=3,
        first=5 * MIN,
        last=MIN,
    )
    return {**raw, "eventTime": None, **fields}


def _args(*args: Any) -> Obj:
    obj = deployment("web", "apps")
    obj["spec"]["template"]["spec"]["containers"][0]["args"] = list(args)
    return obj


def _conditions(extra: int) -> list[Obj]:
    return [cond("Ready", "True", "Applied")] + [cond(f"Extra{i}") for i in range(extra)]


def _annotations(count: int) -> dict[str, str]:
    return {f"reconcile.fluxcd.io/k{i}": "v" for i in range(count)}


def _history(count: int) -> list[Obj]:
    return [
        {"name": "podinfo", "version": v, "status": "superseded", "chartVersion": "6.5.0"}
        for v in range(count)
    ]


def _managed(count: int) -> list[Obj]:
    return [
        {
            "manager": f"m{i}",
            "operation": "Update",
            "time": "2024-05-01T11:00:00Z",
            "fieldsV1": {"f:spec": {}},
        }
        for i in range(count)
    ]


EDGES = [
    # Fast: the Struct shape says it all.
    pytest.param(_pod(), True, id="pod-with-waiting-and-last-terminated"),
    pytest.param(
        _pod(status__conditions=[*_conditions(4), cond("PodScheduled")]),
        True,
        id="extra-pod-conditions-are-left-out",
    ),
    pytest.param(_pod(status__containerStatuses__0__lastState={}), True, id="empty-last-state-is-left-out"),
    pytest.param(
        _pod(status__reason="", status__conditions__0__reason=""), True, id="empty-strings-read-as-absent"
    ),
    pytest.param(_pod(metadata__namespace=""), True, id="empty-namespace-is-kept"),
    pytest.param(_pod(status__conditions__0__lastProbeTime=None), True, id="null-unread-field-is-skipped"),
    pytest.param(_ks(status__conditions__0__lastUpdateTime=None), True, id="null-timestamp-reads-as-absent"),
    pytest.param(_ks(status__conditions=[]), True, id="empty-condition-list-is-kept"),
    pytest.param(_ks(status={}), True, id="empty-status-is-left-out"),
    pytest.param(
        _ks(metadata__annotations={**_annotations(3), "kubectl.kubernetes.io/x": "{}"}),
        True,
        id="annotations-kept-by-prefix",
    ),
    pytest.param(
        _ks(metadata__annotations={"reconcile.fluxcd.io/requestedAt": "t" * 5000}),
        True,
        id="long-kept-annotation-is-cut",
    ),
    pytest.param(_ks(metadata__managedFields=_managed(40)), True, id="managed-fields-cut-to-32"),
    pytest.param(
        _ks(metadata__managedFields=[{**m, "subresource": "status"} for m in _managed(40)] + _managed(2)),
        True,
        id="status-subresource-writes-are-not-read-nor-counted",
    ),
    pytest.param(
        _set(helm_release("podinfo", "apps"), "status.history", _history(7)), True, id="helm-history-cut-to-5"
    ),
    pytest.param(helm_chart("apps-podinfo", "apps"), True, id="helm-chart-spec-chart-is-a-name"),
    pytest.param(
        lease("kustomize-controller-leader-election", holder="kc-1_abc", renewed=MIN), True, id="lease"
    ),
    pytest.param(_events_v1(), True, id="events-v1-names-read-as-core-v1"),
    pytest.param(_core_event(), True, id="core-event-with-null-event-time"),
    pytest.param(deployment("web", "apps"), True, id="deployment"),
    # Slow: project() decides, the fast path steps aside.
    pytest.param(_pod(metadata__labels={"app": "web", "weird": None}), False, id="null-label-value"),
    pytest.param(_ks(spec__interval=600), False, id="wrong-type-token-is-rejected"),
    pytest.param(_ks(status__observedGeneration=True), False, id="boolean-is-not-an-integer"),
    pytest.param(_ks(status__observedGeneration=2**63 + 1), False, id="integer-beyond-int64"),
    pytest.param(_ks(status__conditions__0__message="x" * 50_000), False, id="over-long-message-is-cut"),
    pytest.param(
        _pod(status__conditions=[cond("Initialized", message="x" * 5000), cond("Ready")]),
        False,
        id="over-long-message-of-unread-pod-condition",
    ),
    pytest.param(_ks(metadata__creationTimestamp="yesterday"), False, id="unparseable-timestamp-is-rejected"),
    pytest.param(_ks(status__conditions__0__status=""), False, id="condition-without-status-is-dropped"),
    pytest.param(_ks(spec__dependsOn=[{"namespace": "x"}]), False, id="depends-on-without-name-is-dropped"),
    pytest.param(_ks(status__inventory={"entries": [{"id": ""}]}), False, id="inventory-entry-without-id"),
    pytest.param(_ks(status__inventory={"entries": "web"}), False, id="inventory-a-string-is-rejected"),
    pytest.param(_ks(metadata__managedFields={"a": 1}), False, id="managed-fields-an-object-is-rejected"),
    pytest.param(_ks(metadata__managedFields=[{"fieldsV1": 5}]), False, id="fields-v1-a-number-is-rejected"),
    pytest.param(_ks(spec__sourceRef="flux-system"), False, id="a-string-for-an-object-is-rejected"),
    pytest.param(_ks(status__inventory={"entries": [None]}), False, id="a-null-entry-reads-as-absent"),
    pytest.param(_events_v1(message="core spelling too"), False, id="event-with-both-spellings"),
    pytest.param(_events_v1(message=""), False, id="event-with-both-spellings-the-later-empty"),
    pytest.param(_core_event(note="v1 spelling"), False, id="core-event-with-a-v1-spelling"),
    pytest.param(_ks(metadata__name="n" * 300), False, id="over-long-name-is-malformed"),
    pytest.param(_ks(metadata__name=""), False, id="no-name-is-malformed"),
    pytest.param(_ks(metadata__generation="2"), False, id="generation-not-an-integer-is-malformed"),
    pytest.param(_ks(status__conditions=_conditions(64)), False, id="too-many-conditions-is-malformed"),
    pytest.param(_ks(status__conditions=["Ready"]), False, id="condition-not-an-object-is-malformed"),
    pytest.param(_ks(metadata__annotations=_annotations(65)), False, id="too-many-kept-annotations"),
    pytest.param(_pod(status__conditions=[cond("Ready")] * 65), False, id="too-many-pod-conditions"),
    # Out of range: the slow path drops the value and says so under "rejected".
    pytest.param(
        _ks(status__conditions__0__lastTransitionTime="9999-12-31T23:59:59-01:00"),
        False,
        id="far-future-offset-time-is-rejected",
    ),
    pytest.param(
        _pod(metadata__creationTimestamp="0001-01-01T00:00:00+01:00"), False, id="year-one-offset-time"
    ),
    pytest.param(_ks(status__conditions__0__observedGeneration=1e41), False, id="float-where-an-int-is"),
    pytest.param(_ks(metadata__generation=2**63), False, id="generation-beyond-int64-is-malformed"),
    pytest.param(
        _set(lease("kc-leader", holder="kc-1_abc", renewed=MIN), "spec.leaseDurationSeconds", 9 * 10**15),
        False,
        id="lease-duration-beyond-a-century",
    ),
    pytest.param(
        _args("--log-level=info", "--watch-label-selector=!sharding.fluxcd.io/key"), True, id="args"
    ),
    pytest.param(_args("--watch-label-selector", "a in (x)", "-v"), True, id="args-flag-then-value"),
    pytest.param(_args("--log-level=info"), True, id="args-without-the-flag-are-left-out"),
    pytest.param(_args("--watch-label-selector=a=1", 5), False, id="args-not-all-strings"),
    pytest.param(
        _set(deployment("web", "apps"), "spec.progressDeadlineSeconds", 2**31 - 1),
        True,
        id="progress-deadline-of-max-int32-is-kept",
    ),
]


@pytest.mark.parametrize(("obj", "fast"), EDGES)
def test_edge_case_gives_the_slow_paths_answer_and_takes_the_fast_path_only_when_sure(
    obj: Obj, fast: bool
) -> None:
    line = watch_line(obj)
    api_version, kind = obj["apiVersion"], obj["kind"]
    fast_path_ = fast_path(api_version, kind)

    answer = decoded_outcome(line, api_version=api_version, kind=kind)

    assert answer == outcome(lambda: ("ADDED", slow(line)))
    assert (fast_path_.event(line) is not None) == fast


def test_a_wrong_typed_field_on_the_watch_comes_rejected_by_name_not_silently_left_out() -> None:
    line = watch_line(_ks(metadata__managedFields={"manager": "kubectl"}))

    decoded = fast_path("kustomize.toolkit.fluxcd.io/v1", "Kustomization").decode(line)

    assert decoded.object is not None
    assert [(m["field"], m["reason"]) for m in decoded.object["rejected"]] == [
        ("metadata.managedFields", "WrongType")
    ]


def test_list_items_without_kind_or_api_version_take_them_from_the_watched_resource() -> None:
    items = [{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")} for obj in (_pod(), _pod())]
    items[1]["metadata"] = {**items[1]["metadata"], "name": "web-2"}
    body = orjson.dumps({"metadata": {"resourceVersion": "77", "continue": "next"}, "items": items})

    page = fast_path("v1", "Pod").page(body)

    assert page is not None
    assert (page.resource_version, page.continue_token) == ("77", "next")
    assert page.items == [
        (("apps", item["metadata"]["name"]), project({"apiVersion": "v1", "kind": "Pod", **item}))
        for item in items
    ]


def test_a_list_page_with_one_doubtful_item_is_left_to_the_slow_path() -> None:
    items = [_pod(), _pod(metadata__labels={"app": None})]

    assert fast_path("v1", "Pod").page(orjson.dumps({"items": items})) is None


def test_bookmark_gives_its_resource_version_and_no_object() -> None:
    bookmark = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "12345", "annotations": {"k8s.io/initial-events-end": "true"}},
    }

    decoded = fast_path("v1", "Pod").event(watch_line(bookmark, "BOOKMARK"))

    assert decoded == Decoded("BOOKMARK", "12345", ("", ""), None)
    assert fast_path("v1", "Pod").decode(watch_line(bookmark, "BOOKMARK")) == decoded


def test_deleted_event_gives_the_key_and_projection() -> None:
    raw = _pod(metadata__resourceVersion="88")

    decoded = fast_path("v1", "Pod").event(watch_line(raw, "DELETED"))

    assert decoded == Decoded("DELETED", "88", ("apps", "web-1"), project(raw))


def test_a_status_in_an_error_event_is_left_to_the_slow_path_which_hands_it_over() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired"}
    line = watch_line(status, "ERROR")

    assert fast_path("v1", "Pod").event(line) is None
    assert fast_path("v1", "Pod").decode(line) == Decoded("ERROR", "", ("", ""), None, raw=status)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"type":"ADDED","object":{"metadata":', id="cut-short"),
        pytest.param(b'{"type":"ADDED"}', id="no-object"),
        pytest.param(b'["ADDED"]', id="not-an-event"),
    ],
)
def test_an_unreadable_line_is_left_to_the_slow_path_which_raises(line: bytes) -> None:
    assert fast_path("v1", "Pod").event(line) is None
    with pytest.raises(Unreadable):
        fast_path("v1", "Pod").decode(line)


def test_decode_always_answers_and_a_malformed_object_comes_with_its_problem() -> None:
    raw = _ks(metadata__resourceVersion="41", status__conditions=["Ready"])
    line = watch_line(raw, "MODIFIED")
    expected = outcome(lambda: slow(line))

    decoded = fast_path(raw["apiVersion"], raw["kind"]).decode(line)

    assert expected[0] == "malformed"
    assert decoded == Decoded(
        "MODIFIED", "41", ("flux-system", "apps"), None, expected[1], raw=orjson.loads(line)["object"]
    )


def test_decode_page_lists_malformed_items_with_their_problem_and_keeps_the_rest() -> None:
    good, bad = _pod(), _pod(metadata__name="web-2", metadata__generation="2")
    body = orjson.dumps({"metadata": {"resourceVersion": "77", "continue": "next"}, "items": [good, bad]})

    page = fast_path("v1", "Pod").decode_page(body)

    assert fast_path("v1", "Pod").page(body) is None
    assert page.items == [(("apps", "web-1"), project(good))]
    assert [(m.key, m.problem) for m in page.malformed] == [
        (("apps", "web-2"), outcome(lambda: project(bad))[1])
    ]
    assert (page.resource_version, page.continue_token) == ("77", "next")
    with pytest.raises(Unreadable):
        fast_path("v1", "Pod").decode_page(b"[]")


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(crd("kustomizations", "kustomize.toolkit.fluxcd.io", "Kustomization"), id="crd"),
        pytest.param(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "migrate", "namespace": "apps", "resourceVersion": "3"},
                "spec": {"parallelism": 1, "completions": 1},
                "status": {"active": 1, "startTime": "2024-05-01T11:00:00Z"},
            },
            id="job",
        ),
    ],
)
def test_every_kind_has_a_fast_path_the_schema_declares_it_for(obj: Obj) -> None:
    assert_fast_and_equal(obj)


def test_long_message_is_cut_exactly_as_project_cuts_it() -> None:
    raw = _ks(status__conditions__0__message="x" * 5000)

    projected = fast_path(raw["apiVersion"], raw["kind"]).decode(watch_line(raw)).object

    assert projected is not None
    assert len(projected["status"]["conditions"][0]["message"]) == MESSAGE_LIMIT


def test_tokens_are_interned_like_projects() -> None:
    first, second = (_pod(metadata__name=name) for name in ("web-1", "web-2"))
    a = fast_path("v1", "Pod").decode(watch_line(first)).object
    b = fast_path("v1", "Pod").decode(watch_line(second)).object

    assert a is not None
    assert b is not None
    assert a["status"]["conditions"][0]["type"] is b["status"]["conditions"][0]["type"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["status"]["containerStatuses"][0]["image"] is b["status"]["containerStatuses"][0]["image"]
