"""The lab fixtures: one lab per test module (starting it takes seconds, its processes hundreds of
MiB), stopped when the module is done so the rest of the suite does not run beside it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controlplane.harness import free_port
from tests.lab.lab import Lab, running_lab


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    """The running lab. Tests that break a controller must say so in their name and run last in
    their module: the lab is shared and does not heal."""
    with running_lab() as started:
        yield started


@pytest.fixture(scope="module")
def stalewatch(lab: Lab) -> str:
    """`stalewatch run` against the lab (Lab.start_stalewatch): its base URL, once ready. It stops
    with the lab."""
    listen = f"127.0.0.1:{free_port()}"
    lab.start_stalewatch(listen)
    return f"http://{listen}"
