package testenv

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// EtcdDBScript runs a real etcd (EtcdImage) on a claim mounted at /data:
// its WAL and bbolt database under /data/etcd, beside 16 MiB written once
// to /data/base. SIGTERM stops it cleanly (exec). It serves on the pod's
// loopback only.
const EtcdDBScript = `[ -f /data/base ] || dd if=/dev/urandom of=/data/base bs=1M count=16 2>/dev/null
exec etcd --name db --data-dir /data/etcd --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster db=http://127.0.0.1:2380`

// EtcdWriterScript puts keys k00000001, k00000002, ... into the pod's
// etcd through its JSON gateway, one every 50 ms; /data/acked holds the
// last one etcd acknowledged (it answers a put once the write is in its
// WAL, fsynced). It resumes after the last acknowledged one, and touches
// /tmp/ready once etcd answers.
const EtcdWriterScript = `trap 'exit 0' TERM
i=$(cat /data/acked 2>/dev/null || echo 0)
until wget -q -O /dev/null http://127.0.0.1:2379/health; do sleep 0.2 & wait $!; done
touch /tmp/ready
while true; do
  n=$((i+1)); k=$(printf 'k%08d' $n | base64); v=$(printf 'v%d' $n | base64)
  if wget -q -O /dev/null --post-data "{\"key\":\"$k\",\"value\":\"$v\"}" http://127.0.0.1:2379/v3/kv/put; then
    i=$n; echo $i > /data/acked.tmp; mv /data/acked.tmp /data/acked
  fi
  sleep 0.05 & wait $!
done`

var etcdCount = regexp.MustCompile(`"count":"([0-9]+)"`)

// EtcdKeys reads, in container of pod (with busybox and the claim at
// /data), the last key EtcdWriterScript had acknowledged, then counts the
// keys k00000001 up to it that the pod's etcd holds: a database that lost
// no acknowledged write holds all of them (held == last).
func EtcdKeys(ctx context.Context, cfg *rest.Config, ns, pod, container string) (last, held int, err error) {
	out, stderr, err := Exec(ctx, cfg, ns, pod, container, nil, "cat", "/data/acked")
	if err != nil {
		return 0, 0, fmt.Errorf("reading /data/acked: %w (%s)", err, stderr)
	}
	if last, err = strconv.Atoi(strings.TrimSpace(out)); err != nil {
		return 0, 0, fmt.Errorf("/data/acked: %w", err)
	}
	count := fmt.Sprintf(`a=$(printf 'k%%08d' 1 | base64); b=$(printf 'k%%08d' %d | base64)
wget -q -O- --post-data "{\"key\":\"$a\",\"range_end\":\"$b\",\"count_only\":true}" http://127.0.0.1:2379/v3/kv/range`, last+1)
	out, stderr, err = Exec(ctx, cfg, ns, pod, container, nil, "sh", "-c", count)
	if err != nil {
		return last, 0, fmt.Errorf("counting etcd's keys: %w (%s)", err, stderr)
	}
	if m := etcdCount.FindStringSubmatch(out); m != nil {
		held, _ = strconv.Atoi(m[1])
	}
	return last, held, nil
}
