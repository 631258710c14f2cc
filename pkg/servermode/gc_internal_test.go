package servermode

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// TestGCFinishesAFolderBeingDeleted: an expired Backup with volume data
// whose store folder has lost both markers but not yet its files (the
// remains of a delete, by another cluster's GC or an interrupted `ferry
// backup delete`) has those remains deleted, not kept as if the folder
// held another backup (TestServerPodVolumes "TTL deletes the volume
// snapshots too" lost its snapshots that way), and not waited for (issue
// 29: nobody may ever finish them), and then the Backup is deleted.
func TestGCFinishesAFolderBeingDeleted(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	bsl := &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: "default"},
		Spec:   v1alpha1.BackupStorageLocationSpec{URL: "file://" + dir, Default: true},
		Status: v1alpha1.BackupStorageLocationStatus{Phase: v1alpha1.LocationAvailable}}
	b := v1alpha1.NewBackup("vb")
	b.Namespace = "ferry"
	b.Labels = map[string]string{v1alpha1.LabelStorageLocation: "default"}
	b.Status.Phase = v1alpha1.PhaseCompleted
	exp := metav1.NewTime(now.Add(-time.Second))
	b.Status.Expiration = &exp
	b.Status.PodVolumes = &v1alpha1.PodVolumeSummary{Completed: 1}
	// What a delete in progress leaves: the markers are gone, the archive not yet.
	if err := os.MkdirAll(filepath.Join(dir, "backups", "vb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "backups", "vb", "vb.tar.gz"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(bsl, b).WithStatusSubresource(bsl, b).Build()
	r := &GCReconciler{Client: cl, APIReader: cl, Clock: clocktesting.NewFakePassiveClock(now), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	req := reconcile.Request{NamespacedName: ctrl.ObjectKeyFromObject(b)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "backups", "vb", "vb.tar.gz")); !os.IsNotExist(err) {
		t.Errorf("the remains of the folder: %v (want them deleted)", err)
	}
	if err := cl.Get(ctx, req.NamespacedName, &v1alpha1.Backup{}); !apierrors.IsNotFound(err) {
		t.Errorf("after its remains were deleted: Backup %v (want it deleted)", err)
	}
}
