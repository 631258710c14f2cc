package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// TestStoragePrefix: ?prefix= keeps a location under a key prefix of a
// shared bucket, and an s3 URL with a path (which would be ignored) is
// refused with the way to say it.
func TestStoragePrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	createNamespace(t, src, "pfx")
	createConfigMaps(t, src, "pfx", 3)
	url := s3.URL("shared") + "&prefix=team-a/"
	r := ferry(t, s3.Env(), "backup", "create", "b1", "--kubeconfig", e.kubeconfig, "--context", "src", "--storage", url, "--include-namespaces", "pfx")
	if r.code != 0 {
		t.Fatalf("backup under a prefix: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(s3.Dir, "shared", "team-a", "backups", "b1", "ferry-backup.json")); err != nil {
		t.Errorf("the backup is not under team-a/ in the bucket: %v", err)
	}
	// Without the prefix the backup is not there: not found (not some
	// other failure), and not in the listing.
	if g := ferry(t, s3.Env(), "backup", "get", "b1", "--storage", s3.URL("shared")); g.code != 1 ||
		!strings.Contains(g.stderr, `backup "b1" in s3://shared`) || !strings.Contains(g.stderr, ": not found") {
		t.Errorf("backup get b1 without the prefix: exit %d, want 1 and not found\nstdout: %s\nstderr: %s", g.code, g.stdout, g.stderr)
	}
	if l := ferry(t, s3.Env(), "backup", "get", "--storage", s3.URL("shared")); l.code != 0 || strings.Contains(l.stdout, "b1") {
		t.Errorf("backup get without the prefix: exit %d, want 0 without b1\nstdout: %s\nstderr: %s", l.code, l.stdout, l.stderr)
	}
	bad := strings.Replace(s3.URL("shared"), "s3://shared?", "s3://shared/team-a?", 1)
	if g := ferry(t, s3.Env(), "backup", "get", "--storage", bad); g.code != 1 || !strings.Contains(g.stderr, "prefix=team-a/") {
		t.Errorf("s3 URL with a path: exit %d stderr %q", g.code, g.stderr)
	}
	// A group command with an unknown subcommand fails.
	if u := ferry(t, nil, "restore", "frobnicate", "x"); u.code != 1 || !strings.Contains(u.stderr, "unknown command") {
		t.Errorf("ferry restore frobnicate: exit %d stderr %q", u.code, u.stderr)
	}
}
