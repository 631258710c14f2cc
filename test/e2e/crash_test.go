package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// crashConfigMaps is how many ConfigMaps the source holds in namespace load.
const crashConfigMaps = 3000

// TestBackupKilled SIGKILLs `ferry backup create` at delays spread over a
// whole backup and checks what the store says afterwards (docs/design.md#the-store-layout):
// a backup is listed Completed only if it was committed and restores; an
// interrupted one is Incomplete, is refused by restore, and can be deleted.
func TestBackupKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, src, "load")
	createConfigMaps(t, src, "load", crashConfigMaps)

	// One backup left alone, to know how long a whole one takes.
	start := time.Now()
	if r := e.run(t, "backup", "create", "full", "--context", "src"); r.code != 0 {
		t.Fatalf("unkilled backup: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	full := time.Since(start)
	t.Logf("an unkilled backup takes %s", full.Round(time.Millisecond))

	const kills = 5
	first := 20 * time.Millisecond
	for i := 0; i < kills; i++ {
		delay := first + (full-first)*time.Duration(i)/(kills-1)
		name := fmt.Sprintf("k%d", i+1)
		t.Run(fmt.Sprintf("%s after %s", name, delay.Round(time.Millisecond)), func(t *testing.T) {
			exited := killBackup(t, e, name, delay)
			phase, listed := listedPhase(t, e, name)
			t.Logf("process exited on its own: %v; backup get lists %s as %q (listed: %v)", exited, name, phase, listed)
			switch {
			case !listed:
				// Killed before it wrote anything: no trace, and nothing to restore.
				if exited {
					t.Fatalf("backup %s exited 0 but is not listed by backup get", name)
				}
				r := e.run(t, "restore", "create", "r-"+name, "--from-backup", name, "--context", "dst")
				if r.code != 1 || !contains(r.stdout+r.stderr, "not found") {
					t.Errorf("restore of never-started backup %s: exit %d, want 1 and \"not found\"\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
				}
				return
			case phase == "Completed":
				// Committed: it must really be whole.
				ns := "load-" + name
				rs, r := e.restore(t, "r-"+name, name, "--include-namespaces", "load", "--namespace-mappings", "load:"+ns)
				if r.code != 0 || rs.Status.Counts.Failed != 0 {
					t.Fatalf("backup %s is listed Completed but its restore fails: exit %d, counts %+v\nstdout: %s\nstderr: %s", name, r.code, rs.Status.Counts, r.stdout, r.stderr)
				}
				cms, err := dst.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if n := countPrefix(cms.Items, "cm-"); n < crashConfigMaps {
					t.Errorf("backup %s is listed Completed but restored %d of the source's %d ConfigMaps", name, n, crashConfigMaps)
				}
			case phase == "Incomplete":
				if exited {
					t.Errorf("backup %s exited 0 before the kill but is listed Incomplete", name)
				}
				if g := e.run(t, "backup", "get", name, "-o", "json"); !contains(g.stdout, `"phase": "Incomplete"`) {
					t.Errorf("backup get %s does not show phase Incomplete: exit %d\nstdout: %s\nstderr: %s", name, g.code, g.stdout, g.stderr)
				}
				ns := "load-" + name
				r := e.run(t, "restore", "create", "r-"+name, "--from-backup", name, "--context", "dst", "--include-namespaces", "load", "--namespace-mappings", "load:"+ns)
				if r.code != 1 || !containsAny(strings.ToLower(r.stdout+r.stderr), []string{"incomplete", "interrupted"}) || !contains(r.stdout+r.stderr, name) {
					t.Errorf("restore of interrupted backup %s: exit %d, want 1 and a message naming it as incomplete/interrupted\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
				} else {
					t.Logf("restore of interrupted backup %s refused: %s", name, strings.TrimSpace(r.stderr))
				}
				if _, err := dst.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err == nil {
					t.Errorf("restore of interrupted backup %s created namespace %s in the target", name, ns)
				}
			default:
				t.Fatalf("backup %s is listed with phase %q after a SIGKILL, want Completed (only if committed) or Incomplete", name, phase)
			}
			if r := e.run(t, "backup", "delete", name); r.code != 0 {
				t.Fatalf("backup delete %s: exit %d\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
			}
			if g := e.run(t, "backup", "get", name); g.code != 1 || !contains(g.stdout+g.stderr, "not found") {
				t.Errorf("after backup delete %s, backup get %s: exit %d, want 1 and \"not found\"\nstdout: %s\nstderr: %s", name, name, g.code, g.stdout, g.stderr)
			}
			if _, listed := listedPhase(t, e, name); listed {
				t.Errorf("after backup delete %s, backup get still lists it", name)
			}
		})
	}
}

// killBackup runs `ferry backup create name` and SIGKILLs it after delay.
// It reports whether the process had already exited 0 by then.
func killBackup(t *testing.T, e *env, name string, delay time.Duration) bool {
	t.Helper()
	cmd := exec.Command(ferryBin, "backup", "create", name, "--kubeconfig", e.kubeconfig, "--context", "src", "--storage", e.storage)
	// A file:// store stages uploads in $TMPDIR; keep what a kill leaves
	// there out of the machine's /tmp, and say what it is.
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	defer func() {
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Logf("the killed backup left %d file(s) in TMPDIR, e.g. %s", len(left), left[0].Name())
		}
	}()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("backup %s ended on its own before the kill: %v\n%s", name, err, out.String())
		}
		return true
	case <-time.After(delay):
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Logf("kill %s: %v", name, err)
	}
	err := <-done
	return err == nil
}

// listedPhase returns kN's phase as `ferry backup get -o json` lists it.
func listedPhase(t *testing.T, e *env, name string) (string, bool) {
	t.Helper()
	r := e.run(t, "backup", "get", "-o", "json")
	if r.code != 0 {
		t.Fatalf("backup get: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var l struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		} `json:"items"`
	}
	mustJSON(t, r.stdout, &l)
	for _, it := range l.Items {
		if it.Metadata.Name == name {
			return it.Status.Phase, true
		}
	}
	return "", false
}

// createConfigMaps creates n ConfigMaps cm-0.. in ns, 16 at a time, each
// holding 4 KiB so that a backup takes a moment.
func createConfigMaps(t *testing.T, cs kubernetes.Interface, ns string, n int) {
	t.Helper()
	payload := strings.Repeat("0123456789abcdef", 256)
	idx := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"payload": payload}}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		idx <- i
	}
	close(idx)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("creating ConfigMaps in %s: %v", ns, err)
	}
	t.Logf("created %d ConfigMaps in %s in %s", n, ns, time.Since(start).Round(time.Millisecond))
}

func countPrefix(items []corev1.ConfigMap, prefix string) int {
	n := 0
	for _, c := range items {
		if strings.HasPrefix(c.Name, prefix) {
			n++
		}
	}
	return n
}
