package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	enginemigration "github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// liveWriter keeps writing while it runs (its pod's pre-backup hook
// appends a line to /data/hooks): 16 MiB written once, then a
// numbered line appended to /data/log every 50 ms, each acknowledged by
// /data/acked once it is in the log; a second loop creates and deletes
// files in /data/churn all the while. It stops on SIGTERM and resumes from
// the last acknowledged number.
const liveWriter = `trap 'exit 0' TERM
mkdir -p /data/churn
[ -f /data/base ] || dd if=/dev/urandom of=/data/base bs=1M count=16 2>/dev/null
i=$(cat /data/acked 2>/dev/null || echo 0)
( while true; do for j in 1 2 3 4 5 6 7 8; do echo x > /data/churn/f$j; done; rm -f /data/churn/f*; done ) &
touch /tmp/ready
while true; do i=$((i+1)); echo $i >> /data/log; echo $i > /data/acked.tmp; mv /data/acked.tmp /data/acked; sleep 0.05 & wait $!; done`

// TestStagedCutover: a StatefulSet that keeps writing is moved by two
// stages while it runs, then a cutover; the second stage moves about what
// changed; the target's claim holds every write acknowledged before the
// quiesce, and its files that did not change are the source's; the
// cutover reports its downtime beside its prediction; a rollback puts the
// source back at its recorded replica count, with its data.
func TestStagedCutover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	const ns = "live"
	createLiveWriter(ctx, t, src, ns, e.reg.NodeHost+"/"+testenv.BusyboxImage)
	waitAppReady(ctx, t, e.src, ns, "writer")
	base := execOut(ctx, t, e.src, ns, "writer-0", "sha256sum /data/base")

	args := func(op string, extra ...string) []string { return stagedArgs(e, op, extra...) }
	for n := 1; n <= 2; n++ {
		r := ferry(t, e.env, args("stage", "--include-namespaces", ns, "--report-dir", t.TempDir())...)
		t.Logf("stage %d: exit %d\n%s\n%s", n, r.code, r.stdout, r.stderr)
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("Stage %d", n)) || !strings.Contains(r.stdout, "cutover will take about") {
			t.Fatalf("stage %d: exit %d", n, r.code)
		}
		time.Sleep(3 * time.Second)
	}
	j := readJournal(ctx, t, e)
	s1, s2 := j.Stages[0].Claims, j.Stages[1].Claims
	if len(s1) != 1 || len(s2) != 1 || s1[0].Claim != ns+"/data-writer-0" {
		t.Fatalf("stages' claims: %+v / %+v", s1, s2)
	}
	t.Logf("stage 1: %+v\nstage 2: %+v", s1[0], s2[0])
	if s1[0].ChangedBytes < 16<<20 || s2[0].ScannedBytes < 16<<20 || s2[0].ChangedBytes > 1<<20 || s2[0].ChangedFiles == 0 {
		t.Errorf("stage 2 changed %d of %d bytes (%d files), stage 1 %d: want all of the data first, then only the log", s2[0].ChangedBytes, s2[0].ScannedBytes, s2[0].ChangedFiles, s1[0].ChangedBytes)
	}
	if pods, _ := dst.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writer"}); len(pods.Items) != 0 {
		t.Errorf("a stage started the workload in the target: %d pods", len(pods.Items))
	}

	acked := ackedNumber(t, execOut(ctx, t, e.src, ns, "writer-0", "cat /data/acked"))
	reportDir := t.TempDir()
	r := ferry(t, e.env, args("cutover", "--report-dir", reportDir)...)
	t.Logf("cutover: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "cutover will take about") || !strings.Contains(r.stdout, "Downtime:") {
		dumpCluster(ctx, t, e.dst)
		t.Fatalf("cutover: exit %d", r.code)
	}
	waitAppReady(ctx, t, e.dst, ns, "writer")
	checkLog(t, execOut(ctx, t, e.dst, ns, "writer-0", "cat /data/log"), acked, "target")
	// Each stage's backup ran the pre hook, and the cutover before the
	// quiesce: three flushes, all in the target.
	if got := execOut(ctx, t, e.dst, ns, "writer-0", "cat /data/hooks"); got != "flush\nflush\nflush" {
		t.Errorf("target's /data/hooks: %q, want the two stages' and the cutover's pre hooks", got)
	}
	if got := execOut(ctx, t, e.dst, ns, "writer-0", "sha256sum /data/base"); got != base {
		t.Errorf("target's /data/base: %s, want the source's %s", got, base)
	}
	j = readJournal(ctx, t, e)
	c := j.Cutover
	if c == nil || c.Step != enginemigration.CutoverDone || c.Hooks != 1 || c.Downtime <= 0 || c.Prediction.Total <= 0 || len(c.Workloads) != 1 || *c.Workloads[0].Replicas != 1 {
		t.Fatalf("journal's cutover: %+v", c)
	}
	t.Logf("downtime %s, predicted %s (%+v)", c.Downtime, c.Prediction.Total, c.Prediction)
	t.Logf("cutover steps: quiesce %s, pods gone %s, delta done %s, restored %s, ready %s", c.QuiesceStarted.Format("15:04:05.000"), c.PodsGone.Format("15:04:05.000"),
		c.DeltaDone.Format("15:04:05.000"), c.Restored.Format("15:04:05.000"), c.Ready.Format("15:04:05.000"))
	checkReadyMeasured(ctx, t, dst, ns, c.Ready)
	var rep struct{ Cutover *report.Cutover }
	if b, err := os.ReadFile(filepath.Join(reportDir, "report.json")); err != nil || json.Unmarshal(b, &rep) != nil || rep.Cutover == nil ||
		len(rep.Cutover.Stages) != 2 || len(rep.Cutover.Steps) != 4 || rep.Cutover.Total.Actual <= 0 || rep.Cutover.Total.Predicted <= 0 {
		t.Errorf("the report's cutover section: %+v (%v)", rep.Cutover, err)
	}
	if sts, err := src.AppsV1().StatefulSets(ns).Get(ctx, "writer", metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 0 {
		t.Fatalf("source after the cutover: %v %v, want scaled to 0", sts.Spec.Replicas, err)
	}

	r = ferry(t, e.env, args("rollback")...)
	t.Logf("rollback: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 0 {
		t.Fatalf("rollback: exit %d", r.code)
	}
	if sts, err := dst.AppsV1().StatefulSets(ns).Get(ctx, "writer", metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 0 {
		t.Errorf("target after the rollback: %v %v, want scaled to 0", sts.Spec.Replicas, err)
	}
	waitAppReady(ctx, t, e.src, ns, "writer")
	checkLog(t, execOut(ctx, t, e.src, ns, "writer-0", "cat /data/log"), acked, "source after the rollback")
	noHelperLeft(ctx, t, e.src)
	noHelperLeft(ctx, t, e.dst)
}

// stagedArgs are the arguments of ferry migrate OP m1 between e's
// clusters.
func stagedArgs(e *volumeEnv, op string, extra ...string) []string {
	a := []string{"migrate", op, "m1", "--kubeconfig", e.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", e.location,
		"--repository-password-file", e.password, "--insecure", "--helper-image", e.image,
		"--node-pods-dir", filepath.Join(e.src.Node.RootDir, "pods"), "--to-node-pods-dir", filepath.Join(e.dst.Node.RootDir, "pods")}
	return append(a, extra...)
}

func createLiveWriter(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, image string) {
	t.Helper()
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one, grace := int32(1), int64(5)
	sel := map[string]string{"app": "writer"}
	c := corev1.Container{Name: "main", Image: image, Command: []string{"sh", "-c", liveWriter},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1, FailureThreshold: 900}}
	claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("200Mi")}}}}
	if _, err := k.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, ServiceName: "writer",
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel,
				Annotations: map[string]string{"pre.hook.backup.velero.io/command": `["/bin/sh", "-c", "echo flush >> /data/hooks"]`}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{c}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func execOut(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, pod, cmd string) string {
	t.Helper()
	out, stderr, err := testenv.Exec(ctx, c.Config, ns, pod, "main", nil, "sh", "-c", cmd)
	if err != nil {
		t.Fatalf("%s: %s/%s: %s: %v %s", c.Name, ns, pod, cmd, err, stderr)
	}
	return strings.TrimSpace(out)
}

func ackedNumber(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n == 0 {
		t.Fatalf("acked %q: %v", s, err)
	}
	return n
}

// checkLog checks that log holds the lines 1..n at least, in order, none
// missing.
func checkLog(t *testing.T, log string, n int, where string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i, l := range lines {
		if l != strconv.Itoa(i+1) {
			t.Errorf("%s: /data/log line %d is %q", where, i+1, l)
			return
		}
	}
	if len(lines) < n {
		t.Errorf("%s: /data/log has %d lines, want every acknowledged write (%d)", where, len(lines), n)
	}
}

func readJournal(ctx context.Context, t *testing.T, e *volumeEnv) *enginemigration.Journal {
	t.Helper()
	creds := map[string]string{}
	for _, kv := range e.env {
		k, v, _ := strings.Cut(kv, "=")
		creds[k] = v
	}
	loc, err := store.Open(ctx, e.location, store.WithCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	j, err := enginemigration.LoadJournal(ctx, loc, "m1")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// checkReadyMeasured: the cutover's downtime ends when the target's pods
// were Ready (their Ready condition's time, to the second), not when the
// verification, after comparing every object, got to look (it measured
// 3.5 to 4 s late).
func checkReadyMeasured(ctx context.Context, t *testing.T, k kubernetes.Interface, ns string, ready time.Time) {
	t.Helper()
	pods, err := k.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writer"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("target's writer pods: %v (%d)", err, len(pods.Items))
	}
	for _, cd := range pods.Items[0].Status.Conditions {
		if cd.Type == corev1.PodReady {
			if late := ready.Sub(cd.LastTransitionTime.Time); late > 3*time.Second {
				t.Errorf("the cutover's Ready is %s, %s after the target pod's Ready condition (%s): the downtime was measured late", ready.Format("15:04:05.000"), late, cd.LastTransitionTime.Format("15:04:05"))
			}
			return
		}
	}
	t.Errorf("target pod %s has no Ready condition", pods.Items[0].Name)
}
