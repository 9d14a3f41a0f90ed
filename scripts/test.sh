#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: install, lint, type-check, layering, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh all
export STALEWATCH_CONTROLPLANE_BIN
STALEWATCH_CONTROLPLANE_BIN=$(bash tests/controlplane/build.sh | tail -n 1)
export STALEWATCH_LAB_BIN
STALEWATCH_LAB_BIN=$(bash tests/lab/build.sh | tail -n 1)

echo "== ruff" && .venv/bin/ruff check watcher tests bench dashboards alerts charts
echo "== ruff format" && .venv/bin/ruff format --check .
echo "== mypy (strict)" && .venv/bin/mypy watcher
echo "== import-linter" && .venv/bin/lint-imports
echo "== pytest"
set +e
.venv/bin/pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
