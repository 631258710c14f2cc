package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// leased writes the status of objects of one kind (Migration, Backup,
// Restore) that a hub process carries out under a lease in their status:
// each write renews the lease, and fails with errLeaseLost once another
// process holds it or the object is gone.
type leased[T client.Object] struct {
	client client.Client
	reader client.Reader
	opts   *Options
	new    func() T
	lease  func(T) **v1beta1.Lease
}

// errLeaseLost is returned when another process took the object over, or
// it was deleted.
var errLeaseLost = errors.New("the lease was lost")

func leaseExpiry(l *v1beta1.Lease) time.Time {
	return l.RenewTime.Add(time.Duration(l.LeaseDurationSeconds) * time.Second)
}

// heldElsewhere says how long to wait when another process holds obj's
// lease and it has not expired. Expiry is judged as client-go's leader
// election judges it: from the local time this process first saw the
// lease as it is now (holder and renew time), plus its duration, never
// from the holder's clock.
func (k leased[T]) heldElsewhere(obj T) (time.Duration, bool) {
	l := *k.lease(obj)
	if l == nil || l.HolderIdentity == k.opts.Identity {
		return 0, false
	}
	seen := k.opts.observed.seen(obj.GetUID(), l, time.Now())
	if wait := time.Until(seen.Add(time.Duration(l.LeaseDurationSeconds) * time.Second)); wait > 0 {
		return wait + 100*time.Millisecond, true
	}
	return 0, false
}

// observations are the leases of other processes as this one saw them
// change, by object UID.
type observations struct {
	mu     sync.Mutex
	leases map[types.UID]observation
}

type observation struct {
	holder string
	renew  time.Time
	at     time.Time // local, monotonic
}

// seen records l as seen at now unless it was seen before unchanged, and
// returns when it was first seen as it is.
func (o *observations) seen(uid types.UID, l *v1beta1.Lease, now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.leases == nil {
		o.leases = map[types.UID]observation{}
	}
	if len(o.leases) > 10000 {
		// Leases not seen change for an hour are long expired or gone.
		for uid, was := range o.leases {
			if now.Sub(was.at) > time.Hour {
				delete(o.leases, uid)
			}
		}
	}
	cur := observation{holder: l.HolderIdentity, renew: l.RenewTime.Time, at: now}
	if was, ok := o.leases[uid]; ok && was.holder == cur.holder && was.renew.Equal(cur.renew) {
		return was.at
	}
	o.leases[uid] = cur
	return now
}

// sameLease says whether a and b are one lease record.
func sameLease(a, b *v1beta1.Lease) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.HolderIdentity == b.HolderIdentity && a.RenewTime.Equal(&b.RenewTime)
}

// claimKey is an object's key in Options.claimed: its kind and name, since
// a Migration's Backup and Restore share its name.
type claimKey struct {
	kind string
	types.NamespacedName
}

func (k leased[T]) claimKey(key types.NamespacedName) claimKey {
	return claimKey{reflect.TypeFor[T]().String(), key}
}

// newLease is this process's lease, renewed now.
func (k leased[T]) newLease() *v1beta1.Lease {
	secs := int32((k.opts.LeaseDuration + time.Second - 1) / time.Second)
	return &v1beta1.Lease{HolderIdentity: k.opts.Identity, LeaseDurationSeconds: secs, RenewTime: metav1.NewMicroTime(k.opts.Clock.Now())}
}

// claim takes obj's lease after start changed its status, at obj's
// resourceVersion: of two hubs, one gets a conflict.
func (k leased[T]) claim(ctx context.Context, obj T, start func(T)) error {
	// The renew deadline counts from before the claim was sent: another
	// process may see the lease as soon as it is written.
	k.opts.claimed.Store(k.claimKey(client.ObjectKeyFromObject(obj)), time.Now())
	start(obj)
	*k.lease(obj) = k.newLease()
	return k.client.Status().Update(ctx, obj)
}

// update applies change to the object's latest status and writes it,
// renewing the lease (unless change released it).
func (k leased[T]) update(ctx context.Context, key types.NamespacedName, change func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := k.new()
		if err := k.reader.Get(ctx, key, cur); err != nil {
			if apierrors.IsNotFound(err) {
				return errLeaseLost
			}
			return err
		}
		if l := *k.lease(cur); l == nil || l.HolderIdentity != k.opts.Identity {
			return errLeaseLost
		}
		change(cur)
		if *k.lease(cur) != nil {
			*k.lease(cur) = k.newLease()
		}
		return k.client.Status().Update(ctx, cur)
	})
}

// renew renews the lease every third of its duration until ctx is done,
// applying change (the progress so far) each time; it calls cancel when
// the lease is lost, or when it was not renewed within its renew deadline
// (two thirds of its duration, as client-go's leader election's default
// is): the work stops before another process may take over, a full
// duration after it last saw the lease change.
func (k leased[T]) renew(ctx context.Context, key types.NamespacedName, change func(T), cancel func(error)) {
	period, deadline := k.opts.LeaseDuration/3, 2*k.opts.LeaseDuration/3
	renewed := time.Now()
	if at, ok := k.opts.claimed.LoadAndDelete(k.claimKey(key)); ok {
		renewed = at.(time.Time) // the claim
	}
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		uctx, ucancel := context.WithDeadline(ctx, renewed.Add(deadline))
		err := k.update(uctx, key, change)
		ucancel()
		switch {
		case err == nil:
			renewed = start
			t.Reset(period)
		case errors.Is(err, errLeaseLost):
			k.opts.Log.Warn("lease lost: stopping", "object", key.String())
			cancel(errLeaseLost)
			return
		case ctx.Err() != nil:
			return
		case !time.Now().Before(renewed.Add(deadline)):
			k.opts.Log.Warn("lease not renewed within its renew deadline: stopping", "object", key.String(), "deadline", deadline, "error", err)
			cancel(fmt.Errorf("%w: not renewed within %s (%v)", errLeaseLost, deadline, err))
			return
		default:
			k.opts.Log.Warn("renewing the lease", "object", key.String(), "error", err)
			t.Reset(min(period, time.Until(renewed.Add(deadline))/2+10*time.Millisecond))
		}
	}
}

// interrupted ends obj, whose holder stopped while it ran, with end
// (which also releases the lease), unless it ended or was taken over
// meanwhile; ended says whether this call ended it.
func (k leased[T]) interrupted(ctx context.Context, obj T, terminal func(T) bool, end func(T)) (ended bool, err error) {
	key := client.ObjectKeyFromObject(obj)
	// Renewed or taken over meanwhile: not ended.
	was := *k.lease(obj)
	err = client.IgnoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ended = false
		cur := k.new()
		if err := k.reader.Get(ctx, key, cur); err != nil {
			return err
		}
		if terminal(cur) || !sameLease(*k.lease(cur), was) {
			return nil
		}
		end(cur)
		if err := k.client.Status().Update(ctx, cur); err != nil {
			return err
		}
		ended = true
		return nil
	}))
	return ended, err
}

// stoppedBy names the process whose lease l was, and when it expired.
func stoppedBy(l *v1beta1.Lease) (who, when string) {
	if l == nil {
		return "a hub process", ""
	}
	return "hub process " + l.HolderIdentity, " (its lease expired at " + leaseExpiry(l).UTC().Format(time.RFC3339) + ")"
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }

// runLeased runs work under key's lease, renewing it (with apply, the
// progress so far) every third of its duration; when the lease is lost,
// work's context is cancelled and the error is errLeaseLost.
func runLeased[T client.Object, R any](ctx context.Context, k leased[T], key types.NamespacedName, apply func(T), work func(context.Context) (R, error)) (R, error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.renew(runCtx, key, apply, cancel)
	}()
	res, err := work(runCtx)
	cause := context.Cause(runCtx)
	cancel(nil)
	wg.Wait()
	if errors.Is(cause, errLeaseLost) {
		return res, cause
	}
	return res, err
}
