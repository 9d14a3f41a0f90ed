"""`stalewatch fleet`'s flags: each mistake is one line naming the flag, exit 2, no traceback;
and a real server answers with credentials sent as configured."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.fleet.rig import prometheus_running
from watcher.cli import build_parser, main
from watcher.fleet.prom import Credentials, Prometheus
from watcher.fleet.queries import Answer
from watcher.fleet.server import check_arguments

OK = ["fleet", "--prometheus", "http://127.0.0.1:9090"]


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    (tmp_path / "token").write_text("s3cret-token\n")
    (tmp_path / "password").write_text("hunter2\n")
    return tmp_path


MISTAKES = [
    pytest.param(
        ["--prometheus", "ftp://x"],
        "--prometheus 'ftp://x': expected an http:// or https:// URL",
        id="scheme",
    ),
    pytest.param(
        ["--prometheus", "http://u:p@x:9090"],
        "--prometheus: no credentials in the URL (it is shown on the page); use --basic-auth-user",
        id="credentials-in-url",
    ),
    pytest.param(["--cluster-label", "9x"], "--cluster-label '9x': not a label name", id="label"),
    pytest.param(["--listen", "8081"], "--listen: listen address '8081' is not [HOST]:PORT", id="listen"),
    pytest.param(
        ["--query-timeout", "10x"],
        "--query-timeout: expected a duration such as 90s, 10m or 1h30m (units h, m, s, ms), or a number "
        "of seconds; got '10x'",
        id="timeout-not-a-duration",
    ),
    pytest.param(
        ["--query-timeout", "0s"],
        "--query-timeout: expected more than 0s and less than 24h; got '0s'",
        id="timeout-nothing",
    ),
    pytest.param(
        ["--stale-after", "24h"],
        "--stale-after: expected more than 0s and less than 24h; got '24h'",
        id="stale-after-a-day",
    ),
    pytest.param(
        ["--stale-after=-5m"],
        "--stale-after: expected a duration such as 90s, 10m or 1h30m (units h, m, s, ms), or a number "
        "of seconds; got '-5m'",
        id="stale-after-negative",
    ),
    pytest.param(
        ["--stale-after", "99999999999h"],
        "--stale-after: at most 2562047h47m16s, the longest Go duration; got '99999999999h'",
        id="stale-after-beyond-any-duration",
    ),
    pytest.param(
        ["--cluster-url", "prod"], "--cluster-url 'prod': expected CLUSTER=http(s)://...", id="cluster-url"
    ),
    pytest.param(
        ["--bearer-token-file", "/nonexistent"],
        "--bearer-token-file /nonexistent: cannot be read",
        id="token",
    ),
    pytest.param(
        ["--basic-auth-user", "me"],
        "--basic-auth-user and --basic-auth-password-file go together",
        id="half-auth",
    ),
    pytest.param(
        ["--ca-file", "/etc/hostname"], "--ca-file /etc/hostname: not a PEM certificate bundle", id="ca"
    ),
]


@pytest.mark.parametrize(("flags", "said"), MISTAKES)
def test_a_bad_flag_is_one_line_naming_it_and_exit_2(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*OK, *flags]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"stalewatch fleet: {said}")


def test_both_bad_durations_are_named_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*OK, "--query-timeout", "soon", "--stale-after", "0"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["--query-timeout", "--stale-after"]


@pytest.mark.parametrize(
    ("flags", "query_timeout", "stale_after"),
    [
        pytest.param([], 10.0, 120.0, id="defaults-10s-and-2m"),
        pytest.param(["--query-timeout", "1m30s", "--stale-after", "1h"], 90.0, 3600.0, id="go-spelling"),
        pytest.param(["--query-timeout", "250ms", "--stale-after", "1.5h"], 0.25, 5400.0, id="ms-fraction"),
        pytest.param(["--query-timeout", "2.5", "--stale-after", "300"], 2.5, 300.0, id="plain-seconds"),
        pytest.param(["--stale-after", "23h59m59s"], 10.0, 86399.0, id="just-under-a-day"),
    ],
)
def test_the_durations_are_read_as_the_settings_spell_them(
    flags: list[str], query_timeout: float, stale_after: float
) -> None:
    argv = [*OK, *flags]
    checked, problems = check_arguments(build_parser(argv).parse_args(argv))
    assert problems == []
    assert (checked.query_timeout, checked.stale_after) == (query_timeout, stale_after)


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "watcher", *OK, "--listen", f"127.0.0.1:{port}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"stalewatch fleet: cannot listen on 127.0.0.1:{port}: ")
    assert line.endswith("address already in use")


@pytest.mark.parametrize(
    ("credentials", "expected"),
    [
        pytest.param(
            lambda d: Credentials(bearer_token_file=d / "token"), "Bearer s3cret-token", id="bearer"
        ),
        pytest.param(
            lambda d: Credentials(basic_auth_user="me", basic_auth_password_file=d / "password"),
            "Basic bWU6aHVudGVyMg==",
            id="basic",
        ),
    ],
)
async def test_the_credentials_reach_the_store_and_a_refusal_is_an_answer_naming_it(
    secrets: Path, credentials: object, expected: str
) -> None:
    seen: list[str] = []

    async def query(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response(
            {"status": "error", "errorType": "unauthorized", "error": "bad token"}, status=401
        )

    app = web.Application()
    app.router.add_post("/api/v1/query", query)
    async with TestServer(app) as server:
        url = str(server.make_url("")).rstrip("/")
        async with Prometheus(url, timeout=5, credentials=credentials(secrets)) as store:  # type: ignore[operator]
            answer = await store.query("up", at=datetime.now(UTC))
    assert seen == [expected]
    assert answer.error == "unauthorized: bad token"


async def test_a_store_slower_than_the_query_timeout_is_an_answer_saying_so() -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    app = web.Application()
    app.router.add_post("/api/v1/query", slow)
    async with TestServer(app) as server, Prometheus(str(server.make_url("")), timeout=0.2) as store:
        answer = await store.query("up", at=datetime.now(UTC))
    assert answer == Answer(error="no answer within 0.2s")


@pytest.mark.parametrize("seconds", [pytest.param(0.25, id="250ms"), pytest.param(90.0, id="1m30s")])
async def test_the_query_timeout_is_sent_in_a_form_the_real_prometheus_accepts(
    seconds: float, tmp_path: Path
) -> None:
    with prometheus_running(tmp_path, targets={}) as store:
        async with Prometheus(store.url, timeout=seconds) as prometheus:
            answer = await prometheus.query("vector(1)", at=datetime.now(UTC))
    assert (answer.error, [sample["value"][1] for sample in answer.result]) == (None, ["1"])
