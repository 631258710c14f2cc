package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/helperpod"
)

// TestClaimDataArrives is issue 28's three ways a claim arrived empty on
// real nodes, each through `ferry migrate` with helper pods, in one pair
// of node clusters (after the pre-flight's volume estimate in the same
// clusters, preflightVolumes):
//   - a StatefulSet whose persistentVolumeClaimRetentionPolicy deletes its
//     claims (so they carry an ownerReference to it) arrives with every
//     replica's data, and its claims are owned by the restored StatefulSet
//     (before: the claims waited for their owner, the step that fills
//     claims found none, and the StatefulSet was refused);
//   - a migrate killed (SIGKILL, and SIGINT) while 2 of its 6 claims wait
//     for a helper slot, then run again as it was: the rerun resumes, fills
//     the claims the killed run never reached and says so (before: it was
//     refused, and under another name it kept those claims empty);
//   - a claim whose pod creates and deletes files all the while is backed
//     up: the backup completes, the vanished files are counted and named,
//     and the stable files arrive equal (before: one vanished file failed
//     the claim with "snapshot incomplete: canceled").
func TestClaimDataArrives(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	t.Run("pre-flight measures the volume data", func(t *testing.T) { preflightVolumes(ctx, t, e) })
	t.Run("StatefulSet that owns its claims", func(t *testing.T) { ownedClaims(ctx, t, e) })
	e.sixClaims(ctx, t)
	t.Run("rerun after SIGKILL", func(t *testing.T) { rerunAfterKill(ctx, t, e, syscall.SIGKILL, "k9", "six9") })
	t.Run("rerun after SIGINT", func(t *testing.T) { rerunAfterKill(ctx, t, e, syscall.SIGINT, "i9", "six8") })
	t.Run("files that vanish while read", func(t *testing.T) { churningClaim(ctx, t, e) })
}

// migrateArgs are the arguments of a migrate of namespace ns into target.
func (e *volumeEnv) migrateArgs(name, ns, target string, extra ...string) []string {
	return append([]string{"migrate", "--name", name, "--kubeconfig", e.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", e.location,
		"--include-namespaces", ns, "--namespace-mappings", ns + ":" + target, "--exclude-resources", "persistentvolumes",
		"--default-volumes-to-fs-backup", "--repository-password-file", e.password, "--helper-image", e.image,
		"--node-pods-dir", filepath.Join(e.src.Node.RootDir, "pods"), "--to-node-pods-dir", filepath.Join(e.dst.Node.RootDir, "pods"), "--verify=false"}, extra...)
}

// readSums returns, per pod of ns labelled app=<app> in c, the checksums
// of its /data: as the pod recorded them (/data/sum), or computed now.
func readSums(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, app string, n int, computed bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	cmd := "cat /data/sum"
	if computed {
		cmd = "cd /data && sha256sum blob sub/who"
	}
	for _, p := range waitPodsReady(ctx, t, c, ns, "app="+app, n) {
		s, _, err := testenv.Exec(ctx, c.Config, ns, p, "main", nil, "sh", "-c", cmd)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		out[p] = strings.TrimSpace(s)
	}
	return out
}

// waitPodsReady waits up to 4 minutes for n ready pods matching selector
// in ns of c, and returns their names, sorted.
func waitPodsReady(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, selector string, n int) []string {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		pods, err := k.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			var names []string
			for i := range pods.Items {
				if podReady(&pods.Items[i]) {
					names = append(names, pods.Items[i].Name)
				}
			}
			if len(names) == n && len(pods.Items) == n {
				sort.Strings(names)
				return names
			}
		}
		time.Sleep(time.Second)
	}
	dumpCluster(ctx, t, c)
	t.Fatalf("%s: %d pods %s in %s not ready after 4m", c.Name, n, selector, ns)
	return nil
}

// ownedClaims: a 3-replica StatefulSet with whenDeleted: Delete.
func ownedClaims(ctx context.Context, t *testing.T, e *volumeEnv) {
	ks := kubernetes.NewForConfigOrDie(e.src.Config)
	kd := kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, ks, "owned")
	f := workloadFixture{ns: "owned", image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	three, zero := int32(3), int64(0)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: &three, ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &zero, Containers: []corev1.Container{f.container(true)}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec()}}}}
	if _, err := ks.AppsV1().StatefulSets("owned").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := readSums(ctx, t, e.src, "owned", "db", 3, false)
	// The source's controller made the StatefulSet its claims' owner.
	waitOwned(ctx, t, ks, "owned", "db", 3)

	r := ferry(t, e.env, e.migrateArgs("o1", "owned", "owned")...)
	t.Logf("migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 0 {
		dumpCluster(ctx, t, e.dst)
		t.Fatalf("migrate of a StatefulSet that owns its claims: exit %d", r.code)
	}
	got := readSums(ctx, t, e.dst, "owned", "db", 3, true)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: the target's data has checksums\n%s\nwant the source's\n%s", p, got[p], w)
		}
	}
	target, err := kd.AppsV1().StatefulSets("owned").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims := waitOwned(ctx, t, kd, "owned", "db", 3)
	for _, c := range claims {
		var owners []string
		for _, ref := range c.OwnerReferences {
			owners = append(owners, ref.Kind+"/"+ref.Name+"/"+string(ref.UID))
		}
		if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != target.UID {
			t.Errorf("target claim %s: owners %v, want the restored StatefulSet db (%s) only", c.Name, owners, target.UID)
		}
	}
	// Still there, with the same UIDs, once the garbage collector has had
	// its look (velero#7862 lost such claims to it).
	time.Sleep(5 * time.Second)
	for _, c := range claims {
		now, err := kd.CoreV1().PersistentVolumeClaims("owned").Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil || now.UID != c.UID || now.DeletionTimestamp != nil {
			t.Errorf("target claim %s after the garbage collector's look: %v", c.Name, err)
		}
	}
	noHelperLeft(ctx, t, e.dst)
}

// waitOwned waits for n claims in ns owned by StatefulSet sts, and returns them.
func waitOwned(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, sts string, n int) []corev1.PersistentVolumeClaim {
	t.Helper()
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		list, err := k.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var owned []corev1.PersistentVolumeClaim
		last = ""
		for _, c := range list.Items {
			last += fmt.Sprintf("%s: %v; ", c.Name, c.OwnerReferences)
			for _, ref := range c.OwnerReferences {
				if ref.Kind == "StatefulSet" && ref.Name == sts {
					owned = append(owned, c)
				}
			}
		}
		if len(owned) == n {
			return owned
		}
	}
	t.Fatalf("claims of %s/%s owned by it: %s; want %d", ns, sts, last, n)
	return nil
}

// sixClaims makes namespace six in the source: pods p0..p5, each writing
// 8 MiB into a claim of its own (d0..d5).
func (e *volumeEnv) sixClaims(ctx context.Context, t *testing.T) {
	ks := kubernetes.NewForConfigOrDie(e.src.Config)
	createNamespace(t, ks, "six")
	f := workloadFixture{ns: "six", image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	for i := range 6 {
		claim := fmt.Sprintf("d%d", i)
		if _, err := ks.CoreV1().PersistentVolumeClaims("six").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim}, Spec: claimSpec()}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c := f.container(true)
		c.Command = []string{"sh", "-c", strings.Replace(writerScript, "count=5", "count=8", 1) + "; touch /tmp/ready; sleep 3600"}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "six"}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{c}, Volumes: []corev1.Volume{claimVolume(claim)}}}
		if _, err := ks.CoreV1().Pods("six").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// rerunAfterKill stops a migrate of namespace six with sig once 4 of its 6
// claims have helper pods in the target (the other 2 wait for a helper
// slot), then runs the same command again.
func rerunAfterKill(ctx context.Context, t *testing.T, e *volumeEnv, sig syscall.Signal, name, target string) {
	want := readSums(ctx, t, e.src, "six", "six", 6, false)
	args := e.migrateArgs(name, "six", target, "-v") // its log says where a slow run is
	cmd, stderr, done := startFerry(t, e.env, args...)
	started := waitRestoreHelpers(ctx, t, e.dst, target, 4, done, stderr)
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-done
	t.Logf("%v with helper pods for %v: exit %d\n%s", sig, started, cmd.ProcessState.ExitCode(), stderr)
	waiting := map[string]bool{}
	for i := range 6 {
		if c := fmt.Sprintf("d%d", i); !started[c] {
			waiting[c] = true
		}
	}
	if len(waiting) != 2 {
		t.Fatalf("killed with helper pods for %v: want 2 of the 6 claims still waiting for a slot", started)
	}
	rec := e.describe(t, "restore", name)
	phase, _ := phaseOf(t, rec)
	if rec.code != 0 || (sig == syscall.SIGKILL && phase != "InProgress") || (sig == syscall.SIGINT && phase != "Failed") {
		t.Errorf("the killed run's restore record: exit %d, phase %q; want it recorded (InProgress after SIGKILL, Failed after SIGINT)\n%s", rec.code, phase, rec.stdout+rec.stderr)
	}

	r := ferry(t, e.env, args...)
	t.Logf("rerun: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 0 {
		dumpCluster(ctx, t, e.dst)
		t.Fatalf("the same migrate run again after %v: exit %d", sig, r.code)
	}
	if !strings.Contains(r.stderr, "Resuming migration "+name) {
		t.Errorf("the rerun does not say it resumes migration %s", name)
	}
	// The claims the killed run never reached are written by the rerun.
	var vols struct {
		Volumes []struct {
			Namespace, ClaimName string
			Bytes                int64
			AlreadyRestored      bool
			Error                string
		}
	}
	d := e.describe(t, "restore", name)
	if err := json.Unmarshal([]byte(d.stdout), &vols); err != nil {
		t.Fatalf("restore describe: %v\n%s", err, d.stdout)
	}
	finished := map[string]bool{}
	for _, v := range vols.Volumes {
		if v.Error != "" {
			t.Errorf("claim %s after the rerun: %s", v.ClaimName, v.Error)
		}
		if !v.AlreadyRestored && v.Bytes > 8<<20 {
			finished[v.ClaimName] = true
		}
	}
	for c := range waiting {
		if !finished[c] {
			t.Errorf("claim %s, which the killed run never reached, is not named as written by the rerun: %+v", c, vols.Volumes)
		}
	}
	got := map[string]string{}
	mountSix(ctx, t, e, target)
	for i := range 6 {
		pod := fmt.Sprintf("p%d", i)
		s, _, err := testenv.Exec(ctx, e.dst.Config, target, pod, "main", nil, "sh", "-c", "cd /data && sha256sum blob sub/who")
		if err != nil {
			t.Fatal(err)
		}
		got[pod] = strings.TrimSpace(s)
		if got[pod] != want[pod] {
			t.Errorf("%s (claim d%d): the target's data has checksums\n%s\nwant the source's\n%s", pod, i, got[pod], want[pod])
		}
	}
	noHelperLeft(ctx, t, e.dst)
}

// mountSix waits for the restored pods of namespace six in target.
func mountSix(ctx context.Context, t *testing.T, e *volumeEnv, target string) {
	t.Helper()
	waitPodsReady(ctx, t, e.dst, target, "app=six", 6)
}

// waitRestoreHelpers waits until n restore helper pods exist in namespace
// ns of c, and returns the claims they mount.
func waitRestoreHelpers(ctx context.Context, t *testing.T, c *testenv.Cluster, ns string, n int, done chan struct{}, stderr fmt.Stringer) map[string]bool {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		pods, err := k.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: helperpod.LabelPurpose + "=volume-restore"})
		if err == nil && len(pods.Items) >= n {
			claims := map[string]bool{}
			for _, p := range pods.Items {
				for _, v := range p.Spec.Volumes {
					if v.PersistentVolumeClaim != nil {
						claims[v.PersistentVolumeClaim.ClaimName] = true
					}
				}
			}
			return claims
		}
		select {
		case <-done:
			t.Fatalf("ferry migrate ended before %d restore helper pods ran in %s\n%s", n, ns, stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	dumpCluster(ctx, t, c)
	t.Fatalf("%d restore helper pods did not appear in %s within 5m; ferry's output so far:\n%s", n, ns, stderr)
	return nil
}

// vanishedRE finds the count of a claim's vanished files in a backup's warnings.
var vanishedRE = regexp.MustCompile(`pod volume churn/\S+: (\d+) file\(s\) vanished while the volume was read and are not in the snapshot \(([^)]*)\)`)

// churnScript writes the stable data, then (in the source only: a
// restored claim has /data/sum already) runs 4 loops that each make a
// directory of 8 small files and remove the one made 3 before, all the
// while, as a busy application's temporary files come and go.
const churnScript = `if [ -f /data/sum ]; then touch /tmp/ready; exec sleep 3600; fi
` + writerScript + `; touch /tmp/ready; mkdir -p /data/tmp
for w in 1 2 3 4; do (i=0; while true; do i=$((i+1)); d=/data/tmp/w$w-$i; mkdir $d; for j in 1 2 3 4 5 6 7 8; do echo $i > $d/f$j; done; rm -rf /data/tmp/w$w-$((i-3)); done) & done; wait`

// churningClaim: a pod keeps creating and deleting files in its claim,
// beside stable files, while it is backed up.
func churningClaim(ctx context.Context, t *testing.T, e *volumeEnv) {
	ks := kubernetes.NewForConfigOrDie(e.src.Config)
	createNamespace(t, ks, "churn")
	if _, err := ks.CoreV1().PersistentVolumeClaims("churn").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := workloadFixture{ns: "churn", image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	c := f.container(true)
	c.Command = []string{"sh", "-c", churnScript}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "churn", Labels: map[string]string{"app": "churn"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{c}, Volumes: []corev1.Volume{claimVolume("data")}}}
	if _, err := ks.CoreV1().Pods("churn").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { // its loops burn CPU
		_ = ks.CoreV1().Pods("churn").Delete(context.WithoutCancel(ctx), "churn", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}()
	want := readSums(ctx, t, e.src, "churn", "churn", 1, false)
	// A file deleted between kopia's listing and its open is a race the
	// application wins now and then: backups of the same claim
	// (incremental, quick) are taken until one sees it. Every one must
	// complete.
	vanished, name := 0, ""
	for i := 1; i <= 12 && vanished == 0; i++ {
		name = fmt.Sprintf("churn-%d", i)
		r := e.run(t, e.src, "backup", "create", name, "--include-namespaces", "churn", "--default-volumes-to-fs-backup")
		if r.code != 0 {
			t.Fatalf("backup of a churning claim: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		var d struct {
			Backup  struct{ Status struct{ Phase string } }
			Results struct{ Warnings []string }
		}
		bd := e.describe(t, "backup", name)
		if err := json.Unmarshal([]byte(bd.stdout), &d); err != nil {
			t.Fatalf("backup describe: %v\n%s", err, bd.stdout)
		}
		if d.Backup.Status.Phase != "Completed" {
			t.Fatalf("backup %s of a churning claim: %s, want Completed\n%s", name, d.Backup.Status.Phase, bd.stdout)
		}
		for _, w := range d.Results.Warnings {
			if m := vanishedRE.FindStringSubmatch(w); m != nil {
				_, _ = fmt.Sscan(m[1], &vanished)
				t.Logf("backup %s: %s", name, w)
				if !strings.Contains(m[2], "tmp/w") {
					t.Errorf("vanished files named %q, want paths under tmp/", m[2])
				}
			}
		}
	}
	if vanished == 0 {
		t.Fatalf("in 12 backups of a claim whose files are deleted all the while, none counted a vanished file")
	}
	// The stable files of that backup arrive equal.
	if r := e.run(t, e.dst, "restore", "create", name, "--from-backup", name, "--namespace-mappings", "churn:churn1"); r.code != 0 {
		t.Fatalf("restore of %s: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
	}
	got := readSums(ctx, t, e.dst, "churn1", "churn", 1, true)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: the stable files arrived with checksums\n%s\nwant the source's\n%s", p, got[p], w)
		}
	}
}

// startFerry starts ferry with args and env (added to the environment),
// and returns it with its stderr and a channel closed at its exit.
func startFerry(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, chan struct{}) {
	t.Helper()
	cmd := exec.Command(ferryBin, args...)
	cmd.Env = append(cmd.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return cmd, &stderr, done
}
