package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/fs/localfs"
	"github.com/kopia/kopia/repo"

	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

// TestSnapshotLiveChurn backs up a volume while files are created and
// deleted in it all the while and a big file keeps growing (issue 28: one
// vanished file failed the whole claim with "snapshot incomplete:
// canceled", naming no file). Every snapshot completes; the growing file
// is named as changing; the stable files restore byte for byte. Whether a
// file vanishes between kopia's listing and its open is up to the race
// (TestSnapshotVanishedOnOpen makes it happen every time).
func TestSnapshotLiveChurn(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src := t.TempDir()
	stable := filepath.Join(src, "stable")
	if _, err := volumetest.MakeTree(stable, volumetest.TreeOptions{SmallFiles: 300, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	churn := filepath.Join(src, "churn")
	if err := os.MkdirAll(churn, 0o755); err != nil {
		t.Fatal(err)
	}
	grow := filepath.Join(src, "grow")
	if err := os.WriteFile(grow, make([]byte, 32<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() { // creates a file, and deletes the one made 100 before it
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Microsecond):
				}
				p := filepath.Join(churn, fmt.Sprintf("w%d-%06d", w, i))
				_ = os.WriteFile(p, make([]byte, 4096), 0o644)
				if i >= 100 {
					_ = os.Remove(filepath.Join(churn, fmt.Sprintf("w%d-%06d", w, i-100)))
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // appends to grow every millisecond
		defer wg.Done()
		f, err := os.OpenFile(grow, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				_, _ = f.Write([]byte("more\n"))
			}
		}
	}()
	var vanished, changed bool
	var last *SnapshotResult
	for i := 0; i < 3; i++ {
		res, err := r.Snapshot(ctx, src, fmt.Sprintf("pvc/live/data-%d", i), nil, nil)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("snapshot %d of a live volume: %v", i, err)
		}
		t.Logf("snapshot %d: %d files, vanished %d %v, changed %d %v; warning %q", i, res.Files, res.Vanished, res.VanishedPaths, res.Changed, res.ChangedPaths, res.Warning())
		if res.Vanished > 0 {
			vanished = true
			if len(res.VanishedPaths) == 0 || len(res.VanishedPaths) > namedMax || !strings.HasPrefix(res.VanishedPaths[0], "churn/w") {
				t.Errorf("vanished paths %v, want up to %d paths under churn/", res.VanishedPaths, namedMax)
			}
			if !strings.Contains(res.Warning(), "vanished while the volume was read") {
				t.Errorf("warning %q does not say files vanished", res.Warning())
			}
		}
		if res.Changed > 0 {
			changed = true
			if len(res.ChangedPaths) != 1 || res.ChangedPaths[0] != "grow" {
				t.Errorf("changed paths %v, want [grow]", res.ChangedPaths)
			}
		}
		last = res
	}
	close(stop)
	wg.Wait()
	if !changed {
		t.Fatalf("in 3 snapshots, the file appended to every millisecond was never named as changing")
	}
	t.Logf("vanished files seen: %v", vanished)
	dst := t.TempDir()
	if _, err := r.Restore(ctx, last.SnapshotID, dst, "r1", nil); err != nil {
		t.Fatal(err)
	}
	if diffs, err := volumetest.Compare(stable, filepath.Join(dst, "stable")); err != nil || len(diffs) > 0 {
		t.Errorf("stable files after a live backup: %v %v", diffs, err)
	}
}

// TestLiveReadErrors: a vanished entry is recorded, any other read error
// is the failure and cancels the upload once.
func TestLiveReadErrors(t *testing.T) {
	canceled := 0
	l := &liveRead{cancel: func() { canceled++ }}
	l.Error("a/gone", &os.PathError{Op: "open", Path: "/v/a/gone", Err: syscall.ENOENT}, true)
	l.Error("b/dir", fmt.Errorf("unable to read directory: %w", os.ErrNotExist), true)
	if l.failed != nil || len(l.vanished) != 2 || canceled != 0 {
		t.Fatalf("vanished entries: failed %v, vanished %v, canceled %d", l.failed, l.vanished, canceled)
	}
	l.Error("c/bad", &os.PathError{Op: "read", Path: "/v/c/bad", Err: syscall.EIO}, true)
	l.Error("d/bad", &os.PathError{Op: "open", Path: "/v/d/bad", Err: syscall.EACCES}, true)
	if l.failed == nil || !strings.HasPrefix(l.failed.Error(), "c/bad: ") || !errors.Is(l.failed, syscall.EIO) || canceled != 1 {
		t.Fatalf("read errors: failed %v, canceled %d; want c/bad's EIO, canceled once", l.failed, canceled)
	}
}

// vanishing is a volume directory whose files named gone-* are removed
// just before kopia opens them: the race of a live volume, every time.
type vanishing struct{ fs.Directory }

func (d vanishing) Iterate(ctx context.Context) (fs.DirectoryIterator, error) {
	it, err := d.Directory.Iterate(ctx)
	return vanishingIter{it}, err
}

type vanishingIter struct{ fs.DirectoryIterator }

func (it vanishingIter) Next(ctx context.Context) (fs.Entry, error) {
	e, err := it.DirectoryIterator.Next(ctx)
	if f, ok := e.(fs.File); ok && strings.HasPrefix(f.Name(), "gone-") {
		return vanishingFile{f}, err
	}
	if d, ok := e.(fs.Directory); ok {
		return vanishing{d}, err
	}
	return e, err
}

type vanishingFile struct{ fs.File }

func (f vanishingFile) Open(ctx context.Context) (fs.Reader, error) {
	_ = os.Remove(f.LocalFilesystemPath())
	return f.File.Open(ctx)
}

// TestSnapshotVanishedOnOpen: 12 files vanish between the listing and
// their open. The upload completes without them, counts all 12 and names
// the first 5; every other file is in the snapshot.
func TestSnapshotVanishedOnOpen(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src := t.TempDir()
	if _, err := volumetest.MakeTree(filepath.Join(src, "keep"), volumetest.TreeOptions{SmallFiles: 50, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if err := os.WriteFile(filepath.Join(src, "tmp", fmt.Sprintf("gone-%02d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := localfs.Directory(src)
	if err != nil {
		t.Fatal(err)
	}
	var live *liveRead
	var files int64
	err = repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "test"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		man, l, _, err := uploadLive(ctx, w, liveDir{Directory: vanishing{root}}, sourceInfo("pvc/t/v"), nil, nil)
		if err == nil {
			live, files = l, man.RootEntry.DirSummary.TotalFileCount
		}
		return err
	})
	if err != nil {
		t.Fatalf("upload with vanishing files: %v", err)
	}
	want := []string{"tmp/gone-00", "tmp/gone-01", "tmp/gone-02", "tmp/gone-03", "tmp/gone-04"}
	if len(live.vanished) != 12 || !slices.Equal(sortedPaths(live.vanished), want) {
		t.Errorf("vanished %d %v, want 12 named %v", len(live.vanished), sortedPaths(live.vanished), want)
	}
	kept, _ := filepath.Glob(filepath.Join(src, "keep", "*"))
	if files < int64(len(kept)) {
		t.Errorf("snapshot holds %d files, fewer than the %d kept ones", files, len(kept))
	}
	res := &SnapshotResult{Vanished: 12, VanishedPaths: want}
	if w := res.Warning(); !strings.Contains(w, "12 file(s) vanished") || !strings.Contains(w, "tmp/gone-04 and 7 more") {
		t.Errorf("warning %q", w)
	}
}

// TestLiveReadDirectoryBack: a directory that vanished in the first pass
// and is read in the second is not reported as vanished.
func TestLiveReadDirectoryBack(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "back"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := localfs.Directory(src)
	if err != nil {
		t.Fatal(err)
	}
	live := &liveRead{seen: map[string]bool{"back": true, "gone": true}}
	ctx := withLiveRead(context.Background(), live)
	e, err := liveDir{Directory: root}.Child(ctx, "back")
	if err != nil {
		t.Fatal(err)
	}
	it, err := e.(fs.Directory).Iterate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it.Close()
	if live.seen["back"] || !live.seen["gone"] {
		t.Errorf("after reading back/: still to report %v, want only gone", live.seen)
	}
}
