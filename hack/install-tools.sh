#!/usr/bin/env bash
# Installs the test tools ferry's tests use:
#   versitygw v1.8.0 (S3 gateway)  -> ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/bin
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
      echo "install-tools: need the Debian packages ${missing[*]}: run as root or install sudo (apt-get install -y ${missing[*]})" >&2
      exit 1
    fi
    sudo=(sudo -n)
  fi
  echo "installing Debian packages ${missing[*]}" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
    || { "${sudo[@]}" apt-get update >&2 && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
fi
echo "$bin"
