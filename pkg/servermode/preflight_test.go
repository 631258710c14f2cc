package servermode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/servermode"
	"github.com/kubeferry/ferry/pkg/store"
)

// A Restore of spec.preflightOnly runs the engine's pre-flight check of
// that restore in the server's cluster: a backup the cluster can take
// ends Completed with its risks and estimate in status.preflight; one
// whose claim names a storage class the cluster lacks ends
// PartiallyFailed, reason PreflightBlocked, the blocker naming the
// claim; spec.dryRun beside it is refused by name. Nothing is written:
// no namespace of either appears, and the location holds no record of
// them.
func TestServerPreflight(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	ctx := context.Background()
	cs, err := testenv.StartNamedClusters(ctx, t, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	must(t, s3.CreateBucket(ctx, "ferry"))
	src := setupSite(t, cs[0], s3, s3.URL("ferry"))
	dst := setupSite(t, cs[1], s3, s3.URL("ferry"))
	src.start(t, servermode.Options{})
	dst.start(t, servermode.Options{})

	must(t, src.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	for _, name := range []string{"a", "b", "c"} {
		must(t, src.cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Data: map[string]string{"k": name}}))
	}
	gold := "gold-nowhere"
	must(t, src.cl.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}))
	for name, excluded := range map[string][]string{"plain": {"persistentvolumeclaims"}, "claims": nil} {
		b := v1alpha1.NewBackup(name)
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"app"}
		b.Spec.ExcludedResources = excluded
		must(t, src.cl.Create(ctx, b))
		waitBackup(t, src, name, 60*time.Second, v1alpha1.PhaseCompleted)
		waitBackup(t, dst, name, 10*time.Second, v1alpha1.PhaseCompleted)
	}
	preflight := func(name, backup string, dryRun bool, phase v1alpha1.Phase) *v1alpha1.Restore {
		r := v1alpha1.NewRestore(name)
		r.Namespace = ns
		r.Spec.BackupName = backup
		r.Spec.NamespaceMapping = map[string]string{"app": name}
		r.Spec.PreflightOnly, r.Spec.DryRun = true, dryRun
		must(t, dst.cl.Create(ctx, r))
		return waitRestore(t, dst, name, phase)
	}

	ok := preflight("pf-ok", "plain", false, v1alpha1.PhaseCompleted)
	p := ok.Status.Preflight
	if p == nil || p.Objects < 4 || p.Blockers != 0 || p.Estimate == nil || len(p.EstimateParts) == 0 {
		t.Fatalf("pf-ok: status.preflight %+v", p)
	}
	checkCondition(t, ok.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonCompleted)

	blocked := preflight("pf-blocked", "claims", false, v1alpha1.PhasePartiallyFailed)
	checkCondition(t, blocked.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonPreflightBlocked)
	p = blocked.Status.Preflight
	if p == nil || p.Blockers < 1 || len(p.Risks) == 0 {
		t.Fatalf("pf-blocked: status.preflight %+v", p)
	}
	r0 := p.Risks[0]
	if r0.Severity != "blocker" || r0.Check != "storage-class" || len(r0.Objects) == 0 || !strings.Contains(strings.Join(r0.Objects, " "), "pf-blocked/data") || !strings.Contains(r0.What, gold) {
		t.Errorf("pf-blocked: first risk %+v, want the claim's missing storage class %s", r0, gold)
	}
	if !strings.Contains(blocked.Status.FailureReason, "1 blocker(s)") {
		t.Errorf("pf-blocked: reason %q", blocked.Status.FailureReason)
	}

	bad := preflight("pf-bad", "plain", true, v1alpha1.PhaseFailed)
	if !strings.Contains(bad.Status.FailureReason, "spec.preflightOnly") || bad.Status.Preflight != nil {
		t.Errorf("pf-bad: reason %q, status.preflight %+v", bad.Status.FailureReason, bad.Status.Preflight)
	}

	loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
	must(t, err)
	defer loc.Close()
	for _, name := range []string{"pf-ok", "pf-blocked", "pf-bad"} {
		if err := dst.cl.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s in the target: %v, want none (nothing written)", name, err)
		}
		if keys, err := loc.Keys(ctx, store.RestoreDir(name)); err != nil || len(keys) > 0 {
			t.Errorf("the location holds %v (%v) of %s, want nothing", keys, err, name)
		}
	}
	if keys, err := loc.Keys(ctx, store.ProbeDir); err != nil || len(keys) > 0 {
		t.Errorf("probe objects left in the location: %v (%v)", keys, err)
	}
}
