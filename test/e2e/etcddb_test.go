package e2e

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// etcdDB runs a real etcd (the control plane's build, testenv.EtcdImage)
// on the claim: its WAL and bbolt database under /data/etcd, beside 16 MiB
// written once to /data/base. SIGTERM stops it cleanly (exec).
const etcdDB = `[ -f /data/base ] || dd if=/dev/urandom of=/data/base bs=1M count=16 2>/dev/null
exec etcd --name db --data-dir /data/etcd --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster db=http://127.0.0.1:2380`

// etcdWriter puts keys k00000001, k00000002, ... into the pod's etcd
// through its JSON gateway, one every 50 ms; /data/acked holds the last
// one etcd acknowledged (it answers a put once the write is in its WAL,
// fsynced). It resumes after the last acknowledged one.
const etcdWriter = `trap 'exit 0' TERM
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

// createEtcdDB creates StatefulSet etcd in namespace ns: etcd and its
// writer (container main) on one claim, data-etcd-0.
func createEtcdDB(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, registry string) {
	t.Helper()
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one, grace := int32(1), int64(10)
	sel := map[string]string{"app": "etcd"}
	mount := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	probe := func(cmd ...string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: 1, FailureThreshold: 900}
	}
	containers := []corev1.Container{
		{Name: "etcd", Image: registry + "/" + testenv.EtcdImage, Command: []string{"sh", "-c", etcdDB}, VolumeMounts: mount,
			StartupProbe: probe("wget", "-q", "-O", "/dev/null", "http://127.0.0.1:2379/health")},
		{Name: "main", Image: registry + "/" + testenv.BusyboxImage, Command: []string{"sh", "-c", etcdWriter}, VolumeMounts: mount,
			StartupProbe: probe("test", "-f", "/tmp/ready")},
	}
	claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("500Mi")}}}}
	if _, err := k.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, ServiceName: "etcd",
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: containers}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var etcdCount = regexp.MustCompile(`"count":"([0-9]+)"`)

// checkEtcdKeys: the etcd of pod etcd-0 in c holds every key up to the
// last its writer had acknowledged (read first), and that is at least
// acked: none of the writes acknowledged before the cutover is missing.
func checkEtcdKeys(ctx context.Context, t *testing.T, c *testenv.Cluster, ns string, acked int) {
	t.Helper()
	last := ackedNumber(t, execOut(ctx, t, c, ns, "etcd-0", "cat /data/acked"))
	if last < acked {
		t.Errorf("%s: the writer's last acknowledged key is %d, want at least %d (acknowledged in the source before the cutover)", c.Name, last, acked)
	}
	out := execOut(ctx, t, c, ns, "etcd-0", `a=$(printf 'k%08d' 1 | base64); b=$(printf 'k%08d' `+strconv.Itoa(last+1)+` | base64)
wget -q -O- --post-data "{\"key\":\"$a\",\"range_end\":\"$b\",\"count_only\":true}" http://127.0.0.1:2379/v3/kv/range`)
	n := 0
	if m := etcdCount.FindStringSubmatch(out); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n != last {
		t.Errorf("%s: etcd holds %d of the keys k00000001..k%08d its writer had acknowledged (%s)", c.Name, n, last, out)
	}
	t.Logf("%s: etcd holds all %d acknowledged keys (%d acknowledged before the cutover)", c.Name, n, acked)
}
