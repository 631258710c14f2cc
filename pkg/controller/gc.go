package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// GCReconciler deletes a finished Backup (Completed, PartiallyFailed or
// Failed) once its expiration passes: first its data from the store
// (pkg/store DeleteBackup: the commit marker first, so an interrupted
// delete leaves it Incomplete, never Completed with parts missing), then
// the Backup. If the store cannot be reached the Backup is kept and the
// delete retried. The expiration is status.expiration, or for a Backup
// synced from a store without one, status.startTimestamp + spec.ttl.
//
// The store folder is deleted only if it holds this Backup's own data:
// the stored backup's UID is the Backup's (a backup the server took) or
// the one store sync recorded (AnnotationStoreUID). A Backup that failed
// because the name was taken in the store, or a store folder written
// since by someone else, never loses another backup's data: the Backup
// alone is deleted, with a Warning event. With a repository password,
// the kopia snapshots of the deleted backup go too
// (volumes.Repository.PruneDeletedBackups).
type GCReconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader
	Clock     clock.PassiveClock
	MaxWait   time.Duration
	Log       *slog.Logger
	// RepositoryPassword, if set, opens the volume repository to delete
	// the expired backup's snapshots.
	RepositoryPassword string
	Events             events.EventRecorder
}

// Expiration returns when b expires, or nil.
func Expiration(b *v1alpha1.Backup) *metav1.Time {
	if b.Status.Expiration != nil {
		return b.Status.Expiration
	}
	if ttl := b.Spec.TTL; ttl != nil && ttl.Duration > 0 && b.Status.StartTimestamp != nil {
		t := metav1.NewTime(b.Status.StartTimestamp.Add(ttl.Duration))
		return &t
	}
	return nil
}

// Reconcile implements reconcile.Reconciler.
func (r *GCReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	b := &v1alpha1.Backup{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	switch b.Status.Phase {
	case v1alpha1.PhaseCompleted, v1alpha1.PhasePartiallyFailed, v1alpha1.PhaseFailed:
	default:
		return reconcile.Result{}, nil
	}
	exp := Expiration(b)
	if exp == nil || b.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	if now.Before(exp.Time) {
		wait := exp.Sub(now)
		if r.MaxWait > 0 && wait > r.MaxWait {
			wait = r.MaxWait
		}
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	bsl, err := storagelocation.Resolve(ctx, r.Client, b.Namespace, locationOf(b))
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
	}
	loc, err := storagelocation.Open(ctx, r.APIReader, bsl)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
	}
	defer loc.Close()
	stored, err := loc.GetBackup(ctx, b.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Deleted already (by another cluster's GC sharing the location,
		// perhaps without the password): its snapshots may be left.
		if pv := b.Status.PodVolumes; pv != nil && pv.Completed > 0 {
			r.pruneVolumes(ctx, loc, b)
		}
	case err != nil && !errors.Is(err, store.ErrIncomplete):
		return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
	case err != nil && stored.UID == "" && b.Status.PodVolumes != nil && b.Status.PodVolumes.Completed > 0:
		// Neither marker left, some files: another cluster's GC is deleting
		// the folder (markers first). Once it is gone, the case above
		// prunes the volume snapshots; deleting the Backup now would leave
		// them behind.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	case !owns(b, stored):
		r.Log.Warn("expired backup: the store folder of that name holds another backup; only the Backup object is deleted", "backup", b.Name, "storeUID", stored.UID, "uid", b.UID)
		event(r.Events, b, true, "StoreFolderKept", "Expire", "expired; the store folder %s holds another backup of the same name (UID %s), which is kept", b.Name, stored.UID)
	default:
		hasVolumes, err := loc.Exists(ctx, store.BackupVolumesKey(b.Name))
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
		}
		// Another cluster's GC may be deleting the same folder (its record
		// first gone): the Backup's status says it had volume data too.
		if pv := b.Status.PodVolumes; pv != nil && pv.Completed > 0 {
			hasVolumes = true
		}
		if err := loc.DeleteBackup(ctx, b.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
		}
		if hasVolumes {
			r.pruneVolumes(ctx, loc, b)
		}
	}
	r.Log.Info("expired backup deleted", "backup", b.Name, "expired", exp.UTC().Format(time.RFC3339))
	return reconcile.Result{}, ctrl.IgnoreNotFound(r.Client.Delete(ctx, b))
}

// owns reports whether stored (the store's record of the backup named as
// b) is b's own: see GCReconciler.
func owns(b, stored *v1alpha1.Backup) bool {
	if stored.UID == "" {
		// Written before backups carried a UID: only a Backup that store
		// sync made from this very record stands for it.
		return b.Labels[labelFromStore] != ""
	}
	return stored.UID == b.UID || types.UID(b.Annotations[AnnotationStoreUID]) == stored.UID
}

// pruneVolumes deletes the kopia snapshots of backups no longer in loc.
// Failures are warnings: the next delete (GC, or ferry backup delete)
// prunes what this one left.
func (r *GCReconciler) pruneVolumes(ctx context.Context, loc *store.Location, b *v1alpha1.Backup) {
	if r.RepositoryPassword == "" {
		event(r.Events, b, true, "VolumeDataKept", "Expire", "the backup's pod volume snapshots were not deleted: the server has no volume repository password")
		return
	}
	repo, err := volumes.Open(ctx, loc, r.RepositoryPassword, volumes.OpenOptions{})
	if err == nil {
		defer repo.Close(context.WithoutCancel(ctx))
		var n int
		if n, err = repo.PruneDeletedBackups(ctx, loc); err == nil {
			r.Log.Info("expired backup: volume snapshots deleted", "backup", b.Name, "snapshots", n)
			return
		}
	}
	r.Log.Warn("expired backup: volume snapshots not deleted", "backup", b.Name, "err", err)
	event(r.Events, b, true, "VolumeDataKept", "Expire", "the backup's pod volume snapshots were not deleted: %v", err)
}
