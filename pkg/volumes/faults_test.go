package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/maintenance"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

// repoFiles returns the names of the files under the repository prefix
// of a file:// store whose names start with one of prefixes.
func repoFiles(t *testing.T, storeDir string, prefixes ...string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(storeDir, RepositoryPrefix))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		for _, p := range prefixes {
			if strings.HasPrefix(e.Name(), p) && !strings.HasSuffix(e.Name(), ".tmp") {
				out[e.Name()] = true
			}
		}
	}
	return out
}

func added(before, after map[string]bool) []string {
	var out []string
	for n := range after {
		if !before[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// flipBytes damages the file at p: it inverts 16 bytes at offset off
// (negative: from the end).
func flipBytes(t *testing.T, p string, off int) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += len(data)
	}
	for i := off; i < off+16 && i < len(data); i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshotTree makes a tree with seed and snapshots it, in its own session.
func snapshotTree(t *testing.T, loc *store.Location, seed uint64, backup string) (string, string) {
	t.Helper()
	src := t.TempDir()
	if _, err := volumetest.MakeTree(src, volumetest.TreeOptions{BigFile: 1 << 20, SmallFiles: 20, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), loc, testPassword, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	res, err := r.Snapshot(context.Background(), src, "pvc/ns/"+backup, map[string]string{TagBackup: backup}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src, res.SnapshotID
}

// restoreAndCompare restores snapshot id and compares it with src.
func restoreAndCompare(t *testing.T, r *Repository, id, src string) error {
	t.Helper()
	dst := t.TempDir()
	if _, err := r.Restore(context.Background(), id, dst, "r", nil); err != nil {
		return err
	}
	diffs, err := volumetest.Compare(src, dst, v1alpha1.DoneMarkerDir)
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		return fmt.Errorf("restored tree differs:\n%s", strings.Join(diffs, "\n"))
	}
	return nil
}

// TestDamagedIndexBlob damages the index blob that the second of two
// backups wrote: the repository still opens, the index of that backup's
// packs is recovered from the packs, and both snapshots restore. Then the
// second backup's data packs are damaged as well: the first snapshot
// still restores, and Verify fails the second one.
func TestDamagedIndexBlob(t *testing.T) {
	ctx := context.Background()
	loc, dir := openTestStore(t)
	src1, id1 := snapshotTree(t, loc, 1, "b1")
	indexes, packs := repoFiles(t, dir, "x", "n"), repoFiles(t, dir, "p", "q")
	src2, id2 := snapshotTree(t, loc, 2, "b2")
	newIndexes := added(indexes, repoFiles(t, dir, "xn", "n"))
	if len(newIndexes) == 0 {
		t.Fatalf("the second backup wrote no index blob")
	}
	bad := newIndexes[0]
	flipBytes(t, filepath.Join(dir, RepositoryPrefix, bad), 40)

	r, err := Open(ctx, loc, testPassword, OpenOptions{})
	if err != nil {
		t.Fatalf("open with index blob %s damaged: %v", bad, err)
	}
	defer r.Close(ctx)
	checkDamage(t, r, RepositoryPrefix+bad, false)
	for id, src := range map[string]string{id1: src1, id2: src2} {
		if err := restoreAndCompare(t, r, id, src); err != nil {
			t.Errorf("snapshot %s: %v", id, err)
		}
	}
	r.Close(ctx)
	// Opened again, the damaged blob is still left out, and the recovered
	// index serves.
	ra, err := Open(ctx, loc, testPassword, OpenOptions{})
	if err != nil {
		t.Fatalf("open after the recovery: %v", err)
	}
	if d := ra.Damage(); d == nil || len(d.Indexes) != 1 || d.RecoveredPacks != 0 {
		t.Errorf("damage after the recovery: %+v", d)
	}
	if err := restoreAndCompare(t, ra, id2, src2); err != nil {
		t.Errorf("snapshot %s after the recovery: %v", id2, err)
	}
	ra.Close(ctx)

	// Now the second backup's data is damaged too (each pack's end, where
	// its own index is): its packs cannot be recovered.
	loc2, err := store.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc2.Close()
	dataDir := t.TempDir() // a copy of the store, damaged once more
	if err := os.CopyFS(dataDir, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	for _, p := range added(packs, repoFiles(t, dataDir, "p")) {
		flipBytes(t, filepath.Join(dataDir, RepositoryPrefix, p), -8)
	}
	for _, n := range added(indexes, repoFiles(t, dataDir, "x", "n")) {
		if n != bad && strings.HasPrefix(n, "xn") {
			// the recovered index: gone, as if it had not been written
			_ = os.Remove(filepath.Join(dataDir, RepositoryPrefix, n))
		}
	}
	loc3, err := store.Open(ctx, "file://"+dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc3.Close()
	r3, err := Open(ctx, loc3, testPassword, OpenOptions{})
	if err != nil {
		t.Fatalf("open with index blob %s and the packs it described damaged: %v", bad, err)
	}
	defer r3.Close(ctx)
	checkDamage(t, r3, RepositoryPrefix+bad, true)
	if err := restoreAndCompare(t, r3, id1, src1); err != nil {
		t.Errorf("snapshot %s (undamaged): %v", id1, err)
	}
	v1, err := r3.Verify(ctx, id1)
	if err != nil || len(v1.Errors) > 0 {
		t.Errorf("verify of the undamaged snapshot: %+v %v", v1, err)
	}
	v2, err := r3.Verify(ctx, id2)
	if err == nil && len(v2.Errors) == 0 {
		t.Errorf("verify of the damaged snapshot %s found nothing: %+v", id2, v2)
	}
	if err := r3.Maintain(ctx); err == nil || !strings.Contains(err.Error(), "have no readable index") {
		t.Errorf("maintenance with unrecovered packs: %v", err)
	}
}

// checkDamage asserts what Open reports about the damaged index blob.
func checkDamage(t *testing.T, r *Repository, blob string, unrecovered bool) {
	t.Helper()
	d := r.Damage()
	if d == nil || len(d.Indexes) != 1 || d.Indexes[0].Blob != blob || d.Indexes[0].Reason == "" {
		t.Fatalf("damage %+v, want index blob %s", d, blob)
	}
	if !unrecovered && (d.RecoveredPacks == 0 || d.RecoveredContents == 0 || len(d.Unrecovered) > 0) {
		t.Errorf("damage %+v: want packs recovered, none unrecovered", d)
	}
	if unrecovered && len(d.Unrecovered) == 0 {
		t.Errorf("damage %+v: want unrecovered packs", d)
	}
}

// TestConcurrentCreate opens an empty location with Create from two
// "processes" at once (separate store handles and kopia connections),
// many times: each time one repository results, and both snapshots are
// in it and restore.
func TestConcurrentCreate(t *testing.T) {
	for round := range 8 {
		dir := t.TempDir()
		testConcurrentCreate(t, fmt.Sprintf("round %d", round), func() (*store.Location, error) {
			return store.Open(context.Background(), "file://"+dir)
		})
	}
}

func testConcurrentCreate(t *testing.T, round string, openStore func() (*store.Location, error)) {
	ctx := context.Background()
	srcs := [2]string{t.TempDir(), t.TempDir()}
	var ids [2]string
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		if _, err := volumetest.MakeTree(srcs[i], volumetest.TreeOptions{SmallFiles: 5, Seed: uint64(i + 10)}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = func() error {
				loc, err := openStore()
				if err != nil {
					return err
				}
				defer loc.Close()
				r, err := Open(ctx, loc, testPassword, OpenOptions{Create: true})
				if err != nil {
					return err
				}
				defer r.Close(ctx)
				res, err := r.Snapshot(ctx, srcs[i], fmt.Sprintf("pvc/ns/v%d", i), map[string]string{TagBackup: fmt.Sprintf("b%d", i)}, nil)
				if err != nil {
					return err
				}
				ids[i] = res.SnapshotID
				return nil
			}()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: backup %d: %v", round, i, err)
		}
	}
	loc, err := openStore()
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	r, err := Open(ctx, loc, testPassword, OpenOptions{})
	if err != nil {
		t.Fatalf("%s: %v", round, err)
	}
	defer r.Close(ctx)
	all, err := r.ListSnapshots(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("%s: snapshots %v (%v), want both", round, all, err)
	}
	for i, id := range ids {
		if err := restoreAndCompare(t, r, id, srcs[i]); err != nil {
			t.Fatalf("%s: snapshot %d: %v", round, i, err)
		}
	}
}

// TestConcurrentMaintenance runs full maintenance from two "processes"
// at once: never two at the same time, and the repository stays whole.
func TestConcurrentMaintenance(t *testing.T) {
	testConcurrentMaintenance(t, func(t *testing.T) (func() (*store.Location, error), *store.Location) {
		loc, dir := openTestStore(t)
		return func() (*store.Location, error) { return store.Open(context.Background(), "file://"+dir) }, loc
	})
}

func testConcurrentMaintenance(t *testing.T, setup func(t *testing.T) (func() (*store.Location, error), *store.Location)) {
	ctx := context.Background()
	openStore, loc := setup(t)
	src, id := snapshotTree(t, loc, 3, "b3")
	var active, most, runs atomic.Int32
	orig := runMaintenance
	t.Cleanup(func() { runMaintenance = orig })
	runMaintenance = func(ctx context.Context, w repo.DirectRepositoryWriter, mode maintenance.Mode, safety maintenance.SafetyParameters) error {
		n := active.Add(1)
		defer active.Add(-1)
		runs.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(300 * time.Millisecond)
		return orig(ctx, w, mode, safety)
	}
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = func() error {
					l, err := openStore()
					if err != nil {
						return err
					}
					defer l.Close()
					r, err := Open(ctx, l, testPassword, OpenOptions{})
					if err != nil {
						return err
					}
					defer r.Close(ctx)
					return r.maintain(ctx, maintenance.ModeFull, maintenance.SafetyNone)
				}()
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: maintenance %d: %v", round, i, err)
			}
		}
	}
	if most.Load() > 1 {
		t.Errorf("%d maintenance runs at the same time", most.Load())
	}
	if runs.Load() < 3 {
		t.Errorf("%d maintenance runs in 3 rounds: some round ran none", runs.Load())
	}
	r := openTestRepo(t, loc, false)
	if err := restoreAndCompare(t, r, id, src); err != nil {
		t.Error(err)
	}
}
