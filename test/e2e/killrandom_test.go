package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// killAtRandomObjects is the size of the namespace the kills work on.
const killAtRandomObjects = 5000

// TestKillAtRandom SIGKILLs `ferry backup create` and `ferry restore
// create` at 10 random points each, on a 5,000-object namespace. No backup
// may show Completed unless its archive verifies; every killed restore,
// run again under the same name, must end Completed with the target equal
// to the source and nothing duplicated.
func TestKillAtRandom(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, src, "big")
	createConfigMaps(t, src, "big", killAtRandomObjects)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("random seed %d", seed)

	start := time.Now()
	if r := e.run(t, "backup", "create", "whole", "--context", "src", "--include-namespaces", "big"); r.code != 0 {
		t.Fatalf("backup: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	backupTime := time.Since(start)

	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("kill-b%d", i)
		delay := time.Duration(rng.Int63n(int64(backupTime) + 1))
		killFerry(t, delay, "backup", "create", name, "--kubeconfig", e.kubeconfig, "--context", "src", "--storage", e.storage, "--include-namespaces", "big")
		phase, listed := listedPhase(t, e, name)
		if phase == "Completed" {
			if r := e.run(t, "backup", "verify", name); r.code != 0 {
				t.Errorf("backup %s (killed after %s) is Completed but does not verify: %s", name, delay, r.stderr)
			}
		} else if listed && phase != "Incomplete" {
			t.Errorf("backup %s (killed after %s) is listed %q, want Completed or Incomplete", name, delay, phase)
		}
		t.Logf("backup killed after %s: listed %v as %q", delay.Round(time.Millisecond), listed, phase)
	}

	start = time.Now()
	if _, r := e.restore(t, "timing", "whole", "--namespace-mappings", "big:timing"); r.code != 0 {
		t.Fatalf("restore: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	restoreTime := time.Since(start)
	want := sourceData(t, src, "big")
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("kill-r%d", i)
		ns := fmt.Sprintf("copy-%d", i)
		delay := time.Duration(rng.Int63n(int64(restoreTime) + 1))
		args := []string{"restore", "create", name, "--from-backup", "whole", "--namespace-mappings", "big:" + ns,
			"--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", e.storage}
		killFerry(t, delay, args...)
		rs, r := e.restore(t, name, "whole", "--namespace-mappings", "big:"+ns)
		if r.code != 0 {
			// The killed run had finished: the name is taken, and the restore is complete.
			if !bytes.Contains([]byte(r.stderr), []byte("already exists")) {
				t.Errorf("rerun of %s (killed after %s): exit %d: %s", name, delay, r.code, r.stderr)
				continue
			}
		} else if rs.Status.Phase != "Completed" || rs.Status.Counts.Failed != 0 {
			t.Errorf("rerun of %s: phase %s counts %+v", name, rs.Status.Phase, rs.Status.Counts)
		}
		got := sourceData(t, dst, ns)
		if len(got) != len(want) {
			t.Errorf("%s: %d ConfigMaps in the target, %d in the source", ns, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: ConfigMap %s differs from the source", ns, k)
				break
			}
		}
		t.Logf("restore killed after %s: rerun %+v", delay.Round(time.Millisecond), rs.Status.Counts)
	}
}

// killFerry runs ferry with args and SIGKILLs it after delay (if it is
// still running).
func killFerry(t *testing.T, delay time.Duration, args ...string) {
	t.Helper()
	cmd := exec.Command(ferryBin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return
	case <-time.After(delay):
	}
	_ = cmd.Process.Kill()
	<-done
}

// sourceData maps ConfigMap name to its payload in ns (kube-root-ca.crt left out).
func sourceData(t *testing.T, cs kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	l, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Items {
		if c.Name != "kube-root-ca.crt" {
			out[c.Name] = c.Data["payload"]
		}
	}
	return out
}
