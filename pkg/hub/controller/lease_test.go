package controller

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestRenewDeadlineStopsWork: a holder whose renewals stall (its API
// server, or that server's etcd, accepts them and never answers) cancels
// its work within the renew deadline, two thirds of the lease duration,
// so before another process may take over; runLeased says the lease was
// lost.
func TestRenewDeadlineStopsWork(t *testing.T) {
	b := &v1beta1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b", UID: "u1"},
		Status: v1beta1.BackupStatus{Phase: v1beta1.RunInProgress}}
	var stalled atomic.Bool
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(b).WithStatusSubresource(b).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if stalled.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	const duration = 600 * time.Millisecond
	k := leased[*v1beta1.Backup]{client: c, reader: c, opts: &Options{LeaseDuration: duration, Identity: "hub-a"},
		new:   func() *v1beta1.Backup { return &v1beta1.Backup{} },
		lease: func(b *v1beta1.Backup) **v1beta1.Lease { return &b.Status.Lease }}
	k.opts.complete()
	ctx := context.Background()
	if err := k.claim(ctx, b.DeepCopy(), func(*v1beta1.Backup) {}); err != nil {
		t.Fatal(err)
	}
	claimed := time.Now()
	// The first renewal passes; then every request stalls.
	time.AfterFunc(duration/2, func() { stalled.Store(true) })
	var stopped time.Time
	_, err := runLeased(ctx, k, client.ObjectKeyFromObject(b), func(*v1beta1.Backup) {}, func(ctx context.Context) (struct{}, error) {
		select {
		case <-ctx.Done():
			stopped = time.Now()
			return struct{}{}, ctx.Err()
		case <-time.After(10 * duration):
			return struct{}{}, nil
		}
	})
	if !errors.Is(err, errLeaseLost) || !strings.Contains(err.Error(), "not renewed within") {
		t.Fatalf("runLeased: %v, want the lease lost, not renewed within its deadline", err)
	}
	// The last renewal was at about duration/3; another process may take
	// over no sooner than a full duration after it.
	if stopped.IsZero() || stopped.Sub(claimed) > duration/3+duration {
		t.Errorf("the work stopped %s after the claim, want before %s (the last renewal plus the duration)", stopped.Sub(claimed), duration/3+duration)
	}
}

// TestExpiryFromLocalObservation: another process's lease expires a full
// duration after this process first saw it as it is, whatever its renew
// time says (the holder's clock may be off); a renewal seen restarts it.
func TestExpiryFromLocalObservation(t *testing.T) {
	k := leased[*v1beta1.Backup]{opts: &Options{Identity: "hub-b"},
		lease: func(b *v1beta1.Backup) **v1beta1.Lease { return &b.Status.Lease }}
	k.opts.complete()
	hourAgo := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	b := &v1beta1.Backup{ObjectMeta: metav1.ObjectMeta{UID: "u1"},
		Status: v1beta1.BackupStatus{Lease: &v1beta1.Lease{HolderIdentity: "hub-a", LeaseDurationSeconds: 1, RenewTime: hourAgo}}}
	if wait, held := k.heldElsewhere(b); !held || wait < 900*time.Millisecond {
		t.Fatalf("a lease first seen now, renewed an hour ago by the holder's clock: held %v for %s, want held about 1s", held, wait)
	}
	time.Sleep(600 * time.Millisecond)
	if wait, held := k.heldElsewhere(b); !held || wait > 600*time.Millisecond {
		t.Errorf("the same lease 0.6s later: held %v for %s, want held about 0.4s more", held, wait)
	}
	renewed := b.DeepCopy()
	renewed.Status.Lease.RenewTime = metav1.NewMicroTime(hourAgo.Add(time.Second))
	if wait, held := k.heldElsewhere(renewed); !held || wait < 900*time.Millisecond {
		t.Errorf("a renewal seen: held %v for %s, want about 1s again", held, wait)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, held := k.heldElsewhere(renewed); held {
		t.Errorf("a lease unchanged for its duration is still held")
	}
}

// TestClaimTimesByKind: a Migration's Backup and Restore share its name;
// each keeps the time of its own claim, from which its renew deadline
// counts (one used to take the other's).
func TestClaimTimesByKind(t *testing.T) {
	b := &v1beta1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m"}}
	r := &v1beta1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m"}}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(b, r).WithStatusSubresource(b, r).Build()
	opts := &Options{LeaseDuration: time.Minute, Identity: "hub-a"}
	opts.complete()
	kb := leased[*v1beta1.Backup]{client: c, reader: c, opts: opts,
		new:   func() *v1beta1.Backup { return &v1beta1.Backup{} },
		lease: func(b *v1beta1.Backup) **v1beta1.Lease { return &b.Status.Lease }}
	kr := leased[*v1beta1.Restore]{client: c, reader: c, opts: opts,
		new:   func() *v1beta1.Restore { return &v1beta1.Restore{} },
		lease: func(r *v1beta1.Restore) **v1beta1.Lease { return &r.Status.Lease }}
	ctx := context.Background()
	if err := kb.claim(ctx, b.DeepCopy(), func(*v1beta1.Backup) {}); err != nil {
		t.Fatal(err)
	}
	backupClaimed := time.Now()
	time.Sleep(50 * time.Millisecond)
	if err := kr.claim(ctx, r.DeepCopy(), func(*v1beta1.Restore) {}); err != nil {
		t.Fatal(err)
	}
	at, ok := opts.claimed.Load(kb.claimKey(client.ObjectKeyFromObject(b)))
	if !ok || at.(time.Time).After(backupClaimed) {
		t.Errorf("the Backup's claim time: %v (%v), want its own, before %v", at, ok, backupClaimed)
	}
	if _, ok := opts.claimed.Load(kr.claimKey(client.ObjectKeyFromObject(r))); !ok {
		t.Error("the Restore's claim time is missing")
	}
}

// TestRunsIdle: Idle is closed at 0, open while a run is counted, and
// closed again when the last ends; ending one twice counts once.
func TestRunsIdle(t *testing.T) {
	r := NewRuns()
	closed := func() bool {
		select {
		case <-r.Idle():
			return true
		default:
			return false
		}
	}
	if !closed() {
		t.Fatal("a new count is not idle")
	}
	a, b := r.Start(), r.Start()
	a()
	a()
	if closed() {
		t.Error("idle with one run still counted (the first was ended twice)")
	}
	b()
	if !closed() {
		t.Error("not idle once both runs ended")
	}
}
