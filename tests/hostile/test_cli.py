"""Hostile input on the CLI's answers (issue 42): a dependsOn chain thousands deep, stdout that
cannot take the answer, and a condition message that tries to forge report lines."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from watcher.export.impact import INDENT_LEVELS
from watcher.export.wait import render_text as wait_text
from watcher.model.types import Finding, FindingType, Severity, Subject
from watcher.model.views.convergence import Outcome, Verdict

ROOT = Path(__file__).resolve().parents[2]
CHAIN = 3000
"""Deep enough that indentation growing per level is hundreds of MB (2,000 deep was 88 MB)."""
BYTES_PER_NODE = 1200
"""An upper bound on one node's share of the answer, its indentation included, at any depth."""
MEMORY = 1 << 30
"""The address space the answer is computed and written in."""
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def chain(path: Path) -> Path:
    """Kustomizations k0 <- k1 <- ... <- k2999, each dependsOn the one before."""
    items = []
    for index in range(CHAIN):
        spec: dict[str, Any] = {"interval": "10m", "path": "./", "prune": True}
        spec["sourceRef"] = {"kind": "GitRepository", "name": "flux-system"}
        if index:
            spec["dependsOn"] = [{"name": f"k{index - 1}"}]
        meta = {"name": f"k{index}", "namespace": "flux-system"}
        kind = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization"}
        items.append({**kind, "metadata": meta, "spec": spec})
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def stalewatch(
    *args: str, stdout: int, preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m watcher ARGS` in at most MEMORY of address space, stdout to the given file."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        if preexec is not None:
            preexec()

    return subprocess.run(
        [sys.executable, "-m", "watcher", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=limited,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.upper().startswith("STALEWATCH_")},
    )


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_dependency_chain_thousands_deep_is_answered_in_output_linear_in_its_size(
    tmp_path: Path, output: str
) -> None:
    snapshot, answer = chain(tmp_path / "chain.json"), tmp_path / "answer"
    with answer.open("wb") as out:
        result = stalewatch("impact", "-o", output, "ks/flux-system/k0", str(snapshot), stdout=out.fileno())
    assert (result.returncode, result.stderr) == (1, "")
    text = answer.read_text()
    assert len(text.encode()) <= BYTES_PER_NODE * CHAIN
    if output == "text":
        nodes = text.splitlines()[1:CHAIN]
        assert nodes[INDENT_LEVELS - 1].startswith("  " * INDENT_LEVELS + "blocked ")
        deepest = (
            "  " * INDENT_LEVELS + f"[{CHAIN - 1}] blocked         Kustomization flux-system/k{CHAIN - 1}:"
        )
        assert nodes[-1].startswith(deepest)
        assert [re.search(r"Kustomization flux-system/(k\d+):", n)[1] for n in nodes] == [  # type: ignore[index]
            f"k{index}" for index in range(1, CHAIN)
        ]
        return
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(4 * CHAIN)  # Python's json nests as deep as its recursion
    try:
        document = json.loads(text)
    finally:
        sys.setrecursionlimit(limit)
    names, node = [], document["tree"]
    while True:
        names.append(node["name"])
        if not node["children"]:
            break
        [node] = node["children"]
    assert names == [f"k{index}" for index in range(CHAIN)]
    assert (document["exit_code"], document["summary"]["broken"]) == (1, CHAIN - 1)


def closed_pipe() -> int:
    read, write = os.pipe()
    os.close(read)  # the reader left before stalewatch wrote
    return write


@pytest.mark.parametrize("output", ["text", "json"])
@pytest.mark.parametrize(
    ("stdout", "why"),
    [
        pytest.param(lambda: os.open("/dev/full", os.O_WRONLY), "No space left on device", id="full-device"),
        pytest.param(closed_pipe, "Broken pipe", id="closed-pipe"),
    ],
)
def test_an_answer_that_cannot_be_written_is_exit_2_with_one_line_never_a_partial_answer(
    tmp_path: Path, stdout: Callable[[], int], why: str, output: str
) -> None:
    snapshot, fd = chain(tmp_path / "chain.json"), stdout()
    try:
        result = stalewatch("impact", "-o", output, "ks/flux-system/k0", str(snapshot), stdout=fd)
    finally:
        os.close(fd)
    said = f"stalewatch impact: could not write the answer to stdout ({why}): it is incomplete\n"
    assert (result.returncode, result.stderr) == (2, said)


def test_an_answer_with_stdout_closed_is_exit_2_with_one_line(tmp_path: Path) -> None:
    snapshot = chain(tmp_path / "chain.json")
    result = stalewatch(
        "impact", "ks/flux-system/k0", str(snapshot), stdout=subprocess.DEVNULL, preexec=lambda: os.close(1)
    )
    said = "stalewatch impact: could not write the answer to stdout (stdout is closed): it is incomplete\n"
    assert (result.returncode, result.stderr) == (2, said)


FORGERY = (
    "apply failed\n"
    "blast radius: 0 objects\n"
    "evidence:\n"
    "  Kustomization (1)\n"
    "    flux-system/fine  Healthy\n"
    "  all: healthy"
)
"""A condition message that, continued at its own indent, reads as the lines of a root block."""
FORGED = re.compile(r" *(blast radius|evidence|all|Kustomization \(|flux-system/fine)")
KS = "kustomize.toolkit.fluxcd.io/v1"


def forged_snapshot(path: Path) -> Path:
    ready = {"type": "Ready", "status": "False", "reason": "ReconciliationFailed", "message": FORGERY}
    ready["lastTransitionTime"] = "2026-11-30T10:00:00Z"
    obj = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system", "generation": 1},
        "spec": {
            "interval": "10m",
            "path": "./",
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        },
        "status": {"observedGeneration": 1, "conditions": [ready]},
    }
    path.write_bytes(orjson.dumps(obj))
    return path


def report_lines(text: str) -> list[str]:
    """The lines a reader could take for the report's own: any line at most 6 deep."""
    return [line for line in text.splitlines() if not line.startswith(" " * 7)]


def test_a_newline_in_a_condition_message_cannot_forge_a_report_line(tmp_path: Path) -> None:
    snapshot = forged_snapshot(tmp_path / "apps.json")
    result = stalewatch("analyze", "--now", "2026-11-30T12:00:00Z", str(snapshot), stdout=subprocess.PIPE)
    assert (result.returncode, result.stderr) == (0, "")
    assert [line for line in report_lines(result.stdout) if FORGED.match(line)] == ["  evidence:"]
    for forged in FORGERY.splitlines()[1:]:
        assert any(line.startswith(" " * 8 + forged) for line in result.stdout.splitlines()), forged


def test_a_failed_wait_prints_a_forging_message_continued_below_every_report_line() -> None:
    apps = Subject(apiVersion=KS, kind="Kustomization", namespace="flux-system", name="apps")
    since = NOW - timedelta(hours=1)
    finding = Finding("f1", FindingType.RECONCILE_FAILED, Severity.WARNING, apps, FORGERY, since, {})
    out = wait_text(
        Verdict(Outcome.FAILED, "ReconcileFailed Kustomization flux-system/apps", [], [finding]), now=NOW
    )
    assert [line for line in report_lines(out) if FORGED.match(line)] == []
