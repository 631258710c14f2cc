package servermode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/retention"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/storesync"
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
// the kopia snapshots of the deleted backup go too, also when its folder
// was deleted out of band; pkg/retention does the deleting, as for the
// CLI and the hub.
type GCReconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader
	Clock     clock.PassiveClock
	MaxWait   time.Duration
	Log       *slog.Logger
	// RepositoryPassword, if set, opens the volume repository to delete
	// the expired backup's snapshots.
	RepositoryPassword string
	Events             kevents.EventRecorder
}

// Expiration returns when b expires, or nil (retention.Expiration).
func Expiration(b *v1alpha1.Backup) *metav1.Time {
	return retention.Expiration(b.Status.Expiration, b.Status.StartTimestamp, b.Spec.TTL)
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
	if due, wait := retention.Due(exp.Time, r.Clock.Now(), r.MaxWait); !due {
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
	res, err := retention.Delete(ctx, loc, retention.Request{Name: b.Name,
		Owns:          func(stored *v1alpha1.Backup) bool { return owns(b, stored) },
		HadVolumeData: b.Status.PodVolumes != nil && b.Status.PodVolumes.Completed > 0,
		Repository:    r.repository(loc)})
	switch {
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
	case res.Folder == retention.FolderKeptOther:
		r.Log.Warn("expired backup: the store folder of that name holds another backup; only the Backup object is deleted", "backup", b.Name, "storeUID", res.Stored.UID, "uid", b.UID)
		events.Record(r.Events, b, true, "StoreFolderKept", "Expire", "expired; the store folder %s holds another backup of the same name (UID %s), which is kept", b.Name, res.Stored.UID)
	case res.VolumeError != nil:
		r.Log.Warn("expired backup: volume snapshots not deleted", "backup", b.Name, "err", res.VolumeError)
		events.Record(r.Events, b, true, "VolumeDataKept", "Expire", "%v", res.VolumeError)
	case res.Snapshots > 0:
		r.Log.Info("expired backup: volume snapshots deleted", "backup", b.Name, "snapshots", res.Snapshots)
	}
	r.Log.Info("expired backup deleted", "backup", b.Name, "expired", exp.UTC().Format(time.RFC3339))
	return reconcile.Result{}, ctrl.IgnoreNotFound(r.Client.Delete(ctx, b))
}

// owns reports whether stored (the store's record of the backup named as
// b) is b's own: see GCReconciler.
func owns(b, stored *v1alpha1.Backup) bool {
	return storesync.Owns(b.UID, b.Labels, b.Annotations, stored)
}

// repository opens loc's volume repository with the server's password.
func (r *GCReconciler) repository(loc *store.Location) func(context.Context) (*volumes.Repository, error) {
	return func(ctx context.Context) (*volumes.Repository, error) {
		if r.RepositoryPassword == "" {
			return nil, errors.New("the server has no volume repository password")
		}
		return volumes.Open(ctx, loc, r.RepositoryPassword, volumes.OpenOptions{Log: r.Log})
	}
}
