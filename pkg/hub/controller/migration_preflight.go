package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/preflight"
	"github.com/kubeferry/ferry/pkg/report"
)

// The pre-flight's step and reasons.
const (
	reasonPreflightPassed   = "PreflightPassed"
	reasonPreflightBlocked  = "PreflightBlocked"
	reasonPreflightNotRun   = "PreflightFailed"
	preflightEventOperation = "Preflight"
)

// runPreflight carries out a spec.preflightOnly Migration m: the engine's
// pre-flight check (preflight.Run) of the migration its spec describes,
// under its lease, writing nothing to either cluster or to the location;
// status.preflight gets the report.
func (r *MigrationReconciler) runPreflight(ctx context.Context, m *v1beta1.Migration) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	log := r.Log.With("migration", key.String())
	events.Record(r.Events, m, false, events.Started, preflightEventOperation, "checking the migration from cluster %s to cluster %s", m.Spec.Source.Cluster, m.Spec.Target.Cluster)
	p, err := runLeased(ctx, r.leased(), key, func(*v1beta1.Migration) {}, func(runCtx context.Context) (*report.Preflight, error) {
		if err := r.update(runCtx, key, func(st *v1beta1.MigrationStatus) { st.Phase = v1beta1.PhasePreflight }); err != nil {
			return nil, err
		}
		return r.preflight(runCtx, m)
	})
	if errors.Is(err, errLeaseLost) || ctx.Err() != nil && errors.Is(err, context.Canceled) {
		log.Warn("pre-flight stopped before it ended", "error", err)
		return
	}
	phase, reason, msg := preflightOutcome(p, err)
	log.Info("pre-flight ended", "phase", phase, "reason", reason, "message", msg)
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	err = r.update(wctx, key, func(st *v1beta1.MigrationStatus) {
		if p != nil {
			st.Preflight = preflightStatus(p)
		}
		end(st, phase, reason, msg, r.now())
	})
	if err != nil {
		log.Error("recording the end of the pre-flight", "error", err)
		return
	}
	events.End(r.Events, m, preflightEventOperation, string(phase), 0, 0, failureMessage(phase, msg))
}

// preflight connects to m's clusters and runs the check.
func (r *MigrationReconciler) preflight(ctx context.Context, m *v1beta1.Migration) (*report.Preflight, error) {
	src, srcSpec, err := r.connect(ctx, m.Namespace, m.Spec.Source.Cluster, "spec.source.cluster", "SourceUnreachable")
	if err != nil {
		return nil, err
	}
	dst, dstSpec, err := r.connect(ctx, m.Namespace, m.Spec.Target.Cluster, "spec.target.cluster", "TargetUnreachable")
	if err != nil {
		return nil, err
	}
	if err := migration.CheckClusters(ctx, src, dst); err != nil {
		return nil, fail("SameCluster", "spec.source.cluster %q and spec.target.cluster %q: %w", m.Spec.Source.Cluster, m.Spec.Target.Cluster, err)
	}
	o := options(m, src, dst, nil)
	setDeadlines(&o, m.Spec.Timeouts, r.Deadlines)
	o.Restore.Name = m.Name
	po := preflight.Options{Source: src, Target: dst, Backup: o.Backup, Restore: o.Restore,
		VolumeData: r.Volumes.Password != "", HelperImage: r.Volumes.Image, Estimate: true, Log: r.Log}
	if r.Volumes.Password == "" {
		po.NoVolumeData = errNoPassword.Error()
	} else {
		// The location's credentials, for the volume probe's helper pods
		// (the location is opened only if a probe runs).
		creds, err := migrationAccess(m).credentials(ctx, r.Reader)
		if err != nil {
			return nil, err
		}
		vp := &preflight.VolumeProbe{URL: m.Spec.Storage.Location, Source: r.Volumes, Target: r.Volumes}
		vp.Source.Log, vp.Target.Log = r.Log, r.Log
		vp.Source.Credentials, vp.Target.Credentials = creds, creds
		vp.Source.NodePodsDir, vp.Target.NodePodsDir = srcSpec.Spec.NodePodsDir, dstSpec.Spec.NodePodsDir
		po.VolumeProbe = vp
	}
	return preflight.Run(ctx, po)
}

// preflightOutcome is how a pre-flight ended: Completed without a
// blocker, PartiallyFailed with one (ferry migrate --preflight's exit 2),
// Failed when it could not run.
func preflightOutcome(p *report.Preflight, err error) (v1beta1.MigrationPhase, string, string) {
	var f *failure
	switch {
	case errors.As(err, &f):
		return v1beta1.PhaseFailed, f.reason, f.err.Error()
	case err != nil:
		return v1beta1.PhaseFailed, reasonPreflightNotRun, err.Error()
	case p.Blocked():
		return v1beta1.PhasePartiallyFailed, reasonPreflightBlocked, fmt.Sprintf("%d blocker(s), %d warning(s), %d note(s); first: %s: %s",
			p.Counts[report.Blocker], p.Counts[report.Warning], p.Counts[report.Note], p.Risks[0].Check, p.Risks[0].What)
	}
	return v1beta1.PhaseCompleted, reasonPreflightPassed, fmt.Sprintf("no blocker: %d warning(s), %d note(s); nothing was written", p.Counts[report.Warning], p.Counts[report.Note])
}

// preflightStatus is status.preflight of report p: the engine's summary
// (preflight.Summary: the counts, the first risks, the estimate), whose
// type has the same fields and JSON names as the hub's.
func preflightStatus(p *report.Preflight) *v1beta1.MigrationPreflight {
	raw, err := json.Marshal(preflight.Summary(p))
	st := &v1beta1.MigrationPreflight{}
	if err == nil {
		err = json.Unmarshal(raw, st)
	}
	if err != nil { // the two types drifted apart: a programming error
		panic(fmt.Sprintf("status.preflight: %v", err))
	}
	return st
}
