"""The old code and the new, side by side on the same recording, in one run.

The old ref (OLD_REF: the commit the 2026-11-30 results measured, before the ingest redesign) is
checked out into a temporary worktree (`git worktree add --detach`, removed afterwards). Each
tree's own `bench/pipeline.py` measures its own `watcher/` (bench/side.py, run with that tree
first on the path), so neither is measured by code written for the other. Runs alternate between
the trees, the order flipped every round (old, new, new, old, ...), so a machine that slows down
during the run weighs on both alike; each figure is the median of the rounds, and the spread
(max - min over median) of each tree's rounds is kept to say what noise is.

Usage: python -m bench.compare STREAM [--old REF] [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench import procs

OLD_REF = "b52804f"
ROUNDS = 5
"""Five, not three (until 2026-12-06): a median of three moves with one unlucky round, and the
1k incident and 10k paced cells flipped sign between runs by about the width of their noise."""
MODES = ("passes", "rss")
RUNNER = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
"""Runs bench/side.py as a file, so that only the tree under test (the working directory,
sys.path[0]) provides `bench` and `watcher` (the venv's editable install comes after it)."""
SIDE = Path(__file__).resolve().parent / "side.py"

TARGETS = (
    "events_per_s",
    "each_events_per_s",
    "ingest_events_per_s",
    "churn_event_us_mean",
    "churn_event_us_p99",
    "incident_first_evaluate_ms",
    "incident_event_ms_mean",
    "rss_bytes_per_object",
)
"""Every pipeline target both trees measure, in the order the report shows them."""
HIGHER_IS_BETTER = frozenset({"events_per_s", "each_events_per_s", "ingest_events_per_s"})


@contextlib.contextmanager
def worktree(ref: str, *, repo: Path = procs.ROOT) -> Iterator[Path]:
    """`ref` checked out, detached, in a temporary directory; removed (with its git entry) after."""
    where = Path(tempfile.mkdtemp(prefix="stalewatch-old-")) / "tree"
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(where), ref],
        check=True,
        capture_output=True,
    )
    try:
        yield where
    finally:
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(where)], capture_output=True
        )
        shutil.rmtree(where.parent, ignore_errors=True)
        subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)


def commit_of(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def side(tree: Path, stream: Path, mode: str) -> dict[str, Any]:
    """One worker run: `tree`'s own pipeline on `stream`, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(SIDE), str(tree), str(stream.resolve()), mode],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench/side.py {mode} on {tree} exited {done.returncode}: {done.stderr[-2000:]}")
    result: dict[str, Any] = orjson.loads(done.stdout)
    return result


def spread(values: list[float]) -> float:
    """(max - min) / median: how far this tree's own rounds fell apart."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and spread per target over one tree's rounds."""
    out: dict[str, Any] = {}
    for key in TARGETS:
        values = [r[key] for r in rounds if r.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
            out[f"{key}_spread"] = spread(values)
            out[f"{key}_rounds"] = values
    return out


def change(old: float, new: float, key: str) -> float:
    """Relative change, positive when the new code is better on this target."""
    if not old:
        return 0.0
    return (new - old) / old if key in HIGHER_IS_BETTER else (old - new) / old


def compare(stream: Path, *, old_ref: str = OLD_REF, rounds: int = ROUNDS) -> dict[str, Any]:
    """Both trees on `stream`, alternating, `rounds` times each; medians, spreads and changes."""
    with worktree(old_ref) as old_tree:
        trees = {"old": old_tree, "new": procs.ROOT}
        runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
        for index in range(rounds):
            order = ("old", "new") if index % 2 == 0 else ("new", "old")
            for name in order:
                measured: dict[str, Any] = {}
                for mode in MODES:
                    measured.update(side(trees[name], stream, mode))
                runs[name].append(measured)
        commits = {"old": commit_of(old_tree), "new": procs.commit()}
    out: dict[str, Any] = {"rounds": rounds, "events": runs["new"][0]["events"], "order": "alternating"}
    for name in ("old", "new"):
        out[name] = {"commit": commits[name], **summarize(runs[name])}
    out["change"] = {
        key: change(out["old"][key], out["new"][key], key)
        for key in TARGETS
        if key in out["old"] and key in out["new"]
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stream", type=Path)
    parser.add_argument("--old", default=OLD_REF)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    result = compare(args.stream, old_ref=args.old, rounds=args.rounds)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
