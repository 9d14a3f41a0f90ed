"""project(): keeps what the model reads, drops the rest, names the field when unusable."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from tests.model.builders import (
    MIN,
    cond,
    deployment,
    git_repository,
    helm_release,
    kustomization,
    lease,
    pod,
)
from watcher.model.ingest.projection import MESSAGE_LIMIT, MalformedObject, project

Obj = dict[str, Any]


def test_typical_pod_projection_is_under_two_kib_as_json() -> None:
    raw = pod(
        "podinfo-7d9f-x2x4z",
        "apps",
        app="podinfo",
        ready=False,
        waiting="CrashLoopBackOff",
        waiting_message="back-off 5m0s restarting failed container",
        restarts=7,
        last_terminated="OOMKilled",
    )
    raw["metadata"]["managedFields"] = [
        {"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}
    ]

    projected = project(raw)

    assert len(orjson.dumps(projected)) <= 2048
    assert "managedFields" not in projected["metadata"]
    assert [c["type"] for c in projected["status"]["conditions"]] == ["Ready", "PodScheduled"]
    assert projected["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] == "OOMKilled"


def test_kustomization_keeps_the_fields_the_rules_read() -> None:
    raw = kustomization(
        "apps", depends_on=["infra"], inventory=["apps_web_apps_Deployment"], requested_at="2024-05-01"
    )
    raw["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{...}"

    projected = project(raw)

    assert projected["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}
    assert projected["spec"]["dependsOn"] == [{"name": "infra"}]
    assert projected["status"]["inventory"]["entries"] == [{"id": "apps_web_apps_Deployment", "v": "v1"}]
    assert projected["metadata"]["annotations"] == {"reconcile.fluxcd.io/requestedAt": "2024-05-01"}
    assert "path" not in projected["spec"]


def test_helm_release_history_and_source_artifact_are_kept() -> None:
    release, source = project(helm_release("podinfo", "apps")), project(git_repository())

    assert release["status"]["history"][0]["chartVersion"] == "6.5.0"
    assert release["status"]["helmChart"] == "apps/apps-podinfo"
    assert set(source["status"]["artifact"]) == {"revision", "digest", "lastUpdateTime"}


def test_lease_keeps_holder_duration_and_renew_time() -> None:
    projected = project(lease("kustomize-controller-leader-election", holder="kc-1_abc", renewed=MIN))

    assert set(projected["spec"]) == {
        "holderIdentity",
        "leaseDurationSeconds",
        "renewTime",
        "acquireTime",
        "leaseTransitions",
    }


def test_secret_data_is_never_kept() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "n"},
        "data": {"k": "c2VjcmV0"},
    }

    assert project(secret) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "n"},
    }


def test_long_condition_messages_are_truncated() -> None:
    raw = kustomization("apps", conditions=[cond("Ready", "False", "BuildFailed", "x" * 50_000)])

    message = project(raw)["status"]["conditions"][0]["message"]

    assert len(message) == MESSAGE_LIMIT
    assert message.endswith("…")


def test_yaml_parsed_timestamps_are_spelled_as_rfc3339() -> None:
    raw = kustomization("apps")
    raw["status"]["conditions"][0]["lastTransitionTime"] = datetime(2024, 5, 1, 11, 0, tzinfo=UTC)

    assert project(raw)["status"]["conditions"][0]["lastTransitionTime"] == "2024-05-01T11:00:00Z"


def test_events_v1_fields_are_read_under_core_v1_names() -> None:
    raw = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "apps"},
        "regarding": {"kind": "Pod", "name": "web-1", "namespace": "apps"},
        "note": "Back-off restarting failed container",
        "reason": "BackOff",
        "type": "Warning",
        "deprecatedCount": 5,
        "series": {"count": 9, "lastObservedTime": "2024-05-01T11:59:00.000000Z"},
    }

    projected = project(raw)

    assert projected["involvedObject"] == {"kind": "Pod", "name": "web-1", "namespace": "apps"}
    assert projected["message"] == "Back-off restarting failed container"
    assert projected["count"] == 5
    assert projected["series"]["count"] == 9


QUIET = [
    pytest.param(
        ["status", "conditions"],
        [{"type": "Ready"}, cond("Reconciling", "True")],
        ["Reconciling"],
        id="condition-without-status-says-nothing-and-is-left-out",
    ),
    pytest.param(["spec", "replicas"], None, None, id="null-reads-as-absent"),
    pytest.param(["status", "currentRevision"], "", None, id="empty-string-reads-as-absent"),
    pytest.param(["spec", "paused"], "yes", None, id="a-field-never-read-is-ignored"),
]


@pytest.mark.parametrize(("path", "value", "kept"), QUIET)
def test_what_reads_as_absent_is_left_out_without_a_rejection(path: list[str], value: Any, kept: Any) -> None:
    raw = deployment("web", "apps", conditions=[])
    raw.setdefault(path[0], {})[path[1]] = value

    projected = project(raw)

    section = projected.get(path[0], {})
    if isinstance(kept, list):
        assert [c["type"] for c in section[path[1]]] == kept
    else:
        assert section.get(path[1]) == kept
    assert "rejected" not in projected


def _at(raw: Obj, path: str, value: Any) -> Obj:
    target: Any = raw
    *steps, last = path.split(".")
    for step in steps:
        target = target[int(step)] if isinstance(target, list) else target.setdefault(step, {})
    target[int(last) if isinstance(target, list) else last] = value
    return raw


def _wrong(raw: Obj, path: str, value: Any, reason: str, written: str, *, field: str = "", id: str) -> Any:
    """A case: `raw` with `value` at `path`, rejected as `field` (`path` unless said)."""
    return pytest.param(_at(raw, path, value), field or path, reason, written, id=id)


WRONG = [
    _wrong(
        deployment("web", "apps"), "metadata.labels.weird", 3, "WrongType", "3", id="non-string-label-value"
    ),
    _wrong(deployment("web", "apps"), "spec.replicas", "three", "WrongType", "three", id="string-replicas"),
    _wrong(
        deployment("web", "apps"),
        "status.availableReplicas",
        True,
        "WrongType",
        "true",
        id="boolean-is-not-an-integer",
    ),
    _wrong(
        deployment("web", "apps"),
        "metadata.creationTimestamp",
        "yesterday",
        "TimeUnparseable",
        "yesterday",
        id="unparseable-timestamp",
    ),
    _wrong(
        kustomization("apps"), "status.inventory.entries", "web", "WrongType", "web", id="inventory-a-string"
    ),
    _wrong(
        kustomization("apps"),
        "metadata.managedFields",
        {"manager": "kubectl"},
        "WrongType",
        '{"manager": "kubectl"}',
        id="managed-fields-an-object",
    ),
    _wrong(
        kustomization("apps"),
        "metadata.managedFields",
        [{"manager": "kubectl", "fieldsV1": 5}],
        "WrongType",
        "5",
        field="metadata.managedFields[0].fieldsV1",
        id="fields-v1-no-field-set",
    ),
    _wrong(kustomization("apps"), "spec.suspend", "true", "WrongType", "true", id="suspend-a-string"),
    _wrong(kustomization("apps"), "status", ["Ready"], "WrongType", '["Ready"]', id="status-a-list"),
    _wrong(
        helm_release("podinfo", "apps"),
        "spec.chart",
        "podinfo",
        "WrongType",
        "podinfo",
        id="helm-release-chart-a-name",
    ),
]


@pytest.mark.parametrize(("raw", "field", "reason", "written"), WRONG)
def test_a_wrong_typed_field_is_left_out_and_rejected_by_name(
    raw: Obj, field: str, reason: str, written: str
) -> None:
    projected = project(raw)

    [mark] = projected["rejected"]
    assert (mark["field"], mark["reason"], mark["value"]) == (field, reason, written)
    assert mark["problem"].startswith("is not ")
    assert projected["metadata"]["name"] == raw["metadata"]["name"]


def test_a_condition_whose_status_is_wrong_goes_with_it_under_the_status_name() -> None:
    raw = kustomization("apps", conditions=[cond("Ready", "True"), cond("Reconciling", "True")])
    raw["status"]["conditions"][0]["status"] = True

    projected = project(raw)

    assert [c["type"] for c in projected["status"]["conditions"]] == ["Reconciling"]
    [mark] = projected["rejected"]
    assert (mark["field"], mark["reason"], mark["value"]) == (
        "status.conditions[0].status",
        "WrongType",
        "true",
    )


def test_a_pod_condition_with_a_type_that_is_no_string_is_rejected_not_filtered_away() -> None:
    raw = pod("web-1", "apps", app="web")
    raw["status"]["conditions"].append({"type": 7, "status": "True"})
    index = len(raw["status"]["conditions"]) - 1

    [mark] = project(raw)["rejected"]

    assert (mark["field"], mark["reason"]) == (f"status.conditions[{index}].type", "WrongType")


def test_a_helm_chart_spec_chart_is_its_name_not_a_wrong_type() -> None:
    raw = _at(kustomization("podinfo"), "spec.chart", "podinfo")
    raw["apiVersion"], raw["kind"] = "source.toolkit.fluxcd.io/v1", "HelmChart"

    assert "rejected" not in project(raw)


def test_an_argo_rollout_with_its_string_observed_generation_is_read_without_it() -> None:
    """Argo Rollouts writes status.observedGeneration as a string ("7", or a pod template hash
    before v0.10): a real Rollout is not malformed for it; its phase is kept."""
    raw = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "apps", "generation": 7},
        "status": {"observedGeneration": "7", "phase": "Degraded"},
    }

    projected = project(raw)

    assert projected["status"] == {"phase": "Degraded"}
    assert "rejected" not in projected


def _with(path: list[str], value: Any) -> Obj:
    raw = kustomization("apps")
    target = raw
    for step in path[:-1]:
        target = target.setdefault(step, {})
    target[path[-1]] = value
    return raw


MALFORMED = [
    pytest.param({"apiVersion": "v1", "metadata": {"name": "x"}}, "object has no kind", id="no-kind"),
    pytest.param(
        {"kind": "Pod", "metadata": {"name": "x"}}, "Pod: object has no apiVersion", id="no-api-version"
    ),
    pytest.param(
        {"kind": "Pod", "apiVersion": "v1", "metadata": {}}, "Pod: object has no metadata.name", id="no-name"
    ),
    pytest.param(
        _with(["metadata", "generation"], "2"),
        "Kustomization flux-system/apps: metadata.generation is not an integer",
        id="generation-not-integer",
    ),
    pytest.param(
        _with(["status", "observedGeneration"], 1.5),
        "Kustomization flux-system/apps: status.observedGeneration is not an integer",
        id="observed-generation-not-integer",
    ),
    pytest.param(
        _with(["status", "conditions"], {"type": "Ready"}),
        "Kustomization flux-system/apps: status.conditions is not a list",
        id="conditions-not-a-list",
    ),
    pytest.param(
        _with(["status", "conditions"], ["Ready"]),
        "Kustomization flux-system/apps: status.conditions[0] is not an object",
        id="condition-not-a-mapping",
    ),
    pytest.param(
        _with(["status", "conditions"], [cond("Ready")] * 65),
        "Kustomization flux-system/apps: status.conditions has 65 entries (more than 64)",
        id="too-many-conditions",
    ),
    pytest.param(
        _with(["metadata", "name"], "n" * 300),
        "Kustomization flux-system/" + "n" * 300 + ": metadata.name is longer than 253 characters",
        id="name-too-long",
    ),
    pytest.param(
        _with(["metadata", "namespace"], 7),
        "Kustomization 7/apps: metadata.namespace is not a string",
        id="namespace-not-a-string",
    ),
]


@pytest.mark.parametrize(("raw", "message"), MALFORMED)
def test_unusable_object_raises_one_line_naming_the_field(raw: Obj, message: str) -> None:
    with pytest.raises(MalformedObject) as raised:
        project(raw)

    assert str(raised.value) == message
    assert "\n" not in str(raised.value)


def test_non_mapping_input_is_malformed() -> None:
    with pytest.raises(MalformedObject, match="object is not a mapping"):
        project(["not", "an", "object"])  # type: ignore[arg-type]


def test_writes_through_the_status_subresource_are_not_kept_and_the_spec_writes_are() -> None:
    raw = kustomization("apps")
    status_write = {"manager": "kustomize-controller", "operation": "Update", "subresource": "status"}
    spec_write = {"manager": "flux", "operation": "Apply", "time": "2024-05-01T11:00:00Z"}
    raw["metadata"]["managedFields"] = [
        status_write | {"time": "2024-05-01T12:00:00Z", "fieldsV1": {"f:status": {}}},
        spec_write | {"fieldsV1": {"f:spec": {"f:interval": {}}}},
    ]

    assert project(raw)["metadata"]["managedFields"] == [spec_write | {"fieldsV1": "spec.interval"}]


def test_every_wrong_entry_of_a_long_list_is_rejected_in_one_reading() -> None:
    raw = kustomization("apps")
    good = [{"id": f"apps_web{i}_apps_Deployment", "v": "v1"} for i in range(20_000)]
    raw["status"]["inventory"] = {"entries": [*good, {"id": 1}, {"id": "apps_db_apps_Deployment"}, {"id": 2}]}

    projected = project(raw)

    assert [m["field"] for m in projected["rejected"]] == [
        "status.inventory.entries[20000].id",
        "status.inventory.entries[20002].id",
    ]
    assert len(projected["status"]["inventory"]["entries"]) == 20_001


def test_a_list_with_more_wrong_entries_than_anyone_writes_is_malformed_by_name() -> None:
    raw = kustomization("apps")
    raw["status"]["inventory"] = {"entries": [{"id": i} for i in range(100_000)]}

    with pytest.raises(MalformedObject) as raised:
        project(raw)

    assert str(raised.value) == (
        "Kustomization flux-system/apps: status.inventory.entries has more than 256 wrong values"
    )
