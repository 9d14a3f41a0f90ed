#!/usr/bin/env bash
# The whole benchmark, end to end on a fresh machine: install, build the control plane and
# kube-state-metrics (cached outside the clone), run every size, write bench/results/*.json
# and regenerate the tables in BENCHMARKS.md.
#   bash bench/run.sh [--sizes 1000,10000,50000]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh all
export STALEWATCH_CONTROLPLANE_BIN
STALEWATCH_CONTROLPLANE_BIN=$(bash tests/controlplane/build.sh | tail -n 1)
ksm=$(bash bench/build_ksm.sh | tail -n 1)
.venv/bin/python -m bench.run --ksm "$ksm" "$@"
.venv/bin/python -m bench.report
