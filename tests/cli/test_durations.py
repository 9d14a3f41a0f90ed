"""One duration reader: a command-line flag takes exactly the spellings a setting takes."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest

from watcher.cli import main
from watcher.cli_args import positive_duration
from watcher.config import setting_duration


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param("90s", id="go-seconds"),
        pytest.param("1h30m", id="go-compound"),
        pytest.param("1.5h", id="go-fraction"),
        pytest.param("250ms", id="go-milliseconds"),
        pytest.param("90", id="plain-seconds"),
        pytest.param("1.5", id="plain-fraction-of-seconds"),
        pytest.param(" 5m ", id="surrounding-spaces"),
        pytest.param("2562047h", id="near-the-longest-go-duration"),
    ],
)
def test_a_flag_reads_a_duration_as_a_setting_does(spelling: str) -> None:
    assert positive_duration(spelling) == setting_duration(spelling) > timedelta(0)


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param("soon", id="a-word"),
        pytest.param("0", id="zero"),
        pytest.param("0s", id="zero-go"),
        pytest.param("-5s", id="negative"),
        pytest.param("3000000h", id="longer-than-go-allows"),
        pytest.param("nan", id="not-a-number"),
        pytest.param("", id="empty"),
    ],
)
def test_a_flag_refuses_what_is_not_a_positive_setting_duration(spelling: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a positive duration"):
        positive_duration(spelling)


@pytest.mark.parametrize("command", ["wait", "impact"])
def test_wait_and_impact_refuse_a_bad_timeout_in_one_line_with_exit_2(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "ks/flux-system/apps", "--timeout", "soon"]) == 2
    err = capsys.readouterr().err
    assert "argument --timeout: expected a positive duration" in err
    assert len(err.splitlines()) == 1, err
