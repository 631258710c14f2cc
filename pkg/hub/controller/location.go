package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
)

// LocationReconciler checks each BackupStorageLocation when it changes and
// every spec.validationFrequency (default ValidationPeriod): the hub opens
// the store with its own credentials and lists it (storagelocation.Check,
// as server mode does). The
// result is status.phase Available or Unavailable, status.message with
// pkg/store's reason (access denied, bucket not found, unreachable), and
// the condition Available.
type LocationReconciler struct {
	Client client.Client
	Reader client.Reader
	Options
}

// Reconcile checks the location and records the result.
func (r *LocationReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var l v1beta1.BackupStorageLocation
	if err := r.Reader.Get(ctx, req.NamespacedName, &l); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if l.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	orig := l.DeepCopy()
	err := storagelocation.Check(ctx, r.ConnectTimeout, func(ctx context.Context) (*store.Location, error) { return store.Open(ctx, l.Spec.URL) })
	cond := storagelocation.Condition(err, l.Generation)
	if err == nil {
		l.Status.Phase, l.Status.Message = v1beta1.LocationAvailable, ""
	} else {
		l.Status.Phase, l.Status.Message = v1beta1.LocationUnavailable, err.Error()
		if orig.Status.Phase != v1beta1.LocationUnavailable {
			r.Log.Warn("backup storage location unavailable", "location", req.String(), "reason", err)
		}
	}
	now := metav1.Now()
	l.Status.LastValidationTime, l.Status.ObservedGeneration = &now, l.Generation
	meta.SetStatusCondition(&l.Status.Conditions, cond)
	if err := r.Client.Status().Patch(ctx, &l, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{RequeueAfter: storagelocation.NextCheck(l.Spec.ValidationFrequency, r.ValidationPeriod)}, nil
}

// defaultValidationPeriod is how often a location is checked by default.
const defaultValidationPeriod = time.Minute
