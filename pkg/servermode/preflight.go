package servermode

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/preflight"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
)

// preflight carries out a spec.preflightOnly Restore: the engine's
// pre-flight check (preflight.Run) of restoring the backup from loc into
// the server's cluster with opts, as ferry restore create --preflight
// runs it, with the volume probe through the helper pods when the server
// has a repository password. Nothing is written but the probes; the
// outcome goes to status.preflight: Completed without a blocker,
// PartiallyFailed (ReasonPreflightBlocked) with one, Failed when the
// check could not run.
func (r *RestoreReconciler) preflight(ctx context.Context, rs *v1alpha1.Restore, bsl *v1alpha1.BackupStorageLocation, loc *store.Location, opts restore.Options, start metav1.Time) error {
	po := preflight.Options{Target: r.Cluster, Location: loc, Restore: opts, HelperImage: r.HelperImage, Estimate: true, Log: r.Log}
	s, err := helperSettings(ctx, r.APIReader, bsl, r.Helpers, r.Log)
	if err != nil {
		po.NoVolumeData = err.Error()
	} else {
		po.VolumeData = true
		po.VolumeProbe = &preflight.VolumeProbe{URL: bsl.Spec.URL, Target: s}
	}
	p, err := preflight.Run(ctx, po)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return r.fail(ctx, rs, v1alpha1.ReasonFailed, err.Error())
	}
	orig := rs.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	rs.Status.StartTimestamp, rs.Status.CompletionTimestamp = &start, &now
	rs.Status.Preflight = preflight.Summary(p)
	rs.Status.Phase, rs.Status.FailureReason = v1alpha1.PhaseCompleted, ""
	cond := ended(rs.Status.Phase, "")
	cond.Message = fmt.Sprintf("pre-flight: no blocker: %d warning(s), %d note(s); nothing was written but the probes, which were removed", p.Counts[report.Warning], p.Counts[report.Note])
	if p.Blocked() {
		rs.Status.Phase = v1alpha1.PhasePartiallyFailed
		rs.Status.FailureReason = fmt.Sprintf("pre-flight: %d blocker(s), %d warning(s), %d note(s); first: %s: %s",
			p.Counts[report.Blocker], p.Counts[report.Warning], p.Counts[report.Note], p.Risks[0].Check, p.Risks[0].What)
		cond = ended(rs.Status.Phase, rs.Status.FailureReason)
		cond.Reason = v1alpha1.ReasonPreflightBlocked
	}
	meta.SetStatusCondition(&rs.Status.Conditions, cond)
	if err := patchStatus(ctx, r.Client, r.APIReader, rs, orig); err != nil {
		if errors.Is(err, errGone) {
			return nil
		}
		return err
	}
	events.End(r.Events, rs, "Preflight", string(rs.Status.Phase), 0, 0, rs.Status.FailureReason)
	return nil
}
