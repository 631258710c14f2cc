package servermode

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
)

// LocationReconciler validates each BackupStorageLocation when it changes
// and every spec.validationFrequency (default Period): it opens the store
// with the location's credentials and lists it (storagelocation.Check, as
// the hub does). The
// result is status.phase Available or Unavailable, status.message with
// pkg/store's reason (access denied, bucket not found, unreachable, bad
// URL, a missing Secret), and the condition "Available". Backups and
// Restores to an Unavailable location fail at once with that message.
type LocationReconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader
	Clock     clock.PassiveClock
	Period    time.Duration
	Log       *slog.Logger
	// Events, if set, records each change between Available and Unavailable.
	Events kevents.EventRecorder
}

// Reconcile implements reconcile.Reconciler.
func (r *LocationReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	bsl := &v1alpha1.BackupStorageLocation{}
	if err := r.Client.Get(ctx, req.NamespacedName, bsl); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	orig := bsl.DeepCopy()
	err := storagelocation.Check(ctx, 0, func(ctx context.Context) (*store.Location, error) { return storagelocation.Open(ctx, r.APIReader, bsl) })
	cond := storagelocation.Condition(err, bsl.Generation)
	if err == nil {
		bsl.Status.Phase = v1alpha1.LocationAvailable
		bsl.Status.Message = ""
		if orig.Status.Phase != v1alpha1.LocationAvailable {
			events.Record(r.Events, bsl, false, events.Available, "Validate", "the store %s can be listed", bsl.Spec.URL)
		}
		metrics.LocationChecked(bsl.Name, true)
	} else {
		bsl.Status.Phase = v1alpha1.LocationUnavailable
		bsl.Status.Message = err.Error()
		metrics.LocationChecked(bsl.Name, false)
		if orig.Status.Phase != v1alpha1.LocationUnavailable {
			r.Log.Warn("backup storage location unavailable", "location", bsl.Name, "reason", err)
			events.Record(r.Events, bsl, true, events.Unavailable, "Validate", "%v", err)
		}
	}
	now := metav1.NewTime(r.Clock.Now())
	bsl.Status.LastValidationTime = &now
	meta.SetStatusCondition(&bsl.Status.Conditions, cond)
	if err := r.Client.Status().Patch(ctx, bsl, ctrl.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: storagelocation.NextCheck(bsl.Spec.ValidationFrequency, r.Period)}, nil
}
