package nodeagent

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func lease(node string, renewed time.Time) *coordinationv1.Lease {
	now, dur := metav1.NewMicroTime(renewed), int32(LeaseDurationSecs)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: LeaseName(node)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &now, LeaseDurationSeconds: &dur}}
}

// Alive gives an agent that is starting (no Lease yet) the grace
// period, takes a Lease renewed while watched as alive even when the
// node's clock is far off, and names the node when no agent shows up.
func TestAgentAlive(t *testing.T) {
	ctx := context.Background()
	t.Run("an agent that starts late", func(t *testing.T) {
		cl := fake.NewClientBuilder().WithScheme(scheme()).Build()
		go func() {
			time.Sleep(1500 * time.Millisecond)
			_ = cl.Create(ctx, lease("fresh", time.Now()))
		}()
		if err := Alive(ctx, cl, "ferry", "fresh", 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a node whose clock is an hour behind", func(t *testing.T) {
		l := lease("skewed", time.Now().Add(-time.Hour))
		cl := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(l).Build()
		go func() {
			time.Sleep(1500 * time.Millisecond)
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-time.Hour + 10*time.Second)}
			_ = cl.Update(ctx, l)
		}()
		if err := Alive(ctx, cl, "ferry", "skewed", 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no agent", func(t *testing.T) {
		cl := fake.NewClientBuilder().WithScheme(scheme()).Build()
		start := time.Now()
		err := Alive(ctx, cl, "ferry", "gone", 2*time.Second)
		if err == nil || !strings.Contains(err.Error(), "no node agent runs on node gone") || time.Since(start) < 2*time.Second {
			t.Fatalf("after %s: %v", time.Since(start), err)
		}
	})
	t.Run("a stopped agent", func(t *testing.T) {
		cl := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(lease("stopped", time.Now().Add(-time.Hour))).Build()
		err := Alive(ctx, cl, "ferry", "stopped", 2*time.Second)
		if err == nil || !strings.Contains(err.Error(), "is not running") {
			t.Fatalf("%v", err)
		}
	})
}
