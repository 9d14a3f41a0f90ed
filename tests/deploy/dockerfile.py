"""Reads the Dockerfile the way docker does, and replays its builder stage without an engine.

No container engine runs where the tests run, so the tests read the Dockerfile's
instructions and carry out the builder stage's COPY, WORKDIR, ENV and RUN on the host, with
every absolute path moved under a scratch directory. What comes out is the venv the final
stage copies, made by the same commands from the same files.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

BASE_IMAGE_BIN = "base-image-bin"
"""Under the replay root: holds `python`, standing for the base image's /usr/local/bin."""
_ENV_REF = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_ABSOLUTE = re.compile(r"(?<![\w.:/$-])/(?=[A-Za-z])")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """ENTRYPOINT/CMD in JSON (exec) form; the shell form would put /bin/sh -c as PID 1,
        which does not forward SIGTERM."""
        value = json.loads(self.args)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ValueError(f"{self.keyword} is not in exec form: {self.args}")
        return value


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` updated with the stage's ENV, in order, $VAR references expanded as docker does."""
        values = dict(base or {})
        for instruction in self.all("ENV"):
            _apply_env(instruction, values)
        return values


def parse(text: str) -> list[Stage]:
    """The stages of a Dockerfile; continuation lines joined, comments dropped."""
    stages: list[Stage] = []
    logical = re.sub(r"\\\n(?:\s*#[^\n]*\n)*", " ", text)
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), " ".join(args.split())
        if keyword == "FROM":
            base, _, name = args.partition(" AS ")
            stages.append(Stage(base=base.strip(), name=name.strip() or None))
        elif not stages:
            raise ValueError(f"{keyword} before the first FROM")
        else:
            stages[-1].instructions.append(Instruction(keyword, args))
    return stages


def replay_builder(stage: Stage, *, context: Path, root: Path, python: Path) -> None:
    """Carries out `stage`'s COPY, WORKDIR, ENV and RUN on this host with every absolute
    path moved under `root`; `python` stands in for the base image's interpreter."""
    bin_dir = root / BASE_IMAGE_BIN
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(python)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    workdir = root

    def moved(path: str) -> Path:
        return root / path.lstrip("/") if path.startswith("/") else workdir / path

    for instruction in stage.instructions:
        if instruction.keyword == "WORKDIR":
            workdir = moved(instruction.args)
            workdir.mkdir(parents=True, exist_ok=True)
        elif instruction.keyword == "ENV":
            _apply_env(instruction, env)
        elif instruction.keyword == "COPY":
            *sources, dest = shlex.split(instruction.args)
            if not dest.endswith("/") or any(s.startswith("--") for s in sources):
                raise ValueError(f"the builder replay copies into directories only: COPY {instruction.args}")
            for source in sources:
                _copy(context / source, moved(dest))
        elif instruction.keyword == "RUN":
            command = _ABSOLUTE.sub(f"{root}/", instruction.args)
            subprocess.run(["/bin/sh", "-c", command], cwd=workdir, env=env, check=True)
        else:
            raise ValueError(f"the builder replay does not know {instruction.keyword}")


def _apply_env(instruction: Instruction, values: dict[str, str]) -> None:
    for pair in shlex.split(instruction.args):
        key, _, value = pair.partition("=")
        values[key] = _ENV_REF.sub(lambda m: values.get(m[1] or m[2], ""), value)


def _copy(source: Path, dest: Path) -> None:
    """COPY into a directory: a directory's contents go into it, a file goes into it."""
    if source.is_dir():
        shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / source.name)
