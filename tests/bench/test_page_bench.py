"""bench/page.py runs end to end on a small cluster and reports what it promises."""

from __future__ import annotations

import pytest

from bench.page import main


def test_the_page_benchmark_builds_the_stacks_it_says_and_times_every_view(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--roots", "3", "--repeat", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 stacks, 147 rows, 16 findings (1 root), 105 GitOps objects"
    steps = [line.split(" | ")[0].lstrip("| ") for line in out[3:]]
    assert steps[:2] == ["snapshot (on the event loop)", "snapshot + forest (once per generation)"]
    assert len(steps) == 10
