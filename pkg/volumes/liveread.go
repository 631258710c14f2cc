package volumes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/upload"
)

// namedMax is how many paths a snapshot result names of the files that
// vanished or changed while the volume was read.
const namedMax = 5

// liveRead is what happened to a volume's files while one upload pass read
// them: a live application creates, writes and deletes files all the
// while (konveyor/mig-controller#924 failed whole stages on them).
//   - A file or directory that is gone by the time it is opened vanished:
//     it is left out of the snapshot, counted and named.
//   - A file whose size or modification time differs after it was read
//     from what the directory listing said changed: the next pass reads it
//     again (uploadLive).
//   - Any other read error (permission, I/O) is the first failure: the
//     pass is canceled and the snapshot fails, naming the file.
type liveRead struct {
	mu       sync.Mutex
	vanished map[string]bool
	changed  map[string]bool
	failed   error
	cancel   func()
	// seen, if set, are the paths that vanished in the first pass; the
	// second removes those it reads after all (a file or directory that
	// came back).
	seen map[string]bool
}

// Error is kopia's report of an entry it could not read.
func (l *liveRead) Error(p string, err error, _ bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if vanishedErr(err) {
		if l.vanished == nil {
			l.vanished = map[string]bool{}
		}
		l.vanished[p] = true
		return
	}
	if l.failed == nil {
		l.failed = fmt.Errorf("%s: %w", p, err)
		if l.cancel != nil {
			l.cancel()
		}
	}
}

// vanishedErr says whether err means the entry is no longer there.
func vanishedErr(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, fs.ErrEntryNotFound) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) ||
		strings.Contains(err.Error(), "no such file or directory")
}

func (l *liveRead) changedFile(p string) {
	l.mu.Lock()
	if l.changed == nil {
		l.changed = map[string]bool{}
	}
	l.changed[p] = true
	l.mu.Unlock()
}

func (l *liveRead) read(p string) {
	l.mu.Lock()
	if l.seen != nil && l.seen[p] {
		delete(l.seen, p)
	}
	l.mu.Unlock()
}

// sortedPaths returns the first namedMax paths of set, sorted.
func sortedPaths(set map[string]bool) []string {
	return firstPaths(slices.Sorted(maps.Keys(set)))
}

func firstPaths(p []string) []string {
	if len(p) > namedMax {
		p = p[:namedMax]
	}
	return slices.Clone(p)
}

// namedPaths lists paths, and says how many more of n there are.
func namedPaths(paths []string, n int64) string {
	s := strings.Join(paths, ", ")
	if more := n - int64(len(paths)); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// uploadLive uploads root (a volume read while its application runs) as
// src, in up to two passes: when files changed while the first pass read
// them, a second pass, with the first's manifest as its parent, reads
// again only what changed since the listing (kopia's incremental upload:
// the unchanged files are taken from the first pass). The result's live
// record is the last pass's, with the first pass's vanished entries that
// the second did not find again.
//
// The progress reported is the first pass's (the second re-reads a few
// files), and cachedFiles counts the files the first pass took unchanged
// from the real parent.
func uploadLive(ctx context.Context, w repo.RepositoryWriter, root fs.Directory, src snapshot.SourceInfo, previous []*snapshot.Manifest, progress Progress) (man *snapshot.Manifest, live *liveRead, cachedFiles int64, err error) {
	var first *liveRead
	for pass := 1; ; pass++ {
		live = &liveRead{}
		if first != nil {
			live.seen = first.vanished
			progress = nil
		}
		u := upload.NewUploader(w)
		u.DisableIgnoreRules = true
		u.CheckpointInterval = 0
		live.cancel = u.Cancel
		u.Progress = &uploadProgress{report: progress, live: live}
		if man, err = u.Upload(withLiveRead(ctx, live), root, snapshotPolicy(), src, previous...); err != nil {
			return nil, nil, 0, err
		}
		if live.failed != nil {
			return nil, nil, 0, fmt.Errorf("reading %w (nothing of the volume was saved)", live.failed)
		}
		if man.IncompleteReason != "" {
			return nil, nil, 0, fmt.Errorf("snapshot incomplete: %s", man.IncompleteReason)
		}
		if pass == 1 {
			cachedFiles = int64(man.Stats.CachedFiles)
		}
		if first != nil {
			for p := range live.seen { // vanished in the first pass, not read in this one
				if live.vanished == nil {
					live.vanished = map[string]bool{}
				}
				live.vanished[p] = true
			}
		}
		if len(live.changed) == 0 || pass == 2 {
			return man, live, cachedFiles, nil
		}
		first, previous = live, []*snapshot.Manifest{man}
	}
}

type liveKey struct{}

// withLiveRead makes live the record that the volume's liveFiles report to.
func withLiveRead(ctx context.Context, live *liveRead) context.Context {
	return context.WithValue(ctx, liveKey{}, live)
}

func liveFrom(ctx context.Context) *liveRead {
	l, _ := ctx.Value(liveKey{}).(*liveRead)
	return l
}

// liveDir is a directory of a volume read live: its files are liveFiles,
// its directories liveDirs. rel is its path in the volume ("" at the root).
type liveDir struct {
	fs.Directory
	rel string
}

func (d liveDir) Child(ctx context.Context, name string) (fs.Entry, error) {
	e, err := d.Directory.Child(ctx, name)
	if err != nil {
		return nil, err
	}
	return d.wrap(e), nil
}

func (d liveDir) Iterate(ctx context.Context) (fs.DirectoryIterator, error) {
	it, err := d.Directory.Iterate(ctx)
	if err != nil {
		return nil, err
	}
	if l := liveFrom(ctx); l != nil {
		l.read(d.rel) // a directory that vanished in the first pass is back
	}
	return liveIterator{DirectoryIterator: it, dir: d}, nil
}

func (d liveDir) wrap(e fs.Entry) fs.Entry {
	switch e := e.(type) {
	case fs.Directory:
		return liveDir{Directory: e, rel: path.Join(d.rel, e.Name())}
	case fs.File:
		return liveFile{File: e, rel: path.Join(d.rel, e.Name())}
	}
	return e
}

type liveIterator struct {
	fs.DirectoryIterator
	dir liveDir
}

func (it liveIterator) Next(ctx context.Context) (fs.Entry, error) {
	e, err := it.DirectoryIterator.Next(ctx)
	if err != nil || e == nil {
		return e, err
	}
	return it.dir.wrap(e), nil
}

// liveFile is a file of a volume read live: when its reader is closed, the
// file's size and modification time are compared with the listing's.
type liveFile struct {
	fs.File
	rel string
}

func (f liveFile) Open(ctx context.Context) (fs.Reader, error) {
	r, err := f.File.Open(ctx)
	if err != nil {
		return nil, err
	}
	return liveReader{Reader: r, file: f, live: liveFrom(ctx)}, nil
}

type liveReader struct {
	fs.Reader
	file liveFile
	live *liveRead
}

func (r liveReader) Close() error {
	err := r.Reader.Close()
	if r.live == nil {
		return err
	}
	r.live.read(r.file.rel)
	if p := r.file.LocalFilesystemPath(); p != "" {
		st, serr := os.Lstat(p)
		switch {
		case serr != nil && vanishedErr(serr):
			// Read whole, then removed: the copy is the file as it was.
		case serr != nil:
		case st.Size() != r.file.Size() || !st.ModTime().Equal(r.file.ModTime()):
			r.live.changedFile(r.file.rel)
		}
	}
	return err
}
