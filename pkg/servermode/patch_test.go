package servermode_test

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/servermode"
)

// A run's status patch never lands on a Backup deleted and created again
// under the same name (found by review: the old run's outcome was written
// onto the new object, which then never ran).
func TestStatusPatchOnRecreatedObject(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx := context.Background()
	cs, err := testenv.StartNamedClusters(ctx, t, "one")
	must(t, err)
	root, err := testenv.RepoRoot()
	must(t, err)
	crds, _ := filepath.Glob(filepath.Join(root, "config", "crd", "*.yaml"))
	_, err = testenv.Apply(ctx, cs[0].Config, "", crds...)
	must(t, err)
	cl, err := client.New(cs[0].Config, client.Options{Scheme: servermode.Scheme()})
	must(t, err)
	must(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	b := v1alpha1.NewBackup("x")
	b.Namespace = ns
	must(t, cl.Create(ctx, b))
	// The same object: the patch applies.
	cur := b.DeepCopy()
	cur.Status.Progress = v1alpha1.BackupProgress{ItemsBackedUp: 3, TotalItems: 5}
	must(t, servermode.PatchStatusForTest(ctx, cl, cur, b))
	// Deleted and created again: a Conflict, and the new object untouched.
	must(t, cl.Delete(ctx, b.DeepCopy()))
	nb := v1alpha1.NewBackup("x")
	nb.Namespace = ns
	must(t, cl.Create(ctx, nb))
	cur = b.DeepCopy()
	cur.Status.Phase = v1alpha1.PhaseCompleted
	err = servermode.PatchStatusForTest(ctx, cl, cur, b)
	if !servermode.IsGoneForTest(err) {
		t.Fatalf("patch onto the re-created Backup: %v, want it refused as gone", err)
	}
	got := &v1alpha1.Backup{}
	must(t, cl.Get(ctx, client.ObjectKeyFromObject(nb), got))
	if got.Status.Phase != "" || got.UID == b.UID {
		t.Fatalf("re-created Backup: uid %s phase %q", got.UID, got.Status.Phase)
	}
	// And a deleted one.
	must(t, cl.Delete(ctx, got))
	if err := servermode.PatchStatusForTest(ctx, cl, cur, b); !servermode.IsGoneForTest(err) {
		t.Fatalf("patch of a deleted Backup: %v", err)
	}
}
