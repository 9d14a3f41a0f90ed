"""docs/impact.md stays true: every `$ stalewatch impact` excerpt is what impact prints, and its
exit-code table is the one `stalewatch impact --help` prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from watcher.cli import build_parser, main

DOC = Path(__file__).resolve().parents[2] / "docs" / "impact.md"
TEXT = DOC.read_text()
EXCERPTS = re.findall(r"```text\n\$ stalewatch (impact .*?)\n(.*?)```", TEXT, re.DOTALL)
EXIT_ROWS = re.findall(r"^\| (\d) \| (.*?) \|$", TEXT, re.MULTILINE)


@pytest.mark.parametrize(("command", "output"), EXCERPTS, ids=[c for c, _ in EXCERPTS])
def test_each_excerpt_is_what_impact_prints(
    command: str, output: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(DOC.parents[1])
    main(shlex.split(command))
    assert capsys.readouterr().out == output


def test_the_exit_codes_are_the_ones_help_prints(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser(["impact"]).parse_args(["impact", "--help"])
    epilog = capsys.readouterr().out.split("exit codes:\n", 1)[1]
    helped = re.findall(r"^  (\d)  (.*(?:\n     .*)*)", epilog, re.MULTILINE)
    assert [(code, " ".join(m.split())) for code, m in helped] == EXIT_ROWS
    assert len(EXIT_ROWS) == 5


def test_the_synopsis_has_every_flag_help_has(capsys: pytest.CaptureFixture[str]) -> None:
    synopsis = TEXT.split("```\nstalewatch impact ", 1)[1].split("```", 1)[0]
    with pytest.raises(SystemExit):
        build_parser(["impact"]).parse_args(["impact", "--help"])
    helped = set(re.findall(r"^  (?:-\w, )?(--[a-z-]+)", capsys.readouterr().out, re.MULTILINE))
    assert set(re.findall(r"--[a-z-]+", synopsis)) == helped - {"--help"}
