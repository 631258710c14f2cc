package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

func openTemp(t *testing.T) (*Location, string) {
	t.Helper()
	dir := t.TempDir()
	loc, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	return loc, dir
}

func commit(t *testing.T, loc *Location, name string) {
	t.Helper()
	b := v1alpha1.NewBackup(name)
	b.Status.Phase = v1alpha1.PhaseCompleted
	if err := loc.PutJSON(context.Background(), BackupDir(name)+BackupMarker, b); err != nil {
		t.Fatal(err)
	}
}

// A name that is not a backup name must never reach outside its folder:
// `backup delete .` once deleted every backup.
func TestNamesCannotEscape(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTemp(t)
	commit(t, loc, "keep1")
	commit(t, loc, "keep2")
	for _, bad := range []string{"", ".", "..", "../restores", "a/b", "UPPER", strings.Repeat("a", MaxBackupNameLength+1)} {
		if err := loc.DeleteBackup(ctx, bad); err == nil {
			t.Errorf("DeleteBackup(%q) accepted", bad)
		}
		if _, err := loc.GetBackup(ctx, bad); err == nil {
			t.Errorf("GetBackup(%q) accepted", bad)
		}
		if _, err := loc.GetRestore(ctx, bad); err == nil {
			t.Errorf("GetRestore(%q) accepted", bad)
		}
	}
	list, err := loc.ListBackups(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("after the bad deletes: %d backups, %v; want keep1 and keep2", len(list), err)
	}
}

func TestListShowsDamagedMarker(t *testing.T) {
	ctx := context.Background()
	loc, dir := openTemp(t)
	commit(t, loc, "good")
	commit(t, loc, "bad")
	if err := os.WriteFile(filepath.Join(dir, "backups", "bad", BackupMarker), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := loc.ListBackups(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListBackups = %d, %v; want both listed", len(list), err)
	}
	for _, e := range list {
		if e.Name == "bad" && (e.Backup.Status.Phase != v1alpha1.PhaseFailed || !strings.Contains(e.Backup.Status.FailureReason, "corrupt")) {
			t.Errorf("damaged marker listed as %s %q", e.Backup.Status.Phase, e.Backup.Status.FailureReason)
		}
	}
	if _, err := loc.GetBackup(ctx, "nosuch"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing backup: %v", err)
	}
}

func TestFileURLMustBeAbsolute(t *testing.T) {
	for _, u := range []string{"file://relative/dir", "file:relative", "notaurl"} {
		if _, err := Open(context.Background(), u); err == nil {
			t.Errorf("Open(%q) accepted", u)
		}
	}
}

func TestRedact(t *testing.T) {
	got := Redact("s3://user:pw@bucket?endpoint=http://x&secret_key=abc&region=r")
	if strings.Contains(got, "pw") || strings.Contains(got, "abc") || !strings.Contains(got, "region=r") {
		t.Errorf("Redact = %q", got)
	}
}

// TestDeleteRestore removes one restore's records and nothing else.
func TestDeleteRestore(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTemp(t)
	for _, n := range []string{"r1", "r2"} {
		r := v1alpha1.NewRestore(n)
		if err := loc.PutJSON(ctx, RestoreDir(n)+RestoreMarker, r); err != nil {
			t.Fatal(err)
		}
		if err := loc.PutJSON(ctx, RestoreResultsKey(n), map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, loc, "r1") // a backup of the same name stays
	if err := loc.DeleteRestore(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := loc.GetRestore(ctx, "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("r1 after delete: %v", err)
	}
	if ok, _ := loc.Exists(ctx, RestoreResultsKey("r1")); ok {
		t.Error("r1's results survived")
	}
	if _, err := loc.GetRestore(ctx, "r2"); err != nil {
		t.Errorf("r2: %v", err)
	}
	if _, err := loc.GetBackup(ctx, "r1"); err != nil {
		t.Errorf("backup r1: %v", err)
	}
	if err := loc.DeleteRestore(ctx, "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if err := loc.DeleteRestore(ctx, ".."); err == nil {
		t.Error("DeleteRestore(..) accepted")
	}
}
