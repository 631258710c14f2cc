package backup

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
)

// startSource starts a real API server and returns ferry's clients for it
// and an in-memory location.
func startSource(t *testing.T) (*kube.Cluster, *store.Location) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	c, err := testenv.StartCluster(ctx, t, "src")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kube.Connect(ctx, "src", c.Config)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	return cluster, loc
}

// created fails t when a create failed: created(t)(client.Create(...)).
func created(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupSmallFaults: faults a new user found in the selection of a
// backup (issue 16).
func TestBackupSmallFaults(t *testing.T) {
	cluster, loc := startSource(t)
	ctx := context.Background()
	cs := cluster.Typed
	created(t)(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}))
	created(t)(cs.CoreV1().ConfigMaps("a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}))
	created(t)(cs.CoreV1().Events("a").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "cm.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "a", Name: "cm"},
		Reason:         "Test", Message: "an event", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "ferry-test"},
	}, metav1.CreateOptions{}))

	// --include-namespaces a,a: the namespace is backed up once, not
	// refused with "archive entry ... written twice".
	t.Run("namespace named twice", func(t *testing.T) {
		b, _, err := Run(ctx, cluster, loc, Options{Name: "twice", Spec: v1alpha1.BackupSpec{IncludedNamespaces: []string{"a", "a"}}})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Phase != v1alpha1.PhaseCompleted {
			t.Fatalf("phase %s: %s", b.Status.Phase, b.Status.FailureReason)
		}
		if n := b.Status.ResourceCounts["configmaps"]; n != 2 { // cm and kube-root-ca.crt
			t.Errorf("%d ConfigMaps backed up, want 2 (each once)", n)
		}
		if n := b.Status.ResourceCounts["namespaces"]; n != 1 {
			t.Errorf("%d Namespaces backed up, want 1", n)
		}
	})

	// events and events.events.k8s.io are one resource served by two
	// groups: it is backed up once, under events.k8s.io.
	t.Run("events once", func(t *testing.T) {
		b, _, err := Run(ctx, cluster, loc, Options{Name: "events", Spec: v1alpha1.BackupSpec{IncludedNamespaces: []string{"a"}}})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Phase != v1alpha1.PhaseCompleted {
			t.Fatalf("phase %s: %s", b.Status.Phase, b.Status.FailureReason)
		}
		if n := b.Status.ResourceCounts["events"]; n != 0 {
			t.Errorf("%d core events backed up, want 0 (they are backed up as events.events.k8s.io)", n)
		}
		if n := b.Status.ResourceCounts["events.events.k8s.io"]; n < 1 {
			t.Errorf("%d events.events.k8s.io backed up, want the event", n)
		}
		// Asked for by the core group's name only, the events still come, once.
		b, _, err = Run(ctx, cluster, loc, Options{Name: "events-core", Spec: v1alpha1.BackupSpec{IncludedNamespaces: []string{"a"}, IncludedResources: []string{"events"}}})
		if err != nil {
			t.Fatal(err)
		}
		core, grouped := b.Status.ResourceCounts["events"], b.Status.ResourceCounts["events.events.k8s.io"]
		if core != 0 || grouped < 1 {
			t.Errorf("counts %v: want the events once, as events.events.k8s.io", b.Status.ResourceCounts)
		}
	})
}
