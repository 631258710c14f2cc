package servermode

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/schedule"
	"github.com/kubeferry/ferry/pkg/transform"
)

// ScheduleReconciler creates a Backup from each Schedule's template when
// its cron expression comes due (pkg/schedule, as for the hub). Runs
// missed while the server was down are collapsed into one Backup, for
// the latest time due. An expression that does not parse, or a schedule
// name too long for its Backups' names, marks the Schedule
// FailedValidation with the reason; the server goes on.
//
// Time comes from Clock, and a Schedule is looked at again at its next
// run or after MaxWait, whichever is sooner, so a test can move a fake
// clock and see the Backup within MaxWait.
type ScheduleReconciler struct {
	Client  ctrl.Client
	Clock   clock.PassiveClock
	MaxWait time.Duration
	Log     *slog.Logger
}

// Reconcile implements reconcile.Reconciler.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := &v1alpha1.Schedule{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	orig := s.DeepCopy()
	sched, err := schedule.Parse(s.Spec.Schedule)
	if err == nil {
		err = schedule.ValidateName(s.Name)
	} else {
		err = field.Invalid(field.NewPath("spec", "schedule"), s.Spec.Schedule, err.Error())
	}
	if err == nil {
		err = validateTemplate(field.NewPath("spec"), s.Spec.TTL, field.NewPath("spec", "template"), s.Spec.Template)
	}
	if err != nil {
		s.Status.Phase = v1alpha1.SchedulePhaseFailedValidation
		s.Status.ValidationErrors = []string{err.Error()}
		s.Status.NextBackup = nil
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: "InvalidSchedule", Message: err.Error(), ObservedGeneration: s.Generation})
		r.Log.Warn("schedule failed validation", "schedule", s.Name, "reason", err)
		return reconcile.Result{}, r.Client.Status().Patch(ctx, s, ctrl.MergeFrom(orig))
	}
	s.Status.ValidationErrors = nil
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Parsed", Message: "the schedule parses", ObservedGeneration: s.Generation})
	if s.Spec.Paused {
		s.Status.Phase = v1alpha1.SchedulePhasePaused
		s.Status.NextBackup = nil
		return reconcile.Result{}, r.Client.Status().Patch(ctx, s, ctrl.MergeFrom(orig))
	}
	now := r.Clock.Now().UTC()
	var last *time.Time
	if s.Status.LastBackup != nil {
		last = &s.Status.LastBackup.Time
	}
	due, next := schedule.Due(sched, s.CreationTimestamp.Time, last, orig.Status.Phase == v1alpha1.SchedulePhasePaused, now)
	if due != nil {
		if err := r.createBackup(ctx, s, *due); err != nil {
			return reconcile.Result{}, err
		}
		lb := metav1.NewTime(*due)
		s.Status.LastBackup = &lb
	}
	nb := metav1.NewTime(next)
	s.Status.NextBackup = &nb
	s.Status.Phase = v1alpha1.SchedulePhaseEnabled
	if err := r.Client.Status().Patch(ctx, s, ctrl.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, err
	}
	wait := next.Sub(now)
	if r.MaxWait > 0 && wait > r.MaxWait {
		wait = r.MaxWait
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// createBackup creates <schedule>-<due> from the template; one that
// exists already (a retry) is fine.
func (r *ScheduleReconciler) createBackup(ctx context.Context, s *v1alpha1.Schedule, due time.Time) error {
	b := v1alpha1.NewBackup(schedule.BackupName(s.Name, due))
	b.Namespace = s.Namespace
	b.Labels = map[string]string{v1alpha1.LabelSchedule: transform.LabelValue(s.Name)}
	b.Spec = *s.Spec.Template.DeepCopy()
	if s.Spec.TTL != nil {
		b.Spec.TTL = s.Spec.TTL.DeepCopy()
	}
	if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("schedule %s: creating backup %s: %w", s.Name, b.Name, err)
	}
	r.Log.Info("scheduled backup created", "schedule", s.Name, "backup", b.Name)
	return nil
}

// validateTemplate checks what a Backup (or a Schedule's template) may
// not say in server mode: a negative TTL (it would mean "keep" silently),
// or spec.storageLocation, which ferry writes itself (the location's
// URL; Velero's field of that name is spec.storageLocationName here).
// Errors are *field.Error: ttl is at ttlParent.ttl, spec at specPath.
func validateTemplate(ttlParent *field.Path, ttl *metav1.Duration, specPath *field.Path, spec v1alpha1.BackupSpec) error {
	if ttl != nil && ttl.Duration < 0 {
		return field.Invalid(ttlParent.Child("ttl"), ttl.Duration.String(), "negative (omit it to keep the backup)")
	}
	if spec.StorageLocation != "" {
		return field.Forbidden(specPath.Child("storageLocation"), fmt.Sprintf("%q: set by ferry (the location's URL): name the BackupStorageLocation in %s", spec.StorageLocation, specPath.Child("storageLocationName")))
	}
	return nil
}
