"""`python -m watcher` is the same entry point as the `stalewatch` command."""

from watcher.cli import main

raise SystemExit(main())
