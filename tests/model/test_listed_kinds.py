"""Every kind a Kustomization's inventory lists is read, or its listed objects are counted as not
read (Evaluation.unread): a snapshot without them, or a live watcher that does not watch the kind
(yet, over its limit, or 403), never says "all healthy" about them."""

from __future__ import annotations

import pytest

from tests.model.builders import NOW, Obj, git_repository, kustomization
from watcher.export.report import render_text
from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project

CERT = ("cert-manager.io", "Certificate")


def apps(*entries: str) -> Obj:
    return kustomization("apps", inventory=entries)


def certificate(name: str) -> Obj:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": "apps", "generation": 1},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Ready",
                    "observedGeneration": 1,
                    "lastTransitionTime": "2026-11-30T10:00:00Z",
                }
            ]
        },
    }


def model_of(*objects: Obj) -> HealthModel:
    model = HealthModel()
    for obj in objects:
        model.upsert(project(obj), now=NOW)
    return model


STACK = (
    "apps_web_cert-manager.io_Certificate",
    "apps_api_cert-manager.io_Certificate",
    "apps_settings__ConfigMap",
    "apps_token__Secret",
    "apps_reader_rbac.authorization.k8s.io_Role",
)


def test_listed_kinds_are_the_inventories_kinds_with_state_to_read() -> None:
    model = model_of(git_repository("flux-system"), apps(*STACK))

    assert model.listed_kinds() == {CERT}


def test_a_listed_kind_absent_from_a_snapshot_is_counted_not_read_and_never_all_healthy() -> None:
    evaluation = model_of(git_repository("flux-system"), apps(*STACK)).evaluate(NOW)

    assert evaluation.unread == (("cert-manager.io", "Certificate", 2),)
    assert render_text(evaluation, objects=2) == (
        "No findings on 2 judged objects; 2 objects of 1 kind listed by Kustomizations not read: "
        "Certificate.cert-manager.io (2).\n"
    )


def test_a_listed_kind_the_snapshot_holds_is_read() -> None:
    evaluation = model_of(git_repository("flux-system"), apps(*STACK), certificate("web")).evaluate(NOW)

    assert evaluation.unread == ()
    assert render_text(evaluation, objects=3) == "No findings: 3 objects evaluated, all healthy.\n"


@pytest.mark.parametrize(
    ("watched", "blind", "unread"),
    [
        pytest.param(set(), set(), 2, id="not-watched"),
        pytest.param({CERT}, {"Certificate"}, 2, id="watched-but-blind-403-or-listing"),
        pytest.param({CERT}, set(), 0, id="watched-and-listed"),
    ],
)
def test_live_a_listed_kind_is_read_only_while_watched_and_not_blind(
    watched: set[tuple[str, str]], blind: set[str], unread: int
) -> None:
    model = model_of(git_repository("flux-system"), apps(*STACK))
    model.set_watched(watched)
    model.set_blind(blind)

    assert sum(n for _, _, n in model.evaluate(NOW).unread) == unread


def test_a_kind_stops_being_listed_when_no_inventory_names_it_any_more() -> None:
    model = model_of(git_repository("flux-system"), apps(*STACK), kustomization("edge", inventory=STACK[:1]))
    model.upsert(project(apps("apps_settings__ConfigMap")), now=NOW)
    assert model.listed_kinds() == {CERT}  # edge still lists one

    model.delete(project(kustomization("edge")), now=NOW)

    assert model.listed_kinds() == frozenset()
    assert model.evaluate(NOW).unread == ()
