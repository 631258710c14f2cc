package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/store"
)

// killAtRandomObjects is the size of the namespace the kills work on.
const killAtRandomObjects = 5000

// killRounds is how many backups, and then restores, are killed.
const killRounds = 6

// killSeedEnv, if set, is the seed of the random kill delays (to replay a
// failed run: the test logs its seed).
const killSeedEnv = "FERRY_E2E_KILL_SEED"

// TestKillAtRandom SIGKILLs `ferry backup create` and `ferry restore
// create` killRounds times each on a 5,000-object namespace: the first backup as
// soon as its started marker is in the store, the rest at random points.
// No run may fail on its own before its kill. No backup may show
// Completed unless its archive verifies; at least one is Incomplete, and
// restoring an Incomplete backup is refused and writes nothing. Every
// killed restore, run again under the same name, must end Completed with
// the target equal to the source and nothing duplicated.
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
	if s := os.Getenv(killSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", killSeedEnv, s, err)
		}
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("random seed %d (%s=%d replays these delays)", seed, killSeedEnv, seed)

	incomplete := killBackups(t, e, rng)
	if len(incomplete) == 0 {
		t.Fatalf("no killed backup was left Incomplete (seed %d)", seed)
	}
	for _, name := range incomplete {
		refuseIncomplete(t, e, dst, name)
	}
	killRestores(t, e, src, dst, rng)
}

// killBackups kills killRounds backups of namespace big: kill-b0 when its started
// marker appears in the store (after it and before the commit, so it must
// be Incomplete), the others after random delays within the time an
// unkilled backup takes. It returns the names of the Incomplete ones.
func killBackups(t *testing.T, e *env, rng *rand.Rand) []string {
	start := time.Now()
	if r := e.run(t, "backup", "create", "whole", "--context", "src", "--include-namespaces", "big"); r.code != 0 {
		t.Fatalf("backup: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	backupTime := time.Since(start)
	t.Logf("an unkilled backup takes %s", backupTime.Round(time.Millisecond))
	storeDir := strings.TrimPrefix(e.storage, "file://")

	var incomplete []string
	for i := 0; i < killRounds; i++ {
		name := fmt.Sprintf("kill-b%d", i)
		event, when := fileAppears(filepath.Join(storeDir, store.BackupDir(name), store.BackupStartedMarker)), "at its started marker"
		if i > 0 {
			delay := time.Duration(rng.Int63n(int64(backupTime) + 1))
			event, when = after(delay), "after "+delay.Round(time.Millisecond).String()
		}
		k := killFerry(t, event, "backup", "create", name, "--kubeconfig", e.kubeconfig, "--context", "src", "--storage", e.storage, "--include-namespaces", "big")
		phase, listed := listedPhase(t, e, name)
		switch {
		case phase == "Completed":
			if r := e.run(t, "backup", "verify", name); r.code != 0 {
				t.Errorf("backup %s (killed %s) is Completed but does not verify: %s", name, when, r.stderr)
			}
		case phase == "Incomplete":
			if !k.killed {
				t.Errorf("backup %s exited 0 before its kill (%s) but is listed Incomplete", name, when)
			}
			incomplete = append(incomplete, name)
		case listed:
			t.Errorf("backup %s (killed %s) is listed %q, want Completed or Incomplete", name, when, phase)
		case !k.killed:
			t.Errorf("backup %s exited 0 before its kill (%s) but is not listed", name, when)
		}
		if i == 0 && (!k.killed || phase != "Incomplete") {
			t.Errorf("backup %s, killed %s: killed %v, listed %v as %q; want killed and Incomplete", name, when, k.killed, listed, phase)
		}
		t.Logf("backup killed %s: killed %v, listed %v as %q", when, k.killed, listed, phase)
	}
	return incomplete
}

// refuseIncomplete restores Incomplete backup name into the target: it
// must be refused (exit 1) with a message that names the backup and says
// it is incomplete, and the target must be left as it was.
func refuseIncomplete(t *testing.T, e *env, dst kubernetes.Interface, name string) {
	ns := "refused-" + name
	nsBefore, cmBefore := targetState(t, dst)
	r := e.run(t, "restore", "create", "r-"+name, "--from-backup", name, "--context", "dst", "--namespace-mappings", "big:"+ns)
	msg := r.stdout + r.stderr
	if r.code != 1 || !contains(msg, `"`+name+`"`) || !contains(strings.ToLower(msg), "incomplete") {
		t.Errorf("restore of Incomplete backup %s: exit %d, want 1 and a message naming it as incomplete\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
	} else {
		t.Logf("restore of Incomplete backup %s refused: %s", name, strings.TrimSpace(r.stderr))
	}
	nsAfter, cmAfter := targetState(t, dst)
	if !slices.Equal(nsBefore, nsAfter) || cmAfter != cmBefore {
		t.Errorf("restore of Incomplete backup %s changed the target: namespaces %v -> %v, ConfigMaps %d -> %d", name, nsBefore, nsAfter, cmBefore, cmAfter)
	}
}

// targetState is the target's namespaces (sorted) and its number of ConfigMaps.
func targetState(t *testing.T, cs kubernetes.Interface) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range nss.Items {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	cms, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return names, len(cms.Items)
}

// killRestores kills killRounds restores of backup whole at random points, each
// into a namespace of its own, runs each again under its name and checks
// the target against the source.
func killRestores(t *testing.T, e *env, src, dst kubernetes.Interface, rng *rand.Rand) {
	start := time.Now()
	if _, r := e.restore(t, "timing", "whole", "--namespace-mappings", "big:timing"); r.code != 0 {
		t.Fatalf("restore: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	restoreTime := time.Since(start)
	t.Logf("an unkilled restore takes %s", restoreTime.Round(time.Millisecond))
	want := sourceData(t, src, "big")
	for i := 0; i < killRounds; i++ {
		name := fmt.Sprintf("kill-r%d", i)
		ns := fmt.Sprintf("copy-%d", i)
		delay := time.Duration(rng.Int63n(int64(restoreTime) + 1))
		k := killFerry(t, after(delay), "restore", "create", name, "--from-backup", "whole", "--namespace-mappings", "big:"+ns,
			"--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", e.storage)
		rs, r := e.restore(t, name, "whole", "--namespace-mappings", "big:"+ns)
		switch {
		case r.code != 0 && !contains(r.stderr, "already exists"):
			t.Errorf("rerun of %s (killed after %s): exit %d: %s", name, delay, r.code, r.stderr)
			continue
		case r.code != 0:
			// The killed run had finished: the name is taken, and the restore is complete.
		case !k.killed:
			t.Errorf("rerun of %s, whose first run exited 0 before its kill, was accepted: it must say the restore exists", name)
		case rs.Status.Phase != "Completed" || rs.Status.Counts.Failed != 0:
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
		t.Logf("restore killed after %s: killed %v, rerun %+v", delay.Round(time.Millisecond), k.killed, rs.Status.Counts)
	}
}

// killed is what became of a ferry run the test meant to SIGKILL.
type killed struct {
	killed bool   // SIGKILLed; false: it exited 0 on its own first
	output string // its stdout and stderr
}

// killFerry runs ferry with args and SIGKILLs it when event returns (the
// context given to event ends if ferry exits first). A run that exits on
// its own with a non-zero code fails the test: nothing made it fail.
func killFerry(t *testing.T, event func(context.Context), args ...string) killed {
	t.Helper()
	cmd := exec.Command(ferryBin, args...)
	// A file:// store stages uploads in $TMPDIR: keep what a kill leaves
	// there out of the machine's /tmp.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	ctx, cancel := context.WithCancel(context.Background())
	fired := make(chan struct{})
	go func() { event(ctx); close(fired) }()
	select {
	case <-done:
	case <-fired:
		_ = cmd.Process.Kill() // an error: it had just exited
		<-done
	}
	cancel()
	<-fired
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	k := killed{killed: ws.Signaled() && ws.Signal() == syscall.SIGKILL, output: out.String()}
	if code := cmd.ProcessState.ExitCode(); !k.killed && code != 0 {
		t.Fatalf("ferry %s exited %d on its own before its kill:\n%s", strings.Join(args[:3], " "), code, k.output)
	}
	return k
}

// after is the event "d has passed".
func after(d time.Duration) func(context.Context) {
	return func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

// fileAppears is the event "path exists", looked for every millisecond.
func fileAppears(path string) func(context.Context) {
	return func(ctx context.Context) {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := os.Stat(path); err == nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}
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
