"""ConflictingWriters: two field managers rewriting the same object in turn, each undoing the other.

Each case is a series of versions of one custom resource, shaped as the API server records them:
every full-object Update (PUT) moves the fields whose values it changed to its manager and
removes the fields it left out from the object and from their owner's set (an owner whose set
becomes empty loses its entry); a status write through the status subresource is an entry of its
own and does not bump metadata.generation. Incident 3: the platform operator PUTs a typed struct
without `spec.sidecar`, which the mesh controller adds on every reconcile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import pytest

from tests.model.builders import MIN, NOW, Obj, run, ts
from watcher.model.engine import HealthModel
from watcher.model.ingest.fieldsets import field_paths
from watcher.model.ingest.objects import Key
from watcher.model.ingest.projection import project
from watcher.model.rules.writers import MAX_FIGHTS, Writers
from watcher.model.types import FindingType, ModelConfig, Thresholds

OPERATOR, MESH, STATUS_WRITER = "platform-operator", "mesh-controller", "widget-controller"
OWN = ("spec.size", "spec.image")
ADDED = ("spec.sidecar.image", "spec.sidecar.port")
KEY = Key("example.com", "Widget", "team-a", "shop")


def trie(paths: Sequence[str]) -> Obj:
    """The fieldsV1 trie of dotted paths (each key 'f:<name>', a member mapping to {})."""
    root: Obj = {}
    for path in paths:
        node = root
        for part in path.split("."):
            node = node.setdefault(f"f:{part}", {})
    return root


def widget(
    generation: int, writes: Mapping[str, tuple[timedelta, Sequence[str]]], *, status: bool = False
) -> Obj:
    """A version: per manager, (how long before NOW it last wrote, the fields it owns)."""
    managed = [
        {
            "manager": m,
            "operation": "Update",
            "apiVersion": "example.com/v1",
            "time": ts(ago),
            "fieldsType": "FieldsV1",
            "fieldsV1": trie(paths),
        }
        for m, (ago, paths) in writes.items()
        if paths
    ]
    if status:
        managed.append(
            {
                "manager": STATUS_WRITER,
                "operation": "Update",
                "subresource": "status",
                "time": ts(MIN),
                "fieldsV1": trie(["status.conditions", "status.observedGeneration"]),
            }
        )
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": "shop",
            "namespace": "team-a",
            "generation": generation,
            "managedFields": managed,
        },
        "spec": {"size": 3},
    }


def fight(rounds: int, *, every: timedelta = MIN, start: timedelta = 20 * MIN) -> list[Obj]:
    """The operator creates the Widget, the mesh adds its sidecar, the operator's PUT erases it,
    and so on: `rounds` erasures, all but the first one after a re-add (2 * rounds - 1 flips)."""
    at = start
    versions = [widget(1, {OPERATOR: (at, OWN)})]
    gen = 1
    for _ in range(rounds):
        at -= every
        gen += 1
        versions.append(widget(gen, {OPERATOR: (start, OWN), MESH: (at, ADDED)}))
        at -= every
        gen += 1
        versions.append(widget(gen, {OPERATOR: (at, OWN)}))
    return versions


def erasing_puts(rounds: int) -> list[Obj]:
    """As the API server records it: the operator's PUTs only remove fields, which takes no field,
    so its entry keeps the time of its create; only the mesh's re-adds date its entry."""
    versions = [widget(1, {OPERATOR: (30 * MIN, OWN)})]
    for r in range(rounds):
        versions.append(widget(2 + 2 * r, {OPERATOR: (30 * MIN, OWN), MESH: ((20 - r) * MIN, ADDED)}))
        versions.append(widget(3 + 2 * r, {OPERATOR: (30 * MIN, OWN)}))
    return versions


def test_a_put_that_only_erases_is_credited_to_the_one_other_manager() -> None:
    (found,) = writers_findings(erasing_puts(3))
    assert found.evidence["writers"] == [MESH, OPERATOR]
    assert found.evidence["flips"] == 5


def entry(manager: str, fields: Obj, *, operation: str = "Update", ago: timedelta = 60 * MIN) -> Obj:
    """A managedFields entry as the API server writes it."""
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "example.com/v1",
        "time": ts(ago),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def labels(*keys: str) -> Obj:
    return {"f:metadata": {"f:labels": {f"f:{k}": {} for k in keys}}}


def annotations(*keys: str) -> Obj:
    return {"f:metadata": {"f:annotations": {f"f:{k}": {} for k in keys}}}


KUBECTL_LABEL = entry("kubectl-label", labels("team"))
CLIENT_SIDE_APPLY = entry(
    "kubectl-client-side-apply",
    {
        "f:metadata": {
            "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
            "f:labels": {".": {}, "f:app": {}},
        }
    },
)
SERVER_SIDE_APPLY = entry("kubectl", {"f:spec": {"f:size": {}}, **labels("app")}, operation="Apply")
"""kubectl apply --server-side owns spec.size too: an apply never erases another's field."""
HELM = entry(
    "helm",
    {**labels("app.kubernetes.io/managed-by"), **annotations("meta.helm.sh/release-name")},
)
KUSTOMIZE = entry(
    "kustomize-controller",
    {"f:spec": {"f:image": {}}, **labels("kustomize.toolkit.fluxcd.io/name")},
    operation="Apply",
)
CONTROLLER_MANAGER = entry("kube-controller-manager", annotations("deployment.kubernetes.io/revision"))
STATUS_ENTRY = {**entry("kube-controller-manager", {"f:status": {"f:replicas": {}}}), "subresource": "status"}
WEBHOOK = entry("vpa-admission-controller", annotations("vpaUpdates"))
"""A mutating webhook's changes are recorded under the manager of the request it mutated: here the
VPA admission controller's own request, an annotation."""
ALL = (
    KUBECTL_LABEL,
    CLIENT_SIDE_APPLY,
    SERVER_SIDE_APPLY,
    HELM,
    KUSTOMIZE,
    CONTROLLER_MANAGER,
    STATUS_ENTRY,
    WEBHOOK,
)
BYSTANDERS = [
    pytest.param((KUBECTL_LABEL,), id="kubectl-label owning metadata.labels.team"),
    pytest.param((CLIENT_SIDE_APPLY,), id="kubectl client-side apply"),
    pytest.param((SERVER_SIDE_APPLY,), id="kubectl server-side apply owning a spec field"),
    pytest.param((HELM,), id="helm"),
    pytest.param((KUSTOMIZE,), id="kustomize-controller applying a spec field"),
    pytest.param((CONTROLLER_MANAGER, STATUS_ENTRY), id="kube-controller-manager"),
    pytest.param((WEBHOOK,), id="a mutating webhook's annotation"),
    pytest.param(ALL, id="all of them"),
]


def beside(versions: list[Obj], bystanders: Sequence[Obj]) -> list[Obj]:
    """The same versions, with managers writing other fields of the object in all of them."""
    for version in versions:
        version["metadata"]["managedFields"] = [*bystanders, *version["metadata"]["managedFields"]]
    return versions


@pytest.mark.parametrize("bystanders", BYSTANDERS)
def test_a_fight_is_found_and_named_whatever_other_managers_write_the_object(
    bystanders: Sequence[Obj],
) -> None:
    (found,) = writers_findings(beside(erasing_puts(3), bystanders))
    assert found.evidence["writers"] == [MESH, OPERATOR]
    assert found.evidence["managers"] == [MESH, OPERATOR]
    assert found.evidence["fields"] == list(ADDED)
    assert found.evidence["flips"] == 5
    assert "3 writes by platform-operator took fields mesh-controller owned" in found.message
    assert not any(b["manager"] in found.message for b in bystanders)


@pytest.mark.parametrize("bystanders", BYSTANDERS)
def test_a_lone_writer_among_other_managers_is_no_fight(bystanders: Sequence[Obj]) -> None:
    assert writers_findings(beside(one_writer(), bystanders)) == []
    assert writers_findings(beside(disjoint(), bystanders)) == []


def test_erasing_writes_two_managers_may_have_made_are_still_a_fight_by_one_of_them() -> None:
    """helm owns a spec field too, as near to the sidecar as the operator's: either could have
    PUT the object without it; the mesh's fields flip all the same."""
    helm_in_spec = entry("helm", {"f:spec": {"f:replicas": {}}})
    (found,) = writers_findings(beside(erasing_puts(3), [helm_in_spec]))
    assert found.evidence["writers"] == [MESH]
    assert found.evidence["managers"] == [MESH]
    assert "3 writes by one of helm or platform-operator took fields mesh-controller owned" in found.message


def test_an_erasure_no_other_manager_is_near_is_credited_to_nobody() -> None:
    """The operator erases its own sidecar and puts it back (its PUTs date no entry); kubectl-label
    owns nothing under spec: no other side, no fight."""
    versions = [widget(1, {OPERATOR: (30 * MIN, OWN)})]
    for r in range(3):
        versions.append(widget(2 + 2 * r, {OPERATOR: ((20 - r) * MIN, OWN + ADDED)}))
        versions.append(widget(3 + 2 * r, {OPERATOR: ((20 - r) * MIN, OWN)}))
    assert writers_findings(beside(versions, [KUBECTL_LABEL])) == []


def shrinking(*, same_second: bool) -> list[Obj]:
    """The mesh also owns an annotation the operator's PUT keeps: its entry shrinks to it, never
    vanishes; `same_second`: every mesh write within the second of its first one (no time moves)."""
    mark = ("metadata.annotations.mesh",)
    versions = [widget(1, {OPERATOR: (30 * MIN, OWN)})]
    for r in range(3):
        at = 20 * MIN if same_second else (20 - r) * MIN
        versions.append(widget(2 + 2 * r, {OPERATOR: (30 * MIN, OWN), MESH: (at, ADDED + mark)}))
        versions.append(widget(3 + 2 * r, {OPERATOR: (30 * MIN, OWN), MESH: (at, mark)}))
    return versions


@pytest.mark.parametrize("same_second", [False, True], ids=["apart", "within one second"])
def test_an_erasure_that_leaves_the_loser_an_entry_is_not_credited_to_the_loser(same_second: bool) -> None:
    (found,) = writers_findings(shrinking(same_second=same_second))
    assert found.evidence["writers"] == [MESH, OPERATOR]
    assert found.evidence["fields"] == list(ADDED)


def one_writer() -> list[Obj]:
    """The operator alone, changing its own fields every minute."""
    return [widget(g, {OPERATOR: ((20 - g) * MIN, OWN[: 1 + g % 2])}) for g in range(1, 12)]


def disjoint() -> list[Obj]:
    """The operator and the mesh write in turn, each only its own fields (the mesh adds and drops
    its port on its turns)."""
    versions = [widget(1, {OPERATOR: (20 * MIN, OWN)})]
    operator, mesh = 20 * MIN, 20 * MIN
    for g in range(2, 12):
        if g % 2:
            operator = (20 - g) * MIN
        else:
            mesh = (20 - g) * MIN
        versions.append(widget(g, {OPERATOR: (operator, OWN), MESH: (mesh, ADDED[: 1 + g // 2 % 2])}))
    return versions


def handover() -> list[Obj]:
    """kubectl created it; Helm took every field over once (adoption) and writes alone since."""
    versions = [widget(1, {"kubectl-client-side-apply": (30 * MIN, OWN)})]
    versions += [widget(g, {"helm": ((20 - g) * MIN, OWN)}) for g in range(2, 10)]
    return versions


def status_only() -> list[Obj]:
    """The operator wrote the spec once; its controller writes status every minute (no generation bump)."""
    return [widget(1, {OPERATOR: (30 * MIN, OWN)}, status=True) for _ in range(10)]


def writers_findings(versions: Sequence[Obj], **kw: object) -> list:
    return [f for f in run(versions, **kw).findings if f.type is FindingType.CONFLICTING_WRITERS]


def test_an_operator_erasing_the_mesh_sidecar_again_and_again_is_a_fight() -> None:
    (found,) = writers_findings(fight(3))
    assert found.is_root
    assert found.severity == "warning"
    assert found.subject["name"] == "shop"
    assert found.subject["kind"] == "Widget"
    assert found.evidence["managers"] == [MESH, OPERATOR]
    assert found.evidence["fields"] == list(ADDED)
    assert found.evidence["flips"] == 5
    assert found.since is not None
    assert found.since == NOW - 18 * MIN
    assert "mesh-controller and platform-operator" in found.message
    assert "spec.sidecar.image, spec.sidecar.port" in found.message


@pytest.mark.parametrize(
    "versions",
    [
        pytest.param(one_writer(), id="one manager updating often"),
        pytest.param(disjoint(), id="two managers writing disjoint fields"),
        pytest.param(handover(), id="a single handover"),
        pytest.param(status_only(), id="status-only updates through the status subresource"),
        pytest.param(fight(2), id="erased, re-added, erased: three flips, below the threshold"),
        pytest.param(fight(3, start=90 * MIN), id="a fight that stopped an hour ago"),
    ],
)
def test_not_a_fight(versions: list[Obj]) -> None:
    assert writers_findings(versions) == []


def test_the_flips_threshold_and_window_are_settings() -> None:
    patient = ModelConfig(thresholds=Thresholds(conflicting_writers_flips=6))
    assert writers_findings(fight(3), config=patient) == []
    assert len(writers_findings(fight(4), config=patient)) == 1
    short = ModelConfig(thresholds=Thresholds(conflicting_writers_window=timedelta(minutes=2)))
    assert writers_findings(fight(3), config=short) == []


def test_the_finding_goes_once_the_fight_has_stopped_for_the_window() -> None:
    model = HealthModel()
    for version in fight(3):
        model.upsert(project(version), now=NOW)
    assert [f.type for f in model.evaluate(NOW).findings] == [FindingType.CONFLICTING_WRITERS]
    assert model.evaluate(NOW + 20 * MIN).findings == []


def observe(writers: Writers, key: Key, versions: list[Obj], *, after: Obj | None = None) -> Obj | None:
    """Each version in turn, after the one before it as the model stores it (the last one is returned)."""
    previous = after
    for version in versions:
        projected = project(version)
        writers.observe(key, projected, previous, now=NOW)
        previous = projected
    return previous


def test_the_model_stores_no_field_sets_and_keeps_them_only_for_a_fight() -> None:
    model = HealthModel()
    for version in disjoint():
        model.upsert(project(version), now=NOW)
    stored = model.stored(KEY)
    assert stored is not None
    assert all("fieldsV1" not in e for e in stored["metadata"]["managedFields"])
    writers = Writers(ModelConfig())
    last = observe(writers, KEY, disjoint() + status_only())
    assert writers.fighting() == []
    observe(writers, KEY, fight(3), after=last)
    assert writers.fighting() == [KEY]


def test_no_more_than_max_fights_objects_keep_their_field_sets() -> None:
    writers = Writers(ModelConfig())
    for index in range(MAX_FIGHTS + 3):
        key = Key("example.com", "Widget", "team-a", f"w{index}")
        observe(writers, key, fight(1))
    assert len(writers.fighting()) == MAX_FIGHTS


def test_field_names_and_managers_are_shown_on_one_line_and_cut() -> None:
    odd = "spec.x\nforged: line" + "y" * 300
    manager = "mesh\r\ncontroller"
    versions = [widget(1, {OPERATOR: (20 * MIN, OWN)})]
    for g in range(2, 8, 2):
        versions.append(widget(g, {OPERATOR: (20 * MIN, OWN), manager: ((20 - g) * MIN, (odd,))}))
        versions.append(widget(g + 1, {OPERATOR: ((19 - g) * MIN, OWN)}))
    (found,) = writers_findings(versions)
    assert "\n" not in found.message
    assert "\r" not in found.message
    assert "mesh\\u000d\\u000acontroller" in found.message
    assert all(len(f) <= 120 for f in found.evidence["fields"])


@pytest.mark.parametrize(
    ("fields", "paths"),
    [
        pytest.param({"f:spec": {"f:size": {}}}, ["spec.size"], id="a struct field"),
        pytest.param(
            {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
            ["metadata.labels", "metadata.labels.app"],
            id="a map marked itself and its key",
        ),
        pytest.param(
            {"f:spec": {"f:ports": {'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:name": {}}}}},
            ["spec.ports[port=80,protocol=TCP]", "spec.ports[port=80,protocol=TCP].name"],
            id="an associative list item by its keys",
        ),
        pytest.param(
            {"f:metadata": {"f:finalizers": {'v:"example.com/cleanup"': {}}}},
            ["metadata.finalizers[=example.com/cleanup]"],
            id="a set item by its value",
        ),
        pytest.param({"f:spec": {"f:args": {"i:0": {}}}}, ["spec.args[0]"], id="a list item by index"),
    ],
)
def test_fieldsv1_reads_as_paths(fields: Obj, paths: list[str]) -> None:
    assert field_paths(fields) == paths


def test_a_huge_field_set_is_cut() -> None:
    paths = field_paths({"f:spec": {f"f:k{i}": {} for i in range(10_000)}})
    assert len(paths) == 256
    assert paths[-1] == "…"
