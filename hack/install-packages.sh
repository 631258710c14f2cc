#!/usr/bin/env bash
# Installs the Debian packages ferry's tests use, when they are missing:
#   chromium        headless checks of the verification report (test/e2e)
#   busybox-static  the userland of ferry's image and the test images
#                   (internal/imagebuild, make image)
# With arguments, installs just those packages.
# Needs root (or sudo) and apt-get, as on the CI machines.
set -euo pipefail
packages=(chromium busybox-static)
[ $# -gt 0 ] && packages=("$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-packages: need root or sudo to apt-get install ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
