#!/usr/bin/env bash
# Fails when the generated files (deepcopy, CRD YAML) are stale: it hashes
# them, runs `make generate`, and compares. Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."
sum() { cat pkg/apis/v1alpha1/zz_generated.deepcopy.go config/crd/ferry.dev_*.yaml 2>/dev/null | sha256sum; }
before=$(sum)
make -s generate >/dev/null
after=$(sum)
if [ "$before" != "$after" ]; then
  echo "generated files were stale (pkg/apis/v1alpha1/zz_generated.deepcopy.go, config/crd/): regenerated now; review and commit them" >&2
  exit 1
fi
