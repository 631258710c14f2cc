package controller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// TestInterruptedSaysWhetherItEnded: a Backup whose holder stopped is
// ended by one call, which says so; a second call (another hub that saw
// the same expired lease) finds it ended and says it did not end it, so
// that only one Failed Event is recorded (a new user's finding: both
// recorded one).
func TestInterruptedSaysWhetherItEnded(t *testing.T) {
	b := &v1beta1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b"},
		Status: v1beta1.BackupStatus{Phase: v1beta1.RunInProgress, Lease: &v1beta1.Lease{HolderIdentity: "hub-a"}}}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(b).WithStatusSubresource(b).Build()
	k := leased[*v1beta1.Backup]{client: c, reader: c, opts: &Options{},
		new:   func() *v1beta1.Backup { return &v1beta1.Backup{} },
		lease: func(b *v1beta1.Backup) **v1beta1.Lease { return &b.Status.Lease }}
	end := func(cur *v1beta1.Backup) { cur.Status.Phase, cur.Status.Lease = v1beta1.RunFailed, nil }
	terminal := func(cur *v1beta1.Backup) bool { return runEnded(cur.Status.Phase) }
	for i, want := range []bool{true, false} {
		ended, err := k.interrupted(context.Background(), b.DeepCopy(), terminal, end)
		if err != nil || ended != want {
			t.Errorf("call %d: ended %v, %v; want %v", i+1, ended, err, want)
		}
	}
	var got v1beta1.Backup
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), &got); err != nil || got.Status.Phase != v1beta1.RunFailed {
		t.Errorf("the Backup: %v, phase %s; want Failed", err, got.Status.Phase)
	}
}
