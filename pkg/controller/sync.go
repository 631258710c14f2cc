package controller

import (
	"context"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/storagelocation"
)

// AnnotationStoreUID on a Backup that store sync created is the UID the
// stored backup was written with: GC deletes the store folder only when
// it still holds that backup.
const AnnotationStoreUID = "ferry.dev/store-uid"

// labelFromStore marks a Backup that store sync created; the Backup
// reconciler never runs one (its status comes from the store).
const labelFromStore = "ferry.dev/synced-from"

// SyncReconciler keeps the cluster's Backups in step with each Available
// BackupStorageLocation, every Period: the store is the source of truth.
//
//   - A committed, restorable backup (Completed or PartiallyFailed) in the
//     store with no Backup of that name in the cluster is created in the
//     cluster with the store's spec and status (labelled with the
//     location), so a fresh target cluster sees the source's backups.
//   - A Completed or PartiallyFailed Backup of this location whose folder
//     is gone from the store is deleted from the cluster, unless it has
//     expired: the GC deletes that one, after pruning its volume snapshots.
//
// Backups that are Failed, InProgress or Incomplete are left alone both ways.
type SyncReconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader
	Clock     clock.PassiveClock
	Period    time.Duration
	Log       *slog.Logger
}

// Reconcile implements reconcile.Reconciler.
func (r *SyncReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	bsl := &v1alpha1.BackupStorageLocation{}
	if err := r.Client.Get(ctx, req.NamespacedName, bsl); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	again := reconcile.Result{RequeueAfter: r.Period}
	if bsl.Status.Phase != v1alpha1.LocationAvailable {
		return again, nil
	}
	loc, err := storagelocation.Open(ctx, r.APIReader, bsl)
	if err != nil {
		return again, nil // the location reconciler reports it
	}
	defer loc.Close()
	entries, err := loc.ListBackups(ctx)
	if err != nil {
		r.Log.Warn("store sync: listing backups", "location", bsl.Name, "err", err)
		return again, nil
	}
	inStore := map[string]*v1alpha1.Backup{}
	for _, e := range entries {
		inStore[e.Name] = e.Backup
	}
	list := &v1alpha1.BackupList{}
	if err := r.APIReader.List(ctx, list, ctrl.InNamespace(bsl.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	inCluster := map[string]*v1alpha1.Backup{}
	for i := range list.Items {
		inCluster[list.Items[i].Name] = &list.Items[i]
	}
	for _, e := range entries {
		sb := e.Backup
		if sb.Status.Phase != v1alpha1.PhaseCompleted && sb.Status.Phase != v1alpha1.PhasePartiallyFailed {
			continue
		}
		cb := inCluster[e.Name]
		if cb != nil && !(cb.Labels[labelFromStore] != "" && cb.Status.Phase == "") {
			continue
		}
		if err := r.create(ctx, bsl, cb, sb); err != nil {
			return reconcile.Result{}, err
		}
	}
	for _, cb := range inCluster {
		if locationOf(cb) != bsl.Name || inStore[cb.Name] != nil {
			continue
		}
		if cb.Status.Phase != v1alpha1.PhaseCompleted && cb.Status.Phase != v1alpha1.PhasePartiallyFailed {
			continue
		}
		if exp := Expiration(cb); exp != nil && !r.Clock.Now().Before(exp.Time) {
			// Expired: another cluster's GC, sharing the location, deleted
			// the folder, perhaps without the repository password. This
			// cluster's GC deletes the Backup after pruning its volume
			// snapshots; deleting it here would leave them behind.
			continue
		}
		r.Log.Info("store sync: backup gone from the store, deleting it from the cluster", "backup", cb.Name, "location", bsl.Name)
		if err := r.Client.Delete(ctx, cb); ctrl.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	orig := bsl.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	bsl.Status.LastSyncedTime = &now
	return again, r.Client.Status().Patch(ctx, bsl, ctrl.MergeFrom(orig))
}

// create makes the cluster's copy of store backup sb (or finishes cb, a
// copy whose status was not written yet).
func (r *SyncReconciler) create(ctx context.Context, bsl *v1alpha1.BackupStorageLocation, cb, sb *v1alpha1.Backup) error {
	if cb == nil {
		cb = v1alpha1.NewBackup(sb.Name)
		cb.Namespace = bsl.Namespace
		cb.Labels = map[string]string{v1alpha1.LabelStorageLocation: bsl.Name, labelFromStore: bsl.Name}
		if sb.UID != "" {
			cb.Annotations = map[string]string{AnnotationStoreUID: string(sb.UID)}
		}
		cb.Spec = sb.Spec
		cb.Spec.StorageLocationName = bsl.Name
		if err := r.Client.Create(ctx, cb); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}
	}
	cb.Status = sb.Status
	cb.Status.Expiration = Expiration(sb)
	r.Log.Info("store sync: backup created in the cluster", "backup", cb.Name, "location", bsl.Name, "phase", cb.Status.Phase)
	return r.Client.Status().Update(ctx, cb)
}
