package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/fs/localfs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/policy"
	"github.com/kopia/kopia/snapshot/upload"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// Snapshot tags ferry puts on every kopia snapshot it takes.
const (
	TagBackup   = "ferry-backup"
	TagIdentity = "ferry-volume"
)

// Progress receives running totals while a volume is backed up or
// restored: bytes and files done so far. It may be called concurrently.
type Progress func(bytes, files int64)

// SnapshotResult is what one volume snapshot produced.
type SnapshotResult struct {
	// SnapshotID is the kopia snapshot manifest ID.
	SnapshotID string `json:"snapshotID"`
	// ParentSnapshotID is the earlier snapshot of the same volume identity
	// the upload reused unchanged files from ("" for a first backup).
	ParentSnapshotID string `json:"parentSnapshotID,omitempty"`
	// Bytes and Files count the volume's regular files and their sizes.
	Bytes int64 `json:"bytes"`
	Files int64 `json:"files"`
	// UploadedBytes counts the bytes written to the store (new, encrypted
	// pack and index blobs): after deduplication against the repository.
	UploadedBytes int64 `json:"uploadedBytes"`
	// CachedFiles counts the files taken unchanged from the parent.
	CachedFiles int64 `json:"cachedFiles"`
	// Vanished counts the files and directories that were removed while
	// the volume was read (a live application's temporary files): they are
	// not in the snapshot. VanishedPaths names the first few.
	Vanished      int64    `json:"vanished,omitempty"`
	VanishedPaths []string `json:"vanishedPaths,omitempty"`
	// Changed counts the files that were still changing when they were
	// read a second time: their copy may mix old and new content.
	// ChangedPaths names the first few.
	Changed      int64    `json:"changed,omitempty"`
	ChangedPaths []string `json:"changedPaths,omitempty"`
	// Duration of the upload.
	Duration Duration `json:"duration"`
}

// Duration prints as a Go duration string in JSON ("1.5s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).Round(time.Millisecond).String() + `"`), nil
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("duration %s: not a string", b)
	}
	v, err := time.ParseDuration(string(b[1 : len(b)-1]))
	*d = Duration(v)
	return err
}

// sourceInfo is the kopia source of a volume identity: not a host path, so
// that the same volume finds its parent snapshot from any node.
func sourceInfo(identity string) snapshot.SourceInfo {
	return snapshot.SourceInfo{Host: clientHost, UserName: clientUser, Path: "/" + identity}
}

// snapshotPolicy is the policy of every ferry snapshot: everything in the
// volume is copied (no .kopiaignore files, no skipping of cache
// directories, no size limit), files of unknown types (sockets, devices)
// are skipped as Velero does, and kopia's retention never deletes a
// snapshot: ferry deletes a backup's snapshots when the backup is deleted.
func snapshotPolicy() *policy.Tree {
	f := policy.OptionalBool(false)
	t := policy.OptionalBool(true)
	p := &policy.Policy{
		FilesPolicy: policy.FilesPolicy{IgnoreCacheDirectories: &f},
		// Read errors do not stop kopia: liveRead.Error decides (a vanished
		// entry is left out, any other error cancels and fails the snapshot).
		ErrorHandlingPolicy: policy.ErrorHandlingPolicy{IgnoreFileErrors: &t, IgnoreDirectoryErrors: &t, IgnoreUnknownTypes: &t},
		SchedulingPolicy:    policy.SchedulingPolicy{Manual: true},
	}
	return policy.BuildTree(map[string]*policy.Policy{".": p}, policy.DefaultPolicy)
}

// Snapshot backs up directory dir as volume identity (a stable name such
// as "pvc/<namespace>/<claim>", see Volume.Identity), reusing the latest
// complete snapshot of the same identity as its parent. tags are added to
// the snapshot (TagIdentity is set). The snapshot is saved and flushed to
// the store before Snapshot returns; a file or directory that cannot be
// read fails the whole snapshot (nothing is saved), naming the path; a
// file that vanishes while the volume is read is left out, and one that
// changes is read again, both counted and named in the result (liveRead).
func (r *Repository) Snapshot(ctx context.Context, dir, identity string, tags map[string]string, progress Progress) (*SnapshotResult, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", identity, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("volume %s: %s is not a directory", identity, dir)
	}
	entry, err := localfs.Directory(dir)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", identity, err)
	}
	src := sourceInfo(identity)
	res := &SnapshotResult{}
	start := time.Now()
	var uploaded atomic.Int64
	err = repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{
		Purpose:  "ferry: snapshot " + identity,
		OnUpload: func(n int64) { uploaded.Add(n) },
	}, func(ctx context.Context, w repo.RepositoryWriter) error {
		previous, err := snapshot.FindPreviousManifests(ctx, w, src, nil)
		if err != nil {
			return fmt.Errorf("finding the previous snapshot: %w", err)
		}
		if len(previous) > 0 {
			res.ParentSnapshotID = string(previous[0].ID)
		}
		man, live, cached, err := uploadLive(ctx, w, withoutMarkers{liveDir{Directory: entry}}, src, previous, progress)
		if err != nil {
			return err
		}
		res.CachedFiles = cached
		res.Vanished, res.VanishedPaths = int64(len(live.vanished)), sortedPaths(live.vanished)
		res.Changed, res.ChangedPaths = int64(len(live.changed)), sortedPaths(live.changed)
		man.Tags = map[string]string{TagIdentity: identity}
		for k, v := range tags {
			man.Tags[k] = v
		}
		id, err := snapshot.SaveSnapshot(ctx, w, man)
		if err != nil {
			return fmt.Errorf("saving the snapshot manifest: %w", err)
		}
		res.SnapshotID = string(id)
		// The root's summary counts every file; kopia's upload stats
		// count only those it hashed this time.
		if ds := man.RootEntry.DirSummary; ds != nil {
			res.Bytes, res.Files = ds.TotalFileSize, ds.TotalFileCount
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("volume %s (%s): %w", identity, dir, err)
	}
	res.UploadedBytes = uploaded.Load()
	res.Duration = Duration(time.Since(start))
	return res, nil
}

// withoutMarkers hides v1alpha1.DoneMarkerDir at the root of a volume from the uploader.
type withoutMarkers struct{ fs.Directory }

func (d withoutMarkers) Child(ctx context.Context, name string) (fs.Entry, error) {
	if name == v1alpha1.DoneMarkerDir {
		return nil, fs.ErrEntryNotFound
	}
	return d.Directory.Child(ctx, name)
}

func (d withoutMarkers) Iterate(ctx context.Context) (fs.DirectoryIterator, error) {
	it, err := d.Directory.Iterate(ctx)
	if err != nil {
		return nil, err
	}
	return skipMarkers{it}, nil
}

type skipMarkers struct{ fs.DirectoryIterator }

func (s skipMarkers) Next(ctx context.Context) (fs.Entry, error) {
	for {
		e, err := s.DirectoryIterator.Next(ctx)
		if err != nil || e == nil || e.Name() != v1alpha1.DoneMarkerDir {
			return e, err
		}
	}
}

// uploadProgress forwards kopia's upload events as running totals.
type uploadProgress struct {
	upload.NullUploadProgress
	live         *liveRead
	report       Progress
	bytes, files atomic.Int64
}

func (p *uploadProgress) Enabled() bool { return p.report != nil }

// Error is an entry kopia could not read: the live record decides.
func (p *uploadProgress) Error(path string, err error, isIgnored bool) {
	if p.live != nil {
		p.live.Error(path, err, isIgnored)
	}
}

func (p *uploadProgress) HashedBytes(n int64) {
	if p.report != nil {
		p.report(p.bytes.Add(n), p.files.Load())
	}
}

func (p *uploadProgress) CachedFile(_ string, n int64) {
	if p.report != nil {
		p.report(p.bytes.Add(n), p.files.Load())
	}
}

func (p *uploadProgress) FinishedFile(string, error) {
	if p.report != nil {
		p.report(p.bytes.Load(), p.files.Add(1))
	}
}

// Warning describes what changed while the volume was read, or "".
func (r *SnapshotResult) Warning() string {
	var parts []string
	if r.Vanished > 0 {
		parts = append(parts, fmt.Sprintf("%d file(s) vanished while the volume was read and are not in the snapshot (%s)", r.Vanished, namedPaths(r.VanishedPaths, r.Vanished)))
	}
	if r.Changed > 0 {
		parts = append(parts, fmt.Sprintf("%d file(s) were still changing when read a second time, and their copy may mix old and new content (%s)", r.Changed, namedPaths(r.ChangedPaths, r.Changed)))
	}
	return strings.Join(parts, "; ")
}

// ErrSnapshotNotFound is returned (wrapped) for a snapshot ID the
// repository does not hold.
var ErrSnapshotNotFound = errors.New("snapshot not found")
