package controller

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Runs counts the reconciles in progress of the kinds run under a lease
// (Migrations, Backups, Restores), from before a claim to after the
// record that releases it, across the controller managers of a process.
type Runs struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0
}

// NewRuns returns a count at 0.
func NewRuns() *Runs {
	r := &Runs{idle: make(chan struct{})}
	close(r.idle)
	return r
}

// Start counts a run in progress until done is called (once).
func (r *Runs) Start() (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.idle = make(chan struct{})
	}
	r.n++
	var once sync.Once
	return func() { once.Do(r.done) }
}

func (r *Runs) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n--
	if r.n == 0 {
		close(r.idle)
	}
}

// Idle is closed once no reconcile is in progress (at the time of the
// call: a new one may start after).
func (r *Runs) Idle() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.idle
}

// counted is a reconciler whose reconciles runs counts (if set).
func counted(runs *Runs, r reconcile.Reconciler) reconcile.Reconciler {
	if runs == nil {
		return r
	}
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		defer runs.Start()()
		return r.Reconcile(ctx, req)
	})
}
