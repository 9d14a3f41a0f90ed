"""Namespace mode's logic: the setting, the per-namespace paths, and one kind's state summed
over its namespaces so that a namespace it may not read is named, never taken as empty."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from tests.kube.support import FAST, MemorySink
from watcher.cli import main
from watcher.config import ConfigError, load_settings
from watcher.kube.ledger import Sink
from watcher.kube.link import Link
from watcher.kube.rbac import CLUSTER_SCOPED, namespaced_rules
from watcher.kube.reflector import Reflector
from watcher.kube.resources import Resource
from watcher.kube.scoped import NamespacedKind
from watcher.telemetry import KindStats, Scope, Telemetry

KUSTOMIZATIONS = Resource("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations")


def kind(telemetry: Telemetry, sink: MemorySink, *namespaces: str) -> NamespacedKind:
    def make(resource: Resource, part: Sink, stats: KindStats) -> Reflector:
        link = Link(telemetry, lambda up: None)  # no request is made: the reflectors never run
        return Reflector(None, resource, part, telemetry, link, options=FAST, stats=stats)

    return NamespacedKind(KUSTOMIZATIONS, namespaces, make, sink, telemetry)


def part(namespaced: NamespacedKind, namespace: str) -> Reflector:
    return namespaced._parts[namespace]


def test_the_namespaces_setting_takes_a_comma_list_and_replaces_the_cluster_filters() -> None:
    assert load_settings(overrides={"namespaces": "team-a, team-b,team-a"}).namespaces == ["team-a", "team-b"]
    with pytest.raises(ConfigError, match="namespaces replaces include_namespaces"):
        load_settings(overrides={"namespaces": "team-a", "include_namespaces": "team-b"})


def test_more_namespaces_than_namespace_mode_is_for_is_a_config_error() -> None:
    many = ",".join(f"team-{i}" for i in range(101))
    with pytest.raises(ConfigError, match="at most 100 namespaces"):
        load_settings(overrides={"namespaces": many})


@pytest.mark.parametrize("command", [["run"], ["wait", "ks/team-a/apps"]])
def test_a_namespace_that_is_not_a_dns_label_is_a_config_error_exit_2(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--namespaces", "team-a,Team_B"]) == 2
    assert capsys.readouterr().err.strip() == (
        "config: namespaces: 'Team_B' is not a namespace name (lowercase letters, digits and '-', 1-63)"
    )


def test_wait_refuses_a_target_outside_the_namespaces_it_may_watch_rather_than_call_it_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["wait", "ks/team-c/apps", "--namespaces", "team-a,team-b"]) == 2
    assert capsys.readouterr().err.strip() == (
        "stalewatch wait: kustomization team-c/apps is outside the namespaces watched "
        "(watching namespaces team-a, team-b (namespace-scoped))"
    )


def test_in_namespace_mode_a_namespaced_kind_is_read_at_its_namespace_path_a_cluster_one_as_ever() -> None:
    assert KUSTOMIZATIONS.path == "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations"
    one = part(kind(Telemetry(), MemorySink(), "team-a"), "team-a").resource
    assert one.path == "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/team-a/kustomizations"
    nodes = Resource("", "v1", "Namespace", "namespaces", namespaced=False, namespace="team-a")
    assert nodes.path == "/api/v1/namespaces"


def test_a_kind_is_synced_and_live_once_every_namespace_it_may_read_is_and_names_the_one_it_may_not() -> None:
    telemetry, sink = Telemetry(scope=Scope(("team-a", "team-b"))), MemorySink()
    scoped = kind(telemetry, sink, "team-a", "team-b")
    part(scoped, "team-a").stats.synced = part(scoped, "team-a").stats.live = True
    scoped.refresh()
    stats = telemetry.kinds[KUSTOMIZATIONS.key]
    assert (stats.synced, stats.live, stats.forbidden) == (False, False, False), "team-b has not listed"

    part(scoped, "team-b").stats.forbidden = True
    scoped.refresh()
    assert (stats.synced, stats.live, stats.forbidden) == (True, True, False)
    assert telemetry.unseen() == [
        "every other namespace (controllers there, such as Flux's: liveness unknown)",
        "Kustomization.kustomize.toolkit.fluxcd.io in team-b (403)",
    ]
    assert telemetry.scope_said().startswith(
        "watching namespaces team-a, team-b (namespace-scoped); cannot see:"
    )

    part(scoped, "team-a").stats.forbidden = True
    scoped.refresh()
    assert (stats.synced, stats.forbidden) == (False, True), "refused everywhere: the kind is not judged"


def test_a_relist_in_one_namespace_keeps_the_objects_of_the_others() -> None:
    telemetry, sink = Telemetry(), MemorySink()
    scoped = kind(telemetry, sink, "team-a", "team-b")
    for namespace, name in (("team-a", "apps"), ("team-b", "infra"), ("team-b", "gone")):
        obj = {"apiVersion": KUSTOMIZATIONS.api_version, "kind": "Kustomization"}
        part(scoped, namespace)._ledger.accept(
            (namespace, name), {**obj, "metadata": {"namespace": namespace, "name": name}}
        )
    assert telemetry.kinds[KUSTOMIZATIONS.key].objects == 3

    part(scoped, "team-b")._ledger.replace({("team-b", "infra")}, {})
    assert sink.names("Kustomization") == {"apps", "infra"}


def test_the_tenants_role_is_the_cluster_roles_namespaced_part() -> None:
    rules = [
        {"apiGroups": [""], "resources": ["services", "namespaces", "persistentvolumes"], "verbs": ["get"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get"]},
    ]
    assert namespaced_rules(rules) == [{"apiGroups": [""], "resources": ["services"], "verbs": ["get"]}]
    assert ("apiregistration.k8s.io", "apiservices") in CLUSTER_SCOPED


def test_the_cluster_mode_scope_says_its_filters() -> None:
    assert Scope().said() == "watching all namespaces (cluster-wide)"
    assert Scope(exclude=("sandbox",)).said() == "watching all namespaces except sandbox (cluster-wide)"
    assert Telemetry().scope_said() == "watching all namespaces (cluster-wide)"


def snapshot(tmp_path: Path, *, applies: bool = True) -> str:
    """A tenant's Kustomization in team-a that applies a Deployment in team-c (or nothing)."""
    applier = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "team-a"},
        "spec": {
            "interval": "10m",
            "path": "./",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "x"},
        },
        "status": {
            "inventory": {"entries": [{"id": "team-c_web_apps_Deployment", "v": "v1"}] if applies else []}
        },
    }
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [applier]}))
    return str(path)


def test_impact_in_namespace_mode_never_says_nothing_depends_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What depends on it may live in a namespace it does not look at."""
    path = snapshot(tmp_path, applies=False)
    main(["impact", "ks/team-a/apps", path, "-o", "json"])
    assert orjson.loads(capsys.readouterr().out)["outcome"] == "nothing"
    main(["impact", "ks/team-a/apps", path, "--namespaces", "team-a", "-o", "json"])
    answer = orjson.loads(capsys.readouterr().out)
    assert answer["outcome"] == "unknown"
    assert answer["not_looked_at"] == ["namespaces other than team-a: not looked at"]


def test_impact_refuses_a_target_outside_the_namespaces_rather_than_call_it_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["impact", "deploy/team-c/web", snapshot(tmp_path), "--namespaces", "team-a"]) == 2
    assert "is outside the namespaces looked at (watching namespaces team-a (namespace-scoped))" in (
        capsys.readouterr().err
    )
