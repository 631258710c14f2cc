package nodeagent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// The agent's work on a PodVolumeBackup stops when the object is deleted
// or the server ends it (found by review: it went on uploading for
// nobody, and the node's next volumes queued behind it); an outcome the
// agent could not write is written on the retried reconcile instead of
// the object being taken for one a stopped agent left.
func TestNodeAgentWork(t *testing.T) {
	ctx := context.Background()
	newAgent := func() (*Reconciler, *v1alpha1.PodVolumeBackup) {
		pvb := &v1alpha1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: "p", UID: "u1"},
			Status: v1alpha1.PodVolumeStatus{Phase: v1alpha1.PhaseInProgress}}
		cl := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(pvb).WithStatusSubresource(pvb).Build()
		a := &Reconciler{Client: cl, APIReader: cl, Opts: Options{Clock: clock.RealClock{}}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		got := &v1alpha1.PodVolumeBackup{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pvb), got); err != nil {
			t.Fatal(err)
		}
		return a, got
	}
	for name, end := range map[string]func(a *Reconciler, p *v1alpha1.PodVolumeBackup){
		"deleted": func(a *Reconciler, p *v1alpha1.PodVolumeBackup) { _ = a.Client.Delete(ctx, p.DeepCopy()) },
		"ended by the server": func(a *Reconciler, p *v1alpha1.PodVolumeBackup) {
			q := p.DeepCopy()
			q.Status.Phase, q.Status.Message = v1alpha1.PhaseFailed, "not finished within 4h"
			_ = a.Client.Status().Update(ctx, q)
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, p := newAgent()
			start := time.Now()
			a.withProgress(ctx, p, &p.Status, func(work context.Context, progress func(volumes.Totals)) {
				end(a, p)
				select {
				case <-work.Done():
				case <-time.After(10 * time.Second):
				}
			})
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("work went on for %s", took)
			}
		})
	}
	t.Run("an outcome written late", func(t *testing.T) {
		a, p := newAgent()
		outcome := &v1alpha1.PodVolumeStatus{Phase: v1alpha1.PhaseCompleted, SnapshotID: "s1"}
		a.unwritten = map[types.UID]*v1alpha1.PodVolumeStatus{p.UID: outcome}
		run, err := a.claim(ctx, p, &p.Status)
		if err != nil || run {
			t.Fatalf("claim: %v %v", run, err)
		}
		got := &v1alpha1.PodVolumeBackup{}
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil || got.Status.Phase != v1alpha1.PhaseCompleted || got.Status.SnapshotID != "s1" {
			t.Fatalf("status %+v (%v): the agent's own outcome, not Failed as left by a stopped agent", got.Status, err)
		}
	})
}
