package servermode

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
	"github.com/kubeferry/ferry/pkg/storesync"
)

// AnnotationStoreUID and labelFromStore are store sync's marks
// (pkg/storesync).
const (
	AnnotationStoreUID = storesync.AnnotationStoreUID
	labelFromStore     = storesync.LabelSyncedFrom
)

// SyncReconciler keeps the cluster's Backups in step with each Available
// BackupStorageLocation, every Period: the store is the source of truth,
// and storesync.PlanSync (the hub's too) says what to add and remove. A
// Backup it adds has the store's spec and status, labelled with the
// location.
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
	list := &v1alpha1.BackupList{}
	if err := r.APIReader.List(ctx, list, ctrl.InNamespace(bsl.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	inCluster := map[string]*v1alpha1.Backup{}
	known := map[string]storesync.Known{}
	for i := range list.Items {
		cb := &list.Items[i]
		inCluster[cb.Name] = cb
		known[cb.Name] = storesync.Known{Phase: cb.Status.Phase, Synced: cb.Labels[labelFromStore] != "", InLocation: locationOf(cb) == bsl.Name, Expiration: Expiration(cb)}
	}
	plan := storesync.PlanSync(entries, known, r.Clock.Now())
	for _, sb := range plan.Add {
		if err := r.create(ctx, bsl, inCluster[sb.Name], sb); err != nil {
			return reconcile.Result{}, err
		}
	}
	for _, name := range plan.Remove {
		r.Log.Info("store sync: backup gone from the store, deleting it from the cluster", "backup", name, "location", bsl.Name)
		if err := r.Client.Delete(ctx, inCluster[name]); ctrl.IgnoreNotFound(err) != nil {
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
		cb.Annotations = storesync.Annotations(sb)
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
