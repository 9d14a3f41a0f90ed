"""`stalewatch run` as a process: probes, JSON logs on stdout, SIGTERM, and user mistakes."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.controlplane.harness import ControlPlane, free_port
from tests.kube.support import parse_metrics, poll

pytestmark = pytest.mark.cluster


@asynccontextmanager
async def stalewatch(*args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "watcher", "run", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def status_of(url: str) -> tuple[int, str]:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            return response.status, await response.text()
    except aiohttp.ClientConnectionError:
        return 0, ""


async def stop(process: asyncio.subprocess.Process) -> tuple[int, list[dict[str, Any]], str]:
    """SIGTERM, then the exit code, the JSON log lines and stderr."""
    process.send_signal(signal.SIGTERM)
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=10)
    lines = [orjson.loads(line) for line in stdout.splitlines() if line.strip()]
    assert process.returncode is not None
    return process.returncode, lines, stderr.decode()


async def test_run_serves_until_sigterm_then_stops_cleanly_logging_json_lines(
    control_plane: ControlPlane, namespace: str
) -> None:
    base = f"http://127.0.0.1:{free_port()}"
    async with stalewatch(
        "--kubeconfig", str(control_plane.kubeconfig), "--listen", base.removeprefix("http://"),
        "--set", f"include_namespaces={namespace}",
    ) as process:  # fmt: skip
        await poll(lambda: _ok(f"{base}/readyz"), within=30, what="ready")
        assert (await status_of(f"{base}/healthz"))[0] == 200
        findings = orjson.loads((await status_of(f"{base}/api/v1/findings"))[1])
        assert findings["findings"] == []
        assert findings["summary"]["up"] is True
        code, logs, stderr = await stop(process)

    assert code == 0, stderr
    assert stderr == ""
    assert all({"ts", "level", "msg"} <= line.keys() for line in logs)
    said = [line["msg"] for line in logs]
    assert said.index("stalewatch running") < said.index("stopping") < said.index("stopped")
    listed = {(line["group"], line["kind"]) for line in logs if line["msg"] == "listed"}
    assert ("", "Pod") in listed, "fields are top-level keys; the core group is the empty string"


async def test_an_unreachable_api_server_is_served_as_not_ready_and_stale_and_sigterm_still_stops_it(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    nowhere = free_port()
    kubeconfig = tmp_path / "nowhere"
    control_plane.write_kubeconfig(kubeconfig, user={"token": "x"})
    kubeconfig.write_text(kubeconfig.read_text().replace(str(control_plane.apiserver_port), str(nowhere)))
    base = f"http://127.0.0.1:{free_port()}"
    async with stalewatch(
        "--kubeconfig", str(kubeconfig), "--listen", base.removeprefix("http://")
    ) as process:
        await poll(lambda: _ok(f"{base}/healthz"), within=30, what="serving")
        status, why = await status_of(f"{base}/readyz")
        assert (status, why.strip()) == (503, "the Kubernetes API server is unreachable")
        summary = orjson.loads((await status_of(f"{base}/api/v1/findings"))[1])["summary"]
        assert (summary["up"], summary["stale"], summary["synced"]) == (False, True, False)
        samples = parse_metrics((await status_of(f"{base}/metrics"))[1])
        assert samples["stalewatch_up", frozenset()] == 0

        async def refused() -> bool:
            samples = parse_metrics((await status_of(f"{base}/metrics"))[1])
            refusals = [
                value
                for (name, labels), value in samples.items()
                if name == "stalewatch_list_requests_total" and ("result", "connection_error") in labels
            ]
            return sum(refusals) > 0

        await poll(refused, within=10, what="a list refused")
        code, logs, stderr = await stop(process)
    assert code == 0, stderr
    said = [line for line in logs if "unreachable" in line["msg"]]
    assert [(line["level"], line["msg"]) for line in said] == [("warning", "API server unreachable")], (
        "the first failure is said once, even though the server was never reached"
    )
    assert "Connect" in said[0]["error"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(
            ["--kubeconfig", "/nonexistent/kubeconfig"], "/nonexistent/kubeconfig", id="no-kubeconfig"
        ),
        pytest.param(["--kubeconfig", "{not_yaml}"], "line 1, column 1", id="kubeconfig-not-yaml"),
        pytest.param(
            ["--kubeconfig", "{empty}", "--context", "prod"], "(context prod)", id="unknown-context"
        ),
        pytest.param(["--listen", "everywhere"], "config: listen:", id="bad-listen"),
        pytest.param(
            ["--set", "thresholds.revision_skew=soon"], "config: thresholds.revision_skew:", id="bad-set"
        ),
    ],
)
async def test_a_user_mistake_is_one_clear_line_and_exit_code_2(
    args: list[str], says: str, tmp_path: Path
) -> None:
    """Each mistake is found before anything is served (the port is never bound)."""
    files = {"not_yaml": tmp_path / "not-yaml", "empty": tmp_path / "empty"}
    files["not_yaml"].write_text(": [\n")
    files["empty"].write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    async with stalewatch("--listen", "127.0.0.1:9", *(a.format(**files) for a in args)) as process:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    text = stderr.decode()
    assert process.returncode == 2, text
    assert says in text
    assert "Traceback" not in text


async def test_a_busy_listen_port_is_one_clear_line_and_exit_code_2(control_plane: ControlPlane) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        async with stalewatch(
            "--kubeconfig", str(control_plane.kubeconfig), "--listen", f"127.0.0.1:{port}"
        ) as process:
            _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in stderr.decode()
    assert "Traceback" not in stderr.decode()


async def _ok(url: str) -> bool:
    return (await status_of(url))[0] == 200
