package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// GCReconciler deletes a finished Backup (Completed, PartiallyFailed or
// Failed) once its expiration passes: first its data from the store
// (pkg/store DeleteBackup: the commit marker first, so an interrupted
// delete leaves it Incomplete, never Completed with parts missing), then
// the Backup. If the store cannot be reached the Backup is kept and the
// delete retried. The expiration is status.expiration, or for a Backup
// synced from a store without one, status.startTimestamp + spec.ttl.
type GCReconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader
	Clock     clock.PassiveClock
	MaxWait   time.Duration
	Log       *slog.Logger
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
	bsl, err := resolveLocation(ctx, r.Client, b.Namespace, locationOf(b))
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
	}
	loc, err := openLocation(ctx, r.APIReader, bsl)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
	}
	defer loc.Close()
	if err := loc.DeleteBackup(ctx, b.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, fmt.Errorf("expired backup %s: %w", b.Name, err)
	}
	r.Log.Info("expired backup deleted", "backup", b.Name, "expired", exp.UTC().Format(time.RFC3339))
	return reconcile.Result{}, ctrl.IgnoreNotFound(r.Client.Delete(ctx, b))
}
