"""Writing (or checking) files that are generated from code and committed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def write_or_check(files: Mapping[Path, str], *, check: bool) -> list[Path]:
    """Writes every file whose text changed, or with check=True only lists them; returns the changed."""
    stale = [path for path, text in files.items() if not path.is_file() or path.read_text() != text]
    if not check:
        for path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[path])
    return stale


def main(
    render: Callable[[], Mapping[Path, str]], *, description: str, argv: Sequence[str] | None = None
) -> int:
    """The command line of a generator script: regenerate, or with --check fail when out of date."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = parser.parse_args(argv)
    stale = write_or_check(render(), check=args.check)
    for path in stale:
        print(f"{'out of date' if args.check else 'wrote'}: {path}", file=sys.stderr)
    return 1 if args.check and stale else 0
