package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// TestRestoreNeverOverwritesRestoredData: a volume that already holds the
// done-marker of an earlier restore is not restored again (its
// application may have written since); a re-run of the same restore is
// a no-op; a .ferry symlink is never written through.
func TestRestoreNeverOverwritesRestoredData(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "db.txt"), []byte("backup"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := openTestRepo(t, loc, true)
	snap, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "b1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if _, err := r.Restore(ctx, snap.SnapshotID, dst, "r1", nil); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dst, "db.txt")
	if err := os.WriteFile(live, []byte("LIVE APP DATA"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same restore again (a re-run after a crash): nothing is written.
	rr, err := r.Restore(ctx, snap.SnapshotID, dst, "r1", nil)
	if err != nil || !rr.AlreadyRestored {
		t.Fatalf("re-run: %+v %v", rr, err)
	}
	// Another restore of the same backup: refused, the live data stays.
	if _, err := r.Restore(ctx, snap.SnapshotID, dst, "r2", nil); !errors.Is(err, ErrAlreadyRestored) {
		t.Fatalf("second restore: %v, want ErrAlreadyRestored", err)
	}
	if b, _ := os.ReadFile(live); string(b) != "LIVE APP DATA" {
		t.Errorf("live data overwritten: %q", b)
	}
	if _, err := os.Stat(MarkerPath(dst, "r2")); err == nil {
		t.Error("a refused restore wrote its done-marker")
	}
	// A .ferry symlink pointing elsewhere: refused, nothing written there.
	vol, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(vol, v1alpha1.DoneMarkerDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(ctx, snap.SnapshotID, vol, "r3", nil); err == nil {
		t.Fatal("restore through a .ferry symlink accepted")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the restore wrote outside the volume: %v", ents)
	}
}

// TestRefreshSeesNewSnapshots: a repository opened before a snapshot was
// taken (a long-running node agent) finds it after Refresh.
func TestRefreshSeesNewSnapshots(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	writer := openTestRepo(t, loc, true)
	agent := openTestRepo(t, loc, false)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := writer.Snapshot(ctx, src, "pvc/ns/late", map[string]string{TagBackup: "b2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Restore(ctx, snap.SnapshotID, t.TempDir(), "r1", nil); err != nil {
		t.Fatalf("restore after refresh: %v", err)
	}
}
