package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	humanize "github.com/dustin/go-humanize"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/store"
)

// maxStatusStages is how many stages a Migration's status lists.
const maxStatusStages = 20

// reconcileStaged carries staged Migration m one step on, through the
// engine's Stage and Cutover (pkg/migration), whose journal in the
// location holds the migration's state:
//   - between stages (phase Staged) nothing is held: the Migration is
//     queued again for its next stage, or at once when spec.staged.cutover
//     is set;
//   - a stage (phase Staging) or the cutover (Quiesce, then the final
//     migration's steps) runs under the Migration's lease;
//   - a holder that stopped midway is not a failure: the journal lets the
//     next holder run the stage again, or finish the cutover.
func (r *MigrationReconciler) reconcileStaged(ctx context.Context, m *v1beta1.Migration) (reconcile.Result, error) {
	st := &m.Status
	retry := st.Reason == reasonCutoverRetry
	idle := st.Phase == "" || st.Phase == v1beta1.PhasePending || st.Phase == v1beta1.PhaseStaged
	// The cutover runs once triggered, after at least one stage (it moves
	// the final delta against one), and a stage a stopped holder left
	// runs again first.
	cutover := st.Phase != v1beta1.PhaseStaging && !idle ||
		m.Spec.Staged.Cutover && st.Phase != v1beta1.PhaseStaging && stageDone(st)
	// Between stages, and after a cutover that failed with the source
	// quiesced, the next try waits for its time.
	if (idle && !cutover || retry) && st.NextStageTime != nil {
		if wait := st.NextStageTime.Sub(r.Clock.Now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	resumed := !idle
	phase := v1beta1.PhaseStaging
	if cutover {
		phase = st.Phase
		if idle || phase == v1beta1.PhaseStaging {
			phase = v1beta1.PhaseQuiesce
		}
	}
	err := r.leased().claim(ctx, m, func(m *v1beta1.Migration) {
		now := r.now()
		m.Status.Phase, m.Status.ObservedGeneration = phase, m.Generation
		m.Status.Reason, m.Status.Message, m.Status.NextStageTime = "", "", nil
		if m.Status.StartTime == nil {
			m.Status.StartTime = &now
		}
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	switch {
	case retry:
		events.Record(r.Events, m, false, events.Started, "Cutover", "trying the cutover again at step %s, from the journal in %s", phase, store.Redact(m.Spec.Storage.Location))
	case resumed:
		events.Record(r.Events, m, false, events.Started, "Migrate", "resuming at step %s from the journal in %s: the hub process that ran it stopped", phase, store.Redact(m.Spec.Storage.Location))
	}
	if cutover {
		return r.runCutover(ctx, m), nil
	}
	return r.runStage(ctx, m)
}

// reasonCutoverRetry is the reason of a staged Migration whose cutover
// failed after the source was quiesced: it is tried again.
const reasonCutoverRetry = "CutoverRetrying"

// cutoverRetry is the wait before a failed cutover is tried again.
const cutoverRetry = 30 * time.Second

// stageDone says whether a stage of st ended without error: a cutover
// predicts from it.
func stageDone(st *v1beta1.MigrationStatus) bool {
	for _, s := range st.Stages {
		if s.CompletionTime != nil && s.Message == "" {
			return true
		}
	}
	return false
}

// runStage runs the next stage of m under its lease, then records it,
// the prediction and the next stage's time, and releases the lease. A
// stage that fails is retried at the next; a spec the engine refuses
// ends the Migration.
func (r *MigrationReconciler) runStage(ctx context.Context, m *v1beta1.Migration) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(m)
	p := &progress{}
	events.Record(r.Events, m, false, events.Started, "Stage", "stage %d: copying the claims of %v while the source runs", m.Status.StageCount+1, m.Spec.Backup.IncludedNamespaces)
	j, err := runLeased(ctx, r.leased(), key, func(m *v1beta1.Migration) { p.apply(&m.Status) },
		func(ctx context.Context) (*migration.Journal, error) {
			o, done, err := r.prepare(ctx, m, p)
			if err != nil {
				return nil, err
			}
			defer done()
			return migration.Stage(ctx, o)
		})
	if r.stopped(ctx, key, err) {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	next := metav1.NewTime(now.Add(m.Spec.Staged.Interval.Duration))
	if j != nil && len(j.Stages) > 0 {
		next = metav1.NewTime(j.Stages[len(j.Stages)-1].Started.Add(m.Spec.Staged.Interval.Duration))
	}
	var f *failure
	permanent := errors.As(err, &f) && (f.reason == "InvalidSpec" || f.reason == "SameCluster" || f.reason == "NoRepositoryPassword") ||
		errors.Is(err, migration.ErrFinished) || errors.Is(err, migration.ErrNoNamespaces)
	if err != nil && j != nil && j.Cutover != nil {
		// A cutover this Migration did not trigger (ferry migrate cutover,
		// or an earlier Migration of this name): the hub leaves it alone.
		permanent = true
		err = fail("CutoverOutsideMigration", "the journal of migration %s in %s has a cutover at step %s that this Migration did not start (ferry migrate cutover, or an earlier Migration of the name): finish or roll it back with ferry migrate cutover|rollback %s: %w",
			m.Name, store.Redact(m.Spec.Storage.Location), j.Cutover.Step, m.Name, err)
	}
	werr := r.endStage(ctx, key, func(st *v1beta1.MigrationStatus) {
		stagedStatus(st, j, now, false)
		st.Reason, st.Message = "", ""
		switch {
		case permanent:
			phase, reason, msg := outcome(nil, err)
			end(st, phase, reason, msg, r.now())
			return
		case err != nil:
			st.Reason, st.Message = "StageFailed", err.Error()+"; the next stage runs at "+next.UTC().Format(time.RFC3339)
		}
		st.Phase, st.NextStageTime, st.Lease = v1beta1.PhaseStaged, &next, nil
	})
	switch {
	case permanent:
		events.End(r.Events, m, "Migrate", string(v1beta1.PhaseFailed), 0, 0, err.Error())
		return reconcile.Result{}, werr
	case err != nil:
		events.Record(r.Events, m, true, "StageFailed", "Stage", "%s", err.Error())
	default:
		s := j.Stages[len(j.Stages)-1]
		events.Record(r.Events, m, false, "Staged", "Stage", "stage %d: %s changed, %s moved in %s", s.Number, humanize.IBytes(uint64(s.ChangedBytes())), humanize.IBytes(uint64(uploaded(s))), s.Duration().Round(time.Second))
	}
	return reconcile.Result{RequeueAfter: max(next.Sub(r.Clock.Now()), 100*time.Millisecond)}, werr
}

// endStage writes a stage's outcome into the Migration's status.
func (r *MigrationReconciler) endStage(ctx context.Context, key types.NamespacedName, change func(*v1beta1.MigrationStatus)) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return r.update(wctx, key, change)
}

// stopped says whether a run of a staged Migration stopped without an
// outcome (its lease was lost, or the hub is stopping): the next holder
// resumes it from the journal.
func (r *MigrationReconciler) stopped(ctx context.Context, key types.NamespacedName, err error) bool {
	if errors.Is(err, errLeaseLost) || ctx.Err() != nil {
		r.Log.Warn("staged migration stopped before its step ended", "migration", key.String(), "error", err)
		return true
	}
	return false
}

// runCutover runs (or finishes) m's cutover under its lease, recording
// the prediction, the steps and the downtime, and ends the Migration, or
// queues it again when the source stays quiesced.
func (r *MigrationReconciler) runCutover(ctx context.Context, m *v1beta1.Migration) reconcile.Result {
	key := client.ObjectKeyFromObject(m)
	p := &progress{}
	metrics.MigrationsInProgress.Inc()
	defer metrics.MigrationsInProgress.Dec()
	started := r.Clock.Now()
	events.Record(r.Events, m, false, events.Started, "Cutover", "cutover: quiescing the source's workloads in %v, then the final delta and the resources", m.Spec.Backup.IncludedNamespaces)
	var res *migration.Result
	j, err := runLeased(ctx, r.leased(), key, func(m *v1beta1.Migration) { p.apply(&m.Status) },
		func(ctx context.Context) (*migration.Journal, error) {
			o, done, err := r.prepare(ctx, m, p)
			if err != nil {
				return nil, err
			}
			defer done()
			if err := rolledBackOutside(ctx, &o, m); err != nil {
				return nil, err
			}
			// Until the prediction is made, a stage the bound asks for may
			// run: the steps recorded are the final migration's.
			predicted := m.Status.Cutover != nil
			stepCtx, stepErr, cancel := recordSteps(ctx, &o, func(s migration.Step) error {
				if !predicted {
					return nil
				}
				return r.update(ctx, key, func(st *v1beta1.MigrationStatus) {
					st.Phase = v1beta1.MigrationPhase(s)
					if st.Cutover != nil && s == migration.StepBackup {
						st.Cutover.Step = string(migration.CutoverQuiesced) // the final migration runs after the quiesce
					}
				})
			})
			defer cancel()
			co := migration.CutoverOptions{MaxStages: int(m.Spec.Staged.MaxStages),
				OnPrediction: func(pr migration.Prediction) {
					predicted = true
					_ = r.update(ctx, key, func(st *v1beta1.MigrationStatus) {
						st.Prediction = prediction(pr)
						st.Cutover = &v1beta1.MigrationCutover{Step: string(migration.CutoverPredicted), Predicted: prediction(pr).Total}
					})
				}}
			if d := m.Spec.Staged.MaxDowntime; d != nil {
				co.MaxDowntime = d.Duration
			}
			var j *migration.Journal
			res, j, err = migration.Cutover(stepCtx, o, co)
			if *stepErr != nil {
				return j, *stepErr
			}
			return j, err
		})
	if r.stopped(ctx, key, err) {
		return reconcile.Result{}
	}
	return r.endCutover(ctx, m, res, j, err, started)
}

// rolledBackOutside fails a cutover this Migration began that a rollback
// (ferry migrate rollback) undid since: the source runs again, and a new
// cutover is not the hub's to start.
func rolledBackOutside(ctx context.Context, o *migration.Options, m *v1beta1.Migration) error {
	if m.Status.Cutover == nil {
		return nil
	}
	j, err := migration.LoadJournal(ctx, o.Location, m.Name)
	if err != nil || j.Cutover != nil || j.RolledBack == nil {
		return nil // Cutover reads it again, and says what is wrong
	}
	return fail("RolledBack", "the cutover was rolled back at %s (ferry migrate rollback): the source runs again; create a new Migration to cut over again", j.RolledBack.Format(time.RFC3339))
}

// endCutover records how m's cutover ended. One that failed with the
// source quiesced (or perhaps quiesced: the journal was not read) is not
// an end: it is tried again after cutoverRetry, and the message says how
// to finish or undo it by hand.
func (r *MigrationReconciler) endCutover(ctx context.Context, m *v1beta1.Migration, res *migration.Result, j *migration.Journal, err error, started time.Time) reconcile.Result {
	key := client.ObjectKeyFromObject(m)
	if res == nil && err == nil {
		err = errors.New("the cutover ended without a result")
	}
	phase, reason, msg := outcome(res, err)
	var step migration.CutoverStep
	if j != nil && j.Cutover != nil {
		step = j.Cutover.Step
		if msg == "" || phase == v1beta1.PhaseCompleted && step != migration.CutoverDone {
			msg = j.Cutover.Error
		}
	}
	switch {
	case step == migration.CutoverDone && phase == v1beta1.PhaseFailed:
		phase = v1beta1.PhasePartiallyFailed // the target runs; what came after failed
	case phase == v1beta1.PhaseCompleted && step != migration.CutoverDone:
		phase, reason = v1beta1.PhasePartiallyFailed, "CutoverNotDone"
	}
	quiesced := step == migration.CutoverQuiescing || step == migration.CutoverQuiesced || j == nil && m.Status.Cutover != nil
	var f *failure
	if phase != v1beta1.PhaseCompleted && quiesced && !(errors.As(err, &f) && f.reason == "RolledBack") {
		return r.retryCutover(ctx, m, j, msg)
	}
	metrics.MigrationFinished(string(phase), r.Clock.Since(started).Seconds())
	err = r.endStage(ctx, key, func(st *v1beta1.MigrationStatus) {
		stagedStatus(st, j, r.Clock.Now(), true)
		st.NextStageTime = nil
		if res != nil {
			counts(st, res)
			if res.Verification != nil {
				st.ReportLocation = reportLocation(m)
			}
		}
		end(st, phase, reason, msg, r.now())
	})
	if err != nil {
		r.Log.Error("recording the end of the cutover", "migration", key.String(), "error", err)
		return reconcile.Result{}
	}
	events.End(r.Events, m, "Cutover", string(phase), 0, 0, failureMessage(phase, msg))
	return reconcile.Result{}
}

// retryCutover records a cutover that failed with the source quiesced,
// releases the lease and queues the Migration for the next try.
func (r *MigrationReconciler) retryCutover(ctx context.Context, m *v1beta1.Migration, j *migration.Journal, msg string) reconcile.Result {
	next := metav1.NewTime(r.Clock.Now().Add(cutoverRetry))
	msg = fmt.Sprintf("%s; the source's workloads in %v stay quiesced: the hub tries the cutover again at %s; to stop it, delete the Migration and finish (ferry migrate cutover %s) or undo (ferry migrate rollback %s) it against %s",
		msg, m.Spec.Backup.IncludedNamespaces, next.UTC().Format(time.RFC3339), m.Name, m.Name, store.Redact(m.Spec.Storage.Location))
	err := r.endStage(ctx, client.ObjectKeyFromObject(m), func(st *v1beta1.MigrationStatus) {
		stagedStatus(st, j, r.Clock.Now(), true)
		st.Reason, st.Message, st.NextStageTime, st.Lease = reasonCutoverRetry, msg, &next, nil
	})
	if err != nil {
		r.Log.Error("recording the cutover's failure", "migration", m.Namespace+"/"+m.Name, "error", err)
	}
	events.Record(r.Events, m, true, reasonCutoverRetry, "Cutover", "%s", msg)
	return reconcile.Result{RequeueAfter: cutoverRetry}
}

// stagedStatus copies the journal's stages, prediction and cutover into
// the status; j may be nil (nothing ran).
func stagedStatus(st *v1beta1.MigrationStatus, j *migration.Journal, now time.Time, withCutover bool) {
	if j == nil {
		return
	}
	st.StageCount = int32(len(j.Stages))
	st.Stages = nil
	for _, s := range j.Stages[max(len(j.Stages)-maxStatusStages, 0):] {
		st.Stages = append(st.Stages, stageStatus(s))
	}
	if c := j.Cutover; c != nil && withCutover {
		st.Prediction = prediction(c.Prediction)
		st.Cutover = cutoverStatus(c)
	} else if p, err := migration.Predict(j, now); err == nil && c == nil {
		st.Prediction = prediction(p)
	}
}

func stageStatus(s migration.StageRecord) v1beta1.MigrationStage {
	out := v1beta1.MigrationStage{Number: int32(s.Number), StartTime: metav1.NewTime(s.Started), Claims: int32(len(s.Claims)), Message: s.Error}
	if !s.Ended.IsZero() {
		t := metav1.NewTime(s.Ended)
		out.CompletionTime = &t
	}
	for _, c := range s.Claims {
		out.ScannedBytes += c.ScannedBytes
		out.ChangedBytes += c.ChangedBytes
		out.UploadedBytes += c.UploadedBytes
		out.ChangedFiles += c.ChangedFiles
		out.RemovedFiles += c.Removed
		out.VanishedFiles += c.Vanished
	}
	return out
}

func prediction(p migration.Prediction) *v1beta1.MigrationPrediction {
	d := func(v time.Duration) metav1.Duration {
		return metav1.Duration{Duration: v.Round(100 * time.Millisecond)}
	}
	return &v1beta1.MigrationPrediction{Total: d(p.Total), Quiesce: d(p.Quiesce), Delta: d(p.Delta), Restore: d(p.Restore), Start: d(p.Start),
		DeltaBytes: p.DeltaBytes, Objects: int32(p.Objects), Basis: p.Basis}
}

func cutoverStatus(c *migration.CutoverRecord) *v1beta1.MigrationCutover {
	out := &v1beta1.MigrationCutover{Name: c.Name, Step: string(c.Step), Workloads: int32(len(c.Workloads)),
		Predicted: metav1.Duration{Duration: c.Prediction.Total.Round(100 * time.Millisecond)}}
	if !c.QuiesceStarted.IsZero() {
		t := metav1.NewTime(c.QuiesceStarted)
		out.QuiesceTime = &t
	}
	if c.Step == migration.CutoverDone {
		t := metav1.NewTime(c.Ready)
		out.ReadyTime, out.Downtime = &t, &metav1.Duration{Duration: c.Downtime.Round(100 * time.Millisecond)}
	}
	return out
}

func uploaded(s migration.StageRecord) (n int64) {
	for _, c := range s.Claims {
		n += c.UploadedBytes
	}
	return n
}
