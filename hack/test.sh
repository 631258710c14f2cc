#!/usr/bin/env bash
# Runs every test as `make test` does, in two streams side by side:
#
#   nodes: the packages other than test/e2e, then the test/e2e tests that
#          run pods on real nodes (E2E_NODES below);
#   api:   the other test/e2e tests (API servers, stores and registries,
#          no nodes).
#
# Each stream is one go test process per step, in a network namespace of
# its own (hack/netns-exec.sh as go test -exec), so the two never share a
# cluster, an address or a port. Output is gotestsum's: each package's
# result and the output of every failing test, each line prefixed with its
# stream; at the end the slowest tests of both streams, so a run that grows
# shows where. A failing run closes with the failing tests and the last
# lines of each one's output (hack/test-failures), so a log cut to its tail
# still names them.
#
#   hack/test.sh GOTESTSUM NETNS_EXEC
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 GOTESTSUM NETNS_EXEC" >&2; exit 2; }
gotestsum=$1 netns=$2
go=${GO:-go}
cd "$(dirname "$0")/.."

# The e2e tests that run pods on real nodes (kubelet, containerd): the
# heavier half of test/e2e's time.
E2E_NODES='^(TestClaimDataArrives|TestMigrateWorkloadVolumes|TestServerWorkloadVolumes|TestHubWorkloadVolumes|TestHubStaged|TestStagedCutover|TestStagedKilled|TestBackupHooks|TestVolumeMoveKilled|TestInstallOnNodes|TestServerCredentials)$'

out=$(mktemp -d "${TMPDIR:-/tmp}/ferry-test.XXXXXX")
trap 'rm -rf "$out"' EXIT
flags=(-count=1 -timeout 60m -exec "$netns")
pkgs=$("$go" list ./... | grep -v '/test/e2e$')

run() { # run JSONFILE GO-TEST-ARGS...: one go test through gotestsum
  local json=$1; shift
  "$gotestsum" --format pkgname-and-test-fails --format-hide-empty-pkg --format-icons text --no-color --jsonfile "$json" -- "$@"
}

# Each stream writes its status to a file: sed's is not the tests'.
(
  rc=0
  # shellcheck disable=SC2086 # one word per package
  run "$out/packages.json" "${flags[@]}" $pkgs || rc=1
  run "$out/nodes.json" "${flags[@]}" ./test/e2e -run "$E2E_NODES" || rc=1
  echo $rc >"$out/nodes.rc"
) 2>&1 | sed -u 's/^/[nodes] /' &
(
  rc=0
  run "$out/api.json" "${flags[@]}" ./test/e2e -skip "$E2E_NODES" || rc=1
  echo $rc >"$out/api.rc"
) 2>&1 | sed -u 's/^/[api]   /' &
wait
rc_nodes=$(cat "$out/nodes.rc" 2>/dev/null || echo 1)
rc_api=$(cat "$out/api.rc" 2>/dev/null || echo 1)

echo
echo "Slowest tests (60s and over):"
cat "$out"/*.json | "$gotestsum" tool slowest --threshold 60s
if [ $rc_nodes -ne 0 ] || [ $rc_api -ne 0 ]; then
  echo
  echo "Failing tests, each with the last lines of its output:"
  "$go" run ./hack/test-failures "$out"/*.json
fi
if [ $rc_nodes -ne 0 ] || [ $rc_api -ne 0 ]; then
  echo "FAIL: nodes stream exit $rc_nodes, api stream exit $rc_api"
  exit 1
fi
echo "PASS"
