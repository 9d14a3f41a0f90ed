#!/usr/bin/env bash
# Installs everything stalewatch and its tests need on a fresh machine, idempotently:
# Debian packages (Prometheus, Alertmanager), the Python venv, and the
# control-plane binaries and helm built from the Go module proxy (cached outside the clone).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}   # "runtime" for the venv only, "all" for the test tooling too

if [ "$what" = all ]; then
  packages=(prometheus prometheus-alertmanager chromium)
  missing=()
  for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "installing Debian packages: ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
extras=""; [ "$what" = all ] && extras="[dev]"
# The runtime dependencies at the versions the image ships (requirements.lock, without its
# hashes, which would put pip in hash-checking mode for the unpinned test tooling as well).
sed -n 's/^\([A-Za-z0-9._-]*==[^ ]*\).*/\1/p' requirements.lock > .venv/constraints.txt
.venv/bin/pip install -q -c .venv/constraints.txt -e ".$extras"

if [ "$what" = all ]; then
  bash tests/controlplane/build.sh >/dev/null
  bash tests/lab/build.sh >/dev/null   # the real Flux controllers, kwok, kube-controller-manager
  bash scripts/chart-tools.sh >/dev/null   # helm and the Prometheus Operator's CRDs (tests/chart)
fi
