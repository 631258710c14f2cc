package servermode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/install"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// progressPeriod is how often a running backup's or restore's progress is
// written to its status.
const progressPeriod = time.Second

// BackupReconciler runs each new Backup once with pkg/backup, against the
// server's own cluster, into its BackupStorageLocation.
//
// Phases: "" or New → InProgress → Completed, PartiallyFailed or Failed.
// The move to InProgress is an optimistic-concurrency update, so two
// servers never both run a Backup. A Backup found InProgress that this
// server is not running (the reconciler runs one at a time, so that is any
// Backup InProgress when it looks) was left by a server that died: it is
// marked Failed with the reason, never left InProgress. Its store folder
// stays Incomplete (never restorable) until `ferry backup delete`.
type BackupReconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader // uncached: Secrets, and re-reading InProgress Backups
	Cluster   *kube.Cluster
	Clock     clock.PassiveClock
	Log       *slog.Logger
	// RepositoryPassword, PodVolumeTimeout and HelperImage: see Options.
	RepositoryPassword string
	// Deadline bounds each backup (Options.BackupDeadline).
	Deadline         time.Duration
	HelperImage      string
	PodVolumeTimeout time.Duration
	AgentGrace       time.Duration
	// Helpers are the settings of the helper pods that back up claims no
	// node agent can read.
	Helpers helperpod.Settings
	// Events, if set, records Started and how each Backup ended.
	Events kevents.EventRecorder
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	b := &v1alpha1.Backup{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	switch b.Status.Phase {
	case "", v1alpha1.PhaseNew:
		if b.Labels[labelFromStore] != "" {
			return reconcile.Result{}, nil // store sync is writing its status
		}
		defer failOnPanic(r.Log, "backup", b.Name, func(msg string) error { return r.fail(ctx, b, v1alpha1.ReasonFailed, msg) }, &err)
		return reconcile.Result{}, r.run(ctx, b)
	case v1alpha1.PhaseInProgress:
		return reconcile.Result{}, r.orphaned(ctx, req)
	}
	return reconcile.Result{}, nil
}

// orphaned marks a Backup Failed if it is still InProgress in the API
// server (the cache may lag behind this server's own last update).
func (r *BackupReconciler) orphaned(ctx context.Context, req reconcile.Request) error {
	b := &v1alpha1.Backup{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	if b.Status.Phase != v1alpha1.PhaseInProgress {
		return nil
	}
	orig := b.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	b.Status.Phase = v1alpha1.PhaseFailed
	b.Status.CompletionTimestamp = &now
	b.Status.Errors++
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionSucceeded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonServerStopped, Message: "the ferry server running it stopped before it finished"})
	b.Status.FailureReason = "the ferry server running this backup stopped before it finished (found InProgress at server start); its store folder is Incomplete and never restorable: remove it with `ferry backup delete " + b.Name + "`"
	r.Log.Warn("backup left InProgress by a stopped server: marked Failed", "backup", b.Name)
	events.End(r.Events, b, "Backup", string(v1alpha1.PhaseFailed), b.Status.Warnings, b.Status.Errors, b.Status.FailureReason)
	metrics.BackupFailed()
	return ignoreGone(patchStatus(ctx, r.Client, r.APIReader, b, orig))
}

// run takes the backup. Errors returned are API errors writing the
// Backup's own status (retried by the workqueue); everything else ends in
// the status.
func (r *BackupReconciler) run(ctx context.Context, b *v1alpha1.Backup) error {
	if err := validateTemplate(field.NewPath("spec"), b.Spec.TTL, field.NewPath("spec"), b.Spec); err != nil {
		return r.fail(ctx, b, v1alpha1.ReasonInvalidSpec, err.Error())
	}
	bsl, err := storagelocation.Resolve(ctx, r.Client, b.Namespace, b.Spec.StorageLocationName)
	if err != nil {
		return r.fail(ctx, b, v1alpha1.ReasonLocationNotFound, err.Error())
	}
	if bsl.Status.Phase == v1alpha1.LocationUnavailable {
		return r.fail(ctx, b, v1alpha1.ReasonLocationUnavailable, fmt.Sprintf("backup storage location %s is Unavailable: %s", bsl.Name, bsl.Status.Message))
	}
	// Claim it: label and InProgress, each with optimistic concurrency.
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	if b.Labels[v1alpha1.LabelStorageLocation] != bsl.Name {
		b.Labels[v1alpha1.LabelStorageLocation] = bsl.Name
		if err := r.Client.Update(ctx, b); err != nil {
			return ignoreConflict(err)
		}
	}
	start := metav1.NewTime(r.Clock.Now())
	b.Status.Phase = v1alpha1.PhaseInProgress
	b.Status.StartTimestamp = &start
	if ttl := b.Spec.TTL; ttl != nil && ttl.Duration > 0 {
		exp := metav1.NewTime(start.Add(ttl.Duration))
		b.Status.Expiration = &exp
	}
	if err := r.Client.Status().Update(ctx, b); err != nil {
		return ignoreConflict(err)
	}
	metrics.BackupsInProgress.Inc()
	defer metrics.BackupsInProgress.Dec()
	events.Record(r.Events, b, false, events.Started, "Backup", "backing up into location %s", bsl.Name)

	loc, err := storagelocation.Open(ctx, r.APIReader, bsl)
	if err != nil {
		return r.fail(ctx, b, v1alpha1.ReasonLocationUnavailable, err.Error())
	}
	defer loc.Close()
	if enc, err := store.NewEncryption(b.Spec.EncryptionRecipients, nil); err != nil {
		return r.fail(ctx, b, v1alpha1.ReasonInvalidSpec, "spec.encryptionRecipients: "+err.Error())
	} else if enc != nil {
		loc.SetEncryption(enc)
	}

	var done, total atomic.Int64
	// Deleting the Backup while it runs stops it (noticed at the next
	// progress write).
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	stop := r.reportProgress(ctx, b, func(st *v1alpha1.Backup) {
		st.Status.Progress = v1alpha1.BackupProgress{ItemsBackedUp: int(done.Load()), TotalItems: int(total.Load())}
	}, func() { cancelRun(errDeleted) })
	res, _, err := backup.Run(runCtx, r.Cluster, loc, backup.Options{
		Name: b.Name, Spec: b.Spec, Log: r.Log, UID: b.UID,
		Deadline:   deadline.Deadline{After: r.Deadline, Field: "the server's --backup-timeout"},
		OnProgress: func(d, t int) { done.Store(int64(d)); total.Store(int64(t)) },
		PodVolumes: &backup.PodVolumeOptions{Backup: r.podVolumeBackup(loc, b, bsl, func() { cancelRun(errDeleted) }), UnmountedClaims: true},
	})
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // stopping: leave it InProgress for the next server
		}
		if errors.Is(context.Cause(runCtx), errDeleted) {
			return r.deletedWhileRunning(ctx, loc, b)
		}
		return r.fail(ctx, b, v1alpha1.ReasonFailed, err.Error())
	}
	orig := b.DeepCopy()
	expiration := b.Status.Expiration
	b.Status = res.Status
	b.Status.StartTimestamp = &start
	b.Status.Expiration = expiration
	meta.SetStatusCondition(&b.Status.Conditions, ended(b.Status.Phase, b.Status.FailureReason))
	if err := patchStatus(ctx, r.Client, r.APIReader, b, orig); err != nil {
		if errors.Is(err, errGone) {
			r.Log.Info("backup finished, but its Backup object was deleted meanwhile; the store keeps the backup (store sync shows it again)", "backup", b.Name, "phase", b.Status.Phase)
			return nil
		}
		return err
	}
	metrics.BackupFinished(&b.Status)
	events.End(r.Events, b, "Backup", string(b.Status.Phase), b.Status.Warnings, b.Status.Errors, b.Status.FailureReason)
	return nil
}

// podVolumeBackup is the Backup's backup.PodVolumeOptions.Backup: it
// opens (creating if need be) the location's volume repository, hands the
// volumes to the node agents (podVolumes.backup), and then runs kopia's
// scheduled maintenance. Without a repository password, or when the
// repository cannot be opened, every volume fails with the reason.
func (r *BackupReconciler) podVolumeBackup(loc *store.Location, b *v1alpha1.Backup, bsl *v1alpha1.BackupStorageLocation, gone func()) func(context.Context, string, []volumes.PodVolume, func(volumes.Totals)) []volumes.PodVolumeBackup {
	location := bsl.Name
	return func(ctx context.Context, name string, vols []volumes.PodVolume, onProgress func(volumes.Totals)) []volumes.PodVolumeBackup {
		if len(vols) == 0 {
			return nil
		}
		failAll := func(why string) []volumes.PodVolumeBackup {
			out := make([]volumes.PodVolumeBackup, len(vols))
			for i, v := range vols {
				out[i] = volumes.PodVolumeBackup{PodVolume: v, Error: why}
			}
			return out
		}
		if r.RepositoryPassword == "" {
			return failAll(fmt.Sprintf("volume data not backed up: the ferry server has no volume repository password ($%s, from key %q of Secret %s, which the Helm-less install creates)", volumes.EnvPassword, install.RepositorySecretKey, install.RepositorySecretName))
		}
		repo, err := volumes.Open(ctx, loc, r.RepositoryPassword, volumes.OpenOptions{Create: true})
		if err != nil {
			return failAll("volume data not backed up: " + err.Error())
		}
		defer repo.Close(context.WithoutCancel(ctx))
		pv := &podVolumes{client: r.Client, reader: r.APIReader, ns: b.Namespace, location: location, backupName: b.Name,
			owner: ownerRef("Backup", b), timeout: r.PodVolumeTimeout, grace: r.AgentGrace, clock: r.Clock, log: r.Log,
			gone: gone, ownerGone: func(ctx context.Context) bool { return objectGone(ctx, r.APIReader, b) }}
		out := r.backupByNodeAndHelpers(ctx, pv, bsl, name, vols, onProgress)
		// kopia's scheduled maintenance, as after the CLI's snapshots; it
		// must first see the snapshots the node agents wrote.
		if err := repo.Refresh(ctx); err != nil {
			r.Log.Warn("volume repository maintenance skipped", "backup", b.Name, "err", err)
		} else if err := repo.Maintain(ctx); err != nil {
			r.Log.Warn("volume repository maintenance", "backup", b.Name, "err", err)
		}
		return out
	}
}

// reportProgress patches the status every progressPeriod with set, until
// the returned stop is called; gone is called when the Backup has been
// deleted.
func (r *BackupReconciler) reportProgress(ctx context.Context, b *v1alpha1.Backup, set func(*v1alpha1.Backup), gone func()) (stop func()) {
	return every(ctx, progressPeriod, func() {
		cur := b.DeepCopy()
		set(cur)
		if err := patchStatus(ctx, r.Client, r.APIReader, cur, b); errors.Is(err, errGone) {
			gone()
		} else if err != nil {
			r.Log.Info("writing backup progress", "backup", b.Name, "err", err)
		}
	})
}

// errDeleted is the cause of a run's cancellation when its object was
// deleted while it ran.
var errDeleted = errors.New("deleted while it ran")

// deletedWhileRunning cleans up after a Backup deleted while it ran: the
// run stopped before its commit, so its store folder is Incomplete; it is
// removed (only if it is this Backup's, by UID), so that nothing of the
// backup the user deleted stays behind or comes back through store sync.
// Volume snapshots it wrote are pruned by the next backup delete or GC.
func (r *BackupReconciler) deletedWhileRunning(ctx context.Context, loc *store.Location, b *v1alpha1.Backup) error {
	stored, err := loc.GetBackup(ctx, b.Name)
	if errors.Is(err, store.ErrIncomplete) && stored != nil && stored.UID == b.UID {
		if err := loc.DeleteBackup(ctx, b.Name); err != nil {
			r.Log.Warn("backup deleted while it ran: its Incomplete store folder could not be removed", "backup", b.Name, "err", err)
			return nil
		}
	}
	r.Log.Info("backup deleted while it ran: stopped, and its Incomplete store folder removed", "backup", b.Name)
	return nil
}

// ended is ConditionSucceeded for a run that ended in phase.
func ended(phase v1alpha1.Phase, failure string) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionSucceeded, Status: metav1.ConditionFalse, Reason: string(phase), Message: failure}
	switch phase {
	case v1alpha1.PhaseCompleted:
		c.Status, c.Message = metav1.ConditionTrue, "completed"
	case v1alpha1.PhasePartiallyFailed:
		if c.Message == "" { // a failure reason (a verification's) says more
			c.Message = "some items failed: see the errors count and the results in the store"
		}
	}
	if c.Message == "" {
		c.Message = string(phase)
	}
	return c
}

// fail ends b as Failed with reason (a v1alpha1.Reason*) and message.
func (r *BackupReconciler) fail(ctx context.Context, b *v1alpha1.Backup, why, reason string) error {
	orig := b.DeepCopy()
	st := &b.Status
	runStatus{&st.StartTimestamp, &st.CompletionTimestamp, &st.Phase, &st.FailureReason, &st.Errors, &st.Conditions}.fail(metav1.NewTime(r.Clock.Now()), why, reason)
	r.Log.Warn("backup failed", "backup", b.Name, "reason", reason)
	events.Record(r.Events, b, true, why, "Backup", "%s", reason)
	metrics.BackupFailed()
	return ignoreGone(patchStatus(ctx, r.Client, r.APIReader, b, orig))
}

// runStatus points at the fields a Backup's and a Restore's status share.
type runStatus struct {
	start, completion **metav1.Time
	phase             *v1alpha1.Phase
	failure           *string
	errors            *int
	conditions        *[]metav1.Condition
}

// fail ends the run Failed at now: why is the Succeeded condition's
// reason (a v1alpha1.Reason*), reason the failure and its message.
func (s runStatus) fail(now metav1.Time, why, reason string) {
	if *s.start == nil {
		*s.start = &now
	}
	*s.phase = v1alpha1.PhaseFailed
	*s.completion = &now
	*s.failure = reason
	*s.errors++
	meta.SetStatusCondition(s.conditions, metav1.Condition{Type: v1alpha1.ConditionSucceeded, Status: metav1.ConditionFalse, Reason: why, Message: reason})
}

// every runs f every period in a goroutine until stop is called; stop
// waits for a running f to return.
func every(ctx context.Context, period time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// failOnPanic, deferred, turns a panic of a run into the end of its
// object: fail(message) marks it Failed with the panic and its stack
// logged, instead of leaving it InProgress, which would later read as a
// stopped server. The reconciler's error becomes fail's.
func failOnPanic(log *slog.Logger, kind, name string, fail func(string) error, err *error) {
	p := recover()
	if p == nil {
		return
	}
	log.Error("internal error: panic", kind, name, "panic", p, "stack", string(debug.Stack()))
	*err = fail(fmt.Sprintf("internal error in ferry (a bug; please report it with the server log): %v", p))
}

// ignoreConflict drops a conflict: another writer won, and the update it
// made triggers a new reconcile.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// backupByNodeAndHelpers hands each claim to a helper pod, which mounts
// it (on the node of the pod that runs on it, or anywhere for a claim no
// running pod mounts, a finished Job's): the kubelet's pods directory
// does not hold every kind of volume (a hostPath-backed one, say). The
// other volumes (an opted-in emptyDir) go to the node agent of their pod's
// node. Records keep the order of vols.
func (r *BackupReconciler) backupByNodeAndHelpers(ctx context.Context, pv *podVolumes, bsl *v1alpha1.BackupStorageLocation, name string, vols []volumes.PodVolume, onProgress func(volumes.Totals)) []volumes.PodVolumeBackup {
	var byAgent, byHelper []volumes.PodVolume
	var where []int // index in vols: the agents' first, then the helpers'
	for pass := 0; pass < 2; pass++ {
		for i, v := range vols {
			claim := v.Type == "persistentVolumeClaim"
			if claim != (pass == 1) {
				continue
			}
			where = append(where, i)
			if claim {
				byHelper = append(byHelper, v)
			} else {
				byAgent = append(byAgent, v)
			}
		}
	}
	var got []volumes.PodVolumeBackup
	if len(byAgent) > 0 {
		got = pv.backup(ctx, name, byAgent, onProgress)
	}
	if len(byHelper) > 0 {
		h, err := helpers(ctx, r.APIReader, r.Cluster, bsl, r.Helpers, r.Log)
		if err != nil {
			for _, v := range byHelper {
				got = append(got, volumes.PodVolumeBackup{PodVolume: v, Error: fmt.Sprintf("claim %s/%s (volume %s): no helper pod can mount it: %v", v.Namespace, v.ClaimName, v.Key(), err)})
			}
		} else {
			got = append(got, h.Backup(ctx, name, byHelper, nil)...)
			h.Run.Close(ctx)
		}
	}
	out := make([]volumes.PodVolumeBackup, len(vols))
	for j, i := range where {
		out[i] = got[j]
	}
	return out
}
