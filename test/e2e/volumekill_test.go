package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/helperpod"
)

// startMigrate starts `ferry migrate` of namespace big (mapped to
// target), and returns it with its stderr and a channel closed at its exit.
func (e *volumeEnv) startMigrate(t *testing.T, name, target string) (*exec.Cmd, *bytes.Buffer, chan struct{}) {
	t.Helper()
	args := []string{"migrate", "--name", name, "--kubeconfig", e.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", e.location,
		"--include-namespaces", "big", "--namespace-mappings", "big:" + target, "--exclude-resources", "persistentvolumes",
		"--repository-password-file", e.password, "--helper-image", e.image, "--verify=false"}
	return startFerry(t, e.env, args...)
}

// waitHelperRunning waits until a helper pod of purpose runs in c, or the
// command ends (a failure: it finished before it could be interrupted).
func waitHelperRunning(ctx context.Context, t *testing.T, c *testenv.Cluster, purpose string, done chan struct{}, stderr *bytes.Buffer) string {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		pods, err := k.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: helperpod.LabelPurpose + "=" + purpose})
		if err == nil {
			for _, p := range pods.Items {
				for _, cs := range p.Status.ContainerStatuses {
					if cs.State.Running != nil {
						return p.Name
					}
				}
			}
		}
		select {
		case <-done:
			t.Fatalf("ferry migrate ended before a %s helper pod ran in %s\n%s", purpose, c.Name, stderr)
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("no %s helper pod ran in %s within 4m", purpose, c.Name)
	return ""
}

// markers lists the done-markers in claim data of namespace ns in c, and
// the sha256sum lines of its blob and sub/who, read by a pod that mounts it.
func markers(ctx context.Context, t *testing.T, e *volumeEnv, c *testenv.Cluster, ns string) (string, string) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	e.mountPod(ctx, t, c, ns, "peek")
	out, _, err := testenv.Exec(ctx, c.Config, ns, "peek", "main", nil, "sh", "-c",
		"find /data/.ferry -maxdepth 1 -type f 2>/dev/null; echo ---; cd /data && sha256sum blob sub/who 2>/dev/null; true")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.CoreV1().Pods(ns).Delete(ctx, "peek", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	m, sums, _ := strings.Cut(out, "---\n")
	return strings.TrimSpace(m), strings.TrimSpace(sums)
}

// TestVolumeMoveKilled interrupts `ferry migrate` in the middle of a
// volume: with SIGINT while a helper pod writes a claim in the target, and
// with SIGKILL while one reads the claim in the source. The SIGINT'd run
// removes its helper pods and Secrets before it exits, its restore record
// says it was interrupted, and the claim holds no done-marker; the same
// restore run again finishes the claim with the source's data. What the
// SIGKILL'd run left is gone after the next run.
func TestVolumeMoveKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	src, dst := e.src, e.dst
	// 300 MiB: long enough for a helper pod to be caught at work.
	ks := kubernetes.NewForConfigOrDie(src.Config)
	if _, err := ks.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "big"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.CoreV1().PersistentVolumeClaims("big").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := workloadFixture{ns: "big", image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	c := f.container(true)
	c.Command = []string{"sh", "-c", strings.Replace(writerScript, "count=5", "count=300", 1) + "; touch /tmp/ready; sleep 3600"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "store", Labels: map[string]string{"app": "store"},
		Annotations: map[string]string{"backup.ferry.dev/backup-volumes": "data"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{c}, Volumes: []corev1.Volume{claimVolume("data")}}}
	if _, err := ks.CoreV1().Pods("big").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAppReady(ctx, t, src, "big", "store")
	want, _, err := testenv.Exec(ctx, src.Config, "big", "store", "main", nil, "cat", "/data/sum")
	if err != nil {
		t.Fatal(err)
	}

	// Every run reaches the store through a proxy, which the first subtest
	// throttles: the restore's 300 MiB take about 20 s, so that the
	// interrupt lands while the helper pod writes the claim, not after.
	proxy, err := testenv.StartStallProxyOn(t, testenv.HostIP, strings.TrimPrefix(e.s3.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	e.location = strings.Replace(e.location, e.s3.NodeEndpoint, "http://"+proxy.Addr, 1)

	t.Run("SIGINT while a claim is written", func(t *testing.T) {
		proxy.Throttle(16 << 20) // the store's answers; the backup's uploads go at full speed
		cmd, stderr, done := e.startMigrate(t, "k1", "big1")
		helper := waitHelperRunning(ctx, t, dst, "volume-restore", done, stderr)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		<-done
		t.Logf("SIGINT with helper pod %s at work: exit %d\n%s", helper, cmd.ProcessState.ExitCode(), stderr)
		if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("interrupted migrate: exit %d, want non-zero and a message saying it was interrupted", cmd.ProcessState.ExitCode())
		}
		noHelperLeft(ctx, t, src)
		noHelperLeft(ctx, t, dst)
		phase, errs := phaseOf(t, e.describe(t, "restore", "k1"))
		if phase != "Failed" || !strings.Contains(errs, "interrupted") {
			t.Errorf("interrupted restore: %s: %s, want Failed and interrupted", phase, errs)
		}
		if m, sums := markers(ctx, t, e, dst, "big1"); m != "" {
			t.Errorf("the interrupted claim holds done-markers %q; want none (its data:\n%s\nthe source's:\n%s)", m, sums, want)
		}
		// The same restore again finishes it.
		proxy.Throttle(0)
		r := e.run(t, dst, "restore", "create", "k1", "--from-backup", "k1", "--namespace-mappings", "big:big1")
		if r.code != 0 {
			t.Fatalf("re-run of the interrupted restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		waitAppReady(ctx, t, dst, "big1", "store")
		got, _, err := testenv.Exec(ctx, dst.Config, "big1", "store", "main", nil, "sh", "-c", "cd /data && sha256sum blob sub/who")
		if err != nil || strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("claim after the re-run: %q (%v), want the source's\n%s", got, err, want)
		}
	})

	t.Run("SIGKILL while a claim is read", func(t *testing.T) {
		cmd, stderr, done := e.startMigrate(t, "k2", "big2")
		helper := waitHelperRunning(ctx, t, src, "volume-backup", done, stderr)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-done
		t.Logf("SIGKILL with helper pod %s at work", helper)
		// The next run removes what the killed one left, once its lease
		// has expired (by the end of that run at the latest).
		r := ferry(t, e.env, "migrate", "--name", "k3", "--kubeconfig", e.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", e.location,
			"--include-namespaces", "big", "--namespace-mappings", "big:big3", "--exclude-resources", "persistentvolumes",
			"--repository-password-file", e.password, "--helper-image", e.image, "--verify=false")
		if r.code != 0 {
			t.Fatalf("the run after SIGKILL: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		noHelperLeft(ctx, t, src)
		noHelperLeft(ctx, t, dst)
		if r := ferry(t, e.env, "backup", "get", "--storage", e.location); !strings.Contains(r.stdout, "k2") || !strings.Contains(r.stdout, "Incomplete") {
			t.Errorf("the killed backup k2 is not listed as Incomplete:\n%s", r.stdout)
		}
		if r := e.describe(t, "restore", "k2"); r.code == 0 {
			t.Errorf("killed during its backup, migrate k2 has a restore record:\n%s", r.stdout)
		}
	})
}
