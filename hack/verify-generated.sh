#!/usr/bin/env bash
# Fails when the generated files are stale (deepcopy and CRD YAML of
# pkg/apis; deepcopy, conversion, defaults and OpenAPI of the hub's
# pkg/hub): it hashes them, runs `make generate`, and compares. Run by
# `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."
generated() { git ls-files -co --exclude-standard 'pkg/hub/**zz_generated.*.go'; }
sum() {
  { cat pkg/apis/v1alpha1/zz_generated.deepcopy.go config/crd/ferry.dev_*.yaml
    generated | sort | while read -r f; do echo "$f"; cat "$f"; done; } 2>/dev/null | sha256sum
}
before=$(sum)
make -s generate >/dev/null
after=$(sum)
if [ "$before" != "$after" ]; then
  echo "generated files were stale (pkg/apis/v1alpha1/zz_generated.deepcopy.go, config/crd/, pkg/hub/**/zz_generated.*.go): regenerated now; review and commit them" >&2
  exit 1
fi
