package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/store"
)

// launchEnv, when set, makes this test binary a launcher: it runs its
// arguments as a command and writes the command's peak RSS (KiB,
// getrusage) and CPU time (seconds) into the file the variable names. A child's ru_maxrss
// counts the memory of the process it was started from (os/exec uses
// vfork), so a test measures ferry through this small process, not from
// its own, larger one.
const launchEnv = "FERRY_E2E_LAUNCH_RUSAGE"

func init() {
	if out := os.Getenv(launchEnv); out != "" {
		os.Exit(launch(out, os.Args[1:]))
	}
}

func launch(out string, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "launch:", err)
		return 127
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil || os.WriteFile(out, fmt.Appendf(nil, "%d %f", ru.Maxrss, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds()), 0o644) != nil {
		fmt.Fprintln(os.Stderr, "launch: no resource usage")
		return 127
	}
	return cmd.ProcessState.ExitCode()
}

// ferryRSS runs ferry as ferry does, with env added, through the launcher,
// and returns its peak RSS in MiB too.
func ferryRSS(t *testing.T, env []string, args ...string) (result, float64) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	usage := filepath.Join(t.TempDir(), "rusage")
	r := ferryCmd(t, self, append(env, launchEnv+"="+usage), append([]string{ferryBin}, args...)...)
	data, err := os.ReadFile(usage)
	if err != nil {
		t.Fatalf("ferry %v: exit %d, no resource usage: %v\nstderr: %s", args, r.code, err, r.stderr)
	}
	var kib, cpu float64
	if _, err := fmt.Sscan(string(data), &kib, &cpu); err != nil {
		t.Fatalf("resource usage %q: %v", data, err)
	}
	t.Logf("ferry %s: exit %d, peak RSS %.0f MiB, CPU %.1fs", strings.Join(args[:min(len(args), 2)], " "), r.code, kib/1024, cpu)
	return r, kib / 1024
}

// bigObjects is the archive TestRestoreBoundedMemory restores: n
// ConfigMaps in namespace ns, each with one value of about size bytes
// that compresses well.
type bigObjects struct {
	ns   string
	n    int
	size int
}

func (o bigObjects) name(i int) string { return fmt.Sprintf("big-%04d", i) }

func (o bigObjects) value(i int) string {
	unit := fmt.Sprintf("object %04d of the bounded-memory restore; ", i)
	return strings.Repeat(unit, o.size/len(unit))
}

// writeBackup writes a committed backup called name of o into the store
// at url with ferry's archive writer, as `ferry backup create` would have
// (the source cluster is left out: it would need as much memory as the
// objects). It returns the size of the archive's entries, uncompressed.
func writeBackup(t *testing.T, url, name string, o bigObjects) int64 {
	t.Helper()
	ctx := context.Background()
	loc, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	key := store.ArchiveKey(name)
	w, err := loc.NewWriter(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	aw, err := archive.NewWriter(w)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	put := func(e archive.Entry, obj map[string]any) {
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		total += int64(len(data))
		if err := aw.WriteItem(e, data); err != nil {
			t.Fatal(err)
		}
	}
	put(archive.Entry{Version: "v1", Resource: "namespaces", Kind: "Namespace", Name: o.ns},
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": o.ns, "uid": "ns-uid"}})
	for i := 0; i < o.n; i++ {
		put(archive.Entry{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: o.ns, Name: o.name(i)},
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": o.name(i), "namespace": o.ns, "uid": fmt.Sprintf("uid-%d", i), "resourceVersion": "7"},
				"data":     map[string]any{"value": o.value(i)}})
	}
	spec := v1alpha1.BackupSpec{IncludedNamespaces: []string{o.ns}}
	specJSON, _ := json.Marshal(spec)
	sum, err := aw.Close(archive.Manifest{BackupName: name, Spec: specJSON})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := v1alpha1.NewBackup(name)
	b.Spec = spec
	now := metav1.Now()
	b.Status.Phase, b.Status.StartTimestamp, b.Status.CompletionTimestamp = v1alpha1.PhaseCompleted, &now, &now
	b.Status.Archive = &v1alpha1.ArchiveSummary{Key: key, Size: sum.Size, SHA256: sum.SHA256, ManifestSHA256: sum.ManifestSHA256, Entries: sum.Entries}
	for _, marker := range []string{store.BackupStartedMarker, store.BackupMarker} {
		if err := loc.PutJSON(ctx, store.BackupDir(name)+marker, b); err != nil {
			t.Fatal(err)
		}
	}
	return total
}

// countConfigMaps counts the ConfigMaps of ns by their metadata alone, a
// page at a time, so that the test's own process stays small.
func countConfigMaps(t *testing.T, c *testenv.Cluster, ns string) int {
	t.Helper()
	mc, err := metadata.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	res := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	n, cont := 0, ""
	for {
		l, err := res.List(context.Background(), metav1.ListOptions{Limit: 200, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			if strings.HasPrefix(it.Name, "big-") {
				n++
			}
		}
		if cont = l.Continue; cont == "" {
			return n
		}
	}
}

// TestRestoreBoundedMemory restores an archive of 1,000 ConfigMaps of
// 900 KiB (about 880 MiB of objects, a few MiB compressed) with the Go
// runtime's soft memory limit at 128 MiB: the restore's peak RSS
// (getrusage) stays under 256 MiB, because it verifies the archive in one
// pass, spooling the items to local disk, and reads each back when it
// applies it; and every object arrives. The same archive with one byte of
// its tar.gz changed, near its end, is refused naming the archive, and
// nothing is created in the target: the whole archive is verified before
// the first write.
func TestRestoreBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	dst, err := testenv.StartCluster(ctx, t, "dst")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	e := &env{dst: dst, kubeconfig: filepath.Join(dir, "kubeconfig"), storage: "file://" + storeDir}
	if err := testenv.WriteKubeconfig(e.kubeconfig, dst); err != nil {
		t.Fatal(err)
	}
	objs := bigObjects{ns: "big", n: 1000, size: 900 << 10}
	start := time.Now()
	uncompressed := writeBackup(t, e.storage, "big", objs)
	archivePath := filepath.Join(storeDir, store.ArchiveKey("big"))
	fi, err := os.Stat(archivePath)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("archive: %d objects, %.0f MiB of entries, %.1f MiB compressed, written in %s", objs.n+1, float64(uncompressed)/(1<<20), float64(fi.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
	// The Go runtime's soft limit, and the peak RSS the restore must stay
	// under: both far below the archive's size.
	const memLimit, rssBound = "128MiB", 256.0
	spool := t.TempDir() // ferry's $TMPDIR, where its spool file goes
	limit := []string{"GOMEMLIMIT=" + memLimit, "TMPDIR=" + spool}
	spoolRemoved := func(after string) {
		t.Helper()
		if left, _ := os.ReadDir(spool); len(left) > 0 {
			t.Errorf("after %s: %s left in ferry's $TMPDIR", after, left[0].Name())
		}
	}
	if mib := float64(uncompressed) / (1 << 20); mib < 3*rssBound {
		t.Fatalf("the archive's objects are %.0f MiB: too few to tell a bounded restore from one that holds them", mib)
	}

	// One byte changed at nine tenths of the stream: a restore that wrote
	// as it read would have created most of the objects by then.
	copyBackup(t, storeDir, "big", "tampered")
	f, err := os.OpenFile(filepath.Join(storeDir, store.ArchiveKey("tampered")), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	pos := fi.Size() * 9 / 10
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cs := kubernetes.NewForConfigOrDie(dst.Config)
	before := targetNamespaces(t, cs)
	r, _ := ferryRSS(t, limit, "restore", "create", "r-tampered", "--from-backup", "tampered", "--context", "dst", "--kubeconfig", e.kubeconfig, "--storage", e.storage)
	t.Logf("refused: %s", strings.TrimSpace(r.stderr))
	if want := store.ArchiveKey("tampered"); r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, archive.ErrCorrupt.Error()) {
		t.Errorf("restore of the tampered archive: exit %d, want 1 naming %s as damaged\nstderr: %s", r.code, want, r.stderr)
	}
	checkTargetUntouched(t, cs, before)
	if n := countConfigMaps(t, dst, objs.ns); n != 0 {
		t.Errorf("%d ConfigMaps created from the tampered archive", n)
	}
	spoolRemoved("the refused restore")

	start = time.Now()
	r, rss := ferryRSS(t, limit, "restore", "create", "r-big", "--from-backup", "big", "--context", "dst", "-o", "json", "--kubeconfig", e.kubeconfig, "--storage", e.storage)
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("restore: exit %d\nstderr: %s", r.code, r.stderr)
	}
	t.Logf("restore of %.0f MiB of objects with GOMEMLIMIT=%s: %s, peak RSS %.0f MiB", float64(uncompressed)/(1<<20), memLimit, took.Round(time.Millisecond), rss)
	if rss >= rssBound {
		t.Errorf("peak RSS %.0f MiB, want under %.0f MiB (the archive's objects are %.0f MiB)", rss, rssBound, float64(uncompressed)/(1<<20))
	}
	spoolRemoved("the restore")
	rs := &v1alpha1.Restore{}
	mustJSON(t, r.stdout, rs)
	if rs.Status.Phase != v1alpha1.PhaseCompleted || rs.Status.Counts.Created != objs.n+1 || rs.Status.Counts.Failed != 0 {
		t.Errorf("restore: phase %s, counts %+v, want Completed with %d created", rs.Status.Phase, rs.Status.Counts, objs.n+1)
	}
	if n := countConfigMaps(t, dst, objs.ns); n != objs.n {
		t.Errorf("%d ConfigMaps in the target, want %d", n, objs.n)
	}
	for _, i := range []int{0, objs.n / 2, objs.n - 1} {
		cm, err := cs.CoreV1().ConfigMaps(objs.ns).Get(ctx, objs.name(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["value"] != objs.value(i) {
			t.Errorf("%s: value of %d bytes differs from the backup's", cm.Name, len(cm.Data["value"]))
		}
	}
}
