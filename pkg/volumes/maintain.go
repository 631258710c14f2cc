package volumes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kopia/kopia/repo"
	kblob "github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/logging"
	"github.com/kopia/kopia/repo/maintenance"
	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/snapshotfs"
	"github.com/kopia/kopia/snapshot/snapshotmaintenance"

	"github.com/kubeferry/ferry/pkg/store"
)

// VerifyResult is what Verify found for one snapshot.
type VerifyResult struct {
	SnapshotID string `json:"snapshotID"`
	Files      int64  `json:"files"`
	Bytes      int64  `json:"bytes"`
	// Errors name the file and the reason, for each file whose data
	// could not be read back and authenticated.
	Errors []string `json:"errors,omitempty"`
}

// Verify reads back every file of snapshot id (kopia's snapshot verify
// with 100 % of files read): each content is fetched from the store,
// decrypted and authenticated, and every pack blob the index names must
// exist. It returns an error only when the snapshot cannot be walked at
// all; damaged files are listed in the result.
func (r *Repository) Verify(ctx context.Context, id string) (*VerifyResult, error) {
	man, err := r.loadSnapshot(ctx, id)
	if err != nil {
		return nil, err
	}
	root, err := snapshotfs.SnapshotRoot(r.rep, man)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	blobMap, err := kblob.ReadBlobMap(ctx, r.rep.BlobReader())
	if err != nil {
		return nil, fmt.Errorf("listing the blobs of %s: %w", r.where(), err)
	}
	// kopia's tree walker logs each error with the file's path ("error
	// processing <path>: <error>") but returns it without; keep the log.
	var lines lineCollector
	lctx := logging.WithLogger(ctx, zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zapcore.EncoderConfig{MessageKey: "msg"}), zapcore.AddSync(&lines), zap.ErrorLevel)).Sugar().Named)
	v := snapshotfs.NewVerifier(lctx, r.rep, snapshotfs.VerifierOptions{VerifyFilesPercent: 100, BlobMap: blobMap, MaxErrors: 1000})
	res, err := v.InParallel(lctx, func(tw *snapshotfs.TreeWalker) error {
		return tw.Process(lctx, root, ".")
	})
	out := &VerifyResult{SnapshotID: id, Files: res.Stats.ReadFileCount, Bytes: res.Stats.ReadBytes}
	for _, l := range lines.get() {
		if p, ok := strings.CutPrefix(l, "error processing "); ok && !strings.HasPrefix(p, "tree walker enqueue:") {
			out.Errors = append(out.Errors, strings.TrimPrefix(p, "./"))
		}
	}
	if len(out.Errors) == 0 {
		for _, e := range res.Errors {
			out.Errors = append(out.Errors, e.Error())
		}
	}
	if err != nil && len(out.Errors) == 0 {
		out.Errors = append(out.Errors, err.Error())
	}
	return out, nil
}

// ListSnapshots returns the IDs of the snapshots tagged with backup
// (TagBackup), or of all ferry snapshots when backup is "".
func (r *Repository) ListSnapshots(ctx context.Context, backup string) (map[string]string, error) {
	tags := map[string]string{}
	if backup != "" {
		tags[TagBackup] = backup
	}
	ids, err := snapshot.ListSnapshotManifests(ctx, r.rep, nil, tags)
	if err != nil {
		return nil, err
	}
	mans, err := snapshot.LoadSnapshots(ctx, r.rep, ids)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range mans {
		if b, ok := m.Tags[TagBackup]; ok {
			out[string(m.ID)] = b
		}
	}
	return out, nil
}

// DeleteSnapshots deletes the snapshot manifests ids (only manifests: the
// data they share with other snapshots stays; data no snapshot uses any
// more is removed later by maintenance, kopia's garbage collection with
// its safety margins). Missing snapshots are not an error.
func (r *Repository) DeleteSnapshots(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "ferry: delete snapshots"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		for _, id := range ids {
			if err := w.DeleteManifest(ctx, manifest.ID(id)); err != nil && !errors.Is(err, manifest.ErrNotFound) {
				return fmt.Errorf("deleting snapshot %s: %w", id, err)
			}
		}
		return nil
	})
}

// PruneDeletedBackups deletes the snapshots of every backup no longer in
// loc (one just deleted, and any an interrupted delete left; an
// Incomplete backup still counts as present) and then runs kopia's
// maintenance, whose garbage collection removes the data no remaining
// snapshot uses after its safety margins. It returns how many snapshots
// were deleted. Shared by `ferry backup delete` and the server's GC.
func (r *Repository) PruneDeletedBackups(ctx context.Context, loc *store.Location) (int, error) {
	n, err := r.PruneSnapshots(ctx, func(b string) (bool, error) {
		_, err := loc.GetBackup(ctx, b)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil && !errors.Is(err, store.ErrIncomplete) {
			return true, err
		}
		return true, nil
	})
	if err != nil {
		return n, fmt.Errorf("deleting the volume snapshots of deleted backups: %w", err)
	}
	if err := r.Maintain(ctx); err != nil {
		return n, fmt.Errorf("%d volume snapshots deleted; repository maintenance failed: %w", n, err)
	}
	return n, nil
}

// PruneSnapshots deletes the snapshots whose ferry backup no longer
// exists: keep reports whether a backup name is still in the location
// (committed or in progress). It returns how many were deleted.
func (r *Repository) PruneSnapshots(ctx context.Context, keep func(backup string) (bool, error)) (int, error) {
	all, err := r.ListSnapshots(ctx, "")
	if err != nil {
		return 0, err
	}
	exists := map[string]bool{}
	var del []string
	for id, b := range all {
		ok, seen := exists[b]
		if !seen {
			if ok, err = keep(b); err != nil {
				return 0, err
			}
			exists[b] = ok
		}
		if !ok {
			del = append(del, id)
		}
	}
	return len(del), r.DeleteSnapshots(ctx, del)
}

// Maintain runs kopia's maintenance (snapshotmaintenance.Run) in auto
// mode: the quick cycle (index compaction, at most hourly) or, when kopia's
// schedule says so (daily), the full cycle, which garbage-collects the
// contents no snapshot references and rewrites or deletes the pack blobs
// that held them, never touching data a remaining snapshot uses. Safety is
// kopia's maintenance.SafetyFull (contents younger than its margins are
// kept, so backups running meanwhile are safe).
func (r *Repository) Maintain(ctx context.Context) error {
	return r.maintain(ctx, maintenance.ModeAuto, maintenance.SafetyFull)
}

// Only one process at a time runs it on a repository (lockMaintenance); a
// process that finds another one at it skips maintenance (logged): the
// other does the same work.
//
// A repository with pack blobs whose index could not be recovered (see
// Damage) is not maintained: to kopia's garbage collection they would be
// unreferenced, and it would delete them.
func (r *Repository) maintain(ctx context.Context, mode maintenance.Mode, safety maintenance.SafetyParameters) error {
	if d := r.damage; d != nil && len(d.Unrecovered) > 0 {
		return fmt.Errorf("volume repository in %s: no maintenance while %d pack blobs (%s first) have no readable index: garbage collection would delete them", r.where(), len(d.Unrecovered), d.Unrecovered[0].Blob)
	}
	unlock, held, err := r.lockMaintenance(ctx)
	if err != nil {
		return err
	}
	if held != nil {
		args := []any{"location", r.url, "holder", held.Owner}
		if !held.Expires.IsZero() {
			args = append(args, "until", held.Expires)
		}
		r.log.Info("volume repository maintenance skipped: another process is running it", args...)
		return nil
	}
	defer unlock()
	return repo.DirectWriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "ferry: maintenance"}, func(ctx context.Context, w repo.DirectRepositoryWriter) error {
		return runMaintenance(ctx, w, mode, safety)
	})
}

// runMaintenance is kopia's snapshot maintenance (a variable for tests).
var runMaintenance = func(ctx context.Context, w repo.DirectRepositoryWriter, mode maintenance.Mode, safety maintenance.SafetyParameters) error {
	return snapshotmaintenance.Run(ctx, w, mode, true, safety)
}

// lineCollector keeps the lines written to it.
type lineCollector struct {
	mu    sync.Mutex
	lines []string
}

func (c *lineCollector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	return len(p), nil
}

func (c *lineCollector) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}
