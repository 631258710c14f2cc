package helperpod

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func lease(ns, run string, renewed time.Time) *coordinationv1.Lease {
	d := int32(LeaseDuration / time.Second)
	t := metav1.NewMicroTime(renewed)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(run), Namespace: ns, Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: run},
		CreationTimestamp: metav1.NewTime(renewed)}, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &d, RenewTime: &t}}
}

func objects(ns, name, run string, created time.Time) []runtime.Object {
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: run}, CreationTimestamp: metav1.NewTime(created)}
	return []runtime.Object{&corev1.Pod{ObjectMeta: meta}, &corev1.Secret{ObjectMeta: meta}}
}

// TestSweep: the objects of a run whose lease expired go, with the lease;
// those of a live run stay; objects without a lease go once they are
// older than a lease's duration (a run killed before its lease was made
// cannot be told from one just starting before that).
func TestSweep(t *testing.T) {
	now := time.Now()
	objs := []runtime.Object{lease("a", "dead", now.Add(-time.Minute)), lease("a", "live", now)}
	objs = append(objs, objects("a", "dead-1", "dead", now.Add(-2*time.Minute))...)
	objs = append(objs, objects("a", "live-1", "live", now.Add(-2*time.Minute))...)
	objs = append(objs, objects("b", "orphan-old", "gone", now.Add(-time.Minute))...)
	objs = append(objs, objects("b", "orphan-new", "starting", now)...)
	c := fake.NewClientset(objs...)
	n, err := Sweep(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := c.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	secrets, _ := c.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{})
	leases, _ := c.CoordinationV1().Leases("").List(context.Background(), metav1.ListOptions{})
	names := func(ms ...metav1.ObjectMeta) map[string]bool {
		out := map[string]bool{}
		for _, m := range ms {
			out[m.Name] = true
		}
		return out
	}
	var pm, sm, lm []metav1.ObjectMeta
	for _, p := range pods.Items {
		pm = append(pm, p.ObjectMeta)
	}
	for _, s := range secrets.Items {
		sm = append(sm, s.ObjectMeta)
	}
	for _, l := range leases.Items {
		lm = append(lm, l.ObjectMeta)
	}
	for kind, got := range map[string]map[string]bool{"pods": names(pm...), "secrets": names(sm...)} {
		if len(got) != 2 || !got["live-1"] || !got["orphan-new"] {
			t.Errorf("%s after the sweep: %v, want live-1 and orphan-new", kind, got)
		}
	}
	if got := names(lm...); len(got) != 1 || !got[LeaseName("live")] {
		t.Errorf("leases after the sweep: %v, want only the live run's", got)
	}
	if n != 5 {
		t.Errorf("Sweep deleted %d objects, want 5 (two of the dead run, its lease, two orphans)", n)
	}
}
