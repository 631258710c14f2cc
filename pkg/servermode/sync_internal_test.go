package servermode

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// TestSyncLeavesExpiredBackupsToGC: a Backup whose store folder is gone
// is deleted by store sync, unless it has expired. Then another cluster's
// GC deleted the folder, and this cluster's GC must still prune the
// backup's volume snapshots before it deletes the Backup (a race that
// TestServerPodVolumes "TTL deletes the volume snapshots too" lost when
// sync came first).
func TestSyncLeavesExpiredBackupsToGC(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	bsl := &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: "default"},
		Spec:   v1alpha1.BackupStorageLocationSpec{URL: "file://" + t.TempDir(), Default: true},
		Status: v1alpha1.BackupStorageLocationStatus{Phase: v1alpha1.LocationAvailable}}
	backup := func(name string, expires time.Time) *v1alpha1.Backup {
		b := v1alpha1.NewBackup(name)
		b.Namespace = "ferry"
		b.Labels = map[string]string{v1alpha1.LabelStorageLocation: "default"}
		b.Spec.StorageLocationName = "default"
		b.Status.Phase = v1alpha1.PhaseCompleted
		exp := metav1.NewTime(expires)
		b.Status.Expiration = &exp
		b.Status.PodVolumes = &v1alpha1.PodVolumeSummary{Completed: 1}
		return b
	}
	expired, live := backup("expired", now.Add(-time.Second)), backup("live", now.Add(time.Hour))
	cl := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(bsl, expired, live).WithStatusSubresource(bsl, expired, live).Build()
	r := &SyncReconciler{Client: cl, APIReader: cl, Clock: clocktesting.NewFakePassiveClock(now), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: ctrl.ObjectKeyFromObject(bsl)}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, ctrl.ObjectKeyFromObject(expired), &v1alpha1.Backup{}); err != nil {
		t.Errorf("the expired Backup gone from the store: %v (want it kept for the GC)", err)
	}
	if err := cl.Get(ctx, ctrl.ObjectKeyFromObject(live), &v1alpha1.Backup{}); err == nil {
		t.Error("the unexpired Backup gone from the store was kept (want it deleted)")
	}
}
