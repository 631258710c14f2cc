package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// TestFinalizeWaitsForRestores: a deleted Backup keeps its finalizer (and
// so its data) while a Restore of it is in progress, and loses it once
// none is (a reviewer's finding: the data went from under a running
// Restore).
func TestFinalizeWaitsForRestores(t *testing.T) {
	now := metav1.Now()
	b := &v1beta1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b", DeletionTimestamp: &now, Finalizers: []string{v1beta1.BackupDataFinalizer}},
		Status: v1beta1.BackupStatus{Phase: v1beta1.RunCompleted}}
	rs := &v1beta1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "r"}, Spec: v1beta1.RestoreSpec{BackupName: "b"},
		Status: v1beta1.RestoreStatus{Phase: v1beta1.RunInProgress}}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(b, rs).WithStatusSubresource(rs).Build()
	r := &BackupReconciler{Client: c, Reader: c}
	r.complete()
	ctx := context.Background()
	res, err := r.finalize(ctx, b.DeepCopy())
	if err != nil || res.RequeueAfter != 10*time.Second {
		t.Fatalf("finalize with a Restore in progress: %+v, %v; want a requeue in 10s", res, err)
	}
	var got v1beta1.Backup
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), &got); err != nil || len(got.Finalizers) != 1 {
		t.Fatalf("the Backup during the Restore: %v, finalizers %v; want it kept", err, got.Finalizers)
	}
	rs.Status.Phase = v1beta1.RunCompleted
	if err := c.Status().Update(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if _, err := r.finalize(ctx, got.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), &got); err == nil {
		t.Errorf("the Backup after the Restore ended: still there with finalizers %v, want gone", got.Finalizers)
	}
}
