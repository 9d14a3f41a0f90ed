#!/usr/bin/env bash
# The chart's tooling, fetched once per version into a cache OUTSIDE the clone:
# helm, built from the Go module proxy (no Debian package serves Helm 4), and the Prometheus
# Operator's published CRDs for ServiceMonitor, PodMonitor and PrometheusRule (from its Go
# module zip, checked against the hash below), which tests/chart applies to the real API server.
# Prints the helm binary on the next-to-last line and the CRD directory on the last.
set -euo pipefail
HELM_VERSION=4.3.2
OPERATOR_VERSION=0.88.0
OPERATOR_ZIP_SHA256=d95534b2a114265487b1c223ada9ead2181b5d11747e68a06d53d5f1485dc8c0
cache=${STALEWATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stalewatch}

helm_dir="$cache/helm/v$HELM_VERSION"
if [ ! -x "$helm_dir/helm" ]; then
  echo "building helm v$HELM_VERSION (first run only; cached in $helm_dir)" >&2
  tmp="$helm_dir/build.$$"
  mkdir -p "$tmp"
  # Helm's version string is set at link time (its Makefile does the same).
  GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS= GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@v$HELM_VERSION"
  mv "$tmp/helm" "$helm_dir/helm"
  rmdir "$tmp"
fi

crd_dir="$cache/prometheus-operator/v$OPERATOR_VERSION"
crds=(servicemonitors podmonitors prometheusrules)
if [ ! -f "$crd_dir/monitoring.coreos.com_prometheusrules.yaml" ]; then
  echo "fetching the Prometheus Operator v$OPERATOR_VERSION CRDs (first run only; cached in $crd_dir)" >&2
  mkdir -p "$crd_dir"
  zip="$crd_dir/module.zip.$$"
  module=github.com/prometheus-operator/prometheus-operator
  curl -fsSL -o "$zip" "https://proxy.golang.org/$module/@v/v$OPERATOR_VERSION.zip"
  echo "$OPERATOR_ZIP_SHA256  $zip" | sha256sum -c --quiet -
  for crd in "${crds[@]}"; do
    unzip -p "$zip" "$module@v$OPERATOR_VERSION/example/prometheus-operator-crd/monitoring.coreos.com_$crd.yaml" \
      > "$crd_dir/monitoring.coreos.com_$crd.yaml.tmp"
  done
  for crd in "${crds[@]}"; do
    mv "$crd_dir/monitoring.coreos.com_$crd.yaml.tmp" "$crd_dir/monitoring.coreos.com_$crd.yaml"
  done
  rm "$zip"
fi
echo "$helm_dir/helm"
echo "$crd_dir"
