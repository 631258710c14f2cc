package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/retention"
	"github.com/kubeferry/ferry/pkg/store"
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
	// With its finalizer, the delete deletes the data (finalize); one
	// created before Backups had it is deleted here first.
	if b.Status.StorageLocation != "" && !controllerutil.ContainsFinalizer(b, v1beta1.BackupDataFinalizer) {
		if err := r.deleteStored(ctx, b); err != nil {
			return reconcile.Result{}, fmt.Errorf("expired backup %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	r.Log.Info("expired backup deleted", "backup", b.Namespace+"/"+b.Name, "expired", exp.UTC().Format(time.RFC3339))
	uid := b.UID
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, b, client.Preconditions{UID: &uid}))
}

// finalize deletes the data of Backup b, which is being deleted, then
// removes its finalizer: its folder in the location when it is b's, and
// the volume snapshots no backup uses any more (deleteStored). A run
// another hub holds ends first. A failure is written to the status
// (condition DataDeleted False, reason DeletionFailed, naming the error)
// and tried again with the controller's backoff; the Backup stays until
// its data is gone.
func (r *BackupReconciler) finalize(ctx context.Context, b *v1beta1.Backup) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(b, v1beta1.BackupDataFinalizer) {
		return reconcile.Result{}, nil
	}
	if b.Status.Phase == v1beta1.RunInProgress {
		if wait, held := r.leased().heldElsewhere(b); held {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if busy, err := r.restoring(ctx, b); err != nil || busy {
		// A Restore reading the data ends first.
		return reconcile.Result{RequeueAfter: 10 * time.Second}, err
	}
	if b.Status.StorageLocation != "" {
		if err := r.deleteStored(ctx, b); err != nil {
			msg := fmt.Sprintf("deleting the backup's data in %s: %v", store.Redact(b.Status.StorageLocation), err)
			// Written once: a write per attempt would bring the Backup
			// back at once, past the controller's backoff.
			if c := meta.FindStatusCondition(b.Status.Conditions, conditionDataDeleted); c == nil || c.Reason != "DeletionFailed" {
				cur := b.DeepCopy()
				meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: conditionDataDeleted, Status: metav1.ConditionFalse, Reason: "DeletionFailed", Message: msg})
				if werr := r.Client.Status().Update(ctx, cur); werr != nil && !apierrors.IsNotFound(werr) {
					r.Log.Warn("recording a failed deletion", "backup", b.Namespace+"/"+b.Name, "error", werr)
				}
			}
			return reconcile.Result{}, fmt.Errorf("deleted backup %s/%s: %s", b.Namespace, b.Name, msg)
		}
	}
	patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(b, v1beta1.BackupDataFinalizer)
	if err := r.Client.Patch(ctx, b, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.Log.Info("deleted backup: its data is deleted", "backup", b.Namespace+"/"+b.Name)
	return reconcile.Result{}, nil
}

// restoring says whether a Restore of b is in progress.
func (r *BackupReconciler) restoring(ctx context.Context, b *v1beta1.Backup) (bool, error) {
	var list v1beta1.RestoreList
	if err := r.Reader.List(ctx, &list, client.InNamespace(b.Namespace)); err != nil {
		return false, err
	}
	for _, rs := range list.Items {
		if rs.Spec.BackupName == b.Name && rs.Status.Phase == v1beta1.RunInProgress {
			return true, nil
		}
	}
	return false, nil
}

// conditionDataDeleted is false while a deleted Backup's data could not
// be deleted.
const conditionDataDeleted = "DataDeleted"

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
