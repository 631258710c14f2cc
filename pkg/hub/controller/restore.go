package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/restore"
)

// RestoreReconciler runs each new hub Restore once: the hub Backup it
// names (Completed or PartiallyFailed), from that Backup's location, into
// its member Cluster, under a lease in its status as Backups are. One
// whose holder stopped while it ran is Failed with reason HubInterrupted.
type RestoreReconciler struct {
	Client client.Client
	Reader client.Reader
	Options
}

func (r *RestoreReconciler) leased() leased[*v1beta1.Restore] {
	return leased[*v1beta1.Restore]{client: r.Client, reader: r.Reader, opts: &r.Options,
		new:   func() *v1beta1.Restore { return &v1beta1.Restore{} },
		lease: func(rs *v1beta1.Restore) **v1beta1.Lease { return &rs.Status.Lease }}
}

// Reconcile claims and runs a new Restore, or fails one whose holder
// stopped.
func (r *RestoreReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var rs v1beta1.Restore
	if err := r.Reader.Get(ctx, req.NamespacedName, &rs); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if rs.DeletionTimestamp != nil || runEnded(rs.Status.Phase) {
		return reconcile.Result{}, nil
	}
	k := r.leased()
	if wait, held := k.heldElsewhere(&rs); held {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if rs.Status.Phase == v1beta1.RunInProgress {
		who, ago := stoppedBy(rs.Status.Lease)
		msg := fmt.Sprintf("%s stopped while the restore ran%s; cluster %s may hold part of it (objects labelled %s=%s)", who, ago, rs.Spec.Cluster, v1alpha1.LabelRestore, rs.Name)
		ended, err := k.interrupted(ctx, &rs,
			func(cur *v1beta1.Restore) bool { return runEnded(cur.Status.Phase) },
			func(cur *v1beta1.Restore) { endRestore(&cur.Status, v1beta1.RunFailed, "HubInterrupted", msg, r.now()) })
		if ended {
			events.End(r.Events, &rs, "Restore", string(v1beta1.RunFailed), 0, 0, msg)
		}
		return reconcile.Result{}, err
	}
	err := k.claim(ctx, &rs, func(rs *v1beta1.Restore) {
		now := r.now()
		rs.Status.Phase, rs.Status.StartTimestamp = v1beta1.RunInProgress, &now
	})
	if err != nil {
		return claimResult(err)
	}
	r.run(ctx, &rs)
	return reconcile.Result{}, nil
}

// endRestore sets the terminal phase, the Succeeded condition and the
// completion time, and releases the lease.
func endRestore(s *v1beta1.RestoreStatus, phase v1beta1.RunPhase, reason, msg string, now metav1.Time) {
	s.Phase, s.CompletionTimestamp, s.Lease = phase, &now, nil
	if phase != v1beta1.RunCompleted {
		s.FailureReason = msg
	}
	meta.SetStatusCondition(&s.Conditions, succeeded(phase, reason, msg))
}

// run carries the claimed Restore out and records how it ended.
func (r *RestoreReconciler) run(ctx context.Context, rs *v1beta1.Restore) {
	key := types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}
	var mu sync.Mutex
	var progress v1beta1.RestoreProgress
	apply := func(cur *v1beta1.Restore) {
		mu.Lock()
		defer mu.Unlock()
		cur.Status.Progress = progress
	}
	metrics.RestoresInProgress.Inc()
	defer metrics.RestoresInProgress.Dec()
	events.Record(r.Events, rs, false, events.Started, "Restore", "restoring backup %s into cluster %s", rs.Spec.BackupName, rs.Spec.Cluster)
	res, err := runLeased(ctx, r.leased(), key, apply, func(ctx context.Context) (*v1alpha1.Restore, error) {
		return r.restore(ctx, rs, func(d, t int) {
			mu.Lock()
			progress = v1beta1.RestoreProgress{ItemsRestored: int64(d), TotalItems: int64(t)}
			mu.Unlock()
		})
	})
	if errors.Is(err, errLeaseLost) || ctx.Err() != nil && errors.Is(err, context.Canceled) {
		r.Log.Warn("restore stopped before it ended", "restore", key.String(), "error", err)
		return
	}
	if res != nil {
		metrics.RestoreFinished(&res.Status)
	} else {
		metrics.RestoreFailed()
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var phase v1alpha1.Phase
	var why string
	var warnings, errs int
	if res != nil {
		phase, why, warnings, errs = res.Status.Phase, res.Status.FailureReason, res.Status.Warnings, res.Status.Errors
	}
	p, reason, msg := runOutcome(phase, why, err)
	err = r.leased().update(wctx, key, func(cur *v1beta1.Restore) {
		apply(cur)
		if res != nil {
			c := res.Status.Counts
			cur.Status.Counts = v1beta1.RestoreCounts{Created: int64(c.Created), Updated: int64(c.Updated), Unchanged: int64(c.Unchanged), Skipped: int64(c.Skipped), Failed: int64(c.Failed)}
			cur.Status.Warnings, cur.Status.Errors = int64(res.Status.Warnings), int64(res.Status.Errors)
			cur.Status.PodVolumes = podVolumeCounts(res.Status.PodVolumes)
			cur.Status.Verification = verificationSummary(res.Status.Verification)
		}
		endRestore(&cur.Status, p, reason, msg, r.now())
	})
	if err != nil {
		r.Log.Error("recording the end of the restore", "restore", key.String(), "error", err)
		return // the next holder ends it, and says so
	}
	events.End(r.Events, rs, "Restore", string(p), warnings, errs, failureMessage(p, msg))
}

// restore finds the Backup, its location and the Cluster, and runs the
// restore.
func (r *RestoreReconciler) restore(ctx context.Context, rs *v1beta1.Restore, onProgress func(done, total int)) (*v1alpha1.Restore, error) {
	var b v1beta1.Backup
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: rs.Namespace, Name: rs.Spec.BackupName}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fail("BackupNotFound", "spec.backupName: Backup %q not found in namespace %s", rs.Spec.BackupName, rs.Namespace)
		}
		return nil, err
	}
	if b.DeletionTimestamp != nil {
		return nil, fail("BackupNotRestorable", "spec.backupName: Backup %q is being deleted, with its data", b.Name)
	}
	if p := b.Status.Phase; p != v1beta1.RunCompleted && p != v1beta1.RunPartiallyFailed {
		return nil, fail("BackupNotRestorable", "spec.backupName: Backup %q is %s; only a Completed or PartiallyFailed backup is restored", b.Name, phaseName(p))
	}
	cl, c, err := connectRef(ctx, r.Reader, &r.Options, rs.Namespace, rs.Spec.Cluster, "spec.cluster", "ClusterUnreachable")
	if err != nil {
		return nil, err
	}
	a, err := backupAccess(ctx, r.Reader, &b)
	if err != nil {
		return nil, err
	}
	loc, creds, err := a.open(ctx, r.Reader, "LocationUnavailable")
	if err != nil {
		return nil, err
	}
	defer loc.Close()
	opts := restore.Options{Name: rs.Name, Spec: engineRestoreSpec(rs.Spec), Log: r.Log, OnProgress: onProgress,
		Deadline:       deadline.Deadline{After: r.Deadlines.Restore, Field: "the hub's --restore-timeout"},
		VerifyDeadline: deadline.Deadline{After: r.Deadlines.Verify, Field: "the hub's --verify-timeout"}}
	if r.Volumes.Password != "" {
		s := r.Volumes
		s.Log, s.NodePodsDir, s.Credentials = r.Log, c.Spec.NodePodsDir, creds
		pv, _, closeVolumes, err := helperpod.RestoreOptions(ctx, loc, cl, s)
		if err != nil {
			return nil, fail("VolumeRepositoryUnavailable", "Backup %q's location: the volume repository: %w", b.Name, err)
		}
		defer closeVolumes()
		opts.PodVolumes = pv
	}
	if err := opts.Validate(); err != nil {
		return nil, fail("InvalidSpec", "%w", err)
	}
	res, _, err := restore.Run(ctx, cl, loc, opts)
	if err != nil || !rs.Spec.Verify {
		return res, err
	}
	// As server mode's spec.verify: the report is kept in the location,
	// and an unexpected difference makes a Completed restore
	// PartiallyFailed.
	if err := migration.VerifyAndRecord(ctx, cl, loc, opts, res, nil); err != nil {
		r.Log.Warn("restore verified, but its record was not rewritten", "restore", rs.Namespace+"/"+rs.Name, "error", err)
	}
	if v := res.Status.Verification; v != nil {
		events.Record(r.Events, rs, v.Error != "" || v.Unexpected > 0, events.Verified, "Verify", "%d of %d object(s) match the backup, %d unexpected", v.Matched, v.Objects, v.Unexpected)
	}
	return res, nil
}

// verificationSummary is the hub's copy of the engine's verification
// summary (nil when the restore was not verified).
func verificationSummary(v *v1alpha1.VerificationSummary) *v1beta1.VerificationSummary {
	if v == nil {
		return nil
	}
	return &v1beta1.VerificationSummary{Objects: int64(v.Objects), Matched: int64(v.Matched), Differ: int64(v.Differ), Missing: int64(v.Missing),
		Failed: int64(v.Failed), Unexpected: int64(v.Unexpected), Report: v.Report, Error: v.Error}
}

func phaseName(p v1beta1.RunPhase) string {
	if p == "" {
		return "New"
	}
	return string(p)
}

// engineRestoreSpec is the engine's (server mode's) spec of a hub Restore.
func engineRestoreSpec(s v1beta1.RestoreSpec) v1alpha1.RestoreSpec {
	return v1alpha1.RestoreSpec{
		BackupName:             s.BackupName,
		IncludedNamespaces:     s.IncludedNamespaces,
		ExcludedNamespaces:     s.ExcludedNamespaces,
		IncludedResources:      s.IncludedResources,
		ExcludedResources:      s.ExcludedResources,
		NamespaceMapping:       s.NamespaceMapping,
		StorageClassMapping:    s.StorageClassMapping,
		ExistingResourcePolicy: v1alpha1.ExistingResourcePolicy(s.ExistingResourcePolicy),
		PreserveNodePorts:      s.PreserveNodePorts,
		ImageRegistryMappings:  s.ImageRegistryMappings,
		PushImages:             s.PushImages,
		ImagesRequired:         s.ImagesRequired,
		FromCloud:              s.FromCloud,
		ToCloud:                s.ToCloud,
	}
}
