"""Snapshot loading: kubectl's output in every shape, and one clear error per bad input."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from watcher.snapshot import MAX_DEPTH, MAX_FILE_BYTES, load_snapshot


def kustomization(name: str, namespace: str = "flux-system", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"interval": "10m", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": status or {"observedGeneration": 1, "conditions": []},
    }


def kubectl_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def names(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects]


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("filename", "content"),
    [
        pytest.param(
            "list.yaml", yaml.safe_dump(kubectl_list(kustomization("a"), kustomization("b"))), id="yaml-list"
        ),
        pytest.param(
            "list.json", orjson.dumps(kubectl_list(kustomization("a"), kustomization("b"))), id="json-list"
        ),
        pytest.param(
            "typed-list.yaml",
            yaml.safe_dump(
                {**kubectl_list(kustomization("a"), kustomization("b")), "kind": "KustomizationList"}
            ),
            id="typed-list",
        ),
        pytest.param(
            "multi.yaml",
            "---\n"
            + yaml.safe_dump(kustomization("a"))
            + "---\n"
            + yaml.safe_dump(kustomization("b"))
            + "---\n",
            id="multi-document-yaml-with-empty-documents",
        ),
        pytest.param(
            "multi-lists.yaml",
            yaml.safe_dump(kubectl_list(kustomization("a")))
            + "---\n"
            + yaml.safe_dump(kubectl_list(kustomization("b"))),
            id="one-list-per-document",
        ),
        pytest.param(
            "items.json", orjson.dumps([kustomization("a"), kustomization("b")]), id="bare-json-array"
        ),
        pytest.param(
            "snapshot.txt",
            orjson.dumps(kubectl_list(kustomization("a"), kustomization("b"))),
            id="sniffed-json",
        ),
        pytest.param(
            "snapshot",
            yaml.safe_dump_all([kustomization("a"), kustomization("b")]),
            id="sniffed-yaml",
        ),
    ],
)
def test_every_kubectl_output_shape_loads_every_object(
    tmp_path: Path, filename: str, content: str | bytes
) -> None:
    snapshot = load_snapshot([str(write(tmp_path / filename, content))])
    assert snapshot.errors == []
    assert names(snapshot.objects) == ["Kustomization/flux-system/a", "Kustomization/flux-system/b"]


def test_single_objects_load_from_json_and_yaml(tmp_path: Path) -> None:
    json_file = write(tmp_path / "a.json", orjson.dumps(kustomization("a")))
    yaml_file = write(tmp_path / "b.yml", yaml.safe_dump(kustomization("b")))
    snapshot = load_snapshot([str(json_file), str(yaml_file)])
    assert (snapshot.errors, snapshot.files) == ([], 2)
    assert names(snapshot.objects) == ["Kustomization/flux-system/a", "Kustomization/flux-system/b"]


def test_directories_are_searched_recursively_in_sorted_order_skipping_hidden_and_other_files(
    tmp_path: Path,
) -> None:
    write(tmp_path / "b" / "two.yaml", yaml.safe_dump(kustomization("two")))
    write(tmp_path / "a" / "deep" / "one.json", orjson.dumps(kustomization("one")))
    write(tmp_path / "c.YML", yaml.safe_dump(kustomization("three")))
    write(tmp_path / "notes.md", "# not a snapshot")
    write(tmp_path / ".git" / "config.yaml", yaml.safe_dump(kustomization("hidden-dir")))
    write(tmp_path / ".hidden.yaml", yaml.safe_dump(kustomization("hidden-file")))
    snapshot = load_snapshot([str(tmp_path)])
    assert (snapshot.errors, snapshot.files) == ([], 3)
    assert names(snapshot.objects) == [
        "Kustomization/flux-system/one",
        "Kustomization/flux-system/two",
        "Kustomization/flux-system/three",
    ]


def test_dash_reads_the_snapshot_from_stdin() -> None:
    stdin = io.BytesIO(orjson.dumps(kubectl_list(kustomization("piped"))))
    snapshot = load_snapshot(["-"], stdin=stdin)
    assert (snapshot.errors, names(snapshot.objects)) == ([], ["Kustomization/flux-system/piped"])


def test_the_same_object_given_twice_counts_once_and_the_last_copy_wins(tmp_path: Path) -> None:
    first = write(tmp_path / "1.yaml", yaml.safe_dump(kustomization("a", lastAppliedRevision="main@sha1:1")))
    second = write(tmp_path / "2.yaml", yaml.safe_dump(kustomization("a", lastAppliedRevision="main@sha1:2")))
    snapshot = load_snapshot([str(first), str(second)])
    assert [o["status"]["lastAppliedRevision"] for o in snapshot.objects] == ["main@sha1:2"]


def test_objects_outside_the_watched_namespaces_are_skipped(tmp_path: Path) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}
    file = write(
        tmp_path / "x.yaml",
        yaml.safe_dump(kubectl_list(kustomization("a"), kustomization("b", "apps"), namespace)),
    )
    snapshot = load_snapshot([str(file)], keep_namespace=lambda ns: ns != "apps")
    assert names(snapshot.objects) == ["Kustomization/flux-system/a", "Namespace//apps"]


def test_unquoted_yaml_timestamps_stay_strings_like_the_api_servers_json(tmp_path: Path) -> None:
    text = yaml.safe_dump(kustomization("a")) + (
        "  conditions:\n  - type: Ready\n    status: 'True'\n    reason: ReconciliationSucceeded\n"
        "    message: ok\n    lastTransitionTime: 2026-11-30T11:00:00Z\n"
    )
    snapshot = load_snapshot([str(write(tmp_path / "a.yaml", text.replace("  conditions: []\n", "")))])
    assert snapshot.errors == []
    assert snapshot.objects[0]["status"]["conditions"][0]["lastTransitionTime"] == "2026-11-30T11:00:00Z"


def test_objects_are_projected_like_the_live_watcher_does(tmp_path: Path) -> None:
    obj = kustomization("a")
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    obj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{" * 5000}
    snapshot = load_snapshot([str(write(tmp_path / "a.json", orjson.dumps(obj)))])
    assert "last-applied-configuration" not in orjson.dumps(snapshot.objects[0]).decode()


GOOD = kustomization("good")


@pytest.mark.parametrize(
    ("filename", "content", "error"),
    [
        pytest.param(
            "broken.yaml",
            yaml.safe_dump(GOOD) + "---\nkind: [unclosed\n",
            "{dir}/broken.yaml: not valid YAML: line 17, column 1: did not find expected ',' or ']'",
            id="yaml-syntax-error-keeps-documents-before-it",
        ),
        pytest.param(
            "broken.json",
            b'{"kind": ',
            "{dir}/broken.json: not valid JSON: unexpected end of data: line 1 column 10 (char 9)",
            id="json-syntax-error-loses-the-whole-file",
        ),
        pytest.param(
            "latin1.yaml",
            "kind: Kustomization\nmetadata: {name: caf\xe9}\n".encode("latin-1"),
            "{dir}/latin1.yaml: not UTF-8 text: 'utf-8' codec can't decode byte 0xe9 in position 40: "
            "invalid continuation byte",
            id="not-utf8",
        ),
        pytest.param(
            "no-kind.yaml",
            yaml.safe_dump(kubectl_list(GOOD, {"apiVersion": "v1", "metadata": {"name": "x"}})),
            "{dir}/no-kind.yaml: item 2: object has no kind",
            id="object-without-kind",
        ),
        pytest.param(
            "no-name.yaml",
            yaml.safe_dump_all([GOOD, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]),
            "{dir}/no-name.yaml: document 2: ConfigMap: object has no metadata.name",
            id="object-without-name",
        ),
        pytest.param(
            "conditions.json",
            orjson.dumps(kubectl_list(GOOD, kustomization("bad", conditions={"type": "Ready"}))),
            "{dir}/conditions.json: item 2: Kustomization flux-system/bad: status.conditions is not a list",
            id="conditions-of-the-wrong-type",
        ),
        pytest.param(
            "scalar.yaml",
            yaml.safe_dump(GOOD) + "---\njust a string\n",
            "{dir}/scalar.yaml: document 2: expected a Kubernetes object (a mapping), got a string",
            id="document-that-is-not-an-object",
        ),
        pytest.param(
            "items.yaml",
            yaml.safe_dump_all([GOOD, {"apiVersion": "v1", "kind": "List", "items": {"a": 1}}]),
            "{dir}/items.yaml: document 2: items: expected a list, got a mapping",
            id="list-whose-items-are-not-a-list",
        ),
        pytest.param(
            "deep.yaml",
            yaml.safe_dump(GOOD) + "---\nkind: ConfigMap\ndata: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n",
            "{dir}/deep.yaml: document 2: nested more than 100 levels deep; refusing it",
            id="document-nested-absurdly",
        ),
        pytest.param(
            "bomb.yaml",
            yaml.safe_dump(GOOD)
            + "---\na: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(6)
            ),
            "{dir}/bomb.yaml: expands to more values than the file has bytes (YAML aliases?); refusing it",
            id="yaml-alias-bomb",
        ),
    ],
)
def test_bad_input_is_one_error_naming_file_and_object_and_loading_continues(
    tmp_path: Path, filename: str, content: str | bytes, error: str
) -> None:
    bad = write(tmp_path / filename, content)
    other = write(tmp_path / "other.yaml", yaml.safe_dump(kustomization("other")))
    snapshot = load_snapshot([str(bad), str(other)])
    assert [str(e) for e in snapshot.errors] == [error.format(dir=tmp_path)]
    raw = content if isinstance(content, bytes) else content.encode()
    kept = (
        ["Kustomization/flux-system/good"] if b"good" in raw else []
    )  # the good object survives its bad neighbour
    assert names(snapshot.objects) == [*kept, "Kustomization/flux-system/other"]


def test_a_file_over_256_mib_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:  # sparse: no disk is used
        handle.truncate(MAX_FILE_BYTES + 1)
    snapshot = load_snapshot([str(huge)])
    assert [str(e) for e in snapshot.errors] == [
        f"{huge}: file is {MAX_FILE_BYTES + 1} bytes, larger than the 256 MiB limit"
    ]


def test_stdin_over_256_mib_is_refused() -> None:
    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            buffer[:] = b" " * len(buffer)
            return len(buffer)

    snapshot = load_snapshot(["-"], stdin=io.BufferedReader(Endless()))
    assert [str(e) for e in snapshot.errors] == ["-: input is larger than the 256 MiB limit"]


@pytest.mark.parametrize(
    ("make", "error"),
    [
        pytest.param(lambda d: d / "missing.yaml", "{path}: no such file or directory", id="missing-path"),
        pytest.param(
            lambda d: (d / "empty").mkdir() or d / "empty",
            "{path}: directory has no *.json, *.yaml, *.yml files",
            id="directory-without-snapshots",
        ),
    ],
)
def test_unusable_paths_are_named(tmp_path: Path, make: Any, error: str) -> None:
    path = make(tmp_path)
    other = write(tmp_path / "other.yaml", yaml.safe_dump(kustomization("other")))
    snapshot = load_snapshot([str(path), str(other)])
    assert [str(e) for e in snapshot.errors] == [error.format(path=path)]
    assert names(snapshot.objects) == ["Kustomization/flux-system/other"]
