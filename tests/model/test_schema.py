"""One declaration, two readers: project() and the fast path read what schema.py declares, alike.

Both are generated from watcher.model.ingest.schema, so these tests compare what they DO on objects:
an object carrying every declared field, the examples, the real-world cases, the builders'
objects, and thousands of seeded random mutations of them (nulls, wrong types, over-long values,
out-of-range times and integers, entries missing or repeated past a limit). On each, the fast
path either answers exactly what orjson.loads + project() gives, or steps aside; and decode()
(the fast path, else the slow one) always gives the slow path's answer, MalformedObject message
included.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.model import builders as b
from tests.model.test_fastpath import EXAMPLES, Obj, decoded_outcome, outcome, slow, watch_line
from watcher.model.ingest.decoded import Decoded
from watcher.model.ingest.fastpath import fast_path
from watcher.model.ingest.kinds import GATEKEEPER_GROUP
from watcher.model.ingest.schema import CUSTOM, EVENTS_V1_RENAMES, GROUP_KINDS, KINDS, kind_schema
from watcher.model.ingest.schema_nodes import Bool, Field, FieldSet, Flags, Int, Kind, Labels, List, Str, Time
from watcher.model.ingest.schema_nodes import Obj as ObjNode

REALWORLD = Path(__file__).resolve().parents[1] / "realworld" / "cases"
CUSTOM_KINDS = [
    ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
    ("source.toolkit.fluxcd.io/v1", "HelmChart"),
    ("infra.contrib.fluxcd.io/v1alpha2", "Terraform"),
    ("example.com/v1", "Widget"),
    ("constraints.gatekeeper.sh/v1beta1", "K8sRequiredLabels"),
    ("wgpolicyk8s.io/v1alpha2", "PolicyReport"),
    ("wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport"),
    ("kyverno.io/v1", "ClusterPolicy"),
    ("kyverno.io/v1", "Policy"),
]
ALL_KINDS = [(f"{group}/v1" if group else "v1", kind) for group, kind in KINDS] + CUSTOM_KINDS
A_TIME = "2024-05-01T11:00:00Z"


# -- An object carrying every field the schema declares, made from the schema itself -----------


def full(node: Field) -> Any:
    """A valid value for every field under `node`."""
    if isinstance(node, Str):
        return "a"
    if isinstance(node, Int):
        return 3
    if isinstance(node, Bool):
        return True
    if isinstance(node, Time):
        return A_TIME
    if isinstance(node, Labels):
        return {f"{node.keep[0] if node.keep else ''}k": "v"}
    if isinstance(node, ObjNode):
        return {name: full(field) for name, field in node.fields.items()}
    if isinstance(node, FieldSet):
        return {"f:spec": {".": {}, "f:size": {}}}
    if isinstance(node, Flags):
        return ["--log-level=info", *(f"{name}=a" for name in node.names)]
    entry = full(node.item)
    if node.types is not None:
        entry["type"] = sorted(node.types)[0]
    return [entry]


def full_object(api_version: str, kind: str) -> Obj:
    schema = kind_schema(api_version.rpartition("/")[0], kind)
    obj: Obj = {"apiVersion": api_version, "kind": kind, "metadata": full(schema.metadata)}
    obj["metadata"] |= {"name": "web-1", "namespace": "apps", "resourceVersion": "7"}
    for name, section in schema.sections.items():
        if name:
            obj[name] = full(section)
        else:  # an Event's fields, in the spelling of its group
            renames = EVENTS_V1_RENAMES if api_version.startswith("events.k8s.io/") else {}
            spelled = {new: old for old, new in renames.items()}
            obj |= {spelled.get(k, k): v for k, v in full(section).items()}
    return obj


def missing(node: Field, value: Any, path: str) -> Iterator[str]:
    """The declared fields under `node` that `value` (a projection) does not hold."""
    if isinstance(node, ObjNode):
        for name, field in node.fields.items():
            if name not in value:
                yield f"{path}{name}"
            else:
                yield from missing(field, value[name], f"{path}{name}.")
    elif isinstance(node, List):
        yield from missing(node.item, value[0], path) if value else [f"{path}[0]"]


def declared_fields_missing(schema: Kind, projected: Obj) -> list[str]:
    out = list(missing(schema.metadata, projected["metadata"], "metadata."))
    for name, section in schema.sections.items():
        out += missing(section, projected.get(name, {}) if name else projected, f"{name}." if name else "")
    return out


def assert_fast_and_equal(obj: Obj) -> None:
    line = watch_line(obj)
    fast = fast_path(obj["apiVersion"], obj["kind"]).event(line)
    meta = obj["metadata"]
    key = (meta.get("namespace", ""), meta["name"])
    assert fast == Decoded("ADDED", meta.get("resourceVersion", ""), key, slow(line))


@pytest.mark.parametrize(("api_version", "kind"), [pytest.param(*k, id=f"{k[1]}.{k[0]}") for k in ALL_KINDS])
def test_an_object_with_every_declared_field_keeps_each_and_takes_the_fast_path(
    api_version: str, kind: str
) -> None:
    obj = full_object(api_version, kind)
    schema = kind_schema(api_version.rpartition("/")[0], kind)

    assert declared_fields_missing(schema, slow(watch_line(obj))) == []
    assert_fast_and_equal(obj)


def test_the_custom_resource_schema_is_the_one_for_any_kind_not_built_in() -> None:
    assert kind_schema("example.com", "Widget") is CUSTOM
    assert kind_schema("policy", "PodDisruptionBudget") is CUSTOM
    assert kind_schema("apps", "Deployment") is KINDS[("extensions", "Deployment")]


def test_every_constraint_kind_of_gatekeeper_is_read_alike_and_no_other_groups() -> None:
    assert kind_schema("constraints.gatekeeper.sh", "K8sRequiredLabels") is GROUP_KINDS[GATEKEEPER_GROUP]
    assert kind_schema("constraints.gatekeeper.sh", "K8sAllowedRepos") is GROUP_KINDS[GATEKEEPER_GROUP]
    assert kind_schema("templates.gatekeeper.sh", "ConstraintTemplate") is CUSTOM


# -- The objects others wrote: examples, real-world cases, builders ------------------------------


def _items(document: Any) -> list[Obj]:
    if not isinstance(document, dict):
        return []
    return list(document["items"]) if document.get("kind") == "List" or "items" in document else [document]


def corpus() -> Iterator[Any]:
    files = [*sorted(EXAMPLES.glob("*/*.yaml")), *sorted(REALWORLD.glob("*.yaml"))]
    for file in files:
        for document in yaml.safe_load_all(file.read_text()):
            for item in _items(document):
                name = f"{file.parent.name}/{file.stem}/{item['kind']}/{item['metadata']['name']}"
                yield pytest.param(
                    orjson.loads(orjson.dumps(item)), id=name
                )  # YAML times as JSON spells them
    made = [
        b.git_repository("podinfo", "apps"),
        b.helm_chart("apps-podinfo", "apps"),
        b.kustomization("apps", depends_on=["infra"], inventory=["apps_web_apps_Deployment"]),
        b.helm_release("podinfo", "apps"),
        b.terraform("vpc", "infra"),
        b.deployment("web", "apps", replicas=3, available=1),
        b.pod(
            "web-1", "apps", app="web", ready=False, waiting="CrashLoopBackOff", last_terminated="OOMKilled"
        ),
        b.pod("web-2", "apps", app="web", phase="Pending", ready=False, unschedulable=True),
        b.lease("kustomize-controller-leader-election", holder="kc-1_abc", renewed=b.MIN),
        *b.controller("kustomize-controller"),
        b.warning_about("apps", count=3, first=5 * b.MIN, last=b.MIN),
        b.crd("kustomizations", "kustomize.toolkit.fluxcd.io", "Kustomization", deleting=True),
    ]
    for obj in made:
        yield pytest.param(
            orjson.loads(orjson.dumps(obj)), id=f"builders/{obj['kind']}/{obj['metadata']['name']}"
        )


CORPUS = list(corpus())


@pytest.mark.parametrize("obj", CORPUS)
def test_every_object_others_wrote_takes_the_fast_path_to_its_projection(obj: Obj) -> None:
    assert_fast_and_equal(obj)


# -- Mutations: whatever an object holds, both readers agree -------------------------------------

HOSTILE = [
    None,
    "",
    "x" * 300,
    "x" * 5000,
    0,
    -1,
    2**63 - 1,
    2**63,
    -(2**63),
    2**64 - 1,
    10**16,
    1.5,
    1e41,
    True,
    [],
    ["a"],
    {},
    {"a": None},
    {"a": 1},
    "yesterday",
    A_TIME,
    "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:00:00+01:00",
    "Ready",
]
"""Values real API servers, webhooks and hand-written snapshots have been seen to hold where
another belongs, and the edges of every bound the schema states."""


def paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from paths(item, (*path, index))


def mutate(obj: Obj, rng: random.Random) -> Obj:
    """One to three random changes: a value replaced, a field removed, an entry repeated past
    a limit, a field added where none was."""
    out = copy.deepcopy(obj)
    for _ in range(rng.randint(1, 3)):
        # apiVersion and kind are the watched resource's: the reflector sets them, whatever the object says
        *parent_path, last = rng.choice([p for p in paths(out) if p[0] not in ("apiVersion", "kind")])
        parent: Any = out
        for step in parent_path:
            parent = parent[step]
        action = rng.random()
        if action < 0.6:
            parent[last] = copy.deepcopy(rng.choice(HOSTILE))
        elif action < 0.7 and isinstance(parent, dict) and last not in ("metadata",):
            del parent[last]
        elif action < 0.85 and isinstance(parent[last], list) and parent[last]:
            parent[last] = parent[last] * rng.choice([2, 33, 65, 257])
        elif isinstance(parent[last], dict):
            parent[last][rng.choice(["type", "status", "name", "reason", "extra"])] = rng.choice(HOSTILE)
    return out


def agree(obj: Obj) -> bool:
    """Both readers agree on `obj`; True when the fast path answered."""
    line = watch_line(obj)
    api_version, kind = obj["apiVersion"], obj["kind"]
    expected = outcome(lambda: ("ADDED", slow(line)))
    assert decoded_outcome(line, api_version=api_version, kind=kind) == expected
    fast = fast_path(api_version, kind).event(line)
    if fast is None:
        return False
    assert expected == ("projected", ("ADDED", fast.object))
    return True


SEEDS = 250


@pytest.mark.parametrize(("api_version", "kind"), [pytest.param(*k, id=f"{k[1]}.{k[0]}") for k in ALL_KINDS])
def test_mutations_of_a_full_object_get_the_slow_paths_answer(api_version: str, kind: str) -> None:
    base = full_object(api_version, kind)
    rng = random.Random(f"{api_version}/{kind}")

    fast = [agree(mutate(base, rng)) for _ in range(SEEDS)]

    assert any(fast)
    assert not all(fast)


def test_mutations_of_the_objects_others_wrote_get_the_slow_paths_answer() -> None:
    rng = random.Random(15)
    objects = [param.values[0] for param in CORPUS]

    fast = [agree(mutate(rng.choice(objects), rng)) for _ in range(20 * SEEDS)]

    assert any(fast)
    assert not all(fast)
