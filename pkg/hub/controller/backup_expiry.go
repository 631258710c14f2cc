package controller

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/retention"
	"github.com/kubeferry/ferry/pkg/storesync"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// expire deletes an ended Backup whose status.expiration passed, with
// pkg/retention as server mode and the CLI do: its folder in the location
// (when it is this Backup's, by UID), the volume snapshots no backup in
// the location uses any more (also when the folder was deleted out of
// band), and then the hub object. Before then it is looked at again at
// its expiration.
func (r *BackupReconciler) expire(ctx context.Context, b *v1beta1.Backup) (reconcile.Result, error) {
	exp := b.Status.Expiration
	if exp == nil {
		return reconcile.Result{}, nil
	}
	if due, wait := retention.Due(exp.Time, r.Clock.Now(), 0); !due {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if b.Status.StorageLocation != "" {
		if err := r.deleteStored(ctx, b); err != nil {
			return reconcile.Result{}, fmt.Errorf("expired backup %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	r.Log.Info("expired backup deleted", "backup", b.Namespace+"/"+b.Name, "expired", exp.UTC().Format(time.RFC3339))
	uid := b.UID
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, b, client.Preconditions{UID: &uid}))
}

// deleteStored deletes b's folder in its location, if it is b's, and
// prunes the volume snapshots; the location is opened with the
// credentials of the BackupStorageLocation b was written to
// (backupAccess).
func (r *BackupReconciler) deleteStored(ctx context.Context, b *v1beta1.Backup) error {
	a, err := backupAccess(ctx, r.Reader, b)
	if err != nil {
		return err
	}
	loc, _, err := a.open(ctx, r.Reader, "LocationUnavailable")
	if err != nil {
		return err
	}
	defer loc.Close()
	res, err := retention.Delete(ctx, loc, retention.Request{Name: b.Name,
		Owns:          func(stored *v1alpha1.Backup) bool { return storesync.Owns(b.UID, b.Labels, b.Annotations, stored) },
		HadVolumeData: b.Status.PodVolumes != nil && b.Status.PodVolumes.Completed > 0,
		Repository: func(ctx context.Context) (*volumes.Repository, error) {
			if r.Volumes.Password == "" {
				return nil, errNoPassword
			}
			return volumes.Open(ctx, loc, r.Volumes.Password, volumes.OpenOptions{Log: r.Log})
		}})
	switch {
	case err != nil:
		return err
	case res.Folder == retention.FolderKeptOther:
		r.Log.Warn("expired backup: the store folder of that name holds another backup, and is kept", "backup", b.Name, "storeUID", res.Stored.UID)
	case res.VolumeError != nil:
		r.Log.Warn("expired backup: volume snapshots not deleted", "backup", b.Name, "error", res.VolumeError)
	case res.Snapshots > 0:
		r.Log.Info("expired backup: volume snapshots deleted", "backup", b.Name, "snapshots", res.Snapshots)
	}
	return nil
}
