"""`stalewatch run --prometheus URL`: the flag is the heartbeat_prometheus setting, and its
credentials are checked before anything starts (exit 2, one line naming the setting)."""

from __future__ import annotations

from pathlib import Path

import pytest

from watcher.cli import main


def test_run_offers_the_prometheus_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    assert "--prometheus URL" in capsys.readouterr().out


def test_the_prometheus_flag_is_the_heartbeat_prometheus_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--prometheus", "prometheus:9090"]) == 2
    assert capsys.readouterr().err == (
        "config: heartbeat_prometheus: expected an http:// or https:// URL; got 'prometheus:9090'\n"
    )


def test_an_unreadable_token_file_stops_run_naming_its_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "token"
    args = ["run", "--prometheus", "http://prometheus:9090"]
    assert main([*args, "--set", f"heartbeat_prometheus_bearer_token_file={missing}"]) == 2
    assert capsys.readouterr().err == (
        f"config: heartbeat_prometheus_bearer_token_file {missing}: "
        "cannot be read: No such file or directory\n"
    )


def test_basic_auth_without_its_password_stops_run(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "--prometheus", "http://prometheus:9090"]
    assert main([*args, "--set", "heartbeat_prometheus_basic_auth_user=me"]) == 2
    assert capsys.readouterr().err == (
        "config: heartbeat_prometheus_basic_auth_user and heartbeat_prometheus_basic_auth_password_file "
        "go together\n"
    )
