package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// TestStagedKilled: ferry is SIGKILLed at seeded random points of a
// stage and of two cutovers ($FERRY_KILL_SEED repeats a run). Each time
// the next command finishes or rolls back: a rerun stage marks the
// target's claim with the snapshot it holds; whenever the source is at
// zero, the journal holds its count; a rerun cutover moves every
// acknowledged write; a rollback after a killed cutover puts the source
// back at its count with its data; a cutover after the rollbacks moves
// what the source wrote since; no helper pod is left.
func TestStagedKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	seed := time.Now().UnixNano()
	if s := os.Getenv("FERRY_KILL_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("kill seed %d (FERRY_KILL_SEED=%d repeats it)", seed, seed)
	e := newVolumeEnv(ctx, t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	const ns = "live"
	createLiveWriter(ctx, t, src, ns, e.reg.NodeHost+"/"+testenv.BusyboxImage)
	waitAppReady(ctx, t, e.src, ns, "writer")
	run := func(what string, args ...string) {
		t.Helper()
		r := ferry(t, e.env, args...)
		t.Logf("%s: exit %d\n%s\n%s", what, r.code, r.stdout, r.stderr)
		if r.code != 0 {
			dumpCluster(ctx, t, e.dst)
			t.Fatalf("%s: exit %d", what, r.code)
		}
	}
	// kill starts ferry and kills it after a random time in [lo, hi),
	// and reports whether it did: a run that ended before is not killed.
	kill := func(what string, lo, hi time.Duration, args ...string) bool {
		t.Helper()
		d := lo + time.Duration(rng.Int63n(int64(hi-lo)))
		cmd, stderr, done := startFerry(t, e.env, args...)
		killed := false
		select {
		case <-done:
			t.Logf("%s ended before its kill at %s: %s", what, d, stderr)
		case <-time.After(d):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			killed = true
			t.Logf("%s killed after %s", what, d)
		}
		sourceRecorded(ctx, t, e, src, ns)
		return killed
	}

	kill("stage 1", 3*time.Second, 18*time.Second, stagedArgs(e, "stage", "--include-namespaces", ns)...)
	run("stage 1 again", stagedArgs(e, "stage", "--include-namespaces", ns)...)
	claimHoldsLastStage(ctx, t, e, ns)
	run("stage 2", stagedArgs(e, "stage")...)

	acked := ackedNumber(t, execOut(ctx, t, e.src, ns, "writer-0", "cat /data/acked"))
	if kill("cutover 1", 2*time.Second, 12*time.Second, stagedArgs(e, "cutover", "--report-dir", t.TempDir())...) {
		run("cutover 1 again", stagedArgs(e, "cutover", "--report-dir", t.TempDir())...)
	} else if r := ferry(t, e.env, stagedArgs(e, "cutover", "--report-dir", t.TempDir())...); r.code != 1 || !strings.Contains(r.stderr, "its cutover finished") {
		// Found in CI (FERRY_KILL_SEED=1796450001486899506): the cutover
		// ended before its kill; run again, a finished cutover says so.
		t.Errorf("cutover again after it finished: exit %d: %s", r.code, r.stderr)
	}
	waitAppReady(ctx, t, e.dst, ns, "writer")
	checkLog(t, execOut(ctx, t, e.dst, ns, "writer-0", "cat /data/log"), acked, "target after the rerun cutover")

	run("rollback 1", stagedArgs(e, "rollback")...)
	waitAppReady(ctx, t, e.src, ns, "writer")
	run("stage 3", stagedArgs(e, "stage")...)
	acked = ackedNumber(t, execOut(ctx, t, e.src, ns, "writer-0", "cat /data/acked"))
	kill("cutover 2", 2*time.Second, 12*time.Second, stagedArgs(e, "cutover", "--report-dir", t.TempDir())...)
	if j := readJournal(ctx, t, e); j.Cutover == nil {
		// Killed before the cutover was recorded: nothing was changed,
		// and a rollback says there is nothing to roll back.
		t.Logf("cutover 2 was killed before it recorded its prediction")
		if r := ferry(t, e.env, stagedArgs(e, "rollback")...); r.code == 0 || !strings.Contains(r.stderr, "no cutover began") {
			t.Errorf("rollback without a cutover: exit %d: %s", r.code, r.stderr)
		}
	} else {
		run("rollback 2", stagedArgs(e, "rollback")...)
	}
	if sts, err := src.AppsV1().StatefulSets(ns).Get(ctx, "writer", metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 1 {
		t.Fatalf("source after the rollback of a killed cutover: %v %v, want 1 replica", sts.Spec.Replicas, err)
	}
	waitAppReady(ctx, t, e.src, ns, "writer")
	checkLog(t, execOut(ctx, t, e.src, ns, "writer-0", "cat /data/log"), acked, "source after the rollback of a killed cutover")

	// A cutover after rollbacks moves what the source wrote since: a new
	// final backup, and the target's workloads started again.
	run("stage 4", stagedArgs(e, "stage")...)
	acked = ackedNumber(t, execOut(ctx, t, e.src, ns, "writer-0", "cat /data/acked"))
	run("cutover 3", stagedArgs(e, "cutover", "--report-dir", t.TempDir())...)
	waitAppReady(ctx, t, e.dst, ns, "writer")
	checkLog(t, execOut(ctx, t, e.dst, ns, "writer-0", "cat /data/log"), acked, "target after a cutover that follows rollbacks")
	if j := readJournal(ctx, t, e); j.Cutover == nil || j.Cutovers < 2 || j.Cutover.Name != fmt.Sprintf("m1-cutover-%d", j.Cutovers) {
		t.Errorf("the third cutover's record: %+v", j.Cutover)
	}
	noHelperLeft(ctx, t, e.src)
	noHelperLeft(ctx, t, e.dst)
}

// sourceRecorded checks that a source scaled to zero has its count in
// the journal.
func sourceRecorded(ctx context.Context, t *testing.T, e *volumeEnv, src kubernetes.Interface, ns string) {
	t.Helper()
	sts, err := src.AppsV1().StatefulSets(ns).Get(ctx, "writer", metav1.GetOptions{})
	if err != nil || *sts.Spec.Replicas != 0 {
		return
	}
	j := readJournal(ctx, t, e)
	if c := j.Cutover; c == nil || len(c.Workloads) != 1 || *c.Workloads[0].Replicas != 1 {
		t.Fatalf("the source is at 0 replicas and the journal does not record its count: %+v", c)
	}
}

// claimHoldsLastStage reads the target's claim through a checker pod: its
// one done-marker names the snapshot the journal's last stage wrote, and
// its stable file is the source's.
func claimHoldsLastStage(ctx context.Context, t *testing.T, e *volumeEnv, ns string) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(e.dst.Config)
	j := readJournal(ctx, t, e)
	last := j.Stages[len(j.Stages)-1]
	if last.Ended.IsZero() || len(last.Claims) != 1 {
		t.Fatalf("last stage: %+v", last)
	}
	chk := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "check-claim", Labels: map[string]string{"app": "check-claim"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{Name: "main", Image: e.reg.NodeHost + "/" + testenv.BusyboxImage,
			Command:      []string{"sh", "-c", "touch /tmp/ready; sleep 3600"},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1, FailureThreshold: 900}}},
			Volumes: []corev1.Volume{claimVolume("data-writer-0")}}}
	if _, err := k.CoreV1().Pods(ns).Create(ctx, chk, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAppReady(ctx, t, e.dst, ns, "check-claim")
	markers := execOut(ctx, t, e.dst, ns, "check-claim", "cat /data/.ferry/* 2>/dev/null; ls -a /data/.ferry")
	if strings.Count(markers, last.Claims[0].SnapshotID) != 1 || strings.Contains(markers, ".sync") {
		t.Errorf("the target's claim after the rerun stage: markers %q, want one naming %s and no sync record", markers, last.Claims[0].SnapshotID)
	}
	if err := k.CoreV1().Pods(ns).Delete(ctx, "check-claim", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	// The next command must not find the claim in use.
	for ctx.Err() == nil {
		if _, err := k.CoreV1().Pods(ns).Get(ctx, "check-claim", metav1.GetOptions{}); err != nil {
			break
		}
		time.Sleep(time.Second)
	}
}
