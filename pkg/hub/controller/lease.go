package controller

import (
	"context"
	"errors"
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

// holder is l's holder identity; "" for none.
func holder(l *v1beta1.Lease) string {
	if l == nil {
		return ""
	}
	return l.HolderIdentity
}

// heldElsewhere says how long to wait when another process holds obj's
// lease and it has not expired.
func (k leased[T]) heldElsewhere(obj T) (time.Duration, bool) {
	l := *k.lease(obj)
	if l == nil || l.HolderIdentity == k.opts.Identity {
		return 0, false
	}
	if wait := leaseExpiry(l).Sub(k.opts.Clock.Now()); wait > 0 {
		return wait + 100*time.Millisecond, true
	}
	return 0, false
}

// newLease is this process's lease, renewed now.
func (k leased[T]) newLease() *v1beta1.Lease {
	secs := int32((k.opts.LeaseDuration + time.Second - 1) / time.Second)
	return &v1beta1.Lease{HolderIdentity: k.opts.Identity, LeaseDurationSeconds: secs, RenewTime: metav1.NewMicroTime(k.opts.Clock.Now())}
}

// claim takes obj's lease after start changed its status, at obj's
// resourceVersion: of two hubs, one gets a conflict.
func (k leased[T]) claim(ctx context.Context, obj T, start func(T)) error {
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
// the lease is lost.
func (k leased[T]) renew(ctx context.Context, key types.NamespacedName, change func(T), cancel func()) {
	t := time.NewTicker(k.opts.LeaseDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := k.update(ctx, key, change)
		if errors.Is(err, errLeaseLost) {
			k.opts.Log.Warn("lease lost: stopping", "object", key.String())
			cancel()
			return
		}
		if err != nil && ctx.Err() == nil {
			k.opts.Log.Warn("renewing the lease", "object", key.String(), "error", err)
		}
	}
}

// interrupted ends obj, whose holder stopped while it ran, with end
// (which also releases the lease), unless it ended or was taken over
// meanwhile; ended says whether this call ended it.
func (k leased[T]) interrupted(ctx context.Context, obj T, terminal func(T) bool, end func(T)) (ended bool, err error) {
	key := client.ObjectKeyFromObject(obj)
	was := holder(*k.lease(obj))
	err = client.IgnoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ended = false
		cur := k.new()
		if err := k.reader.Get(ctx, key, cur); err != nil {
			return err
		}
		if terminal(cur) || holder(*k.lease(cur)) != was {
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
		k.renew(runCtx, key, apply, func() { cancel(errLeaseLost) })
	}()
	res, err := work(runCtx)
	lost := errors.Is(context.Cause(runCtx), errLeaseLost)
	cancel(nil)
	wg.Wait()
	if lost {
		return res, errLeaseLost
	}
	return res, err
}
