package servermode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// RestoreReconciler runs each new Restore once with pkg/restore, from its
// BackupStorageLocation into the server's own cluster. Phases and the
// handling of a Restore left InProgress by a stopped server are those of
// BackupReconciler. A Restore naming a backup the location does not hold
// (or holds Incomplete, Failed or damaged) ends Failed with the reason.
type RestoreReconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader
	Cluster   *kube.Cluster
	Clock     clock.PassiveClock
	Log       *slog.Logger
	// PodVolumeTimeout and HelperImage: see Options.
	PodVolumeTimeout time.Duration
	// Deadline and VerifyDeadline bound each restore and its verification
	// (Options.RestoreDeadline, VerifyDeadline).
	Deadline, VerifyDeadline time.Duration
	AgentGrace               time.Duration
	HelperImage              string
	// RepositoryPassword lets the helper pods that fill restored claims
	// open the volume repository; without it, claims get no data (each
	// is an error of the restore).
	RepositoryPassword string
	// Helpers are the settings of the helper pods that fill claims.
	Helpers helperpod.Settings
	// Events, if set, records Started and how each Restore ended.
	Events kevents.EventRecorder
}

// Reconcile implements reconcile.Reconciler.
func (r *RestoreReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	rs := &v1alpha1.Restore{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	switch rs.Status.Phase {
	case "", v1alpha1.PhaseNew:
		defer failOnPanic(r.Log, "restore", rs.Name, func(msg string) error { return r.fail(ctx, rs, v1alpha1.ReasonFailed, msg) }, &err)
		return reconcile.Result{}, r.run(ctx, rs)
	case v1alpha1.PhaseInProgress:
		cur := &v1alpha1.Restore{}
		if err := r.APIReader.Get(ctx, req.NamespacedName, cur); err != nil {
			return reconcile.Result{}, ctrl.IgnoreNotFound(err)
		}
		if cur.Status.Phase == v1alpha1.PhaseInProgress {
			return reconcile.Result{}, r.fail(ctx, cur, v1alpha1.ReasonServerStopped, "the ferry server running this restore stopped before it finished (found InProgress at server start); create a new Restore of the same backup to finish it: what was applied comes out unchanged")
		}
	}
	return reconcile.Result{}, nil
}

func (r *RestoreReconciler) run(ctx context.Context, rs *v1alpha1.Restore) error {
	opts := restore.Options{Name: rs.Name, Spec: rs.Spec, Log: r.Log,
		Deadline:       deadline.Deadline{After: r.Deadline, Field: "the server's --restore-timeout"},
		VerifyDeadline: deadline.Deadline{After: r.VerifyDeadline, Field: "the server's --verify-timeout"}}
	if rs.Spec.CRDTimeout != nil {
		opts.CRDTimeout = rs.Spec.CRDTimeout.Duration
	}
	if err := opts.Validate(); err != nil {
		return r.fail(ctx, rs, v1alpha1.ReasonInvalidSpec, err.Error())
	}
	bsl, err := storagelocation.Resolve(ctx, r.Client, rs.Namespace, rs.Spec.StorageLocationName)
	if err != nil {
		return r.fail(ctx, rs, v1alpha1.ReasonLocationNotFound, err.Error())
	}
	if bsl.Status.Phase == v1alpha1.LocationUnavailable {
		return r.fail(ctx, rs, v1alpha1.ReasonLocationUnavailable, fmt.Sprintf("backup storage location %s is Unavailable: %s", bsl.Name, bsl.Status.Message))
	}
	start := metav1.NewTime(r.Clock.Now())
	rs.Status.Phase = v1alpha1.PhaseInProgress
	rs.Status.StartTimestamp = &start
	if err := r.Client.Status().Update(ctx, rs); err != nil {
		return ignoreConflict(err)
	}
	metrics.RestoresInProgress.Inc()
	defer metrics.RestoresInProgress.Dec()
	if rs.Spec.PreflightOnly {
		events.Record(r.Events, rs, false, events.Started, "Preflight", "checking the restore of backup %s from location %s (spec.preflightOnly: nothing is written but its probes, which are removed)", rs.Spec.BackupName, bsl.Name)
	} else {
		events.Record(r.Events, rs, false, events.Started, "Restore", "restoring backup %s from location %s", rs.Spec.BackupName, bsl.Name)
	}
	loc, err := storagelocation.Open(ctx, r.APIReader, bsl)
	if err != nil {
		return r.fail(ctx, rs, v1alpha1.ReasonLocationUnavailable, err.Error())
	}
	defer loc.Close()
	if ref := rs.Spec.EncryptionIdentitySecret; ref != nil {
		ids, err := identities(ctx, r.APIReader, rs.Namespace, ref)
		if err != nil {
			return r.fail(ctx, rs, v1alpha1.ReasonInvalidSpec, err.Error())
		}
		enc, err := store.NewEncryption(nil, ids)
		if err != nil {
			return r.fail(ctx, rs, v1alpha1.ReasonInvalidSpec, "spec.encryptionIdentitySecret: "+err.Error())
		}
		loc.SetEncryption(enc)
	}
	if rs.Spec.PreflightOnly {
		return r.preflight(ctx, rs, bsl, loc, opts, start)
	}

	pv, cleanup := r.podVolumes(ctx, rs, bsl, loc, &opts)
	defer cleanup()

	var done, total atomic.Int64
	opts.OnProgress = func(d, t int) { done.Store(int64(d)); total.Store(int64(t)) }
	// Deleting the Restore while it runs stops it (noticed at the next
	// progress write); what it applied stays.
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	pv.gone = func() { cancelRun(errDeleted) }
	stop := every(ctx, progressPeriod, func() {
		cur := rs.DeepCopy()
		cur.Status.Progress = &v1alpha1.RestoreProgress{ItemsRestored: int(done.Load()), TotalItems: int(total.Load())}
		if err := patchStatus(ctx, r.Client, r.APIReader, cur, rs); errors.Is(err, errGone) {
			cancelRun(errDeleted)
		} else if err != nil {
			r.Log.Info("writing restore progress", "restore", rs.Name, "err", err)
		}
	})
	res, _, err := restore.Run(runCtx, r.Cluster, loc, opts)
	stop()
	if errors.Is(context.Cause(runCtx), errDeleted) && ctx.Err() == nil {
		r.Log.Info("restore deleted while it ran: stopped; what it applied stays", "restore", rs.Name)
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		why := v1alpha1.ReasonFailed
		if errors.Is(err, restore.ErrBackupNotRestorable) {
			why = v1alpha1.ReasonBackupNotRestorable
		}
		return r.fail(ctx, rs, why, err.Error())
	}
	if rs.Spec.Verify {
		r.verify(ctx, rs, loc, opts, res)
	}
	return r.finish(ctx, rs, start, res)
}

// verify runs the verification spec.verify asks for on the restored
// res (pkg/migration.VerifyAndRecord, as restore create --verify runs
// it), keeping the report in the location, and writes its outcome into
// res's status and its record; a failed restore is not verified.
func (r *RestoreReconciler) verify(ctx context.Context, rs *v1alpha1.Restore, loc *store.Location, opts restore.Options, res *v1alpha1.Restore) {
	if err := migration.VerifyAndRecord(ctx, r.Cluster, loc, opts, res, nil); err != nil {
		r.Log.Warn("restore verified", "restore", rs.Name, "error", err)
	}
	sum := res.Status.Verification
	if sum == nil {
		return
	}
	events.Record(r.Events, rs, sum.Error != "" || sum.Unexpected > 0, events.Verified, "Verify", "%d of %d object(s) match the backup, %d unexpected", sum.Matched, sum.Objects, sum.Unexpected)
}

// finish writes the outcome res of rs's run (started at start) into its
// status, with its condition, event and metrics.
func (r *RestoreReconciler) finish(ctx context.Context, rs *v1alpha1.Restore, start metav1.Time, res *v1alpha1.Restore) error {
	orig := rs.DeepCopy()
	rs.Status = res.Status
	rs.Status.StartTimestamp = &start
	rs.Status.Progress = &v1alpha1.RestoreProgress{ItemsRestored: res.Status.Counts.Total(), TotalItems: res.Status.Counts.Total()}
	meta.SetStatusCondition(&rs.Status.Conditions, ended(rs.Status.Phase, rs.Status.FailureReason))
	if err := patchStatus(ctx, r.Client, r.APIReader, rs, orig); err != nil {
		if errors.Is(err, errGone) {
			r.Log.Info("restore finished, but its Restore object was deleted meanwhile", "restore", rs.Name, "phase", rs.Status.Phase)
			return nil
		}
		return err
	}
	metrics.RestoreFinished(&rs.Status)
	events.End(r.Events, rs, "Restore", string(rs.Status.Phase), rs.Status.Warnings, rs.Status.Errors, rs.Status.FailureReason)
	return nil
}

// podVolumes sets opts.PodVolumes for rs: the volume data goes to the
// node agents, one PodVolumeRestore per volume (the restored pods wait for
// it in their init container); claims are filled by helper pods before
// their workloads exist: no pod mounts them yet, so no node agent can
// reach them. cleanup removes what the helper pods left.
func (r *RestoreReconciler) podVolumes(ctx context.Context, rs *v1alpha1.Restore, bsl *v1alpha1.BackupStorageLocation, loc *store.Location, opts *restore.Options) (pv *podVolumes, cleanup func()) {
	pv = &podVolumes{client: r.Client, reader: r.APIReader, ns: rs.Namespace, location: bsl.Name, backupName: rs.Spec.BackupName,
		owner: ownerRef("Restore", rs), timeout: r.PodVolumeTimeout, grace: r.AgentGrace, clock: r.Clock, log: r.Log,
		ownerGone: func(ctx context.Context) bool { return objectGone(ctx, r.APIReader, rs) }}
	opts.PodVolumes = &restore.PodVolumeOptions{HelperImage: r.HelperImage, Wait: r.PodVolumeTimeout,
		Restore: func(ctx context.Context, uid string, targets []volumes.RestoreTarget, wait time.Duration, onProgress func(volumes.Totals)) []volumes.PodVolumeRestore {
			return pv.restore(ctx, rs.Name, uid, targets, wait, onProgress)
		}}
	h, herr := helpers(ctx, r.APIReader, r.Cluster, bsl, r.Helpers, r.Log)
	cleanup = func() {}
	if herr == nil {
		cleanup = func() { h.Run.Close(ctx) }
		opts.PodVolumes.Claims = h.RestoreClaims
		opts.PodVolumes.CheckClaims = h.CheckClaims
		opts.PodVolumes.Check = func(ctx context.Context) error {
			repo, err := volumes.Open(ctx, loc, r.RepositoryPassword, volumes.OpenOptions{})
			if err != nil {
				return err
			}
			return repo.Close(context.WithoutCancel(ctx))
		}
	} else {
		opts.PodVolumes.Claims = failClaims(herr)
	}

	return pv, cleanup
}

// identities reads the age identities of spec.encryptionIdentitySecret
// (key "identity" unless it says). Errors name the Secret and key.
func identities(ctx context.Context, secrets ctrl.Reader, ns string, ref *v1alpha1.SecretKeyReference) ([]age.Identity, error) {
	key := ref.Key
	if key == "" {
		key = "identity"
	}
	what := fmt.Sprintf("spec.encryptionIdentitySecret: Secret %s/%s key %q", ns, ref.Name, key)
	s := &corev1.Secret{}
	if err := secrets.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: ref.Name}, s); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	data, ok := s.Data[key]
	if !ok {
		return nil, fmt.Errorf("%s: the Secret has no such key", what)
	}
	return store.ParseIdentities(bytes.NewReader(data), what)
}

// fail ends rs as Failed with reason (a v1alpha1.Reason*) and message.
func (r *RestoreReconciler) fail(ctx context.Context, rs *v1alpha1.Restore, why, reason string) error {
	orig := rs.DeepCopy()
	st := &rs.Status
	runStatus{&st.StartTimestamp, &st.CompletionTimestamp, &st.Phase, &st.FailureReason, &st.Errors, &st.Conditions}.fail(metav1.NewTime(r.Clock.Now()), why, reason)
	r.Log.Warn("restore failed", "restore", rs.Name, "reason", reason)
	events.Record(r.Events, rs, true, why, "Restore", "%s", reason)
	metrics.RestoreFailed()
	return ignoreGone(patchStatus(ctx, r.Client, r.APIReader, rs, orig))
}

// failClaims restores no claim: each fails with err.
func failClaims(err error) func(context.Context, string, []volumes.ClaimRestore, func(volumes.Totals)) []volumes.PodVolumeRestore {
	return func(_ context.Context, _ string, claims []volumes.ClaimRestore, _ func(volumes.Totals)) []volumes.PodVolumeRestore {
		out := make([]volumes.PodVolumeRestore, len(claims))
		for i, c := range claims {
			out[i] = volumes.PodVolumeRestore{RestoreTarget: volumes.RestoreTarget{PodVolume: c.Source, SnapshotID: c.SnapshotID}, Error: fmt.Sprintf("%s: %v", c.Key(), err)}
		}
		return out
	}
}
