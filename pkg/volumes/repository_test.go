package volumes

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kopia/kopia/repo/maintenance"

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
	diffs, err := volumetest.Compare(src, dst, MarkerDir)
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
	entries, _ := os.ReadDir(filepath.Join(dst, MarkerDir))
	if len(entries) != 1 {
		t.Errorf("marker folder holds %d entries, want only the marker (staging left behind?)", len(entries))
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
	// 20 files of 1 MiB; then 1 % of the bytes changes.
	for i := 0; i < 20; i++ {
		data := bytes.Repeat([]byte{byte(i)}, 1<<20)
		for j := range data {
			data[j] ^= byte(j * 7919 >> 3)
		}
		if err := os.WriteFile(filepath.Join(src, "f"+string(rune('a'+i))), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := openTestRepo(t, loc, true)
	first, err := r.Snapshot(ctx, src, "pvc/ns/inc", map[string]string{TagBackup: "b1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite one file's first 200 KiB (about 1 % of 20 MiB).
	p := filepath.Join(src, "fc")
	data, _ := os.ReadFile(p)
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
	if second.Files != first.Files || second.Bytes != first.Bytes || second.CachedFiles != 19 {
		t.Errorf("second snapshot counts %d files, %d bytes, %d cached; first %d files, %d bytes", second.Files, second.Bytes, second.CachedFiles, first.Files, first.Bytes)
	}
	if second.ParentSnapshotID != first.SnapshotID {
		t.Errorf("parent %q, want the first snapshot %q", second.ParentSnapshotID, first.SnapshotID)
	}
	ratio := float64(second.UploadedBytes) / float64(first.UploadedBytes)
	t.Logf("first upload %d bytes, second %d bytes: %.2f %% (%d of %d files unchanged)", first.UploadedBytes, second.UploadedBytes, 100*ratio, second.CachedFiles, second.Files)
	if ratio > 0.10 {
		t.Errorf("second backup uploaded %.1f %% of the first", 100*ratio)
	}

	sizeBefore := dirSize(t, storeDir)
	if err := r2.DeleteSnapshots(ctx, []string{first.SnapshotID}); err != nil {
		t.Fatal(err)
	}
	// Garbage-collect with no safety margin (test only) so that what only
	// the first snapshot used is really removed.
	for range 2 {
		if err := r2.maintain(ctx, maintenance.ModeFull, maintenance.SafetyNone); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("store %d bytes before deleting the first snapshot, %d after", sizeBefore, dirSize(t, storeDir))
	r3 := openTestRepo(t, loc, false)
	if _, err := r3.Restore(ctx, first.SnapshotID, t.TempDir(), "x", nil); !errors.Is(err, ErrSnapshotNotFound) {
		t.Errorf("restoring the deleted snapshot: %v", err)
	}
	dst := t.TempDir()
	if _, err := r3.Restore(ctx, second.SnapshotID, dst, "r2", nil); err != nil {
		t.Fatal(err)
	}
	if diffs, _ := volumetest.Compare(src, dst, MarkerDir); len(diffs) > 0 {
		t.Fatalf("second backup after deleting the first: %v", diffs)
	}
	if vr, err := r3.Verify(ctx, second.SnapshotID); err != nil || len(vr.Errors) > 0 {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, err := d.Info(); err == nil {
				n += st.Size()
			}
		}
		return nil
	})
	return n
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
	if entries, _ := os.ReadDir(dst); len(entries) != 1 || entries[0].Name() != MarkerDir {
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
