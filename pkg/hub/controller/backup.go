package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/storesync"
)

// BackupReconciler runs each new hub Backup once, against its member
// Cluster, into its BackupStorageLocation, under a lease in its status as
// Migrations are (New → InProgress → Completed, PartiallyFailed or
// Failed). One whose holder stopped while it ran is Failed with reason
// HubInterrupted: its store folder is never marked complete, so it is
// never restorable. Once an ended Backup's status.expiration passes, it
// is deleted from its location and from the hub (expire).
type BackupReconciler struct {
	Client client.Client
	Reader client.Reader
	Options
}

func runEnded(p v1beta1.RunPhase) bool {
	return p == v1beta1.RunCompleted || p == v1beta1.RunPartiallyFailed || p == v1beta1.RunFailed
}

func (r *BackupReconciler) leased() leased[*v1beta1.Backup] {
	return leased[*v1beta1.Backup]{client: r.Client, reader: r.Reader, opts: &r.Options,
		new:   func() *v1beta1.Backup { return &v1beta1.Backup{} },
		lease: func(b *v1beta1.Backup) **v1beta1.Lease { return &b.Status.Lease }}
}

// Reconcile claims and runs a new Backup, fails one whose holder stopped,
// or expires an ended one.
func (r *BackupReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b v1beta1.Backup
	if err := r.Reader.Get(ctx, req.NamespacedName, &b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if b.DeletionTimestamp != nil {
		return r.finalize(ctx, &b)
	}
	if runEnded(b.Status.Phase) {
		return r.expire(ctx, &b)
	}
	if b.Labels[storesync.LabelSyncedFrom] != "" {
		return reconcile.Result{}, nil // store sync writes its status; it never runs
	}
	k := r.leased()
	if wait, held := k.heldElsewhere(&b); held {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if b.Status.Phase == v1beta1.RunInProgress {
		who, ago := stoppedBy(b.Status.Lease)
		msg := fmt.Sprintf("%s stopped while the backup ran%s, before it chose its location; nothing was written", who, ago)
		if url := b.Status.StorageLocation; url != "" {
			msg = fmt.Sprintf("%s stopped while the backup ran%s; its store folder is incomplete and never restorable: remove it (ferry backup delete %s --storage %s) before creating a Backup of that name again", who, ago, b.Name, store.Redact(url))
		}
		ended, err := k.interrupted(ctx, &b,
			func(cur *v1beta1.Backup) bool { return runEnded(cur.Status.Phase) },
			func(cur *v1beta1.Backup) { endBackup(&cur.Status, v1beta1.RunFailed, "HubInterrupted", msg, r.now()) })
		if ended {
			events.End(r.Events, &b, "Backup", string(v1beta1.RunFailed), 0, 0, msg)
		}
		return reconcile.Result{}, err
	}
	err := k.claim(ctx, &b, func(b *v1beta1.Backup) {
		now := r.now()
		b.Status.Phase, b.Status.StartTimestamp = v1beta1.RunInProgress, &now
		if ttl := b.Spec.TTL; ttl != nil && ttl.Duration > 0 {
			exp := metav1.NewTime(now.Add(ttl.Duration))
			b.Status.Expiration = &exp
		}
	})
	if err != nil {
		return claimResult(err)
	}
	r.run(ctx, &b)
	return reconcile.Result{}, nil
}

// recordTimeout bounds the write of how a run ended, which is made even
// as the hub stops.
const recordTimeout = 10 * time.Second

// claimResult is what a failed claim means: another hub won (try again
// soon, to see its lease), or the object is gone.
func claimResult(err error) (reconcile.Result, error) {
	if isConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(err)
}

// endBackup sets the terminal phase, the Succeeded condition and the
// completion time, and releases the lease.
func endBackup(s *v1beta1.BackupStatus, phase v1beta1.RunPhase, reason, msg string, now metav1.Time) {
	s.Phase, s.CompletionTimestamp, s.Lease = phase, &now, nil
	if phase != v1beta1.RunCompleted {
		s.FailureReason = msg
	}
	meta.SetStatusCondition(&s.Conditions, succeeded(phase, reason, msg))
}

func succeeded(phase v1beta1.RunPhase, reason, msg string) metav1.Condition {
	c := metav1.Condition{Type: v1beta1.ConditionSucceeded, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
	if phase == v1beta1.RunCompleted {
		c.Status = metav1.ConditionTrue
	}
	if c.Message == "" {
		c.Message = string(phase)
	}
	return c
}

// run carries the claimed Backup out and records how it ended.
func (r *BackupReconciler) run(ctx context.Context, b *v1beta1.Backup) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	var mu sync.Mutex
	var progress v1beta1.BackupProgress
	apply := func(cur *v1beta1.Backup) {
		mu.Lock()
		defer mu.Unlock()
		cur.Status.Progress = progress
	}
	metrics.BackupsInProgress.Inc()
	defer metrics.BackupsInProgress.Dec()
	events.Record(r.Events, b, false, events.Started, "Backup", "backing up cluster %s", b.Spec.Cluster)
	res, err := runLeased(ctx, r.leased(), key, apply, func(ctx context.Context) (*v1alpha1.Backup, error) {
		return r.backup(ctx, b, func(done, total int) {
			mu.Lock()
			progress = v1beta1.BackupProgress{ItemsBackedUp: int64(done), TotalItems: int64(total)}
			mu.Unlock()
		})
	})
	if errors.Is(err, errLeaseLost) || ctx.Err() != nil && errors.Is(err, context.Canceled) {
		r.Log.Warn("backup stopped before it ended", "backup", key.String(), "error", err)
		return
	}
	if res != nil {
		metrics.BackupFinished(&res.Status)
	} else {
		metrics.BackupFailed()
	}
	phase, reason, msg := runOutcome(phaseOf(res), failureOf(res), err)
	recorded := r.record(ctx, key, func(cur *v1beta1.Backup) {
		apply(cur)
		if res != nil {
			backupStatus(&cur.Status, res)
		}
		endBackup(&cur.Status, phase, reason, msg, r.now())
	})
	if !recorded {
		return // the next holder ends it, and says so
	}
	var warnings, errs int
	if res != nil {
		warnings, errs = res.Status.Warnings, res.Status.Errors
	}
	events.End(r.Events, b, "Backup", string(phase), warnings, errs, failureMessage(phase, msg))
}

// failureMessage is msg when phase is not Completed.
func failureMessage[P ~string](phase P, msg string) string {
	if phase == "Completed" {
		return ""
	}
	return msg
}

// record writes how a run ended, even as the hub stops, within a short
// deadline, and says whether it did.
func (r *BackupReconciler) record(ctx context.Context, key types.NamespacedName, change func(*v1beta1.Backup)) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := r.leased().update(wctx, key, change); err != nil {
		r.Log.Error("recording the end of the backup", "backup", key.String(), "error", err)
		return false
	}
	return true
}

func phaseOf(b *v1alpha1.Backup) v1alpha1.Phase {
	if b == nil {
		return ""
	}
	return b.Status.Phase
}

func failureOf(b *v1alpha1.Backup) string {
	if b == nil {
		return ""
	}
	return b.Status.FailureReason
}

// backupStatus copies what the engine's Backup reports into the hub's.
func backupStatus(s *v1beta1.BackupStatus, res *v1alpha1.Backup) {
	s.Progress = v1beta1.BackupProgress{TotalItems: int64(res.Status.Progress.TotalItems), ItemsBackedUp: int64(res.Status.Progress.ItemsBackedUp)}
	s.Warnings, s.Errors = int64(res.Status.Warnings), int64(res.Status.Errors)
	s.PodVolumes = podVolumeCounts(res.Status.PodVolumes)
}

func podVolumeCounts(pv *v1alpha1.PodVolumeSummary) *v1beta1.PodVolumeCounts {
	if pv == nil {
		return nil
	}
	return &v1beta1.PodVolumeCounts{Total: int64(pv.Total), Completed: int64(pv.Completed), Failed: int64(pv.Failed), Bytes: pv.Bytes}
}

// runOutcome is how a Backup's or Restore's run ended: from the engine's
// phase and failure, or from the error that stopped it (a failure of the
// hub's own, named by its reason).
func runOutcome(phase v1alpha1.Phase, why string, err error) (v1beta1.RunPhase, string, string) {
	var f *failure
	switch {
	case errors.As(err, &f):
		return v1beta1.RunFailed, f.reason, f.err.Error()
	case err != nil:
		return v1beta1.RunFailed, "Failed", err.Error()
	case phase == v1alpha1.PhaseCompleted:
		return v1beta1.RunCompleted, "Completed", ""
	case phase == v1alpha1.PhasePartiallyFailed:
		return v1beta1.RunPartiallyFailed, "PartiallyFailed", why
	}
	return v1beta1.RunFailed, "Failed", why
}

// backup connects to b's Cluster and location, and runs the backup.
func (r *BackupReconciler) backup(ctx context.Context, b *v1beta1.Backup, onProgress func(done, total int)) (*v1alpha1.Backup, error) {
	cl, c, err := connectRef(ctx, r.Reader, &r.Options, b.Namespace, b.Spec.Cluster, "spec.cluster", "ClusterUnreachable")
	if err != nil {
		return nil, err
	}
	bsl, err := resolveLocation(ctx, r.Reader, b.Namespace, b.Spec.StorageLocationName)
	if err != nil {
		return nil, err
	}
	loc, creds, err := locationAccess(bsl, true).open(ctx, r.Reader, "LocationUnavailable")
	if err != nil {
		return nil, err
	}
	defer loc.Close()
	err = r.leased().update(ctx, client.ObjectKeyFromObject(b), func(cur *v1beta1.Backup) { cur.Status.StorageLocation = bsl.Spec.URL })
	if err != nil {
		return nil, err
	}
	opts := backup.Options{Name: b.Name, Spec: engineBackupSpec(b.Spec), UID: b.UID, Log: r.Log, OnProgress: onProgress,
		Deadline: deadline.Deadline{After: r.Deadlines.Backup, Field: "the hub's --backup-timeout"}}
	if r.Volumes.Password == "" {
		if b.Spec.DefaultVolumesToFsBackup {
			return nil, fail("NoRepositoryPassword", "spec.defaultVolumesToFsBackup: %w", errNoPassword)
		}
		opts.PodVolumes = &backup.PodVolumeOptions{Backup: helperpod.FailVolumes(errNoPassword)}
	} else {
		s := r.Volumes
		s.Log, s.NodePodsDir, s.Credentials = r.Log, c.Spec.NodePodsDir, creds
		pv, _, closeVolumes, err := helperpod.BackupOptions(ctx, loc, cl, s)
		if err != nil {
			return nil, fail("VolumeRepositoryUnavailable", "BackupStorageLocation %q: the volume repository: %w", bsl.Name, err)
		}
		defer closeVolumes()
		opts.PodVolumes = pv
	}
	if err := opts.Validate(); err != nil {
		return nil, fail("InvalidSpec", "%w", err)
	}
	res, _, err := backup.Run(ctx, cl, loc, opts)
	return res, err
}

// engineBackupSpec is the engine's (server mode's) spec of a hub Backup.
func engineBackupSpec(s v1beta1.BackupSpec) v1alpha1.BackupSpec {
	return v1alpha1.BackupSpec{
		IncludedNamespaces:       s.IncludedNamespaces,
		ExcludedNamespaces:       s.ExcludedNamespaces,
		IncludedResources:        s.IncludedResources,
		ExcludedResources:        s.ExcludedResources,
		LabelSelector:            s.LabelSelector,
		IncludeClusterResources:  s.IncludeClusterResources,
		PreferredVersionOnly:     s.PreferredVersionOnly,
		Images:                   s.Images,
		ImageRegistryMappings:    s.ImageRegistryMappings,
		ImagesRequired:           s.ImagesRequired,
		DefaultVolumesToFsBackup: s.DefaultVolumesToFsBackup,
		TTL:                      s.TTL,
	}
}
