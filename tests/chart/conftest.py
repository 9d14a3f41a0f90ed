"""The chart's test tools: the real helm (scripts/chart-tools.sh builds it once and caches it),
`helm template` as a function, and an API server of the tests' own with the Prometheus
Operator's published CRDs installed (cluster-wide objects the other tests should not see)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import ControlPlane, running_control_plane

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "stalewatch"
ALL_ON = CHART / "ci" / "all-on-values.yaml"
RELEASE, NAMESPACE = "stalewatch", "stalewatch"


@dataclass(frozen=True)
class Tools:
    helm: Path
    operator_crds: Path


@cache
def tools() -> Tools:
    lines = subprocess.run(
        ["bash", str(REPO / "scripts" / "chart-tools.sh")], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    return Tools(helm=Path(lines[-2]), operator_crds=Path(lines[-1]))


def helm(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools().helm), *map(str, args)], capture_output=True, text=True, check=False, cwd=REPO
    )


def template(*args: str | Path, release: str = RELEASE) -> list[dict[str, Any]]:
    """`helm template` of the chart into NAMESPACE; fails the test with helm's own words."""
    done = helm("template", release, CHART, "--namespace", NAMESPACE, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objects)


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
    return found[0]


@pytest.fixture(scope="package")
def plane() -> Iterator[ControlPlane]:
    with running_control_plane(tools().operator_crds) as plane:
        yield plane
