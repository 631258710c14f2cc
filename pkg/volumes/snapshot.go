package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
		FilesPolicy:         policy.FilesPolicy{IgnoreCacheDirectories: &f},
		ErrorHandlingPolicy: policy.ErrorHandlingPolicy{IgnoreFileErrors: &f, IgnoreDirectoryErrors: &f, IgnoreUnknownTypes: &t},
		SchedulingPolicy:    policy.SchedulingPolicy{Manual: true},
	}
	return policy.BuildTree(map[string]*policy.Policy{".": p}, policy.DefaultPolicy)
}

// Snapshot backs up directory dir as volume identity (a stable name such
// as "pvc/<namespace>/<claim>", see Volume.Identity), reusing the latest
// complete snapshot of the same identity as its parent. tags are added to
// the snapshot (TagIdentity is set). The snapshot is saved and flushed to
// the store before Snapshot returns; a file or directory that cannot be
// read fails the whole snapshot (nothing is saved), naming the path.
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
		u := upload.NewUploader(w)
		u.DisableIgnoreRules = true
		u.FailFast = true
		u.CheckpointInterval = 0
		u.Progress = &uploadProgress{report: progress}
		man, err := u.Upload(ctx, withoutMarkers{entry}, snapshotPolicy(), src, previous...)
		if err != nil {
			return err
		}
		if man.IncompleteReason != "" {
			return fmt.Errorf("snapshot incomplete: %s", man.IncompleteReason)
		}
		if ds := man.RootEntry.DirSummary; ds != nil && len(ds.FailedEntries) > 0 {
			fe := ds.FailedEntries[0]
			return fmt.Errorf("%d entries could not be read, first %s: %s", len(ds.FailedEntries), filepath.Join(dir, fe.EntryPath), fe.Error)
		}
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
		res.CachedFiles = int64(man.Stats.CachedFiles)
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
	report       Progress
	bytes, files atomic.Int64
}

func (p *uploadProgress) Enabled() bool { return p.report != nil }

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

// ErrSnapshotNotFound is returned (wrapped) for a snapshot ID the
// repository does not hold.
var ErrSnapshotNotFound = errors.New("snapshot not found")
