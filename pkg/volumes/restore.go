package volumes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/restore"
	"github.com/kopia/kopia/snapshot/snapshotfs"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// RestoreResult is what one volume restore wrote.
type RestoreResult struct {
	SnapshotID string   `json:"snapshotID"`
	Bytes      int64    `json:"bytes"`
	Files      int64    `json:"files"`
	Duration   Duration `json:"duration"`
	// AlreadyRestored is set when the volume already held this restore's
	// done-marker (a re-run), or for a claim the done-marker of this
	// snapshot: nothing was written. MarkedBy is then the UID of the
	// restore whose marker it is.
	AlreadyRestored bool   `json:"alreadyRestored,omitempty"`
	MarkedBy        string `json:"markedBy,omitempty"`
	// Replaced names the snapshots whose done-markers the volume held
	// before this one's data was written into it (RestoreClaim).
	Replaced []string `json:"replaced,omitempty"`
	// Content is what the volume held once the snapshot was in place,
	// walked before its done-marker was written; Snapshot is what the
	// snapshot holds, from its manifest (docs/design.md#runtime-checks).
	Content  *Content         `json:"content,omitempty"`
	Snapshot *SnapshotSummary `json:"snapshot,omitempty"`
	// Delta is set when the claim held an earlier snapshot and only what
	// differs was written (Bytes and Files are then what was written).
	Delta *Delta `json:"delta,omitempty"`
}

// ErrKeptExisting is returned for a claim that does not hold the
// snapshot's done-marker when its existing data is to be kept
// (ClaimPolicy.Keep): nothing was written.
var ErrKeptExisting = errors.New("the claim was already in the target without this backup's data, which is kept (existingVolumeDataPolicy keep)")

// ClaimPolicy says what RestoreClaim does with a claim that does not hold
// the snapshot's done-marker: Keep leaves it alone (ErrKeptExisting);
// otherwise the snapshot is written into it.
type ClaimPolicy struct{ Keep bool }

// markerSnapshots reads the done-markers of dir: restore UID -> the
// snapshot ID each names ("" when unreadable).
func markerSnapshots(dir string, uids []string) map[string]string {
	out := map[string]string{}
	for _, uid := range uids {
		b, _ := os.ReadFile(MarkerPath(dir, uid))
		out[uid] = strings.TrimSpace(string(b))
	}
	return out
}

// RestoreClaim writes snapshot id into a claim mounted at dir, as Restore
// does, unless the claim already holds it. What a claim holds is recorded
// in the claim, not guessed from where it came from: it holds snapshot id
// only when a done-marker naming id is in it, whichever restore wrote it
// (a re-run under another name, or a run killed after this claim was
// done). A claim without such a marker (created by a run that was killed
// before it got there, created empty ahead of the migration, or holding an
// older snapshot) gets the data, unless pol keeps existing data. A claim
// that holds another snapshot's done-marker is synced (only what differs
// is written, what the snapshot lacks removed: Repository.sync); an
// unmarked one is restored as Restore does. Either way the markers of
// other snapshots are gone once this one's is written, so the claim names
// the one snapshot it holds.
func (r *Repository) RestoreClaim(ctx context.Context, id, dir, restoreUID string, pol ClaimPolicy, progress Progress) (*RestoreResult, error) {
	unlock, err := lockVolume(ctx, dir, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	uids, err := markerState(dir)
	if err != nil {
		return nil, fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	marks := markerSnapshots(dir, uids)
	for _, uid := range uids {
		if marks[uid] == id {
			return &RestoreResult{SnapshotID: id, AlreadyRestored: true, MarkedBy: uid}, nil
		}
	}
	if pol.Keep {
		return nil, ErrKeptExisting
	}
	if len(uids) > 0 || syncing(dir) {
		// The claim holds an earlier snapshot (a staged migration's last
		// stage), or a sync to one that did not finish: only what differs
		// is written, and what the snapshot lacks is removed.
		return r.sync(ctx, id, dir, restoreUID, marks, progress)
	}
	res, err := r.restore(ctx, id, dir, restoreUID, progress)
	if err != nil {
		return nil, err
	}
	for _, uid := range uids {
		if uid == restoreUID {
			continue
		}
		if err := os.Remove(MarkerPath(dir, uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing the done-marker of restore %s: %w", uid, err)
		}
		res.Replaced = append(res.Replaced, marks[uid])
	}
	return res, nil
}

// ErrAlreadyRestored is returned for a volume that holds the done-marker
// of another restore: its data was restored before and may have changed
// since (the application runs on it), so it is not overwritten.
var ErrAlreadyRestored = errors.New("volume already holds restored data")

// markerState checks dir's marker folder: it must not be a symlink (a
// restore would write through it, outside the volume), and it returns the
// restore UIDs whose done-markers it holds.
func markerState(dir string) ([]string, error) {
	md := filepath.Join(dir, v1alpha1.DoneMarkerDir)
	fi, err := os.Lstat(md)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (a symlink?): refusing to restore through it", md)
	}
	ents, err := os.ReadDir(md)
	if err != nil {
		return nil, err
	}
	var uids []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), ".tmp") && !strings.HasPrefix(e.Name(), ".") {
			uids = append(uids, e.Name())
		}
	}
	return uids, nil
}

// loadSnapshot reads snapshot id's manifest; a missing one wraps ErrSnapshotNotFound.
func (r *Repository) loadSnapshot(ctx context.Context, id string) (*snapshot.Manifest, error) {
	man, err := snapshot.LoadSnapshot(ctx, r.rep, manifest.ID(id))
	if errors.Is(err, snapshot.ErrSnapshotNotFound) {
		return nil, fmt.Errorf("snapshot %s in %s: %w", id, r.where(), ErrSnapshotNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s in %s: %w", id, r.where(), err)
	}
	return man, nil
}

// Restore writes snapshot id into directory dir (which must exist: it is
// the volume's mount), then the done-marker dir/.ferry/<restoreUID>.
//
// Nothing of the snapshot appears in dir until all of it has been read and
// verified: kopia authenticates every content it reads (AES-GCM with
// HMAC'd content IDs), and the data is first written to a staging folder
// under dir/.ferry/, then moved into place entry by entry (same file
// system, so each move is a rename). An entry of the snapshot replaces an
// entry of the same name already in dir. File modes, owners (when
// permitted), modification times, symlinks and sparse regions are
// restored; runs of zeros become holes again with SparseFiles. On error the staging folder is removed and no marker is
// written: the pod's ferry-restore-wait init container keeps waiting.
func (r *Repository) Restore(ctx context.Context, id, dir, restoreUID string, progress Progress) (*RestoreResult, error) {
	unlock, err := lockVolume(ctx, dir, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	done, err := markerState(dir)
	if err != nil {
		return nil, fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	for _, uid := range done {
		if uid == restoreUID {
			// A re-run of this restore, which already finished here.
			return &RestoreResult{SnapshotID: id, AlreadyRestored: true}, nil
		}
	}
	if len(done) > 0 {
		return nil, fmt.Errorf("%w: %s has the done-marker of restore %s; the data is not overwritten (restore into a new pod, or remove %s to force it)", ErrAlreadyRestored, dir, done[0], filepath.Join(dir, v1alpha1.DoneMarkerDir))
	}
	return r.restore(ctx, id, dir, restoreUID, progress)
}

// restore writes snapshot id into dir and the done-marker of restoreUID
// (Restore, after the markers are checked).
func (r *Repository) restore(ctx context.Context, id, dir, restoreUID string, progress Progress) (*RestoreResult, error) {
	start := time.Now()
	man, err := r.loadSnapshot(ctx, id)
	if err != nil {
		return nil, err
	}
	root, err := snapshotfs.SnapshotRoot(r.rep, man)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	markers := filepath.Join(dir, v1alpha1.DoneMarkerDir)
	if err := os.MkdirAll(markers, 0o755); err != nil {
		return nil, err
	}
	// A restore that was killed (its helper pod deleted, its process gone)
	// left its staging folder: nothing of it was moved into the volume.
	stale, _ := filepath.Glob(filepath.Join(markers, "restore-*.partial"))
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return nil, fmt.Errorf("restoring snapshot %s: removing the staging folder %s of an interrupted restore: %w", id, p, err)
		}
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	staging := filepath.Join(markers, "restore-"+hex.EncodeToString(suffix)+".partial")
	defer os.RemoveAll(staging)

	out := &restore.FilesystemOutput{
		TargetPath:             staging,
		OverwriteDirectories:   true,
		OverwriteFiles:         true,
		OverwriteSymlinks:      true,
		IgnorePermissionErrors: true,
		WriteSparseFiles:       r.SparseFiles,
	}
	if err := out.Init(ctx); err != nil {
		return nil, fmt.Errorf("restoring snapshot %s into %s: %w", id, dir, err)
	}
	stats, err := restore.Entry(ctx, r.rep, out, root, restore.Options{
		Parallel:               8,
		RestoreDirEntryAtDepth: math.MaxInt32,
		ProgressCallback: func(_ context.Context, s restore.Stats) {
			if progress != nil {
				progress(s.RestoredTotalFileSize, int64(s.RestoredFileCount))
			}
		},
	})
	if err != nil {
		// Name files by their place in the volume, not in the staging folder.
		msg := strings.ReplaceAll(err.Error(), staging+string(filepath.Separator), "")
		return nil, fmt.Errorf("restoring snapshot %s into %s: %s (nothing was moved into the volume)", id, dir, msg)
	}
	times, err := r.dirTimes(ctx, man.RootEntry)
	if err != nil {
		return nil, fmt.Errorf("restoring snapshot %s into %s: %w (nothing was moved into the volume)", id, dir, err)
	}
	if err := setDirTimes(staging, times); err != nil {
		return nil, err
	}
	if err := moveInto(staging, dir); err != nil {
		return nil, fmt.Errorf("restoring snapshot %s into %s: %w", id, dir, err)
	}
	// The root's own mode and times are the snapshot's (the moves above
	// changed its mtime).
	if err := os.Chmod(dir, root.Mode().Perm()); err != nil {
		return nil, err
	}
	// The restore's own record of what it wrote, walked before the
	// done-marker (so before any pod that mounts it starts). Best effort:
	// the data is in place, and a volume without the record is reported
	// "not checked" by a verification, not failed.
	content, err := RecordContent(ctx, dir)
	if err != nil {
		slog.Warn("the restored volume's content was not recorded: a verification will not check it", "dir", dir, "error", err)
		content = nil
	}
	if err := WriteMarker(dir, restoreUID, id); err != nil {
		return nil, err
	}
	if err := os.Chtimes(dir, root.ModTime(), root.ModTime()); err != nil {
		return nil, err
	}
	return &RestoreResult{SnapshotID: id, Bytes: stats.RestoredTotalFileSize, Files: int64(stats.RestoredFileCount), Duration: Duration(time.Since(start)),
		Content: content, Snapshot: summary(man)}, nil
}

// summary is what snapshot man holds, from its manifest.
func summary(man *snapshot.Manifest) *SnapshotSummary {
	s := &SnapshotSummary{ID: string(man.ID), RootObject: man.RootObjectID().String()}
	if man.RootEntry == nil {
		return s
	}
	if ds := man.RootEntry.DirSummary; ds != nil {
		s.Files, s.Bytes = ds.TotalFileCount, ds.TotalFileSize
	}
	return s
}

// lockVolume takes the volume at dir, where snapshot id is to be
// restored, for this process: an exclusive flock(2) on the marker
// folder dir/.ferry, waited for (until ctx ends) while another writer holds
// it. Two restores of one volume at once (the helper pod of a run that was
// killed, still at work, and the rerun's) would each remove the other's
// staging folder as stale; with the lock the second reads the done-marker
// the first wrote, or writes after it. A file system without flock is
// written without the lock.
func lockVolume(ctx context.Context, dir, id string) (unlock func(), err error) {
	if err := checkDir(dir, id); err != nil {
		return nil, err
	}
	if _, err := markerState(dir); err != nil { // refuses a .ferry symlink
		return nil, fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	md := filepath.Join(dir, v1alpha1.DoneMarkerDir)
	if err := os.MkdirAll(md, 0o755); err != nil {
		return nil, fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	f, err := os.Open(md) // the marker folder itself is locked: no file is left behind
	if err != nil {
		return nil, fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return func() { _ = f.Close() }, nil // closing releases the lock
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return func() { _ = f.Close() }, nil // no flock here
		case !waited:
			slog.Info("another restore is writing this volume: waiting for it", "dir", dir)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("restoring snapshot %s into %s: another restore is writing the volume (it holds the lock of %s), and this one stopped waiting: %w", id, dir, md, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkDir checks that dir, where snapshot id is to be restored, is a
// directory.
func checkDir(dir, id string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("restoring snapshot %s: volume directory: %w", id, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("restoring snapshot %s: %s is not a directory", id, dir)
	}
	return nil
}

// moveInto renames every entry of from into to, replacing same-named ones.
func moveInto(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == v1alpha1.DoneMarkerDir {
			continue
		}
		dst := filepath.Join(to, e.Name())
		if _, err := os.Lstat(dst); err == nil {
			if err := os.RemoveAll(dst); err != nil {
				return err
			}
		}
		if err := os.Rename(filepath.Join(from, e.Name()), dst); err != nil {
			return err
		}
	}
	return nil
}

// MarkerPath is where the done-marker of restore restoreUID lives in a
// volume mounted at dir.
func MarkerPath(dir, restoreUID string) string {
	return filepath.Join(dir, v1alpha1.DoneMarkerDir, restoreUID)
}

// WriteMarker writes the done-marker of restore restoreUID into the volume
// at dir (its content names the snapshot), atomically: written to a temp
// file and renamed, so a waiting init container never sees half of it.
func WriteMarker(dir, restoreUID, snapshotID string) error {
	if restoreUID == "" {
		return errors.New("done-marker: no restore UID")
	}
	if _, err := markerState(dir); err != nil {
		return fmt.Errorf("done-marker: %w", err)
	}
	p := MarkerPath(dir, restoreUID)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(snapshotID+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
