package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeTree writes files (relative path -> content; "->x" makes a symlink
// to x) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads dir back as writeTree's map, leaving out the marker
// folder.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".ferry" && fi.IsDir():
			return filepath.SkipDir
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "->" + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestClaimSyncWritesOnlyTheDelta: a claim that holds an earlier snapshot
// of the same volume (a staged migration's last stage) gets only what
// changed: unchanged files are not rewritten, changed and new ones are,
// what the source removed is removed, a file that became a directory (and
// the reverse) and a changed symlink are replaced; the claim ends equal
// to the source and marked with the new snapshot only.
func TestClaimSyncWritesOnlyTheDelta(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src, dst := t.TempDir(), t.TempDir()
	writeTree(t, src, map[string]string{"keep.db": "unchanged data", "wal/0001": "first", "gone.txt": "removed later",
		"becomes-dir": "a file", "dir-becomes-file/x": "x", "link": "->keep.db", "deep/a/b/c.txt": "deep"})
	s1, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "s1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RestoreClaim(ctx, s1.SnapshotID, dst, "r1", ClaimPolicy{}, nil); err != nil {
		t.Fatal(err)
	}
	keptInode := inode(t, filepath.Join(dst, "keep.db"))
	deepInode := inode(t, filepath.Join(dst, "deep/a/b/c.txt"))

	for _, p := range []string{"gone.txt", "becomes-dir", "dir-becomes-file", "link"} {
		if err := os.RemoveAll(filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, src, map[string]string{"wal/0001": "first, then more", "wal/0002": "new", "becomes-dir/f": "inside",
		"dir-becomes-file": "now a file", "link": "->wal/0002"})
	s2, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "s2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.RestoreClaim(ctx, s2.SnapshotID, dst, "r2", ClaimPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Delta == nil {
		t.Fatalf("no delta: %+v", res)
	}
	// Written: wal/0001, wal/0002, becomes-dir/f, dir-becomes-file.
	if res.Delta.WrittenFiles != 4 || res.Delta.ScannedFiles != 6 {
		t.Errorf("delta %+v: want 4 of 6 files written", *res.Delta)
	}
	// Removed: gone.txt, the file becomes-dir and the directory
	// dir-becomes-file are replaced in place, so only gone.txt is extra.
	if res.Delta.Removed != 1 {
		t.Errorf("removed %d, want 1 (gone.txt)", res.Delta.Removed)
	}
	if got, want := readTree(t, dst), readTree(t, src); !equalMaps(got, want) {
		t.Errorf("claim after the sync:\n got %v\nwant %v", got, want)
	}
	if inode(t, filepath.Join(dst, "keep.db")) != keptInode || inode(t, filepath.Join(dst, "deep/a/b/c.txt")) != deepInode {
		t.Error("an unchanged file was rewritten")
	}
	uids, _ := markerState(dst)
	if len(uids) != 1 || uids[0] != "r2" || len(res.Replaced) != 1 || res.Replaced[0] != s1.SnapshotID {
		t.Errorf("markers %v, replaced %v: want only r2, replacing %s", uids, res.Replaced, s1.SnapshotID)
	}
	if c, err := CheckContent(ctx, dst, nil); err != nil || len(c.Changed) != 0 {
		t.Errorf("content check after the sync: %+v %v", c, err)
	}
}

// TestClaimSyncKilledMidway: a sync that stops after its first write
// leaves a claim marked with no snapshot (not the old one: it no longer
// holds it), and the next write finishes it.
func TestClaimSyncKilledMidway(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src, dst := t.TempDir(), t.TempDir()
	writeTree(t, src, map[string]string{"a": "1", "b": "2", "c": "3"})
	s1, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "s1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RestoreClaim(ctx, s1.SnapshotID, dst, "r1", ClaimPolicy{}, nil); err != nil {
		t.Fatal(err)
	}
	writeTree(t, src, map[string]string{"a": "1 changed", "b": "2 changed", "c": "3 changed"})
	s2, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "s2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kctx, kill := context.WithCancel(ctx)
	if _, err := r.RestoreClaim(kctx, s2.SnapshotID, dst, "r2", ClaimPolicy{}, func(int64, int64) { kill() }); err == nil {
		t.Fatal("a sync whose context ended after one file succeeded")
	}
	if uids, _ := markerState(dst); len(uids) != 0 {
		t.Errorf("a half-synced claim is marked %v", uids)
	}
	if !syncing(dst) {
		t.Error("no sync record in a half-synced claim")
	}
	// The content list went with the markers: the file the killed sync
	// wrote has the next snapshot's size and time, not the old list's hash.
	if _, err := os.Stat(filepath.Join(dst, ".ferry", contentList)); !os.IsNotExist(err) {
		t.Errorf("a half-synced claim keeps its content list: %v", err)
	}
	// A restore of the first snapshot again is a sync too (not a skip).
	res, err := r.RestoreClaim(ctx, s2.SnapshotID, dst, "r3", ClaimPolicy{}, nil)
	if err != nil || res.Delta == nil {
		t.Fatalf("second sync: %+v %v", res, err)
	}
	if got, want := readTree(t, dst), readTree(t, src); !equalMaps(got, want) {
		t.Errorf("claim after the finished sync:\n got %v\nwant %v", got, want)
	}
	if syncing(dst) {
		t.Error("the sync record outlived the sync")
	}
	if c, err := CheckContent(ctx, dst, nil); err != nil || len(c.Changed) != 0 || c.NoList {
		t.Errorf("content check after the finished sync: %+v %v", c, err)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSyncRecordReusesHashes: after a sync, the claim's content list
// takes the hashes of the files the sync kept from the list before (it
// does not read the whole claim again during a cutover), and hashes the
// files it wrote. A kept file whose bytes changed under an unchanged size
// and modification time shows it: the list still has its old hash.
func TestSyncRecordReusesHashes(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src, dst := t.TempDir(), t.TempDir()
	writeTree(t, src, map[string]string{"kept": "0123456789", "dir/changed": "v1"})
	s1, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "s1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RestoreClaim(ctx, s1.SnapshotID, dst, "r1", ClaimPolicy{}, nil); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dst, "kept")
	fi, _ := os.Stat(kept)
	if err := os.WriteFile(kept, []byte("9876543210"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(kept, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	writeTree(t, src, map[string]string{"dir/changed": "v2 longer"})
	s2, err := r.Snapshot(ctx, src, "pvc/ns/data", map[string]string{TagBackup: "s2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RestoreClaim(ctx, s2.SnapshotID, dst, "r2", ClaimPolicy{}, nil); err != nil {
		t.Fatal(err)
	}
	c, err := CheckContent(ctx, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Changed) != 1 || !strings.Contains(c.Changed[0], `"kept" (changed)`) {
		t.Errorf("changed %v: want only kept, whose old hash the list reused", c.Changed)
	}
}
