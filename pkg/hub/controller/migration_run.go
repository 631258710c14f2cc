package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/store"
)

// progress is what a running Migration has done so far, written into its
// status with each renewal of the lease.
type progress struct {
	mu               sync.Mutex
	backedUp, stored int64
}

func (p *progress) apply(s *v1beta1.MigrationStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.backedUp > s.Counts.BackedUp {
		s.Counts.BackedUp = p.backedUp
	}
	if p.stored > s.Counts.Restored {
		s.Counts.Restored = p.stored
	}
}

// run carries the claimed Migration m out and records how it ended. Its
// lease is renewed every third of its duration (runLeased); when it is
// lost (another process took m over, m was deleted, or it was not renewed
// within its renew deadline) the run is cancelled and nothing more is
// written.
func (r *MigrationReconciler) run(ctx context.Context, m *v1beta1.Migration) {
	if m.Spec.PreflightOnly {
		r.runPreflight(ctx, m)
		return
	}
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	log := r.Log.With("migration", key.String())
	p := &progress{}
	started := r.Clock.Now()
	metrics.MigrationsInProgress.Inc()
	defer metrics.MigrationsInProgress.Dec()
	events.Record(r.Events, m, false, events.Started, "Migrate", "migrating from cluster %s to cluster %s through %s", m.Spec.Source.Cluster, m.Spec.Target.Cluster, store.Redact(m.Spec.Storage.Location))
	res, err := runLeased(ctx, r.leased(), key, func(m *v1beta1.Migration) { p.apply(&m.Status) }, func(runCtx context.Context) (*migration.Result, error) {
		return r.migrate(runCtx, m, p, func(s migration.Step) error {
			return r.update(runCtx, key, func(st *v1beta1.MigrationStatus) {
				st.Phase = v1beta1.MigrationPhase(s)
				p.apply(st)
			})
		})
	})
	phase, reason, msg := outcome(res, err)
	if errors.Is(err, errLeaseLost) || ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Taken over or deleted; or this hub is stopping: the next holder
		// finds the lease expired and fails the Migration with the step.
		log.Warn("migration stopped before it ended", "error", err)
		return
	}
	log.Info("migration ended", "phase", phase, "reason", reason, "message", msg)
	metrics.MigrationFinished(string(phase), r.Clock.Since(started).Seconds())
	// Written even as the hub stops, within a short deadline.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	err = r.update(wctx, key, func(st *v1beta1.MigrationStatus) {
		p.apply(st)
		if res != nil {
			counts(st, res)
			if res.Verification != nil {
				st.ReportLocation = reportLocation(m)
			}
		}
		end(st, phase, reason, msg, r.now())
	})
	if err != nil {
		log.Error("recording the end of the migration", "error", err)
		return // the next holder ends it, and says so
	}
	var warnings, errs int
	if res != nil && res.Restore != nil {
		warnings, errs = res.Restore.Status.Warnings, res.Restore.Status.Errors
	}
	events.End(r.Events, m, "Migrate", string(phase), warnings, errs, failureMessage(phase, msg))
}

// reportLocation is where the hub serves the verification report of m
// (kubectl get --raw takes it as it is); it is kept in m's backup storage
// location, beside the restore (migration.ReportKeys).
func reportLocation(m *v1beta1.Migration) string {
	return "/apis/" + v1beta1.SchemeGroupVersion.String() + "/namespaces/" + m.Namespace + "/migrations/" + m.Name + "/report"
}

func counts(st *v1beta1.MigrationStatus, res *migration.Result) {
	if b := res.Backup; b != nil {
		st.Counts.BackedUp = int64(b.Status.Progress.ItemsBackedUp)
	}
	if rs := res.Restore; rs != nil {
		c := rs.Status.Counts
		st.Counts.Restored = int64(c.Created + c.Updated + c.Unchanged)
		st.Counts.Failed = int64(c.Failed)
		st.Counts.Skipped = int64(c.Skipped)
	}
	if v := res.Verification; v != nil && v.Running != nil {
		c := v.Running.Counts
		st.Counts.Workloads, st.Counts.WorkloadsRunning = int64(c.Workloads), int64(c.WorkloadsRunning)
		st.Counts.Services, st.Counts.ServicesServing = int64(c.Services), int64(c.ServicesServing)
		st.Counts.Claims, st.Counts.ClaimsBound = int64(c.Claims), int64(c.ClaimsBound)
		st.Counts.ClaimsWithData, st.Counts.ClaimsEqual = int64(c.ClaimsWithData), int64(c.ClaimsEqual+c.ClaimsChangedByApp)
		st.Counts.Images, st.Counts.ImagesPresent = int64(c.Images), int64(c.ImagesPresent)
		st.Counts.RuntimeFailed = int64(c.Failed)
	}
}

// outcome is how a run ended: from the result, or from the error that
// stopped it (a failure of the hub's own, named by its reason).
func outcome(res *migration.Result, err error) (v1beta1.MigrationPhase, string, string) {
	var f *failure
	switch {
	case errors.As(err, &f):
		return v1beta1.PhaseFailed, f.reason, f.err.Error()
	case err != nil:
		return v1beta1.PhaseFailed, "MigrationFailed", err.Error()
	}
	phase, reason, msg := res.Outcome()
	switch phase {
	case v1alpha1.PhaseCompleted:
		return v1beta1.PhaseCompleted, reason, msg
	case v1alpha1.PhaseFailed:
		return v1beta1.PhaseFailed, reason, msg
	}
	return v1beta1.PhasePartiallyFailed, reason, msg
}

// failure is an error with the Migration's reason for it.
type failure struct {
	reason string
	err    error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func fail(reason string, format string, args ...any) error {
	return &failure{reason: reason, err: fmt.Errorf(format, args...)}
}
