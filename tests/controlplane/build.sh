#!/usr/bin/env bash
# Builds the real control plane the tests run against (kube-apiserver, kubectl, etcd)
# from the Go module proxy, once per version, into a cache OUTSIDE the clone.
# Prints the directory holding the binaries on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=$(sed -n 's/^require k8s.io\/kubernetes v//p' "$here/k8s/go.mod")
ETCD_VERSION=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 v//p' "$here/etcd/go.mod")
cache=${STALEWATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stalewatch}
out="$cache/controlplane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$out"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

build() { # name, module dir, package, ldflags
  local name=$1 dir=$2 pkg=$3 ldflags=$4
  if [ -x "$out/$name" ]; then return; fi
  echo "building $name (first run only; cached in $out)" >&2
  (cd "$here/$dir" && go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp.$$" "$pkg")
  mv "$out/$name.tmp.$$" "$out/$name"
}

minor=$(echo "$K8S_VERSION" | cut -d. -f2)
kver="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION"
kver="$kver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
kver="$kver -X k8s.io/component-base/version.gitTreeState=clean"
kver="$kver -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"
kver="$kver -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver "$kver"
build kubectl k8s k8s.io/kubernetes/cmd/kubectl "$kver"
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager "$kver"
echo "$out"
