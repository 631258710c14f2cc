package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/kopia/kopia/snapshot"
	"golang.org/x/sys/unix"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// Delta is what a sync (Repository.RestoreClaim into a claim that held an
// earlier snapshot) read and wrote: a staged migration's later stages
// write only what changed since the one before.
type Delta struct {
	// ScannedFiles and ScannedBytes are the snapshot's regular files.
	ScannedFiles int64 `json:"scannedFiles"`
	ScannedBytes int64 `json:"scannedBytes"`
	// WrittenFiles and WrittenBytes are those written into the claim: new
	// or changed since what it held (size, modification time or mode).
	WrittenFiles int64 `json:"writtenFiles"`
	WrittenBytes int64 `json:"writtenBytes"`
	// Removed counts the entries the claim held that the snapshot does not
	// (the source removed them).
	Removed int64 `json:"removed"`
}

// syncRecord is the file, in a claim's marker folder, that says a sync
// to a snapshot began and has not finished: the claim then holds no
// snapshot (its done-markers were removed first), and the next write
// into it is a sync again, which finishes the job.
const syncRecord = ".sync"

// listWas is where a sync keeps the claim's content list of before while
// it writes: the hashes of the files it keeps are taken from it.
const listWas = ".content.was"

// setListAside begins a sync of snapshot id into the claim at dir: it writes the sync
// record and moves the content list to listWas, returning that path. A
// claim that another sync left unfinished keeps no list at all: what that
// sync wrote has the snapshot's sizes and times under other hashes than
// the old list's, so the next list hashes every file.
func setListAside(dir, id string) (string, error) {
	markers := filepath.Join(dir, v1alpha1.DoneMarkerDir)
	list, was := filepath.Join(markers, contentList), filepath.Join(markers, listWas)
	unfinished := syncing(dir)
	if err := os.WriteFile(filepath.Join(markers, syncRecord), []byte(id+"\n"), 0o644); err != nil {
		return "", err
	}
	if unfinished {
		if err := errors.Join(removeIfThere(list), removeIfThere(was)); err != nil {
			return "", err
		}
		return was, nil
	}
	if err := os.Rename(list, was); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return was, nil
}

func removeIfThere(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// syncing says whether a sync into the claim at dir began and did not
// finish.
func syncing(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, v1alpha1.DoneMarkerDir, syncRecord))
	return err == nil
}

// sync makes the claim at dir hold snapshot id, writing only what differs
// from it: a regular file whose size, modification time and mode match
// the snapshot's entry is kept (the check kopia's own upload makes
// against a parent snapshot), any other entry is written to a temporary
// file in the marker folder and renamed into place, and entries the
// snapshot lacks are removed. The claim's done-markers are removed before
// the first write and the new one written after the last, so a sync
// killed midway leaves a claim marked with no snapshot (and the sync
// record, so the next write syncs again), never one marked with a
// snapshot it does not hold. Every content read is authenticated by
// kopia; a file that does not verify fails the sync before it is renamed.
func (r *Repository) sync(ctx context.Context, id, dir, restoreUID string, marks map[string]string, progress Progress) (*RestoreResult, error) {
	start := time.Now()
	man, err := r.loadSnapshot(ctx, id)
	if err != nil {
		return nil, err
	}
	markers := filepath.Join(dir, v1alpha1.DoneMarkerDir)
	was, err := setListAside(dir, id)
	if err != nil {
		return nil, fmt.Errorf("syncing snapshot %s into %s: %w", id, dir, err)
	}
	for uid := range marks {
		if err := os.Remove(MarkerPath(dir, uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing the done-marker of restore %s: %w", uid, err)
		}
	}
	// On disk before the first write: a node that crashes midway must not
	// come back with the old marker over new data.
	if err := syncFS(markers); err != nil {
		return nil, fmt.Errorf("syncing snapshot %s into %s: %w", id, dir, err)
	}
	tmp := filepath.Join(markers, "sync.tmp")
	_ = os.RemoveAll(tmp)
	s := &syncer{r: r, tmp: tmp, progress: progress, written: map[string]bool{}}
	if err := s.dir(ctx, man.RootEntry, dir, ""); err != nil {
		return nil, fmt.Errorf("syncing snapshot %s into %s: %w (the claim holds no snapshot until a sync finishes)", id, dir, err)
	}
	content, err := recordContentAfterSync(ctx, dir, was, s.written)
	if err != nil {
		content = nil // best effort, as in restore
	}
	_ = os.Remove(was)
	// The data on disk before the marker that says it is there.
	if err := syncFS(dir); err != nil {
		return nil, fmt.Errorf("syncing snapshot %s into %s: %w", id, dir, err)
	}
	if err := WriteMarker(dir, restoreUID, id); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(markers, syncRecord)); err != nil {
		return nil, err
	}
	res := &RestoreResult{SnapshotID: id, Bytes: s.d.WrittenBytes, Files: s.d.WrittenFiles, Duration: Duration(time.Since(start)),
		Content: content, Snapshot: summary(man), Delta: &s.d}
	for uid, snap := range marks {
		if uid != restoreUID {
			res.Replaced = append(res.Replaced, snap)
		}
	}
	slices.Sort(res.Replaced)
	return res, os.Chtimes(dir, man.RootEntry.ModTime.ToTime(), man.RootEntry.ModTime.ToTime())
}

// syncer is one sync's walk.
type syncer struct {
	r        *Repository
	tmp      string
	progress Progress
	d        Delta
	// written are the paths (slash-separated) this sync wrote.
	written map[string]bool
}

// dir syncs the directory at path with the snapshot's directory de (rel
// is its place in the claim, "" for the root).
func (s *syncer) dir(ctx context.Context, de *snapshot.DirEntry, path, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rd, err := s.r.rep.OpenObject(ctx, de.ObjectID)
	if err != nil {
		return fmt.Errorf("directory %q: %w", rel, err)
	}
	var m snapshot.DirManifest
	err = json.NewDecoder(rd).Decode(&m)
	rd.Close()
	if err != nil {
		return fmt.Errorf("directory %q: %w", rel, err)
	}
	want := map[string]bool{}
	for _, e := range m.Entries {
		want[e.Name] = true
	}
	// What the snapshot lacks goes first: a claim sized like the source
	// has no room for old and new at once.
	have, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, h := range have {
		if want[h.Name()] || (rel == "" && h.Name() == v1alpha1.DoneMarkerDir) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(path, h.Name())); err != nil {
			return err
		}
		s.d.Removed++
	}
	for _, e := range m.Entries {
		if rel == "" && e.Name == v1alpha1.DoneMarkerDir {
			continue // the source's own markers never overwrite the claim's
		}
		if err := s.entry(ctx, e, filepath.Join(path, e.Name), filepath.Join(rel, e.Name)); err != nil {
			return err
		}
	}
	if err := os.Chmod(path, os.FileMode(de.Permissions)&modBits); err != nil {
		return err
	}
	t := de.ModTime.ToTime()
	return os.Chtimes(path, t, t)
}

// entry syncs one entry of a directory.
func (s *syncer) entry(ctx context.Context, e *snapshot.DirEntry, path, rel string) error {
	fi, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	switch e.Type {
	case snapshot.EntryTypeDirectory:
		if fi != nil && !fi.IsDir() {
			if err := os.Remove(path); err != nil {
				return err
			}
			fi = nil
		}
		if fi == nil {
			if err := os.Mkdir(path, 0o700); err != nil {
				return err
			}
		}
		if err := s.dir(ctx, e, path, rel); err != nil {
			return err
		}
		s.chown(path, e)
		return nil
	case snapshot.EntryTypeFile:
		s.d.ScannedFiles++
		s.d.ScannedBytes += e.FileSize
		if fi != nil && fi.Mode().IsRegular() && fi.Size() == e.FileSize && fi.ModTime().Equal(e.ModTime.ToTime()) {
			// The data is the snapshot's (kopia's own check); its mode and
			// owner are set in place when they differ.
			return s.metadata(path, fi, e)
		}
		return s.file(ctx, e, path, fi, rel)
	case snapshot.EntryTypeSymlink:
		return s.symlink(ctx, e, path, fi, rel)
	}
	return nil // sockets, pipes, devices: kopia's restore skips them too
}

// file writes the snapshot's file e to path: into the temporary file,
// then renamed over whatever path held.
func (s *syncer) file(ctx context.Context, e *snapshot.DirEntry, path string, fi os.FileInfo, rel string) error {
	rd, err := s.r.rep.OpenObject(ctx, e.ObjectID)
	if err != nil {
		return fmt.Errorf("file %q: %w", rel, err)
	}
	defer rd.Close()
	f, err := os.OpenFile(s.tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, rd)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file %q: %w", rel, err)
	}
	s.chown(s.tmp, e) // before the mode: a chown clears setuid and setgid
	if err := os.Chmod(s.tmp, os.FileMode(e.Permissions)&modBits); err != nil {
		return err
	}
	t := e.ModTime.ToTime()
	if err := os.Chtimes(s.tmp, t, t); err != nil {
		return err
	}
	if err := s.replace(path, fi); err != nil {
		return err
	}
	s.written[filepath.ToSlash(rel)] = true
	s.d.WrittenFiles++
	s.d.WrittenBytes += n
	if s.progress != nil {
		s.progress(s.d.WrittenBytes, s.d.WrittenFiles)
	}
	return nil
}

// symlink makes path the snapshot's symlink e, unless it is already.
func (s *syncer) symlink(ctx context.Context, e *snapshot.DirEntry, path string, fi os.FileInfo, rel string) error {
	rd, err := s.r.rep.OpenObject(ctx, e.ObjectID)
	if err != nil {
		return fmt.Errorf("symlink %q: %w", rel, err)
	}
	b, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		return fmt.Errorf("symlink %q: %w", rel, err)
	}
	target := string(b)
	if fi != nil && fi.Mode()&fs.ModeSymlink != 0 {
		if cur, err := os.Readlink(path); err == nil && cur == target {
			return nil
		}
	}
	_ = os.Remove(s.tmp)
	if err := os.Symlink(target, s.tmp); err != nil {
		return err
	}
	s.chown(s.tmp, e)
	s.written[filepath.ToSlash(rel)] = true
	return s.replace(path, fi)
}

// modBits are the mode bits a snapshot keeps (kopia's fs.ModBits).
const modBits = os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky

// metadata gives the kept file at path the snapshot's mode and (when
// this process may) owner, where they differ.
func (s *syncer) metadata(path string, fi os.FileInfo, e *snapshot.DirEntry) error {
	if want := os.FileMode(e.Permissions) & modBits; fi.Mode()&modBits != want {
		if err := os.Chmod(path, want); err != nil {
			return err
		}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != e.UserID || st.Gid != e.GroupID) {
		s.chown(path, e)
		// The chown cleared setuid and setgid: set the mode again.
		return os.Chmod(path, os.FileMode(e.Permissions)&modBits)
	}
	return nil
}

// replace renames the temporary file over path (a directory there is
// removed first: rename does not replace one).
func (s *syncer) replace(path string, fi os.FileInfo) error {
	if fi != nil && fi.IsDir() {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	return os.Rename(s.tmp, path)
}

// syncFS flushes the file system that holds dir (syncfs(2)).
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// chown gives path the snapshot's owner, when this process may (a
// helper that is not root may not: kopia's restore ignores that too).
func (s *syncer) chown(path string, e *snapshot.DirEntry) {
	_ = os.Lchown(path, int(e.UserID), int(e.GroupID))
}
