"""Every example's `analyze` and `impact` output, text and JSON, byte for byte against a recording.

The recordings under golden/examples/ were made by the code before `watcher/model/` was laid
out in rooms; a refactor that changes a finding, a message, an order or a byte of the JSON
fails here. A change meant to alter the output re-records them with
STALEWATCH_UPDATE_GOLDEN=1 and shows the difference in its commit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from watcher.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOLDEN = Path(__file__).parent / "golden" / "examples"
UPDATE_GOLDEN = os.environ.get("STALEWATCH_UPDATE_GOLDEN") == "1"
NOW = "2026-11-30T12:00:00Z"
NOWS = {"kustomize-controller-stuck": "2026-12-07T12:54:15Z"}
"""The examples recorded at another moment: their README's --now."""

# One object per example whose deletion plan touches most of what the example holds.
IMPACT = {
    "certificate-failing-under-green-kustomization": "ks/flux-system/apps",
    "conflicting-writers": None,
    "crd-ownership-risk": "crd/imagepolicies.image.toolkit.fluxcd.io",
    "gitrepository-clone-failing": "gitrepository/flux-system/tenants",
    "healthy": "gitrepository/flux-system/flux-system",
    "healthy-multi-stack": "ks/flux-system/flux-system",
    "kustomize-controller-stuck": "deploy/flux-system/kustomize-controller",
    "helmrelease-ready-workload-failing": "hr/podinfo/podinfo",
    "policy-denied-loadbalancer": "ks/flux-system/flux-system",
    "prune-orphan": "deploy/flux-system/tofu-controller",
    "reconciling-left-true": "ks/flux-system/monitoring",
    "sibling-revision-skew": "ks/flux-system/deploy-root",
    "tofu-controller-down": "deploy/flux-system/tofu-controller",
}


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("STALEWATCH_") and name != "STALEWATCH_UPDATE_GOLDEN":
            monkeypatch.delenv(name)
    monkeypatch.delenv("NO_COLOR", raising=False)


def _matches_recording(name: str, code: int, out: str) -> None:
    recorded = f"exit {code}\n{out}"
    golden = GOLDEN / name
    if UPDATE_GOLDEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(recorded)
    assert recorded == golden.read_text()


def test_every_example_has_an_impact_target() -> None:
    assert sorted(IMPACT) == sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


@pytest.mark.parametrize("output", ["text", "json"])
@pytest.mark.parametrize("example", sorted(IMPACT))
def test_analyze_output_of_each_example_is_unchanged(
    example: str, output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    now = NOWS.get(example, NOW)
    code = main(["analyze", "--now", now, "--output", output, str(EXAMPLES / example)])
    _matches_recording(f"{example}.analyze.{output}", code, capsys.readouterr().out)


@pytest.mark.parametrize("output", ["text", "json"])
@pytest.mark.parametrize("example", sorted(name for name, target in IMPACT.items() if target))
def test_impact_output_of_each_example_is_unchanged(
    example: str, output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = IMPACT[example]
    assert target is not None
    code = main(["impact", "-o", output, target, str(EXAMPLES / example)])
    _matches_recording(f"{example}.impact.{output}", code, capsys.readouterr().out)
