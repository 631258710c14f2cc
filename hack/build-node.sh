#!/usr/bin/env bash
# Builds and installs what a test node runs (internal/testenv WithNode), into
# caches outside the clone, skipping what is already there:
#   kubelet, kube-scheduler, kube-proxy v1.37.2   -> the control plane's cache
#       (${XDG_CACHE_HOME:-$HOME/.cache}/ferry/k8s/v1.37.2, FERRY_K8S_BIN),
#       from hack/tools/k8s, the module that pins the control plane
#   containerd, containerd-shim-runc-v2 v2.4.2    -> .../ferry/containerd/v2.4.2
#       (FERRY_CONTAINERD_BIN), from hack/tools/containerd
#   Debian packages: runc, containernetworking-plugins (bridge, host-local,
#       loopback CNI plugins in /usr/lib/cni), iptables (kube-proxy),
#       busybox-static (the test images' userland)
# Prints the two directories on stdout, one a line.
set -euo pipefail
K8S_VERSION=v1.37.2
CONTAINERD_VERSION=v2.4.2
here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferry
k8s=${FERRY_K8S_BIN:-$cache/k8s/$K8S_VERSION}
ctrd=${FERRY_CONTAINERD_BIN:-$cache/containerd/$CONTAINERD_VERSION}
mkdir -p "$k8s" "$ctrd"

k8s_ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=37 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
ctrd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"

build() { # dir name module-dir package ldflags [tags]
  local dir=$1 name=$2 moddir=$3 pkg=$4 ldflags=$5 tags=${6:-}
  if [ -x "$dir/$name" ]; then return; fi
  echo "building $name (cold build takes minutes; cached in $dir)" >&2
  (cd "$here/tools/$moddir" && CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
}

build "$k8s" kubelet k8s k8s.io/kubernetes/cmd/kubelet "$k8s_ldflags"
build "$k8s" kube-scheduler k8s k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
build "$k8s" kube-proxy k8s k8s.io/kubernetes/cmd/kube-proxy "$k8s_ldflags"
build "$ctrd" containerd containerd github.com/containerd/containerd/v2/cmd/containerd "$ctrd_ldflags" "no_btrfs no_devmapper no_zfs"
build "$ctrd" containerd-shim-runc-v2 containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 "$ctrd_ldflags"

packages=(runc containernetworking-plugins iptables busybox-static)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "build-node: need root or sudo to apt-get install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo -n)
  fi
  echo "installing Debian packages: ${missing[*]}" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || { "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2; }
fi
echo "$k8s"
echo "$ctrd"
