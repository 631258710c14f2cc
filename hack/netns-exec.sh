#!/usr/bin/env bash
# Runs a command inside a network namespace of its own that has nothing but
# loopback, so nothing it starts (test clusters, S3 server, registry, ferry)
# can send traffic anywhere else: an API server's calls to a webhook's
# ClusterIP fail at once instead of leaving the machine.
#
#   hack/netns-exec.sh CMD [ARG...]
#
# `make test` passes it to `go test -exec`, so each test binary runs in a
# namespace of its own; `make demo` and the benchmarks to `go run -exec`.
# The namespace is called ferry-test-<pid of this script>; it, the processes
# still in it and the run's TMPDIR are removed when the command ends. Namespaces left by an earlier run that was killed (its
# script's PID is gone) are deleted first, after ending the processes still
# inside them: only ferry's tests start processes in a ferry-test-* namespace.
# Only the network namespace changes (nsenter --net): /sys, and with it
# /sys/fs/cgroup, stay as they are, which `ip netns exec` would not do.
# Needs root (CAP_SYS_ADMIN) and iproute2.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CMD [ARG...]" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
  echo "netns-exec: creating a network namespace needs root; run as root (CI and the dev machines do)" >&2
  exit 1
fi

cleanup_stale() {
  local ns pid pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^ferry-test-[0-9]+(-n[0-9]+)?$' || true); do
    pid=${ns#ferry-test-}; pid=${pid%%-*}
    if { tr '\0' ' ' < /proc/"$pid"/cmdline; } 2>/dev/null | grep -q 'netns-exec\.sh'; then
      continue # a run that is still going (its script is bash running netns-exec.sh)
    fi
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      echo "netns-exec: ending processes left in stale namespace $ns: $(echo $pids)" >&2
      kill -KILL $pids 2>/dev/null || true
      sleep 0.5
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
  local d
  for d in "$base_tmp"/ferry-test-*.tmp; do
    [ -d "$d" ] || continue
    pid=${d##*/ferry-test-}; pid=${pid%.tmp}
    if ! { tr '\0' ' ' < /proc/"$pid"/cmdline; } 2>/dev/null | grep -q 'netns-exec\.sh'; then
      rm -rf "$d"
    fi
  done
}

# end_run ends what the command left in its namespace (processes a killed or
# timed-out test binary started), then deletes the namespace.
end_run() {
  local pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$run_tmp"
}

base_tmp=${TMPDIR:-/tmp}
cleanup_stale
ns=ferry-test-$$
export FERRY_NETNS=$ns
# The command's temporary files (clusters' and servers' folders, t.TempDir)
# go to a folder of this run's own, removed with it, and by the next run's
# cleanup if this one is killed. (Nodes keep theirs in /tmp/<ns>-n<k>,
# which holds mounts: internal/testenv removes those.)
run_tmp=$base_tmp/$ns.tmp
mkdir -p "$run_tmp"
export TMPDIR=$run_tmp
ip netns add "$ns"
trap end_run EXIT
ip -n "$ns" link set lo up
set +e
nsenter --net=/run/netns/"$ns" -- "$@"
code=$?
set -e
exit $code
