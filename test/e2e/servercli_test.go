package e2e

import (
	"bytes"
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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestServerCLI drives server mode as a user: `ferry install --apply`,
// the `ferry server` binary run out of cluster, `backup create --server
// --wait` and `restore create --server --wait` (FERRY_MODE=server), and
// `schedule create|get|pause|unpause|delete`, with an invalid cron refused.
func TestServerCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx := context.Background()
	c, s3, creds := serverSetup(t, "cli")
	kc := []string{"--kubeconfig", c.KubeconfigPath}
	run := func(env []string, args ...string) result {
		t.Helper()
		return ferry(t, env, append(args, kc...)...)
	}
	if r := run(nil, "install", "--apply", "--location-url", s3.URL("ferry"), "--credentials-file", creds); r.code != 0 || !strings.Contains(r.stdout, "BackupStorageLocation ferry/default applied") {
		t.Fatalf("install --apply: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Applying again changes nothing and succeeds.
	if r := run(nil, "install", "--apply", "--location-url", s3.URL("ferry"), "--credentials-file", creds); r.code != 0 {
		t.Fatalf("second install --apply: exit %d\n%s", r.code, r.stderr)
	}

	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	srv := exec.CommandContext(sctx, ferryBin, append([]string{"server", "--metrics-addr", "0", "--probe-addr", "0", "--sync-period", "1s", "--location-validation-period", "1s", "--leader-elect-lease-duration", "3s"}, kc...)...)
	var srvLog bytes.Buffer
	srv.Stdout, srv.Stderr = &srvLog, &srvLog
	srv.Cancel = func() error { return srv.Process.Signal(syscall.SIGTERM) }
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", srvLog.String())
		}
	}()

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"}}
		if _, err := cs.CoreV1().ConfigMaps("app").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := run(nil, "backup", "create", "b1", "--server", "--wait", "--include-namespaces", "app", "--ttl", "24h", "-o", "json")
	if r.code != 0 {
		t.Fatalf("backup create --server: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b := &v1alpha1.Backup{}
	mustJSON(t, r.stdout, b)
	if b.Status.Phase != v1alpha1.PhaseCompleted || b.Status.ResourceCounts["configmaps"] < 10 || b.Status.Expiration == nil || b.Namespace != "ferry" {
		t.Errorf("backup: %+v", b.Status)
	}
	r = run([]string{"FERRY_MODE=server"}, "restore", "create", "r1", "--from-backup", "b1", "--wait", "--namespace-mappings", "app:app2", "--verify")
	if r.code != 0 || !strings.Contains(r.stdout, "Restore r1 of backup b1: Completed") {
		t.Fatalf("restore create (FERRY_MODE=server): exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := cs.CoreV1().ConfigMaps("app2").Get(ctx, "cm-4", metav1.GetOptions{}); err != nil {
		t.Errorf("restored ConfigMap: %v", err)
	}
	checkServerVerify(t, r, s3, c.KubeconfigPath, cs)
	r = run(nil, "restore", "create", "r2", "--from-backup", "nosuch", "--server", "--wait")
	if r.code != 1 || !strings.Contains(r.stdout, `backup "nosuch"`) {
		t.Errorf("restore of a missing backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := run(nil, "backup", "create", "b2", "--server", "--storage", "file:///tmp/x"); r.code != 1 || !strings.Contains(r.stderr, "--storage is not supported in server mode") {
		t.Errorf("--storage with --server: exit %d: %s", r.code, r.stderr)
	}
	if r := run(nil, "backup", "create", "b5", "--server", "--ttl", "-1h"); r.code != 1 || !strings.Contains(r.stderr, "--ttl -1h0m0s is negative") {
		t.Errorf("negative --ttl: exit %d: %s", r.code, r.stderr)
	}
	// Direct-mode volume and image flags are refused, not silently ignored.
	if r := run(nil, "restore", "create", "r3", "--from-backup", "b1", "--server", "--host-pods-dir", "/tmp"); r.code != 1 || !strings.Contains(r.stderr, "--host-pods-dir is not supported in server mode: the node agents") {
		t.Errorf("--host-pods-dir with --server: exit %d: %s", r.code, r.stderr)
	}
	if r := run(nil, "backup", "create", "b3", "--server", "--platform", "linux/amd64"); r.code != 1 || !strings.Contains(r.stderr, "--platform is not supported in server mode") {
		t.Errorf("--platform with --server: exit %d: %s", r.code, r.stderr)
	}
	if r := run(nil, "restore", "create", "r4", "--from-backup", "b1", "--encryption-identity-secret", "age"); r.code != 1 || !strings.Contains(r.stderr, "--encryption-identity-secret is for server mode") {
		t.Errorf("--encryption-identity-secret without --server: exit %d: %s", r.code, r.stderr)
	}
	if r := run(nil, "restore", "create", "r5", "--from-backup", "nosuch", "--server", "--encryption-identity-secret", "age:key.txt", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"encryptionIdentitySecret": {`) || !strings.Contains(r.stdout, `"key": "key.txt"`) {
		t.Errorf("--encryption-identity-secret with --server: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	// --default-volumes-to-fs-backup needs no --host-pods-dir in server mode
	// (the node agents read the data): the Backup carries it.
	if r := run(nil, "backup", "create", "b4", "--server", "--default-volumes-to-fs-backup", "--include-namespaces", "app", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"defaultVolumesToFsBackup": true`) {
		t.Errorf("--default-volumes-to-fs-backup with --server: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}

	if r := run(nil, "schedule", "create", "bad", "--schedule", "61 * * * *"); r.code != 1 || !strings.Contains(r.stderr, `--schedule "61 * * * *"`) {
		t.Errorf("invalid cron: exit %d: %s", r.code, r.stderr)
	}
	if r := run(nil, "schedule", "create", "nightly", "--schedule", "0 3 * * *", "--include-namespaces", "app", "--ttl", "72h"); r.code != 0 {
		t.Fatalf("schedule create: exit %d: %s", r.code, r.stderr)
	}
	getSchedule := func() *v1alpha1.Schedule {
		s := &v1alpha1.Schedule{}
		poll(t, 10*time.Second, "schedule", func() error {
			r := run(nil, "schedule", "get", "nightly", "-o", "json")
			if r.code != 0 {
				return fmt.Errorf("exit %d: %s", r.code, r.stderr)
			}
			mustJSON(t, r.stdout, s)
			if s.Status.Phase == "" {
				return fmt.Errorf("no phase yet")
			}
			return nil
		})
		return s
	}
	if s := getSchedule(); s.Status.Phase != v1alpha1.SchedulePhaseEnabled || s.Status.NextBackup == nil || s.Status.NextBackup.UTC().Hour() != 3 || s.Spec.TTL.Duration != 72*time.Hour {
		t.Errorf("schedule: %+v %+v", s.Spec, s.Status)
	}
	if r := run(nil, "schedule", "pause", "nightly"); r.code != 0 {
		t.Fatalf("pause: %s", r.stderr)
	}
	poll(t, 10*time.Second, "paused", func() error {
		if s := getSchedule(); s.Status.Phase != v1alpha1.SchedulePhasePaused {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		return nil
	})
	if r := run(nil, "schedule", "unpause", "nightly"); r.code != 0 {
		t.Fatalf("unpause: %s", r.stderr)
	}
	poll(t, 10*time.Second, "unpaused", func() error {
		if s := getSchedule(); s.Status.Phase != v1alpha1.SchedulePhaseEnabled {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		return nil
	})
	r = run(nil, "schedule", "get")
	if r.code != 0 || !strings.Contains(r.stdout, "nightly") || !strings.Contains(r.stdout, "0 3 * * *") {
		t.Errorf("schedule get: %s %s", r.stdout, r.stderr)
	}
	if r := run(nil, "schedule", "delete", "nightly"); r.code != 0 {
		t.Fatalf("delete: %s", r.stderr)
	}
	if r := run(nil, "schedule", "get", "nightly"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("get after delete: exit %d: %s", r.code, r.stderr)
	}
}

// serverSetup starts a cluster named name and an S3 server with bucket
// "ferry", and writes a credentials file for `ferry install
// --credentials-file` (KEY=VALUE lines, with a comment line, which the
// parser skips).
// checkServerVerify: the server-mode restore r1 with --verify (spec.verify)
// verified its objects through the engine's verification and kept the
// report in the location, as ferry migrate does; a server-mode restore
// over a ConfigMap that differs from the backup's ends PartiallyFailed,
// naming the verification, with the report kept; the local restore
// --verify gives the same counts.
func checkServerVerify(t *testing.T, r1 result, s3 *testenv.S3, kubeconfig string, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if !strings.Contains(r1.stdout, "verified: ") || !strings.Contains(r1.stdout, "report kept in the location: restores/r1/report.json, restores/r1/report.html") {
		t.Errorf("restore r1 --verify printed no verification:\n%s", r1.stdout)
	}
	loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{"AWS_ACCESS_KEY_ID": s3.AccessKey, "AWS_SECRET_ACCESS_KEY": s3.SecretKey}))
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	rep, err := migration.OpenReport(ctx, loc, "r1", false)
	var v struct {
		Summary struct{ Objects, Matched, Unexpected int } `json:"summary"`
	}
	if err != nil || json.Unmarshal(rep, &v) != nil || v.Summary.Matched < 11 || v.Summary.Unexpected != 0 {
		t.Errorf("report of r1 in the location: %v %+v, want the 10 ConfigMaps and the namespace matched, nothing unexpected", err, v.Summary)
	}
	// A ConfigMap that differs from the backup's is kept (existing
	// resource policy none), and the verification says so.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("app3").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-2"}, Data: map[string]string{"k": "changed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := ferry(t, nil, "restore", "create", "r6", "--from-backup", "b1", "--server", "--wait", "--namespace-mappings", "app:app3", "--verify", "-o", "json", "--kubeconfig", kubeconfig)
	rs := &v1alpha1.Restore{}
	mustJSON(t, r.stdout, rs)
	if r.code != 2 || rs.Status.Phase != v1alpha1.PhasePartiallyFailed || !strings.Contains(rs.Status.FailureReason, "verification: 1 of") ||
		rs.Status.Verification == nil || rs.Status.Verification.Differ != 1 || len(rs.Status.Verification.Report) != 2 {
		t.Errorf("restore over a differing ConfigMap with --verify: exit %d, %+v %+v, want exit 2, PartiallyFailed with 1 differing", r.code, rs.Status, rs.Status.Verification)
	}
	if _, err := migration.OpenReport(ctx, loc, "r6", true); err != nil {
		t.Errorf("the HTML report of r6: %v", err)
	}
	// The location's record says what the cluster's Restore says.
	if rec, err := loc.GetRestore(ctx, "r6"); err != nil || rec.Status.Phase != v1alpha1.PhasePartiallyFailed || rec.Status.Verification == nil || rec.Status.Verification.Differ != 1 {
		t.Errorf("the location's record of r6: %v %+v, want PartiallyFailed with its verification", err, rec)
	}
	// The CLI's own restore --verify: the same verification, the same counts.
	r = ferry(t, s3.Env(), "restore", "create", "r7", "--from-backup", "b1", "--namespace-mappings", "app:app4", "--verify", "--storage", s3.URL("ferry"), "--kubeconfig", kubeconfig)
	want := fmt.Sprintf("verified: %d of %d object(s) match the backup, 0 differ, 0 missing", v.Summary.Matched, v.Summary.Objects)
	if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "restores/r7/report.json") {
		t.Errorf("restore create --verify (local): exit %d, stdout %q; want %q\n%s", r.code, r.stdout, want, r.stderr)
	}
}

func serverSetup(t *testing.T, name string) (*testenv.Cluster, *testenv.S3, string) {
	t.Helper()
	ctx := context.Background()
	c, err := testenv.StartCluster(ctx, t, name)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "ferry"); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf("# test\nAWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", s3.AccessKey, s3.SecretKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	return c, s3, creds
}
