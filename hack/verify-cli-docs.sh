#!/usr/bin/env bash
# Fails when docs/cli is stale: it regenerates the command reference from
# the cobra tree into a temporary folder (hack/gen-cli-docs) and compares
# it with docs/cli, pages added or removed included. Run by `make lint`;
# `make docs` regenerates docs/cli.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./hack/gen-cli-docs -dir "$tmp/cli"
if ! diff -r "$tmp/cli" docs/cli >"$tmp/diff"; then
  cat "$tmp/diff" >&2
  echo "docs/cli is stale: run 'make docs' and commit it" >&2
  exit 1
fi
