package volumes

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kopia/kopia/repo/maintenance"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

const testPassword = "correct horse battery staple"

func openTestStore(t *testing.T) (*store.Location, string) {
	t.Helper()
	dir := t.TempDir()
	loc, err := store.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	return loc, dir
}

func openTestRepo(t *testing.T, loc *store.Location, create bool) *Repository {
	t.Helper()
	r, err := Open(context.Background(), loc, testPassword, OpenOptions{Create: create})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func TestRoundTripAndEncryption(t *testing.T) {
	ctx := context.Background()
	loc, storeDir := openTestStore(t)
	src := t.TempDir()
	marker := "FERRY-PLAINTEXT-MARKER-7d1c2e"
	nfiles, err := volumetest.MakeTree(src, volumetest.TreeOptions{BigFile: 3 << 20, SmallFiles: 300, Marker: marker, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A marker folder at the root (left by an earlier restore) is not data.
	if err := WriteMarker(src, "old-restore", "x"); err != nil {
		t.Fatal(err)
	}
	r := openTestRepo(t, loc, true)
	var progressed atomic.Int64
	res, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "b1"}, func(b, f int64) { progressed.Store(b) })
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID == "" || res.Files != int64(nfiles) || res.ParentSnapshotID != "" || res.UploadedBytes == 0 {
		t.Fatalf("result %+v", res)
	}
	if progressed.Load() == 0 {
		t.Errorf("no progress reported")
	}
	dst := t.TempDir()
	r.SparseFiles = true
	rr, err := r.Restore(ctx, res.SnapshotID, dst, "restore-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Files != res.Files || rr.Bytes != res.Bytes {
		t.Errorf("restored %+v, backed up %+v", rr, res)
	}
	// The restore's record: what it wrote, and what the snapshot holds.
	if c, s := rr.Content, rr.Snapshot; c == nil || s == nil || c.Files != res.Files || c.Bytes != res.Bytes || s.Files != res.Files || s.Bytes != res.Bytes ||
		s.ID != res.SnapshotID || s.RootObject == "" || !strings.HasPrefix(c.Digest, "sha256:") {
		t.Errorf("restore record: content %+v, snapshot %+v; backed up %+v", c, s, res)
	}
	diffs, err := volumetest.Compare(src, dst, v1alpha1.DoneMarkerDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("restored tree differs:\n%s", strings.Join(diffs, "\n"))
	}
	if _, err := os.Stat(MarkerPath(dst, "restore-1")); err != nil {
		t.Errorf("done-marker: %v", err)
	}
	if _, err := os.Stat(MarkerPath(dst, "old-restore")); err == nil {
		t.Errorf("the source's own marker folder was backed up")
	}
	entries, _ := os.ReadDir(filepath.Join(dst, v1alpha1.DoneMarkerDir))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != contentList+",restore-1" {
		t.Errorf("marker folder holds %v, want only the marker and the list of restored entries (staging left behind?)", names)
	}
	// The restore's record of what it wrote is what a check finds.
	if c, err := CheckContent(ctx, dst, nil); err != nil || len(c.Changed) != 0 || c.NoList {
		t.Errorf("check of the restored volume: %+v, %v; want nothing changed", c, err)
	}
	if blocks, err := volumetest.Blocks(filepath.Join(dst, "sparse.img")); err != nil || blocks*512 > 1<<20 {
		t.Errorf("sparse.img uses %d blocks (%v): holes were not kept", blocks, err)
	}

	// Encryption: no byte of the store holds the marker or a file name.
	err = filepath.WalkDir(storeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, needle := range []string{marker, "deep.txt", "FERRY-PLAINTEXT"} {
			if bytes.Contains(data, []byte(needle)) {
				t.Errorf("%s holds plaintext %q", p, needle)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	vr, err := r.Verify(ctx, res.SnapshotID)
	if err != nil || len(vr.Errors) > 0 || vr.Files < res.Files {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

func TestIncrementalAndDelete(t *testing.T) {
	ctx := context.Background()
	loc, storeDir := openTestStore(t)
	src := t.TempDir()
	// 20 files of 1 MiB, already in the repository from another volume;
	// the first snapshot adds a 15 MiB file of its own, which is gone from
	// the second, where 1 % of the bytes changes as well. The first
	// snapshot thus writes one pack blob holding only data that no other
	// snapshot uses (and too big for kopia to merge with others): garbage
	// collection must remove it once that snapshot is deleted.
	for i := 0; i < 20; i++ {
		writeMiBFile(t, src, i)
	}
	r := openTestRepo(t, loc, true)
	if _, err := r.Snapshot(ctx, src, "pvc/ns/other", map[string]string{TagBackup: "b0"}, nil); err != nil {
		t.Fatal(err)
	}
	before := dataPacks(t, storeDir)
	old := filepath.Join(src, "old")
	data := make([]byte, 15<<20)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(data)
	if err := os.WriteFile(old, data, 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := r.Snapshot(ctx, src, "pvc/ns/inc", map[string]string{TagBackup: "b1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	firstPacks := newPacks(before, dataPacks(t, storeDir))
	if firstPacks.bytes() < 15<<20 {
		t.Fatalf("the first snapshot wrote packs %v, want 15 MiB of its own", firstPacks)
	}
	// Remove the big file; rewrite fc's first 200 KiB (1 % of 20 MiB).
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(src, "fc")
	data, _ = os.ReadFile(p)
	for j := 0; j < 200<<10; j++ {
		data[j] = ^data[j]
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Another process (another node) takes the second backup.
	r2 := openTestRepo(t, loc, false)
	second, err := r2.Snapshot(ctx, src, "pvc/ns/inc", map[string]string{TagBackup: "b2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Files != 21 || second.Files != 20 || second.Bytes != 20<<20 || second.CachedFiles != 19 {
		t.Errorf("second snapshot counts %d files, %d bytes, %d cached; first %d files", second.Files, second.Bytes, second.CachedFiles, first.Files)
	}
	if second.ParentSnapshotID != first.SnapshotID {
		t.Errorf("parent %q, want the first snapshot %q", second.ParentSnapshotID, first.SnapshotID)
	}
	ratio := float64(second.UploadedBytes) / float64(second.Bytes)
	t.Logf("second upload %d bytes: %.2f %% of the volume's %d bytes (%d of %d files unchanged)", second.UploadedBytes, 100*ratio, second.Bytes, second.CachedFiles, second.Files)
	if ratio > 0.10 {
		t.Errorf("second backup uploaded %.1f %% of the volume", 100*ratio)
	}

	if err := r2.DeleteSnapshots(ctx, []string{first.SnapshotID}); err != nil {
		t.Fatal(err)
	}
	collectGarbage(t, r2, storeDir, firstPacks)
	r3 := openTestRepo(t, loc, false)
	if _, err := r3.Restore(ctx, first.SnapshotID, t.TempDir(), "x", nil); !errors.Is(err, ErrSnapshotNotFound) {
		t.Errorf("restoring the deleted snapshot: %v", err)
	}
	dst := t.TempDir()
	if _, err := r3.Restore(ctx, second.SnapshotID, dst, "r2", nil); err != nil {
		t.Fatal(err)
	}
	if diffs, _ := volumetest.Compare(src, dst, v1alpha1.DoneMarkerDir); len(diffs) > 0 {
		t.Fatalf("second backup after deleting the first: %v", diffs)
	}
	if vr, err := r3.Verify(ctx, second.SnapshotID); err != nil || len(vr.Errors) > 0 {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

// collectGarbage runs full maintenance with no safety margin (test only)
// until the packs gone, which only a deleted snapshot used, are removed
// (at most 15 s): kopia forgets deleted contents only once its deletion
// watermark, kept in whole seconds, has passed the second they were found
// unused in, and deletes their pack in that cycle. It fails the test
// unless they are gone and the data packs shrank by at least their size.
func collectGarbage(t *testing.T, r *Repository, storeDir string, gone packSet) {
	t.Helper()
	before := dataPacks(t, storeDir)
	after, left := before, gone
	deadline := time.Now().Add(15 * time.Second)
	cycles := 0
	for ; len(left) > 0 && time.Now().Before(deadline); cycles++ {
		if cycles > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if err := r.maintain(context.Background(), maintenance.ModeFull, maintenance.SafetyNone); err != nil {
			t.Fatal(err)
		}
		after, left = dataPacks(t, storeDir), packSet{}
		for name, size := range gone {
			if _, ok := after[name]; ok {
				left[name] = size
			}
		}
	}
	t.Logf("after %d maintenance cycles: data packs %d bytes, were %d; %d of the deleted snapshot's %d packs left", cycles, after.bytes(), before.bytes(), len(left), len(gone))
	if len(left) > 0 {
		t.Errorf("packs %v, written only for the deleted snapshot, are still in the store", left)
	}
	// Packs removed, by size: maintenance may also rewrite the live
	// contents of short packs into new ones, which a drop in the total
	// would miss (a flake seen once in a few runs).
	var freed int64
	for name, size := range before {
		if _, ok := after[name]; !ok {
			freed += size
		}
	}
	if freed < gone.bytes() {
		t.Errorf("garbage collection removed %d bytes of data packs; the deleted snapshot's own packs hold %d", freed, gone.bytes())
	}
}

// writeMiBFile writes file "f<a+i>" of 1 MiB in dir, its bytes a function
// of i, and returns its path.
func writeMiBFile(t *testing.T, dir string, i int) string {
	t.Helper()
	data := bytes.Repeat([]byte{byte(i)}, 1<<20)
	for j := range data {
		data[j] ^= byte(j * 7919 >> 3)
	}
	p := filepath.Join(dir, "f"+string(rune('a'+i)))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// packSet maps pack blob names to their sizes.
type packSet map[string]int64

func (s packSet) bytes() int64 {
	var n int64
	for _, size := range s {
		n += size
	}
	return n
}

// dataPacks returns the data pack blobs (kopia names them "p...") of the
// volume repository in the file store at storeDir.
func dataPacks(t *testing.T, storeDir string) packSet {
	t.Helper()
	out := packSet{}
	err := filepath.WalkDir(filepath.Join(storeDir, RepositoryPrefix), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "p") {
			return err
		}
		st, err := d.Info()
		if err == nil {
			out[d.Name()] = st.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newPacks returns the packs of after that are not in before.
func newPacks(before, after packSet) packSet {
	out := packSet{}
	for name, size := range after {
		if _, ok := before[name]; !ok {
			out[name] = size
		}
	}
	return out
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	loc, storeDir := openTestStore(t)
	if _, err := Open(ctx, loc, "", OpenOptions{Create: true}); !errors.Is(err, ErrNoPassword) {
		t.Errorf("no password: %v", err)
	}
	if _, err := Open(ctx, loc, testPassword, OpenOptions{}); !errors.Is(err, ErrNoRepository) {
		t.Errorf("no repository: %v", err)
	}
	r := openTestRepo(t, loc, true)
	src := t.TempDir()
	if _, err := volumetest.MakeTree(src, volumetest.TreeOptions{BigFile: 2 << 20, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Snapshot(ctx, src, "pvc/ns/bad", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	_, err = Open(ctx, loc, "not the password", OpenOptions{})
	if !errors.Is(err, ErrWrongPassword) || strings.Contains(err.Error(), "not the password") {
		t.Errorf("wrong password: %v", err)
	}

	missing := filepath.Join(t.TempDir(), "gone")
	if _, err := r.Snapshot(ctx, missing, "pvc/ns/gone", nil, nil); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing volume dir: %v", err)
	}

	// Corrupt the biggest pack blob (data packs start with "p").
	var pack string
	var size int64
	_ = filepath.WalkDir(filepath.Join(storeDir, "volumes"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "p") {
			if st, _ := d.Info(); st.Size() > size {
				pack, size = p, st.Size()
			}
		}
		return nil
	})
	if pack == "" {
		t.Fatal("no pack blob found")
	}
	data, _ := os.ReadFile(pack)
	for i := 100; i < len(data); i += 4096 {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(pack, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := openTestRepo(t, loc, false)
	dst := t.TempDir()
	_, err = r2.Restore(ctx, res.SnapshotID, dst, "r", nil)
	if err == nil {
		t.Fatal("restore of a corrupted pack succeeded")
	}
	t.Logf("corrupted pack: %v", err)
	if !regexp.MustCompile(`(file "[^"]+"|snapshot file for [^: ]+): .*invalid checksum at p[0-9a-f]+`).MatchString(err.Error()) {
		t.Errorf("error does not name the volume's file and the pack blob: %v", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 1 || entries[0].Name() != v1alpha1.DoneMarkerDir {
		t.Errorf("a failed restore left data in the volume: %v", entries)
	}
	if _, err := os.Stat(MarkerPath(dst, "r")); err == nil {
		t.Errorf("a failed restore wrote its done-marker")
	}
	vr, err := r2.Verify(ctx, res.SnapshotID)
	if err != nil || len(vr.Errors) == 0 {
		t.Errorf("verify of a corrupted pack: %+v %v", vr, err)
	} else if t.Logf("verify: %v", vr.Errors); !regexp.MustCompile(`^[^ :]+: .*invalid checksum at p[0-9a-f]+`).MatchString(vr.Errors[0]) {
		t.Errorf("verify does not name the file and the pack blob: %q", vr.Errors[0])
	}
}
