#!/usr/bin/env bash
# Builds kube-state-metrics from the Go module proxy with the wrapper module in bench/ksm,
# once per version, into a cache OUTSIDE the clone (the same way tests/controlplane/build.sh
# builds kube-apiserver). Prints the binary's path on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KSM_VERSION=$(sed -n 's/^require k8s.io\/kube-state-metrics\/v2 v//p' "$here/ksm/go.mod")
cache=${STALEWATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stalewatch}
out="$cache/ksm/$KSM_VERSION"
bin="$out/kube-state-metrics"
if [ ! -x "$bin" ]; then
  mkdir -p "$out"
  echo "building kube-state-metrics v$KSM_VERSION (first run only; cached in $out)" >&2
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
  ldflags="-s -w -X github.com/prometheus/common/version.Version=v$KSM_VERSION"
  (cd "$here/ksm" && go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" k8s.io/kube-state-metrics/v2)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
