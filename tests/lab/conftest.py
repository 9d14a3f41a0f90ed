"""The lab fixtures: one lab per test module (starting it takes seconds, its processes hundreds of
MiB), stopped when the module is done so the rest of the suite does not run beside it."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.controlplane.harness import free_port
from tests.lab.lab import Lab, running_lab, wait_for


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    """The running lab. Tests that break a controller must say so in their name and run last in
    their module: the lab is shared and does not heal."""
    with running_lab() as started:
        yield started


@pytest.fixture(scope="module")
def stalewatch(lab: Lab) -> Iterator[str]:
    """`stalewatch run` as a user starts it against the lab: its own process, default settings and
    thresholds, the lab's kubeconfig. Yields its base URL once it is ready (every kind listed)."""
    base = f"http://127.0.0.1:{free_port()}"
    log = (lab.logs / "stalewatch.log").open("wb")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "watcher", "run"),
            *("--kubeconfig", str(lab.plane.kubeconfig), "--listen", base.removeprefix("http://")),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for("stalewatch ready", lambda: process.poll() is None and _ok(f"{base}/readyz"), timeout=60)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False
