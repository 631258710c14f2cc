package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// MigrationReconciler carries Migrations out, one per worker, each under a
// lease in its status (docs/design.md#the-hub):
//   - a Migration nobody holds, or whose holder's lease expired while it
//     was Pending, is claimed and run;
//   - one whose lease another process holds is left alone until the lease
//     expires;
//   - one whose holder stopped in a step (the lease expired, or this
//     process restarted) is Failed with reason HubInterrupted, as its
//     backup or restore may be partial. It is never resumed silently, and
//     never shown Completed unless every step ended;
//   - a staged Migration (spec.staged) runs a stage at a time, and its
//     cutover, each under the lease, and resumes from its journal
//     instead (reconcileStaged).
type MigrationReconciler struct {
	Client client.Client
	// Reader reads the hub directly, not the cache; default Client.
	Reader client.Reader
	Options
}

func terminal(p v1beta1.MigrationPhase) bool {
	return p == v1beta1.PhaseCompleted || p == v1beta1.PhasePartiallyFailed || p == v1beta1.PhaseFailed
}

// Reconcile claims and runs a Migration, or fails one whose holder stopped.
func (r *MigrationReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.complete()
	if r.Reader == nil {
		r.Reader = r.Client
	}
	var m v1beta1.Migration
	if err := r.Reader.Get(ctx, req.NamespacedName, &m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if terminal(m.Status.Phase) || m.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	if wait, held := r.leased().heldElsewhere(&m); held {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if m.Spec.Staged != nil {
		return r.reconcileStaged(ctx, &m)
	}
	if m.Status.Phase != "" && m.Status.Phase != v1beta1.PhasePending {
		return reconcile.Result{}, r.failInterrupted(ctx, &m)
	}
	if err := r.claim(ctx, &m); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.run(ctx, &m)
	return reconcile.Result{}, nil
}

// leased writes Migrations' status under their lease.
func (r *MigrationReconciler) leased() leased[*v1beta1.Migration] {
	return leased[*v1beta1.Migration]{client: r.Client, reader: r.Reader, opts: &r.Options,
		new:   func() *v1beta1.Migration { return &v1beta1.Migration{} },
		lease: func(m *v1beta1.Migration) **v1beta1.Lease { return &m.Status.Lease }}
}

// claim takes the lease of m, at m's resourceVersion: of two hubs, one
// gets a conflict.
func (r *MigrationReconciler) claim(ctx context.Context, m *v1beta1.Migration) error {
	return r.leased().claim(ctx, m, func(m *v1beta1.Migration) {
		now := r.now()
		m.Status.Phase = v1beta1.PhasePending
		m.Status.ObservedGeneration = m.Generation
		m.Status.StartTime = &now
		m.Status.Reason, m.Status.Message = "", ""
	})
}

// failInterrupted ends m, whose holder stopped during a step, as Failed.
func (r *MigrationReconciler) failInterrupted(ctx context.Context, m *v1beta1.Migration) error {
	who, ago := stoppedBy(m.Status.Lease)
	msg := fmt.Sprintf("%s stopped during step %s%s; backup and restore %q in %s may be partial, and the target may hold part of the restore: delete them (ferry backup delete, ferry restore delete) and create the Migration again",
		who, m.Status.Phase, ago, m.Name, m.Spec.Storage.Location)
	ended, err := r.leased().interrupted(ctx, m,
		func(cur *v1beta1.Migration) bool { return terminal(cur.Status.Phase) },
		func(cur *v1beta1.Migration) { end(&cur.Status, v1beta1.PhaseFailed, "HubInterrupted", msg, r.now()) })
	if ended {
		events.End(r.Events, m, "Migrate", string(v1beta1.PhaseFailed), 0, 0, msg)
	}
	return err
}

// end sets the terminal phase, the Succeeded condition and the completion
// time, and releases the lease.
func end(s *v1beta1.MigrationStatus, phase v1beta1.MigrationPhase, reason, msg string, now metav1.Time) {
	s.Phase, s.Reason, s.Message, s.CompletionTime, s.Lease = phase, reason, msg, &now, nil
	cond := metav1.ConditionFalse
	if phase == v1beta1.PhaseCompleted {
		cond = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1beta1.MigrationConditionSucceeded, Status: cond, Reason: reason, Message: msg})
}

// update applies change to the Migration's latest status and writes it,
// renewing the lease; errLeaseLost when another process holds it, or the
// Migration is gone.
func (r *MigrationReconciler) update(ctx context.Context, key types.NamespacedName, change func(*v1beta1.MigrationStatus)) error {
	return r.leased().update(ctx, key, func(m *v1beta1.Migration) { change(&m.Status) })
}
