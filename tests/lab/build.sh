#!/usr/bin/env bash
# Builds the real-Flux lab's binaries from the Go module proxy, once per set of versions, into a
# cache OUTSIDE the clone: source-, kustomize- and helm-controller (the real Flux controllers),
# kwok (plays the kubelet of one fake node), the lab's Git server (tests/lab/gitserver), and,
# through tests/controlplane/build.sh, kube-controller-manager (Deployments -> ReplicaSets -> Pods).
# Also copies the controllers' own CRDs and kwok's node/pod lifecycle Stages next to them, so the
# lab installs exactly what these versions ship. Idempotent; a version change is a new directory.
# Prints the directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

SOURCE_CONTROLLER_VERSION=v1.9.6
KUSTOMIZE_CONTROLLER_VERSION=v1.9.6
HELM_CONTROLLER_VERSION=v1.6.4
KWOK_VERSION=v0.8.0
# source-controller v1.9.6 does not build against the artifact package its go.mod names.
SOURCE_ARTIFACT_VERSION=v0.18.1
GITTESTSERVER_VERSION=$(sed -n 's/^require github.com\/fluxcd\/pkg\/gittestserver v//p' "$here/gitserver/go.mod")

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

# kube-controller-manager is built beside kube-apiserver, from the same wrapper module.
t0=$SECONDS
cp_dir=$(bash "$here/../controlplane/build.sh" | tail -n 1)
if [ $((SECONDS - t0)) -gt 5 ]; then
  echo "control plane binaries (kube-controller-manager included) built in $((SECONDS - t0))s" >&2
fi
K8S_VERSION=$(sed -n 's/^require k8s.io\/kubernetes v//p' "$here/../controlplane/k8s/go.mod")

# The git server is our own code: a change to it must rebuild it too.
gitserver_sum=$(cat "$here/gitserver/go.mod" "$here/gitserver/main.go" | sha256sum | cut -c1-8)
key="sc-$SOURCE_CONTROLLER_VERSION-kc-$KUSTOMIZE_CONTROLLER_VERSION-hc-$HELM_CONTROLLER_VERSION"
key="$key-kwok-$KWOK_VERSION-k8s-$K8S_VERSION-git-$GITTESTSERVER_VERSION-$gitserver_sum"
cache=${STALEWATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stalewatch}
out="$cache/lab/$key"
mkdir -p "$out"

module_dir() { # module@version -> its extracted, read-only directory in the module cache
  go mod download -json "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'
}

build_module() { # name, module, version, package, go-mod-edit args...
  local name=$1 mod=$2 ver=$3 pkg=$4
  shift 4
  if [ -x "$out/$name" ]; then return; fi
  echo "building $name $ver (first run only; cached in $out)" >&2
  local src="$out/src/$name" t0=$SECONDS
  rm -rf "$src"
  mkdir -p "$out/src"
  cp -r "$(module_dir "$mod@$ver")" "$src"
  chmod -R u+w "$src"
  # The module zip leaves out nested modules (./api): drop the replace that points at them so
  # they come from the proxy, at the version the go.mod requires.
  (cd "$src" && go mod edit "$@" && go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp.$$" "$pkg")
  mv "$out/$name.tmp.$$" "$out/$name"
  rm -rf "$src"
  rmdir "$out/src" 2>/dev/null || true
  echo "built $name in $((SECONDS - t0))s" >&2
}

start=$(date +%s)
build_module source-controller github.com/fluxcd/source-controller "$SOURCE_CONTROLLER_VERSION" . \
  -dropreplace=github.com/fluxcd/source-controller/api \
  "-require=github.com/fluxcd/pkg/artifact@$SOURCE_ARTIFACT_VERSION" \
  "-replace=github.com/fluxcd/pkg/artifact=github.com/fluxcd/pkg/artifact@$SOURCE_ARTIFACT_VERSION"
build_module kustomize-controller github.com/fluxcd/kustomize-controller "$KUSTOMIZE_CONTROLLER_VERSION" . \
  -dropreplace=github.com/fluxcd/kustomize-controller/api
build_module helm-controller github.com/fluxcd/helm-controller "$HELM_CONTROLLER_VERSION" . \
  -dropreplace=github.com/fluxcd/helm-controller/api
build_module kwok sigs.k8s.io/kwok "$KWOK_VERSION" ./cmd/kwok -fmt

if [ ! -x "$out/gitserver" ]; then
  echo "building gitserver (first run only; cached in $out)" >&2
  (cd "$here/gitserver" && go build -trimpath -ldflags "-s -w" -o "$out/gitserver.tmp.$$" .)
  mv "$out/gitserver.tmp.$$" "$out/gitserver"
fi
ln -sf "$cp_dir/kube-controller-manager" "$out/kube-controller-manager"
elapsed=$(($(date +%s) - start))
if [ "$elapsed" -gt 5 ]; then echo "lab binaries built in ${elapsed}s" >&2; fi

# The CRDs these controller versions ship, and kwok's node/pod lifecycle Stages.
if [ ! -f "$out/crds/.done" ]; then
  mkdir -p "$out/crds"
  for m in "github.com/fluxcd/source-controller@$SOURCE_CONTROLLER_VERSION" \
    "github.com/fluxcd/kustomize-controller@$KUSTOMIZE_CONTROLLER_VERSION" \
    "github.com/fluxcd/helm-controller@$HELM_CONTROLLER_VERSION"; do
    cp "$(module_dir "$m")"/config/crd/bases/*.yaml "$out/crds/"
  done
  chmod u+w "$out"/crds/*.yaml
  touch "$out/crds/.done"
fi
if [ ! -f "$out/stages/.done" ]; then
  mkdir -p "$out/stages"
  stages="$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")/kustomize/stage"
  cp "$stages/node/fast/node-initialize.yaml" "$stages/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
    "$stages/pod/fast/pod-ready.yaml" "$stages/pod/fast/pod-complete.yaml" "$stages/pod/fast/pod-delete.yaml" \
    "$out/stages/"
  chmod u+w "$out"/stages/*.yaml
  touch "$out/stages/.done"
fi

cat >"$out/versions.json" <<EOF
{"source-controller": "$SOURCE_CONTROLLER_VERSION", "kustomize-controller": "$KUSTOMIZE_CONTROLLER_VERSION",
 "helm-controller": "$HELM_CONTROLLER_VERSION", "kwok": "$KWOK_VERSION", "kubernetes": "v$K8S_VERSION",
 "gittestserver": "v$GITTESTSERVER_VERSION", "controlplane": "$cp_dir"}
EOF
echo "$out"
