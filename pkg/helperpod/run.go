package helperpod

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Lease timing: a run renews its leases every RenewEvery; a lease not
// renewed for LeaseDuration belongs to a run that is gone.
const (
	LeaseDuration = 20 * time.Second
	RenewEvery    = 5 * time.Second
)

// LeaseName is the name of run id's Lease in each namespace it uses.
func LeaseName(id string) string { return "ferry-helper-run-" + id }

// Run is one operation's use of helper pods in one cluster: it owns the
// objects labelled with its ID and renews their leases until Close.
type Run struct {
	ID     string
	Log    *slog.Logger
	client kubernetes.Interface

	once    sync.Once
	started bool
	seen    map[string]time.Time // other runs' leases when this one started
	mu      sync.Mutex
	leases  map[string]bool // namespaces with this run's lease
	stop    chan struct{}
	done    chan struct{}
}

// NewRun returns a run in the cluster of client. Nothing is read or
// created until its first pod: then it sweeps what runs that were killed
// left behind (Sweep) and starts renewing its leases.
func NewRun(client kubernetes.Interface, log *slog.Logger) *Run {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return &Run{ID: hex.EncodeToString(b), Log: log, client: client, leases: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// start sweeps and starts the renewals, once.
func (r *Run) start(ctx context.Context) {
	r.once.Do(func() {
		if n, err := Sweep(ctx, r.client); err != nil {
			r.Log.Warn("helper pods of earlier runs not swept", "error", err)
		} else if n > 0 {
			r.Log.Info("removed the helper objects of interrupted runs", "objects", n)
		}
		r.seen = r.otherLeases(ctx)
		r.started = true
		go r.renew()
	})
}

// otherLeases returns the renew times of the unexpired leases of other
// runs (namespace/name).
func (r *Run) otherLeases(ctx context.Context) map[string]time.Time {
	out := map[string]time.Time{}
	leases, err := r.client.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy + "," + LabelRun})
	if err != nil {
		return out
	}
	for _, l := range leases.Items {
		if l.Labels[LabelRun] == r.ID || expired(l) {
			continue
		}
		t := l.CreationTimestamp.Time
		if l.Spec.RenewTime != nil {
			t = l.Spec.RenewTime.Time
		}
		out[l.Namespace+"/"+l.Name] = t
	}
	return out
}

// awaitStale waits, up to a lease's duration, until every other run's
// lease is either renewed (that run lives) or expired (it was killed, and
// Sweep may remove its objects): a run killed just before this one
// started has not expired yet when this one started.
func (r *Run) awaitStale(ctx context.Context) {
	seen := r.seen
	deadline := time.Now().Add(LeaseDuration + RenewEvery)
	for time.Now().Before(deadline) {
		waiting := false
		for key, t := range r.otherLeases(ctx) {
			first, ok := seen[key]
			if !ok {
				seen[key] = t
				first = t
			}
			if !t.After(first) {
				waiting = true // not renewed since it was first seen
			}
		}
		if !waiting {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Close stops renewing, deletes the run's objects and leases, and sweeps
// again, once the leases of runs that were killed before or while this
// one ran have expired (awaitStale: at most a lease's duration more). A
// run that started no pod has nothing to close.
func (r *Run) Close(ctx context.Context) {
	r.once.Do(func() {}) // no start after Close
	if !r.started {
		return
	}
	close(r.stop)
	<-r.done
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second+LeaseDuration)
	defer cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	for ns := range r.leases {
		r.sweepRun(ctx, ns, r.ID)
	}
	r.awaitStale(ctx)
	if _, err := Sweep(ctx, r.client); err != nil {
		r.Log.Warn("helper pods of earlier runs not swept", "error", err)
	}
}

// Own returns the labels of an object this run creates in namespace ns
// by itself (not through Pod: a pre-flight's pull probe), once the run's
// Lease is there: Close deletes the object, and Sweep does when the run
// was killed.
func (r *Run) Own(ctx context.Context, ns string) (map[string]string, error) {
	if err := r.ensureLease(ctx, ns); err != nil {
		return nil, err
	}
	return map[string]string{LabelManagedBy: ManagedBy, LabelRun: r.ID}, nil
}

// ensureLease creates the run's Lease in namespace ns, once.
func (r *Run) ensureLease(ctx context.Context, ns string) error {
	r.start(ctx)
	if !r.started {
		return errors.New("helper pods: the run is closed")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leases[ns] {
		return nil
	}
	now := metav1.NewMicroTime(time.Now())
	secs := int32(LeaseDuration / time.Second)
	holder := "ferry/" + r.ID
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName(r.ID), Namespace: ns, Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: r.ID}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
	if _, err := r.client.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: creating the Lease of ferry's helper pods: %w", ns, err)
	}
	r.leases[ns] = true
	return nil
}

func (r *Run) renew() {
	defer close(r.done)
	t := time.NewTicker(RenewEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		var nss []string
		for ns := range r.leases {
			nss = append(nss, ns)
		}
		r.mu.Unlock()
		for _, ns := range nss {
			ctx, cancel := context.WithTimeout(context.Background(), RenewEvery)
			l, err := r.client.CoordinationV1().Leases(ns).Get(ctx, LeaseName(r.ID), metav1.GetOptions{})
			if err == nil {
				now := metav1.NewMicroTime(time.Now())
				l.Spec.RenewTime = &now
				_, err = r.client.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			}
			cancel()
			if err != nil {
				r.Log.Warn("helper lease not renewed", "namespace", ns, "error", err)
			}
		}
	}
}

// Sweep deletes the helper pods, Secrets and Leases of every run whose
// Lease has expired (a run that was killed), and helper objects that have
// no Lease at all and are older than LeaseDuration. It returns how many
// objects it deleted.
func Sweep(ctx context.Context, client kubernetes.Interface) (int, error) {
	sel := metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy + "," + LabelRun}
	leases, err := client.CoordinationV1().Leases("").List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("listing the Leases of ferry's helper pods: %w", err)
	}
	live := map[string]bool{} // namespace/run
	r := &Run{client: client, Log: slog.New(slog.DiscardHandler)}
	n := 0
	for _, l := range leases.Items {
		id := l.Labels[LabelRun]
		if !expired(l) {
			live[l.Namespace+"/"+id] = true
			continue
		}
		n += r.sweepRun(ctx, l.Namespace, id)
	}
	pods, err := client.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		return n, fmt.Errorf("listing ferry's helper pods: %w", err)
	}
	secrets, err := client.CoreV1().Secrets("").List(ctx, sel)
	if err != nil {
		return n, fmt.Errorf("listing the Secrets of ferry's helper pods: %w", err)
	}
	orphan := func(m metav1.ObjectMeta) bool {
		return !live[m.Namespace+"/"+m.Labels[LabelRun]] && time.Since(m.CreationTimestamp.Time) > LeaseDuration
	}
	for _, p := range pods.Items {
		if orphan(p.ObjectMeta) {
			r.remove(ctx, p.Namespace, "pods", p.Name)
			n++
		}
	}
	for _, s := range secrets.Items {
		if orphan(s.ObjectMeta) {
			r.remove(ctx, s.Namespace, "secrets", s.Name)
			n++
		}
	}
	return n, nil
}

func expired(l coordinationv1.Lease) bool {
	t := l.CreationTimestamp.Time
	if l.Spec.RenewTime != nil {
		t = l.Spec.RenewTime.Time
	}
	d := LeaseDuration
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return time.Since(t) > d
}

// sweepRun deletes run id's objects in namespace ns, its Lease last.
func (r *Run) sweepRun(ctx context.Context, ns, id string) int {
	sel := metav1.ListOptions{LabelSelector: LabelRun + "=" + id}
	n := 0
	if pods, err := r.client.CoreV1().Pods(ns).List(ctx, sel); err == nil {
		for _, p := range pods.Items {
			r.remove(ctx, ns, "pods", p.Name)
			n++
		}
	}
	if secrets, err := r.client.CoreV1().Secrets(ns).List(ctx, sel); err == nil {
		for _, s := range secrets.Items {
			r.remove(ctx, ns, "secrets", s.Name)
			n++
		}
	}
	if err := r.client.CoordinationV1().Leases(ns).Delete(ctx, LeaseName(id), metav1.DeleteOptions{}); err == nil {
		n++
	}
	return n
}

// Pending lists the helper pods of all runs (for tests and describe).
func Pending(ctx context.Context, client kubernetes.Interface) ([]corev1.Pod, error) {
	l, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy + "," + LabelRun})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
