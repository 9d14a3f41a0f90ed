"""Regenerates dashboards/*.json from watcher/export/dashboards.py.

Usage: `python dashboards/generate.py [--check]`.
"""

from __future__ import annotations

from pathlib import Path

from watcher.export import dashboards
from watcher.export.generated import main

HERE = Path(__file__).resolve().parent


def render() -> dict[Path, str]:
    return {HERE / f"{stem}.json": dashboards.render(stem) for stem in dashboards.DASHBOARDS}


if __name__ == "__main__":
    raise SystemExit(main(render, description=__doc__ or ""))
