"""The README's analyze excerpt is real output: every line it shows is printed, in that order."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from watcher.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_analyze_excerpt_is_what_analyze_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    block = re.search(r"```text\n\$ stalewatch (analyze .*?)\n(.*?)```", README.read_text(), re.DOTALL)
    assert block, "README has no analyze excerpt"
    monkeypatch.chdir(README.parent)
    assert main(shlex.split(block[1])) == 1
    printed = capsys.readouterr().out.splitlines()
    position = 0
    for line in block[2].splitlines():
        if line.strip() == "...":
            continue
        assert line in printed[position:], f"README line not printed (in order): {line!r}"
        position = printed.index(line, position) + 1
