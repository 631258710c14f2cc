package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

// TestRestoreClaimByMarker: what a claim holds is read from its
// done-markers (issue 28). A claim with the snapshot's marker, whichever
// restore wrote it, is left alone; an empty claim (created by a run that
// was killed before it got there) is filled; a claim that holds another
// snapshot's marker is written, and names only the new one after; with
// Keep, a claim without the marker is left alone (ErrKeptExisting).
func TestRestoreClaimByMarker(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src := t.TempDir()
	write := func(dir, name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(dir, name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	write(src, "db.txt", "v1")
	s1, err := r.Snapshot(ctx, src, "pvc/ns/data", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(src, "db.txt", "v2")
	s2, err := r.Snapshot(ctx, src, "pvc/ns/data", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	// An empty claim: filled, with this restore's marker.
	claim := t.TempDir()
	res, err := r.RestoreClaim(ctx, s1.SnapshotID, claim, "killed-run", ClaimPolicy{}, nil)
	if err != nil || res.AlreadyRestored || read(claim, "db.txt") != "v1" {
		t.Fatalf("empty claim: %+v %v, db.txt %q", res, err, read(claim, "db.txt"))
	}
	// Another run of another name, same snapshot: the marker says the data
	// is there; the application's writes since are kept.
	write(claim, "db.txt", "v1 + app writes")
	res, err = r.RestoreClaim(ctx, s1.SnapshotID, claim, "rerun", ClaimPolicy{}, nil)
	if err != nil || !res.AlreadyRestored || res.MarkedBy != "killed-run" || read(claim, "db.txt") != "v1 + app writes" {
		t.Fatalf("claim that holds the snapshot: %+v %v, db.txt %q", res, err, read(claim, "db.txt"))
	}
	// Kept with Keep even though it lacks s2's marker.
	if _, err := r.RestoreClaim(ctx, s2.SnapshotID, claim, "keep", ClaimPolicy{Keep: true}, nil); !errors.Is(err, ErrKeptExisting) {
		t.Fatalf("Keep on a claim without the snapshot: %v, want ErrKeptExisting", err)
	}
	if read(claim, "db.txt") != "v1 + app writes" {
		t.Fatalf("Keep wrote the claim: %q", read(claim, "db.txt"))
	}
	// A later snapshot: written, and the claim names only it.
	res, err = r.RestoreClaim(ctx, s2.SnapshotID, claim, "second", ClaimPolicy{}, nil)
	if err != nil || res.AlreadyRestored || read(claim, "db.txt") != "v2" || len(res.Replaced) != 1 || res.Replaced[0] != s1.SnapshotID {
		t.Fatalf("claim with another snapshot's marker: %+v %v, db.txt %q", res, err, read(claim, "db.txt"))
	}
	uids, err := markerState(claim)
	if err != nil || len(uids) != 1 || uids[0] != "second" {
		t.Errorf("markers after the second snapshot: %v %v, want [second]", uids, err)
	}
	// A claim that holds data but no marker (made ahead of the migration):
	// written, entries of the same name replaced, others kept.
	pre := t.TempDir()
	write(pre, "db.txt", "old")
	write(pre, "other.txt", "mine")
	if _, err := r.RestoreClaim(ctx, s2.SnapshotID, pre, "third", ClaimPolicy{}, nil); err != nil || read(pre, "db.txt") != "v2" || read(pre, "other.txt") != "mine" {
		t.Fatalf("claim with data and no marker: %v, db.txt %q other.txt %q", err, read(pre, "db.txt"), read(pre, "other.txt"))
	}
}

// TestRestoreClaimConcurrent: two restores of one claim at once (a killed
// run's helper pod still at work, and the rerun's) no longer remove each
// other's staging folders: one writes, the other waits for its lock and
// then finds the snapshot's done-marker.
func TestRestoreClaimConcurrent(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src := t.TempDir()
	if _, err := volumetest.MakeTree(src, volumetest.TreeOptions{BigFile: 32 << 20, SmallFiles: 200, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, src, "pvc/ns/data", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	claim := t.TempDir()
	type out struct {
		res *RestoreResult
		err error
	}
	ch := make(chan out, 2)
	for _, uid := range []string{"killed-run", "rerun"} {
		go func() {
			res, err := r.RestoreClaim(ctx, snap.SnapshotID, claim, uid, ClaimPolicy{}, nil)
			ch <- out{res, err}
		}()
	}
	already := 0
	for range 2 {
		o := <-ch
		if o.err != nil {
			t.Fatalf("concurrent restore of one claim: %v", o.err)
		}
		if o.res.AlreadyRestored {
			already++
		}
	}
	if already != 1 {
		t.Errorf("%d of 2 concurrent restores found the data there, want 1", already)
	}
	if diffs, err := volumetest.Compare(src, claim, v1alpha1.DoneMarkerDir); err != nil || len(diffs) > 0 {
		t.Errorf("claim after two concurrent restores: %v %v", diffs, err)
	}
}
