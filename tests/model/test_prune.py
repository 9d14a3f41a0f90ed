"""PruneOrphan: an object its Kustomization applied, no longer lists, and did not prune.

The world: Kustomization flux-system/data applies Terraform objects in namespace data (tofu-
controller reconciles them). Its inventory ids, history and the labels on what it applied are
spelled as kustomize-controller writes them (fluxcd/kustomize-controller api/v1, fluxcd/pkg
apis/meta History); Terraform data/reports was removed from Git.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import orjson
import pytest

from tests.model.builders import (
    MIN,
    NOW,
    SHA_N,
    SHA_N1,
    Obj,
    by_id,
    controller_down,
    event,
    flux,
    git_repository,
    kustomization,
    pod,
    run,
    terraform,
    ts,
)
from watcher.model.engine import HealthModel
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.projection import project
from watcher.model.types import FindingType, Severity, rfc3339

ORPHAN_ID = "PruneOrphan/Terraform/data/reports"
REVISION = f"main@sha1:{SHA_N}"
KEPT = "data_orders_infra.contrib.fluxcd.io_Terraform"
REPORTS = "data_reports_infra.contrib.fluxcd.io_Terraform"
KS = "kustomize.toolkit.fluxcd.io"


def applied(name: str, *, by: str = "data", **extra: Any) -> Obj:
    """A Terraform kustomize-controller applied for Kustomization flux-system/`by`."""
    obj = terraform(name, "data")
    obj["metadata"]["labels"] = {f"{KS}/name": by, f"{KS}/namespace": "flux-system"}
    obj["metadata"].update(extra)
    return obj


def snapshot(status: str, *, first: timedelta, digest: str = "sha256:d2", revision: str = REVISION) -> Obj:
    return {
        "digest": digest,
        "firstReconciled": ts(first),
        "lastReconciled": ts(MIN),
        "lastReconciledDuration": "4.1s",
        "lastReconciledStatus": status,
        "totalReconciliations": 3,
        "metadata": {"revision": revision},
    }


def data_ks(*history: Obj, inventory: tuple[str, ...] = (KEPT,), prune: bool = True, **kw: Any) -> Obj:
    """Kustomization flux-system/data, whose build lists `inventory`."""
    ks = kustomization("data", inventory=inventory, **kw)
    ks["spec"]["prune"] = prune
    if history:
        ks["status"]["history"] = list(history)
    return ks


BUILT_AN_HOUR_AGO = snapshot("ReconciliationSucceeded", first=60 * MIN)


def world(*objs: Obj) -> list[Obj]:
    return [*flux(), git_repository("flux-system"), applied("orders"), *objs]


def orphans(*objs: Obj) -> list[Any]:
    found = by_id(run(world(*objs)))
    return [f for f in found.values() if f.type is FindingType.PRUNE_ORPHAN]


def with_labels(labels: dict[str, str]) -> Obj:
    obj = applied("reports")
    obj["metadata"]["labels"].update(labels)
    return obj


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [data_ks(BUILT_AN_HOUR_AGO), applied("reports")],
            {"since": ts(60 * MIN), "severity": Severity.WARNING, "reason": "NotInInventory"},
            id="dropped-from-the-inventory-an-hour-ago-and-still-there",
        ),
        pytest.param(
            [
                data_ks(
                    snapshot("ReconciliationSucceeded", first=50 * MIN),
                    snapshot("PruneFailed", first=60 * MIN),
                    snapshot("ReconciliationSucceeded", first=900 * MIN, digest="sha256:d1"),
                ),
                applied("reports"),
            ],
            {"since": ts(60 * MIN), "severity": Severity.WARNING, "reason": "NotInInventory"},
            id="a-prune-that-failed-then-succeeded-on-the-same-build-dates-it-from-the-failed-one",
        ),
        pytest.param(
            [data_ks(BUILT_AN_HOUR_AGO, prune=False), applied("reports")],
            {"since": ts(60 * MIN), "severity": Severity.INFO, "reason": "PruneDisabled"},
            id="spec-prune-false-leaves-it-by-design-as-info",
        ),
        pytest.param(
            [data_ks(), applied("reports")],
            {"since": ts(60 * MIN), "severity": Severity.WARNING, "reason": "NotInInventory"},
            id="without-a-history-the-applied-revision-is-dated-by-its-source-artifact",
        ),
    ],
)
def test_an_object_its_kustomization_no_longer_lists_is_an_orphan(
    objects: list[Obj], expected: dict[str, Any]
) -> None:
    (found,) = orphans(*objects)
    assert found.id == ORPHAN_ID
    assert rfc3339(found.since) == expected["since"]
    assert found.severity is expected["severity"]
    assert found.evidence["reason"] == expected["reason"]
    assert "Terraform data/reports" in found.message
    assert "tofu-controller still reconciles it" in found.message


def test_the_finding_names_the_kustomization_the_revision_and_since_when() -> None:
    (found,) = orphans(data_ks(BUILT_AN_HOUR_AGO), applied("reports"))
    assert found.message.startswith(
        f"Terraform data/reports is no longer in Kustomization flux-system/data's inventory (revision"
        f" {REVISION}, applied since {ts(60 * MIN)}) but still exists: it was not pruned"
    )
    assert found.evidence == {
        "kustomization": "Kustomization/flux-system/data",
        "reason": "NotInInventory",
        "revision": REVISION,
        "applied_since": ts(60 * MIN),
        "prune": True,
        "controller": "tofu-controller",
    }


def written(ago: timedelta, manager: str = "kustomize-controller") -> dict[str, Any]:
    return {"managedFields": [{"manager": manager, "operation": "Apply", "time": ts(ago)}]}


def failed_newer_attempt() -> Obj:
    failed = snapshot(
        "ReconciliationFailed", first=5 * MIN, digest="sha256:d3", revision=f"main@sha1:{SHA_N1}"
    )
    return data_ks(failed, BUILT_AN_HOUR_AGO, attempted=f"main@sha1:{SHA_N1}")


NEAR_MISSES: list[Any] = [
    pytest.param(
        [data_ks(snapshot("ReconciliationSucceeded", first=MIN)), applied("reports")],
        id="dropped-a-minute-ago-prune-may-still-be-on-its-way",
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO, inventory=(KEPT, REPORTS)), applied("reports")], id="still-listed"
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO), applied("reports", **written(5 * MIN))],
        id="kustomize-controller-wrote-it-after-the-inventory-a-newer-apply-made-it",
    ),
    pytest.param(
        [failed_newer_attempt(), applied("reports")],
        id="a-newer-attempt-failed-and-nothing-dates-the-object-no-verdict",
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO), with_labels({f"{KS}/prune": "disabled"})], id="prune-disabled-label"
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO), applied("reports", annotations={f"{KS}/prune": "Disabled"})],
        id="prune-disabled-annotation-any-case",
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO), applied("reports", annotations={f"{KS}/ssa": "Ignore"})],
        id="ssa-ignore-annotation",
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO), applied("reports", annotations={f"{KS}/reconcile": "disabled"})],
        id="reconcile-disabled-annotation",
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO), applied("reports", deletionTimestamp=ts(2 * MIN), finalizers=["x"])],
        id="being-deleted-by-the-prune",
    ),
    pytest.param(
        [data_ks(applied=""), applied("reports")],
        id="kustomization-never-applied-anything-not-judged",
    ),
    pytest.param(
        [data_ks(BUILT_AN_HOUR_AGO), applied("reports", by="retired")],
        id="its-kustomization-is-not-in-the-snapshot-a-snapshot-cannot-tell-gone-from-left-out",
    ),
    pytest.param([data_ks(BUILT_AN_HOUR_AGO), terraform("reports", "data")], id="not-labelled-by-any"),
]


@pytest.mark.parametrize("objects", NEAR_MISSES)
def test_near_misses_are_no_orphan(objects: list[Obj]) -> None:
    assert orphans(*objects) == []


def test_a_kustomization_never_judged_inventory_absent_is_no_verdict() -> None:
    ks = data_ks(BUILT_AN_HOUR_AGO)
    del ks["status"]["inventory"]
    assert orphans(ks, applied("reports")) == []


def test_kustomizations_blind_is_no_verdict_until_they_are_listed() -> None:
    model = HealthModel()
    for obj in world(data_ks(BUILT_AN_HOUR_AGO), applied("reports")):
        model.upsert(project(obj), now=NOW)
    model.set_blind({"Kustomization"})
    assert ORPHAN_ID not in by_id(model.evaluate(NOW))
    model.set_blind(set())
    assert ORPHAN_ID in by_id(model.evaluate(NOW))


def test_one_dropped_a_minute_ago_becomes_an_orphan_once_the_threshold_passes_without_an_event() -> None:
    model = HealthModel()
    for obj in world(data_ks(snapshot("ReconciliationSucceeded", first=MIN)), applied("reports")):
        model.upsert(project(obj), now=NOW)
    assert ORPHAN_ID not in by_id(model.evaluate(NOW))
    assert ORPHAN_ID not in by_id(model.evaluate(NOW + 8 * MIN))
    assert ORPHAN_ID in by_id(model.evaluate(NOW + 9 * MIN))


Change = Callable[[HealthModel], None]


def relisted(model: HealthModel) -> None:
    model.upsert(project(data_ks(BUILT_AN_HOUR_AGO, inventory=(KEPT, REPORTS))), now=NOW)


def deleted(model: HealthModel) -> None:
    model.delete(project(applied("reports")), now=NOW)


def owner_deleted(model: HealthModel) -> None:
    model.delete(project(data_ks(BUILT_AN_HOUR_AGO)), now=NOW)


def owner_recreated(model: HealthModel) -> None:
    owner_deleted(model)
    model.upsert(project(data_ks(BUILT_AN_HOUR_AGO, inventory=(KEPT, REPORTS))), now=NOW)


@pytest.mark.parametrize(
    ("change", "still"),
    [
        pytest.param(relisted, False, id="listed-again-no-orphan"),
        pytest.param(deleted, False, id="deleted-by-hand-no-orphan"),
        pytest.param(owner_deleted, True, id="its-kustomization-deleted-still-an-orphan-now-of-a-gone-owner"),
        pytest.param(owner_recreated, False, id="its-kustomization-back-listing-it-no-orphan"),
    ],
)
def test_the_live_model_judges_an_orphan_again_when_it_or_its_kustomization_changes(
    change: Change, still: bool
) -> None:
    model = HealthModel()
    for obj in world(data_ks(BUILT_AN_HOUR_AGO), applied("reports")):
        model.upsert(project(obj), now=NOW)
    assert ORPHAN_ID in by_id(model.evaluate(NOW))
    change(model)
    assert (ORPHAN_ID in by_id(model.evaluate(NOW))) is still


def retrying(reason: str = "ReconciliationFailed") -> Obj:
    return event(
        "reports.187f1c",
        "data",
        kind="Terraform",
        involved="reports",
        api_version="infra.contrib.fluxcd.io/v1alpha2",
        reason=reason,
        message="Source path not found: ./terraform/reports",
        count=214,
        first=20 * 60 * MIN,  # since Git lost its path; the Terraform was created 24h ago
        last=MIN,
    )


def test_its_controllers_retry_loop_on_it_is_its_symptom_and_named_in_it() -> None:
    found = by_id(run(world(data_ks(BUILT_AN_HOUR_AGO), applied("reports"), retrying())))
    orphan = found[ORPHAN_ID]
    loop = next(f for f in found.values() if f.type is FindingType.RETRY_LOOP)
    assert orphan.is_root
    assert loop.root_cause == ORPHAN_ID
    assert orphan.affected == []
    assert orphan.evidence["acted_on"] == [
        f"RetryLoop, Warning ReconciliationFailed 214 times, last at {ts(MIN)}"
    ]
    assert orphan.message.endswith(
        f"Still acted on: RetryLoop, Warning ReconciliationFailed 214 times, last at {ts(MIN)}."
    )


def test_a_kustomization_seen_deleted_leaves_an_orphan_of_a_gone_owner_without_a_since() -> None:
    model = HealthModel()
    for obj in world(data_ks(BUILT_AN_HOUR_AGO), applied("reports", by="retired"), kustomization("retired")):
        model.upsert(project(obj), now=NOW)
    model.delete(project(kustomization("retired")), now=NOW)
    found = by_id(model.evaluate(NOW))[ORPHAN_ID]
    assert found.since is None
    assert found.evidence["reason"] == "KustomizationGone"
    assert found.message.startswith(
        "Terraform data/reports is labelled as applied by Kustomization flux-system/retired, which no"
        " longer exists: nothing prunes or manages it."
    )


def test_while_its_controller_is_down_the_orphan_is_a_symptom_of_that_and_names_nothing_above_it() -> None:
    """A cached status proves nothing: the StatusStale on the orphan is primary (its ControllerDown
    is the root), and the orphan, its symptom, does not claim it acts on it."""
    found = by_id(
        run(
            world(data_ks(BUILT_AN_HOUR_AGO), applied("reports")),
            controller_down("tofu-controller", "tofu:x"),
        )
    )
    orphan = found[ORPHAN_ID]
    assert orphan.root_cause == "ControllerDown/Deployment/flux-system/tofu-controller"
    assert "acted_on" not in orphan.evidence


def bare(kind: str) -> Obj:
    """A healthy Pod or a ReplicaSet in Git, applied by Kustomization flux-system/data (no owner)."""
    labels = {f"{KS}/name": "data", f"{KS}/namespace": "flux-system"}
    if kind == "Pod":
        obj = pod("reports-once", "data", app="reports", image="ghcr.io/acme/reports:v1")
        obj["metadata"].pop("ownerReferences")
    else:
        obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "reports-once", "namespace": "data", "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "reports"}}},
            "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 1},
        }
    obj["metadata"]["labels"] = labels
    return obj


@pytest.mark.parametrize("kind", ["Pod", "ReplicaSet"])
def test_a_healthy_pod_or_replicaset_it_no_longer_lists_is_an_orphan_as_the_watcher_decodes_it(
    kind: str,
) -> None:
    """The watcher's decoder packs a healthy Pod and any ReplicaSet (no edge, never judged): not
    one kustomize-controller labelled, or the Kustomization's orphans would go unseen."""
    model = HealthModel()
    for obj in world(data_ks(BUILT_AN_HOUR_AGO), bare(kind)):
        line = orjson.dumps({"type": "ADDED", "object": obj})
        decoded = fast_path(obj["apiVersion"], obj["kind"]).decode(line).object
        assert decoded is not None
        model.upsert(decoded, now=NOW)
    found = [f for f in model.evaluate(NOW).findings if f.type is FindingType.PRUNE_ORPHAN]
    assert [f.id for f in found] == [f"PruneOrphan/{kind}/data/reports-once"]
