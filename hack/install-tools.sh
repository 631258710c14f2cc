#!/usr/bin/env bash
# Installs the test tools ferry's tests use:
#   versitygw v1.8.0 (S3 gateway)  -> ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/bin
#   fake-gcs-server v1.56.1 (GCS emulator, Go module)     -> the same directory
#   Azurite 3.37.0 (Azure Blob emulator, npm package;
#     needs Node.js >= 20 and npm)   -> the same directory, azurite-3.37.0/ and
#                                       the launcher azurite-blob
#   docker-registry, skopeo        -> Debian packages (apt-get), for the image
#                                     tests (internal/testenv.StartRegistry) and
#                                     the image benchmark (bench/images)
# Prints the tools directory on stdout. Skips tools that are already there.
set -euo pipefail
bin=${FERRY_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry/bin}
mkdir -p "$bin"
if [ ! -x "$bin/versitygw" ]; then
  echo "installing versitygw v1.8.0 into $bin" >&2
  GOBIN="$bin" go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi
if [ ! -x "$bin/fake-gcs-server" ]; then
  echo "installing fake-gcs-server v1.56.1 into $bin" >&2
  GOBIN="$bin" go install github.com/fsouza/fake-gcs-server@v1.56.1
fi
if [ ! -x "$bin/azurite-blob" ]; then
  if ! command -v npm >/dev/null; then
    echo "install-tools: Azurite 3.37.0 needs Node.js (>= 20) and npm: install them (apt-get -o DPkg::Lock::Timeout=600 install -y nodejs npm)" >&2
    exit 1
  fi
  echo "installing Azurite 3.37.0 (npm) into $bin/azurite-3.37.0" >&2
  npm install --prefix "$bin/azurite-3.37.0" --no-audit --no-fund azurite@3.37.0 >&2
  # The launcher is written last, so a failed npm install is retried next time.
  printf '#!/bin/sh\nexec "%s/azurite-3.37.0/node_modules/.bin/azurite-blob" "$@"\n' "$bin" >"$bin/azurite-blob.tmp"
  chmod +x "$bin/azurite-blob.tmp"
  mv "$bin/azurite-blob.tmp" "$bin/azurite-blob"
fi
missing=()
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v skopeo >/dev/null || missing+=(skopeo)
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "install-tools: need the Debian packages ${missing[*]}, and apt-get is not available: install them by hand" >&2
    exit 1
  fi
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "install-tools: need the Debian packages ${missing[*]}: run as root or install sudo (apt-get -o DPkg::Lock::Timeout=600 install -y ${missing[*]})" >&2
      exit 1
    fi
    sudo=(sudo -n)
  fi
  echo "installing Debian packages ${missing[*]}" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >&2 \
    || { "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update >&2 && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >&2; }
fi
echo "$bin"
