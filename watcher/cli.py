"""The `stalewatch` command line: wires the model, the watcher and the renderers."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from watcher import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stalewatch",
        description="Is the doctor in the building? Correlates GitOps status with controller liveness.",
    )
    parser.add_argument("--version", action="version", version=f"stalewatch {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return 0
