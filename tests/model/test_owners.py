"""A failing object's workload and release are remembered across correlation passes and
asked again only when something they were read from changes."""

from __future__ import annotations

from typing import Any

from tests.model.builders import NOW, deployment, helm_release
from tests.model.test_engine import snapshot
from tests.model.test_incidents import release_with_crash_looping_pod
from watcher.model.engine import HealthModel, evaluate
from watcher.model.ingest.objects import Key, key_of
from watcher.model.ingest.projection import project
from watcher.model.store.graph import Store
from watcher.model.store.owners import OwnerCache, Owners
from watcher.model.types import FindingType, ModelConfig

POD = Key("", "Pod", "apps", "podinfo-7d9f-new01")
DEPLOYMENT = Key("apps", "Deployment", "apps", "podinfo")
PODINFO = Key("helm.toolkit.fluxcd.io", "HelmRelease", "apps", "podinfo")
OTHER = Key("helm.toolkit.fluxcd.io", "HelmRelease", "apps", "other")


def installed_by(release: str) -> dict[str, Any]:
    labels = {"helm.toolkit.fluxcd.io/name": release, "helm.toolkit.fluxcd.io/namespace": "apps"}
    return project(deployment("podinfo", "apps", labels=labels))


def incident_store() -> Store:
    store = Store()
    for obj in release_with_crash_looping_pod():
        store.put(project(obj))
    return store


def test_a_pod_is_owned_by_its_deployment_and_the_release_that_installed_it() -> None:
    assert OwnerCache().of(POD, incident_store()) == Owners(DEPLOYMENT, PODINFO)


def test_an_answer_is_kept_until_an_object_it_was_read_from_is_touched() -> None:
    store, owners = incident_store(), OwnerCache()
    owners.of(POD, store)
    store.put(installed_by("other"))
    assert owners.of(POD, store) == Owners(DEPLOYMENT, PODINFO)  # not told yet
    assert owners.forget([DEPLOYMENT], ())
    assert owners.of(POD, store) == Owners(DEPLOYMENT, OTHER)


def test_touching_an_object_no_answer_read_keeps_every_answer() -> None:
    store, owners = incident_store(), OwnerCache()
    owners.of(POD, store)
    assert not owners.forget([Key("", "Pod", "apps", "podinfo-5c6d-old01")], [("inventory", DEPLOYMENT)])


def test_a_missing_object_is_remembered_missing_until_it_appears() -> None:
    store, owners = Store(), OwnerCache()
    assert owners.of(POD, store) is None
    for obj in release_with_crash_looping_pod():
        store.put(project(obj))
    assert owners.forget([POD], ())
    assert owners.of(POD, store) == Owners(DEPLOYMENT, PODINFO)


def test_answers_a_pass_did_not_ask_for_are_dropped_at_its_end() -> None:
    store, owners = incident_store(), OwnerCache()
    owners.of(POD, store)
    owners.end_pass()
    owners.end_pass()  # a pass in which the Pod no longer failed
    assert not owners.forget([DEPLOYMENT], ())


def test_a_failing_pod_follows_its_deployment_to_another_release_as_evaluate_does() -> None:
    objects = [project(o) for o in release_with_crash_looping_pod()]
    objects.append(project(helm_release("other", "apps", chart_version="6.5.1")))
    model = HealthModel(ModelConfig())
    for obj in objects:
        model.upsert(obj, now=NOW)
    assert [f.subject["name"] for f in model.evaluate(NOW).roots] == ["podinfo"]
    backoff = next(o for o in release_with_crash_looping_pod() if o["kind"] == "Event")
    more = project({**backoff, "count": backoff["count"] + 1})
    objects = [more if key_of(o) == key_of(more) else o for o in objects]
    model.upsert(more, now=NOW)
    model.evaluate(NOW)  # another pass, which takes the Pod's owners as they were
    moved = [installed_by("other") if key_of(o) == DEPLOYMENT else o for o in objects]
    model.upsert(installed_by("other"), now=NOW)
    live = model.evaluate(NOW)
    assert snapshot(live) == snapshot(evaluate(moved, now=NOW, config=ModelConfig()))
    [root] = live.roots
    assert (root.type, root.subject["name"]) == (FindingType.RELEASE_READY_WORKLOAD_FAILING, "other")
