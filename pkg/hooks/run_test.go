package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/kube"
)

// TestHooksInPods runs hooks in pods of a cluster with a real node: a
// pre-backup hook that writes a file, a post-backup hook that exits 3, a
// hook that sleeps past its timeout, and post-restore hooks that wait for
// a container to become Ready, for one that never does, and for a
// container the pod does not have.
func TestHooksInPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster with a node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg, err := testenv.StartRegistry(ctx, t, testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := testenv.StartNodeClusters(ctx, t, reg, "a")
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	k := kubernetes.NewForConfigOrDie(c.Config)
	image := reg.NodeHost + "/" + testenv.BusyboxImage

	// "late" becomes Ready 3 s after it starts: its restore hook must wait.
	late := testPod("late", image, "sleep 3; touch /tmp/ready; exec sleep 3600", "test -f /tmp/ready", map[string]string{
		"post.hook.restore.velero.io/command":        `["/bin/sh", "-c", "test -f /tmp/ready && echo ran-when-ready"]`,
		"post.hook.restore.velero.io/wait-for-ready": "true",
		"post.hook.restore.velero.io/wait-timeout":   "90s",
	})
	never := testPod("never", image, "exec sleep 3600", "false", nil)
	shell := testPod("shell", image, "exec sleep 3600", "", map[string]string{
		"pre.hook.backup.velero.io/command":   `["/bin/sh", "-c", "echo frozen > /tmp/pre; echo out"]`,
		"pre.hook.backup.velero.io/container": "main",
		"post.hook.backup.ferry.dev/command":  `["/bin/sh","-c","echo oops >&2; exit 3"]`,
		"post.hook.backup.velero.io/command":  "ignored: ferry's prefix wins",
	})
	for _, p := range []*corev1.Pod{late, never, shell} {
		if _, err := k.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	restoreHook, err := RestoreHook(late)
	if err != nil {
		t.Fatal(err)
	}
	lateDone := make(chan Result, 1)
	go func() { lateDone <- RunAfterReady(ctx, c.Config, k, "default", "late", restoreHook) }()

	pod := waitRunning(ctx, t, k, "shell")
	pre, post, err := BackupHooks(pod)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("writes a file", func(t *testing.T) {
		r := Run(ctx, c.Config, pod, pre)
		if r.Err != nil || r.Stdout != "out\n" || r.Pod != "default/shell" || r.Container != "main" || r.Phase != PhasePreBackup {
			t.Fatalf("result %+v, want stdout out and no error", r)
		}
		out, _, err := testenv.Exec(ctx, c.Config, "default", "shell", "main", nil, "cat", "/tmp/pre")
		if err != nil || out != "frozen\n" {
			t.Errorf("the hook's file holds %q (%v), want frozen", out, err)
		}
	})
	t.Run("exit 3", func(t *testing.T) {
		r := Run(ctx, c.Config, pod, post)
		want := `post-backup hook in pod default/shell container main, command ["/bin/sh","-c","echo oops >&2; exit 3"]: exit code 3: oops`
		if r.Err == nil || r.Err.Error() != want {
			t.Fatalf("error %v, want %s", r.Err, want)
		}
		if code, ok := kube.ExitCode(r.Err); !ok || code != 3 {
			t.Errorf("kube.ExitCode = %d, %t; want 3", code, ok)
		}
		if r.Stderr != "oops\n" {
			t.Errorf("stderr %q, want oops", r.Stderr)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		h := &ExecHook{Phase: PhasePreBackup, Container: "main", Command: []string{"sh", "-c", "echo started; sleep 60"}, Timeout: 2 * time.Second}
		start := time.Now()
		r := Run(ctx, c.Config, pod, h)
		took := time.Since(start)
		if took < 2*time.Second || took > 7*time.Second {
			t.Errorf("a hook with a 2s timeout returned after %s", took)
		}
		if r.Err == nil || !errors.Is(r.Err, context.DeadlineExceeded) || !strings.HasSuffix(r.Err.Error(), `container main, command ["sh","-c","echo started; sleep 60"]: timed out after 2s`) {
			t.Errorf("error %v, want a timeout after 2s", r.Err)
		}
		t.Logf("stopped after %s, stdout %q", took.Round(time.Millisecond), r.Stdout)
	})
	t.Run("after ready", func(t *testing.T) {
		r := <-lateDone
		if r.Err != nil || r.Stdout != "ran-when-ready\n" {
			t.Fatalf("result %+v, want the hook run once the container is Ready", r)
		}
		if r.Waited < 3*time.Second {
			t.Errorf("waited %s for a container that is Ready after 3s", r.Waited)
		}
		t.Logf("waited %s, ran %s", r.Waited.Round(time.Millisecond), r.Duration.Round(time.Millisecond))
	})
	t.Run("wait timeout", func(t *testing.T) {
		h := &ExecHook{Phase: PhasePostRestore, Command: []string{"true"}, WaitForReady: true, WaitTimeout: 3 * time.Second}
		r := RunAfterReady(ctx, c.Config, k, "default", "never", h)
		want := `post-restore hook in pod default/never container main, command ["true"]: container not Ready after wait-timeout 3s: pod Running, container main running, ready=false`
		if r.Err == nil || r.Err.Error() != want {
			t.Errorf("error %v, want %s", r.Err, want)
		}
		if r.Waited < 3*time.Second || r.Waited > 8*time.Second {
			t.Errorf("waited %s, want 3s", r.Waited)
		}
	})
	t.Run("no such container", func(t *testing.T) {
		h := &ExecHook{Phase: PhasePostRestore, Container: "nope", Command: []string{"true"}}
		r := RunAfterReady(ctx, c.Config, k, "default", "shell", h)
		if r.Err == nil || !strings.Contains(r.Err.Error(), "container nope, command [\"true\"]: will not run: the pod has no container nope") {
			t.Errorf("error %v", r.Err)
		}
	})
}

// testPod is a busybox pod running script, with a readiness probe when
// ready is a command.
func testPod(name, image, script, ready string, ann map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{{Name: "main", Image: image, Command: []string{"sh", "-c", script}}},
		},
	}
	if ready != "" {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", ready}}},
			PeriodSeconds: 1,
		}
	}
	return p
}

// waitRunning waits until the pod is Running and returns it.
func waitRunning(ctx context.Context, t *testing.T, k kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		p, err := k.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			return p
		}
		if err == nil {
			last = fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod default/%s not Running after 2m: %s", name, last)
	return nil
}
