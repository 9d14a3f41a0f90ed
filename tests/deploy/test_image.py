"""The container image: what its Dockerfile promises, and its install run as the pod runs it."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.conftest import REPO, Running, dockerfile_stages, one, start_like_the_pod
from tests.deploy.dockerfile import BASE_IMAGE_BIN, parse
from watcher.config import Settings

BUILDER, FINAL = dockerfile_stages()
VENV = Path("opt") / "stalewatch"


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_stage_starts_from_python_3_11_slim_pinned_to_a_full_version() -> None:
    for stage in parse((REPO / "Dockerfile").read_text()):
        assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", stage.base), stage.base


def test_both_stages_use_the_same_base_so_the_venv_finds_its_interpreter() -> None:
    assert BUILDER.base == FINAL.base


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    user = FINAL.all("USER")[-1].args
    assert re.fullmatch(r"[0-9]+(:[0-9]+)?", user), f"USER {user} is not numeric"
    assert int(user.split(":")[0]) != 0


def test_the_image_declares_no_healthcheck_because_the_kubelet_probes_it() -> None:
    assert not any(stage.all("HEALTHCHECK") for stage in parse((REPO / "Dockerfile").read_text()))


def test_python_writes_no_bytecode_at_run_time_so_the_root_can_be_read_only() -> None:
    assert FINAL.env()["PYTHONDONTWRITEBYTECODE"] == "1"


def test_the_entrypoint_is_the_stalewatch_console_script() -> None:
    entrypoint = FINAL.all("ENTRYPOINT")[-1].exec_form()
    assert entrypoint == ["stalewatch"]
    assert entrypoint[0] in pyproject()["project"]["scripts"]


def test_the_image_exposes_the_port_stalewatch_listens_on_by_default() -> None:
    default_port = Settings.model_fields["listen"].default.rsplit(":", 1)[1]
    assert [e.args for e in FINAL.all("EXPOSE")] == [default_port]


def test_the_default_command_is_a_subcommand_of_the_built_install(image_root: Path) -> None:
    command = FINAL.all("CMD")[-1].exec_form()
    stalewatch = image_root / VENV / "bin" / "stalewatch"
    listing = subprocess.run([stalewatch, "--help"], capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^\s+{re.escape(command[0])}\s", listing, re.MULTILINE), listing
    subprocess.run([stalewatch, *command, "--help"], capture_output=True, check=True)


def locked() -> dict[str, tuple[str, int]]:
    """requirements.lock's pins: name -> (version, number of hashes)."""
    pins: dict[str, tuple[str, int]] = {}
    name = ""
    for line in (REPO / "requirements.lock").read_text().splitlines():
        pinned = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        if pinned:
            name = canonicalize_name(pinned[1])
            pins[name] = (pinned[2], 0)
        elif line.strip().startswith("--hash=sha256:") and name:
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
    return pins


def test_the_image_installs_its_dependencies_only_from_the_hash_pinned_lock() -> None:
    installs = [run.args for run in BUILDER.all("RUN") if " install " in run.args]
    assert any("--require-hashes" in args and "-r requirements.lock" in args for args in installs), installs
    assert all("--no-deps" in args for args in installs), "an install resolving dependencies skips the lock"


def test_the_lock_pins_every_dependency_within_pyproject_ranges_with_hashes() -> None:
    pins = locked()
    assert all(hashes for _, hashes in pins.values()), "every pin carries its hashes: run make lock"
    for requirement in map(Requirement, pyproject()["project"]["dependencies"]):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements.lock: run make lock"
        assert requirement.specifier.contains(pins[name][0]), f"{name}=={pins[name][0]} is not {requirement}"


def test_the_built_install_carries_no_pip_and_no_source_tree(image_root: Path) -> None:
    assert not list((image_root / VENV).glob("lib/python*/site-packages/pip"))
    assert sorted(p.name for p in image_root.iterdir()) == sorted([BASE_IMAGE_BIN, VENV.parts[0]])


@pytest.mark.cluster
def test_the_install_serves_healthz_as_the_image_user_on_a_read_only_root(running: Running) -> None:
    status, body = running.wait_for("/healthz")
    assert status == 200, f"/healthz answered {status}: {body}\n{running.logs()}"
    uid = FINAL.all("USER")[-1].args.split(":")[0]
    process_status = Path(f"/proc/{running.process.pid}/status").read_text()
    assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", process_status, re.MULTILINE)
    mounts = Path(f"/proc/{running.process.pid}/mountinfo").read_text().splitlines()
    root_options = [line.split()[5].split(",") for line in mounts if line.split()[4] == "/"]
    assert root_options, "no root mount"
    assert all("ro" in options for options in root_options)


@pytest.mark.cluster
def test_sigterm_stops_stalewatch_cleanly_within_the_pods_grace_period(
    image_root: Path, rendered: list[dict[str, Any]], token_kubeconfig: Path, shared_dir: Path
) -> None:
    """After the preStop sleep the kubelet sends SIGTERM and waits out the rest of the grace
    period before it kills; stalewatch must be gone by then, with exit code 0."""
    pod = one(rendered, "Deployment")["spec"]["template"]["spec"]
    pre_stop = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
    budget = pod["terminationGracePeriodSeconds"] - pre_stop
    workdir = shared_dir / "sigterm"
    workdir.mkdir()
    running = start_like_the_pod(
        image_root=image_root, rendered=rendered, kubeconfig=token_kubeconfig, workdir=workdir
    )
    try:
        assert running.wait_for("/healthz")[0] == 200, running.logs()
        running.process.terminate()
        try:
            code = running.process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            pytest.fail(f"stalewatch still ran {budget}s after SIGTERM; the kubelet would kill it")
    finally:
        running.stop()
    assert code == 0, running.logs()
