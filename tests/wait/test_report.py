"""What `stalewatch wait` says: its help, its bad-input messages, progress lines and the JSON
document, each as documented in docs/wait.md."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watcher.cli import main
from watcher.export.wait import progress_line, render_json, render_text
from watcher.model.ingest.objects import Key
from watcher.model.views.convergence import Outcome, Verdict
from watcher.model.views.subtree import ObjectState, State
from watcher.model.views.targets import parse_target
from watcher.waiting import EXIT_CODES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "wait.md"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
APPS = Key("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "apps")
HOSTILE = "Progressing: \x1b]0;owned\x07applying\x1b[2J\nINFO forged line"


def hostile_verdict(outcome: Outcome = Outcome.WAITING) -> Verdict:
    state = ObjectState(APPS, State.IN_PROGRESS, HOSTILE, since=NOW - timedelta(minutes=2))
    return Verdict(outcome, "0/1 current", [state])


@pytest.mark.parametrize(
    ("outcome", "code"),
    [pytest.param(outcome, code, id=str(outcome)) for outcome, code in EXIT_CODES.items()],
)
def test_help_and_docs_list_every_exit_code(
    outcome: Outcome, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["wait", "--help"]) == 0
    name = str(outcome).replace("_", " ")
    assert re.search(rf"^  {code}  {name}: ", capsys.readouterr().out, re.MULTILINE)
    assert re.search(rf"^\| `{code}` \| {name} \|", DOCS.read_text(), re.MULTILINE), "docs/wait.md's table"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["deploy/a/b"], "stalewatch wait: target 'deploy/a/b': unknown kind 'deploy'", id="unknown-kind"
        ),
        pytest.param(
            ["ks/a/b", "--revision", "5e0f1a2"],
            "stalewatch wait: --revision '5e0f1a2': 5e0f1a2 looks like an abbreviated digest",
            id="abbreviated-sha",
        ),
        pytest.param(
            ["ks/a/b", "--timeout", "soon"], "argument --timeout: expected a positive duration", id="timeout"
        ),
        pytest.param(
            ["ks/a/b", "--kubeconfig", "/nonexistent/kubeconfig"],
            "stalewatch wait: kubeconfig /nonexistent/kubeconfig: no such file",
            id="no-kubeconfig",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["wait", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.splitlines()) == 1, err


def test_progress_and_report_show_what_the_cluster_wrote_without_obeying_it() -> None:
    line = progress_line(hostile_verdict(), now=NOW)
    assert line == (
        "waiting: 0/1 current; Kustomization flux-system/apps: Progressing: \\x1b]0;owned\\x07applying"
        "\\x1b[2J\\nINFO forged line (since 2m ago)"
    )
    timed_out = render_text(hostile_verdict(Outcome.TIMED_OUT), now=NOW)
    failed = render_text(dataclasses.replace(hostile_verdict(Outcome.FAILED), message=HOSTILE), now=NOW)
    assert "\x1b" not in timed_out + failed
    assert [line.split(":")[0] for line in timed_out.splitlines()] == [
        "timed out",
        "still in progress (1 of 1)",
        "  Kustomization flux-system/apps",
    ]
    assert [line.split(":")[0] for line in failed.splitlines()] == [
        "failed",
        "not current (1 of 1)",
        "  Kustomization flux-system/apps",
    ]


def test_every_field_of_the_json_document_is_documented() -> None:
    target = parse_target("ks/flux-system/apps", revision="main@sha1:" + "b" * 40)
    document = json.loads(
        render_json(hostile_verdict(Outcome.TIMED_OUT), [target], started=NOW, now=NOW, code=3)
    )
    assert document["objects"][0]["reason"] == HOSTILE, "JSON carries the text as written"
    documented = DOCS.read_text().split("## The JSON document")[1]
    fields = [*document, *document["summary"], *document["objects"][0], *document["targets"][0]]
    missing = [name for name in fields if f"`{name}`" not in documented]
    assert not missing, f"not in docs/wait.md: {missing}"
