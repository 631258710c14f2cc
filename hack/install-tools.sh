#!/usr/bin/env bash
# Installs the test tools ferry's tests use, cached outside the clone:
#   versitygw v1.8.0 (S3 gateway)  -> ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/bin
# Prints the directory on stdout. Skips tools that are already there.
set -euo pipefail
bin=${FERRY_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry/bin}
mkdir -p "$bin"
if [ ! -x "$bin/versitygw" ]; then
  echo "installing versitygw v1.8.0 into $bin" >&2
  GOBIN="$bin" go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi
echo "$bin"
