// Package retention owns a stored backup's end of life: when it expires,
// and deleting it from its backup storage location together with the
// kopia snapshots that no backup left in the location uses. It is the one
// implementation behind `ferry backup delete`, server mode's expiry of
// Backups and the hub's (docs/design.md#one-engine-three-front-ends).
package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// Expiration is when a backup expires: its recorded expiration, else
// start + ttl (a backup synced from a store that recorded none), else nil
// (it is kept).
func Expiration(recorded, start *metav1.Time, ttl *metav1.Duration) *metav1.Time {
	if recorded != nil {
		return recorded
	}
	if ttl != nil && ttl.Duration > 0 && start != nil {
		t := metav1.NewTime(start.Add(ttl.Duration))
		return &t
	}
	return nil
}

// Due reports whether exp has passed at now; if not, wait is how long
// until it does, at most max (when max > 0) so that a moved clock is seen.
func Due(exp, now time.Time, max time.Duration) (due bool, wait time.Duration) {
	if !now.Before(exp) {
		return true, 0
	}
	wait = exp.Sub(now)
	if max > 0 && wait > max {
		wait = max
	}
	return false, wait
}

// Request is one deletion of a backup from a location.
type Request struct {
	// Name is the backup's.
	Name string
	// Owns reports whether the location's record of the backup (whose UID
	// is empty for a backup written before backups carried one) is the
	// one to delete. A folder that holds another backup of the same name
	// is kept (FolderKeptOther). nil: any (`ferry backup delete NAME`).
	Owns func(stored *v1alpha1.Backup) bool
	// HadVolumeData says the caller's own record of the backup (a
	// Backup's status) has volume snapshots, which the location may no
	// longer show: its folder was deleted out of band, or is being
	// deleted by another process sharing the location.
	HadVolumeData bool
	// Repository opens the location's volume repository, or says why it
	// cannot (no password).
	Repository func(context.Context) (*volumes.Repository, error)
	// Strict deletes nothing when the volume snapshots cannot be pruned
	// (the repository does not open), and returns that error: for a
	// person, who can give the password and run it again. Otherwise, for
	// an expiry, which must not keep a backup past its time, the folder
	// is deleted and Result.VolumeError says why its snapshots were kept.
	Strict bool
}

// Folder is what a deletion did to the backup's folder in the location.
type Folder string

const (
	// FolderDeleted: the folder was deleted, its commit marker first, so
	// that an interrupted delete leaves it Incomplete, never Completed with
	// parts missing.
	FolderDeleted Folder = "Deleted"
	// FolderGone: there was no folder (deleted already).
	FolderGone Folder = "Gone"
	// FolderKeptOther: the folder holds another backup of the name
	// (Request.Owns), and was kept with its snapshots.
	FolderKeptOther Folder = "KeptOther"
)

// Result is what Delete did.
type Result struct {
	Folder Folder
	// Stored is the location's record of the backup, when it had one.
	Stored *v1alpha1.Backup
	// Snapshots is how many kopia snapshots were deleted (the backup's,
	// and any an earlier, interrupted delete left).
	Snapshots int
	// VolumeError is why the volume snapshots were not all deleted (no
	// password, a repository that does not open, a failed maintenance);
	// nil when they were, or when there were none. The next delete in the
	// location prunes what this one left.
	VolumeError error
}

// Delete deletes backup req.Name from loc: its folder, when it is the
// requester's (Request.Owns), and then the kopia snapshots of every backup
// no longer in loc, followed by kopia's maintenance. Snapshots are pruned
// whenever the backup had volume data by either account (HasVolumeData,
// or Request.HadVolumeData), also when its folder was gone already.
func Delete(ctx context.Context, loc *store.Location, req Request) (*Result, error) {
	res := &Result{}
	stored, err := loc.GetBackup(ctx, req.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		res.Folder = FolderGone
		if req.HadVolumeData {
			return res, prune(ctx, loc, req, nil, res)
		}
		if req.Strict {
			return res, pruneLeftovers(ctx, loc, req, res)
		}
		return res, nil
	case err != nil && !errors.Is(err, store.ErrIncomplete):
		return nil, err
	}
	res.Stored = stored
	// Neither marker left, some files: the remains of a delete (the store
	// deletes the started marker, which holds the UID, last), finished by
	// another process or stopped half way. Never restorable, they are
	// deleted, and the snapshots of the caller's backup, which had volume
	// data, pruned; waiting for another process could wait for ever.
	remains := err != nil && stored.UID == "" && req.HadVolumeData
	if !remains && req.Owns != nil && !req.Owns(stored) {
		res.Folder = FolderKeptOther
		return res, nil
	}
	hasData, err := HasVolumeData(ctx, loc, req.Name)
	if err != nil {
		return nil, err
	}
	hasData = hasData || req.HadVolumeData
	var repo *volumes.Repository
	if hasData && req.Strict {
		if repo, err = req.Repository(ctx); err != nil {
			return nil, fmt.Errorf("backup %s holds pod volume data, whose snapshots are deleted with it: %w", req.Name, err)
		}
		defer repo.Close(context.WithoutCancel(ctx))
	}
	if err := loc.DeleteBackup(ctx, req.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	res.Folder = FolderDeleted
	if !hasData {
		return res, nil
	}
	return res, prune(ctx, loc, req, repo, res)
}

// prune deletes the snapshots of the backups no longer in loc, with repo
// or else one req opens. Not being able to is res.VolumeError, and an
// error only when req is Strict.
func prune(ctx context.Context, loc *store.Location, req Request, repo *volumes.Repository, res *Result) error {
	if repo == nil {
		var err error
		if repo, err = req.Repository(ctx); err != nil {
			res.VolumeError = fmt.Errorf("the volume snapshots of backup %s were not deleted: %w", req.Name, err)
			return strict(req, res.VolumeError)
		}
		defer repo.Close(context.WithoutCancel(ctx))
	}
	n, err := repo.PruneDeletedBackups(ctx, loc)
	res.Snapshots = n
	if err != nil {
		res.VolumeError = fmt.Errorf("backup %s deleted, but its volume data was not all cleaned up (the next delete of a backup with volume data in the location, or `ferry backup delete %s` with the password, retries): %w", req.Name, req.Name, err)
		return strict(req, res.VolumeError)
	}
	return nil
}

// pruneLeftovers prunes, for a person deleting backup req.Name whose
// folder is gone (deleted by hand, say), the snapshots the repository
// still holds of it; a repository that does not open (no password) leaves
// nothing known to prune.
func pruneLeftovers(ctx context.Context, loc *store.Location, req Request, res *Result) error {
	repo, err := req.Repository(ctx)
	if err != nil {
		return nil
	}
	defer repo.Close(context.WithoutCancel(ctx))
	ids, err := repo.ListSnapshots(ctx, req.Name)
	if err != nil || len(ids) == 0 {
		return err
	}
	return prune(ctx, loc, req, repo, res)
}

func strict(req Request, err error) error {
	if req.Strict {
		return err
	}
	return nil
}

// HasVolumeData is the one answer to whether backup name in loc has
// volume data, whose snapshots its deletion must prune: its volume record
// lists a snapshot. A record that cannot be read counts as having some
// (pruning deletes only the snapshots of backups no longer in loc, so
// pruning when unsure loses nothing).
func HasVolumeData(ctx context.Context, loc *store.Location, name string) (bool, error) {
	ok, err := loc.Exists(ctx, store.BackupVolumesKey(name))
	if err != nil || !ok {
		return false, err
	}
	rec, err := volumes.LoadBackupRecord(ctx, loc, name)
	if err != nil || rec == nil {
		return err != nil, nil
	}
	return rec.Snapshots() > 0, nil
}
