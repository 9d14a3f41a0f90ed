"""Regenerates the alert rule files from watcher/export/alerts.py: `python alerts/generate.py [--check]`."""

from __future__ import annotations

from pathlib import Path

from watcher.export import alerts
from watcher.export.generated import main

HERE = Path(__file__).resolve().parent


def render() -> dict[Path, str]:
    return {
        HERE / "stalewatch.rules.yaml": alerts.rules_file(),
        HERE / "prometheusrule.yaml": alerts.prometheus_rule(),
    }


if __name__ == "__main__":
    raise SystemExit(main(render, description=__doc__ or ""))
