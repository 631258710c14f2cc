package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/schedule"
	"github.com/kubeferry/ferry/pkg/transform"
)

// ScheduleReconciler creates a hub Backup from each Schedule's template
// when its cron expression comes due, as server mode's Schedules do
// (pkg/schedule): runs missed while the hub was down collapse into
// one, for the latest time due, and runs missed while paused are not made
// up. The hub's registry refused an expression that does not parse.
type ScheduleReconciler struct {
	Client client.Client
	Reader client.Reader
	Options
}

// Reconcile creates the Backup that is due, if any, and records the next
// time due.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var s v1beta1.Schedule
	if err := r.Reader.Get(ctx, req.NamespacedName, &s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	sched, err := schedule.Parse(s.Spec.Schedule)
	if err != nil {
		return reconcile.Result{}, nil // refused at create; stored by an older hub
	}
	orig := s.DeepCopy()
	s.Status.ObservedGeneration = s.Generation
	if s.Spec.Paused {
		s.Status.Phase, s.Status.NextBackup = v1beta1.SchedulePaused, nil
		return reconcile.Result{}, r.Client.Status().Patch(ctx, &s, client.MergeFrom(orig))
	}
	now := r.Clock.Now().UTC()
	var last *time.Time
	if s.Status.LastBackup != nil {
		last = &s.Status.LastBackup.Time
	}
	due, next := schedule.Due(sched, s.CreationTimestamp.Time, last, orig.Status.Phase == v1beta1.SchedulePaused, now)
	if due != nil {
		if err := r.createBackup(ctx, &s, *due); err != nil {
			return reconcile.Result{}, err
		}
		lb := metav1.NewTime(*due)
		s.Status.LastBackup = &lb
	}
	nb := metav1.NewTime(next)
	s.Status.Phase, s.Status.NextBackup = v1beta1.ScheduleEnabled, &nb
	if err := r.Client.Status().Patch(ctx, &s, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: next.Sub(r.Clock.Now()) + 10*time.Millisecond}, nil
}

// createBackup creates <schedule>-<due> from the template; one that
// exists already (a retry) is fine.
func (r *ScheduleReconciler) createBackup(ctx context.Context, s *v1beta1.Schedule, due time.Time) error {
	b := &v1beta1.Backup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      schedule.BackupName(s.Name, due),
			Labels:    map[string]string{v1beta1.LabelSchedule: transform.LabelValue(s.Name)},
		},
		Spec: *s.Spec.Template.DeepCopy(),
	}
	if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("schedule %s/%s: creating backup %s: %w", s.Namespace, s.Name, b.Name, err)
	}
	r.Log.Info("scheduled backup created", "schedule", s.Namespace+"/"+s.Name, "backup", b.Name)
	return nil
}
