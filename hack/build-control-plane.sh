#!/usr/bin/env bash
# Builds the test control plane from Go modules into a cache outside the clone
# (docs/design.md#test-infrastructure): etcd v3.7.3, kube-apiserver, kube-controller-manager and kubectl v1.37.2.
# Skips every binary that is already there. Prints the directory on stdout.
#
#   FERRY_K8S_BIN  overrides the directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/k8s/v1.37.2)
set -euo pipefail
K8S_VERSION=v1.37.2
here=$(cd "$(dirname "$0")" && pwd)
dir=${FERRY_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry/k8s/$K8S_VERSION}
mkdir -p "$dir"

ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=37 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"

build() { # name module-dir package
  local name=$1 moddir=$2 pkg=$3
  if [ -x "$dir/$name" ]; then return; fi
  echo "building $name (cold build takes minutes; cached in $dir)" >&2
  (cd "$here/tools/$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
}

build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager
build kubectl k8s k8s.io/kubernetes/cmd/kubectl
echo "$dir"
