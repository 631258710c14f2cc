// Package nodeagent is ferry's node agent: the process that runs on each
// node (the ferry-node-agent DaemonSet) and reads and writes pod volume
// data in the kubelet's pods directory, with pkg/volumes. It runs in one
// of two modes:
//
//   - server mode (NewManager): controller-runtime reconcilers carry out
//     the PodVolumeBackups and PodVolumeRestores of its node that the
//     server creates, keep each location's volume repository open between
//     objects, and renew the agent's heartbeat Lease, which the server reads
//     (Alive) before it hands a node any work;
//   - polling (Poller): it finds the restored pods of its node that wait
//     for their volume data (PendingRestores) and restores it from the
//     backup's volume record.
package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// Options configure the node agent's controllers.
type Options struct {
	// Namespace holds the PodVolumeBackups, PodVolumeRestores, locations
	// and credential Secrets (the server's namespace). Required.
	Namespace string
	// Node is this node's name: only objects whose spec.node is Node are
	// taken. Required.
	Node string
	// HostPodsDir is the kubelet's pods directory as mounted in the agent
	// (/var/lib/kubelet/pods on the node). Required.
	HostPodsDir string
	Config      *rest.Config
	// Password of the locations' volume repositories; "" fails every
	// PodVolumeBackup and PodVolumeRestore with volumes.ErrNoPassword.
	Password string
	// Wait bounds the wait for a volume's folder to appear (the kubelet
	// mounts it before the pod's init containers run; default 10m).
	Wait time.Duration
	// SparseFiles restores files sparsely (kopia's write-sparse-files option).
	SparseFiles bool
	// PodName and PodUID, when set (the DaemonSet gives them), make the
	// agent's Pod the owner of its heartbeat Lease, so that the Lease goes
	// with the Pod.
	PodName, PodUID string
	// MetricsAddr and ProbeAddr as in the server's servermode.Options ("0" disables; defaults
	// ":8085" and ":8086").
	MetricsAddr, ProbeAddr string
	Clock                  clock.PassiveClock
	Log                    *slog.Logger
	// SeveralPerProcess allows more than one agent in a process (tests).
	SeveralPerProcess bool
}

// NewManager returns a manager that runs the node agent's two
// reconcilers (PodVolumeBackups and PodVolumeRestores of this node) until
// its Start's ctx ends. It does no leader election: each node has its
// own agent, and an object is taken by the agent of its spec.node only.
func NewManager(opts Options) (manager.Manager, error) {
	switch {
	case opts.Namespace == "":
		return nil, errors.New("node agent: no namespace")
	case opts.Node == "":
		return nil, errors.New("node agent: no nodeagent.Options.Node (the node's name; the DaemonSet gives it as $NODE_NAME, from the pod's spec.nodeName)")
	case opts.HostPodsDir == "":
		return nil, errors.New("node agent: no nodeagent.Options.HostPodsDir (the kubelet's pods directory)")
	case opts.Config == nil:
		return nil, errors.New("node agent: no cluster config")
	}
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = ":8085"
	}
	if opts.ProbeAddr == "" {
		opts.ProbeAddr = ":8086"
	}
	mgr, err := ctrl.NewManager(opts.Config, ctrl.Options{
		Scheme:                 scheme(),
		Controller:             config.Controller{SkipNameValidation: &opts.SeveralPerProcess},
		Logger:                 logr.FromSlogHandler(opts.Log.Handler()),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.ProbeAddr,
	})
	if err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	a := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Opts: opts, Log: opts.Log.With("node", opts.Node)}
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		switch x := o.(type) {
		case *v1alpha1.PodVolumeBackup:
			return x.Spec.Node == opts.Node
		case *v1alpha1.PodVolumeRestore:
			return x.Spec.Node == opts.Node
		}
		return false
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("podvolumebackup").For(&v1alpha1.PodVolumeBackup{}, builder.WithPredicates(mine)).
		Complete(reconcile.Func(a.ReconcileBackup)); err != nil {
		return nil, err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("podvolumerestore").For(&v1alpha1.PodVolumeRestore{}, builder.WithPredicates(mine)).
		Complete(reconcile.Func(a.ReconcileRestore)); err != nil {
		return nil, err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		a.close()
		return nil
	})); err != nil {
		return nil, err
	}
	// The heartbeat needs no leader election: each node has its own.
	if err := mgr.Add(heartbeat{a}); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Reconciler backs up and restores the pod volumes that
// PodVolumeBackups and PodVolumeRestores of its node ask for, with
// pkg/volumes, in the kubelet pods directory.
//
// Phases: "" or New → InProgress → Completed or Failed. The move to
// InProgress is an optimistic-concurrency update. An object found
// InProgress that this agent is not running was left by an agent that
// stopped: it is marked Failed with the reason (its Backup or Restore
// names the volume as failed), never left InProgress.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Opts      Options
	Log       *slog.Logger

	mu        sync.Mutex
	repos     map[string]*agentRepo                   // by location name
	retired   []*agentRepo                            // of locations changed since, closed with the agent
	unwritten map[types.UID]*v1alpha1.PodVolumeStatus // outcomes not yet written
}

// ReconcileBackup reconciles one PodVolumeBackup.
func (a *Reconciler) ReconcileBackup(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvb := &v1alpha1.PodVolumeBackup{}
	if err := a.Client.Get(ctx, req.NamespacedName, pvb); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pvb.Spec.Node != a.Opts.Node {
		return reconcile.Result{}, nil
	}
	run, err := a.claim(ctx, pvb, &pvb.Status)
	if err != nil || !run {
		return reconcile.Result{}, err
	}
	s := pvb.Spec
	v := volumes.PodVolume{Namespace: s.Pod.Namespace, Pod: s.Pod.Name, PodUID: s.Pod.UID, Node: s.Node, Volume: s.Volume,
		ClaimName: s.ClaimName, PVName: s.PersistentVolumeName, Identity: s.Identity}
	repo, err := a.repository(ctx, pvb.Namespace, s.StorageLocationName)
	if err != nil {
		return reconcile.Result{}, a.finish(ctx, pvb, &pvb.Status, err.Error())
	}
	var rec volumes.PodVolumeBackup
	a.withProgress(ctx, pvb, &pvb.Status, func(ctx context.Context, progress func(volumes.Totals)) {
		rec = repo.BackupPodVolumes(ctx, a.Opts.HostPodsDir, s.BackupName, []volumes.PodVolume{v}, progress)[0]
	})
	if ctx.Err() != nil {
		return reconcile.Result{}, ctx.Err() // stopping: found InProgress, and failed, on restart
	}
	pvb.Status.Path = rec.Path
	if r := rec.SnapshotResult; r != nil {
		st := &pvb.Status
		st.SnapshotID, st.ParentSnapshotID, st.BytesDone, st.BytesTotal, st.Files = r.SnapshotID, r.ParentSnapshotID, r.Bytes, r.Bytes, r.Files
		st.UploadedBytes, st.CachedFiles = r.UploadedBytes, r.CachedFiles
	}
	a.Log.Info("pod volume backed up", "podvolumebackup", pvb.Name, "volume", v.Key(), "err", rec.Error)
	return reconcile.Result{}, a.finish(ctx, pvb, &pvb.Status, rec.Error)
}

// ReconcileRestore reconciles one PodVolumeRestore.
func (a *Reconciler) ReconcileRestore(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvr := &v1alpha1.PodVolumeRestore{}
	if err := a.Client.Get(ctx, req.NamespacedName, pvr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pvr.Spec.Node != a.Opts.Node {
		return reconcile.Result{}, nil
	}
	run, err := a.claim(ctx, pvr, &pvr.Status)
	if err != nil || !run {
		return reconcile.Result{}, err
	}
	s := pvr.Spec
	t := volumes.RestoreTarget{
		PodVolume:  volumes.PodVolume{Namespace: s.Pod.Namespace, Pod: s.Pod.Name, PodUID: s.Pod.UID, Node: s.Node, Volume: s.Volume, ClaimName: s.ClaimName, PVName: s.PersistentVolumeName},
		SnapshotID: s.SnapshotID, MarkerOnly: s.MarkerOnly, RestoreUID: s.RestoreUID,
	}
	// The run's UID (a marker the pod waits for that another restore
	// wrote is then a skip); an object without runUID is the run's own.
	runID := s.RunUID
	if runID == "" {
		runID = s.RestoreUID
	}
	var res volumes.PodVolumeRestore
	if t.MarkerOnly {
		res = volumes.MarkClaimRestored(ctx, a.Opts.HostPodsDir, runID, t, a.Opts.Wait)
	} else {
		repo, err := a.repository(ctx, pvr.Namespace, s.StorageLocationName)
		if err != nil {
			return reconcile.Result{}, a.finish(ctx, pvr, &pvr.Status, err.Error())
		}
		a.withProgress(ctx, pvr, &pvr.Status, func(ctx context.Context, progress func(volumes.Totals)) {
			res = repo.RestorePodVolumes(ctx, a.Opts.HostPodsDir, runID, []volumes.RestoreTarget{t}, a.Opts.Wait, progress)[0]
		})
	}
	if ctx.Err() != nil {
		return reconcile.Result{}, ctx.Err()
	}
	pvr.Status.Path = res.Path
	pvr.Status.SnapshotID = s.SnapshotID
	if r := res.RestoreResult; r != nil {
		pvr.Status.BytesDone, pvr.Status.BytesTotal, pvr.Status.Files = r.Bytes, r.Bytes, r.Files
	}
	a.Log.Info("pod volume restored", "podvolumerestore", pvr.Name, "volume", t.Key(), "err", res.Error)
	return reconcile.Result{}, a.finish(ctx, pvr, &pvr.Status, res.Error)
}

// claim moves a new object to InProgress (false when another writer won,
// or the object has ended). An object InProgress in the API server was
// left by a stopped agent: it is marked Failed.
func (a *Reconciler) claim(ctx context.Context, o client.Object, st *v1alpha1.PodVolumeStatus) (bool, error) {
	switch st.Phase {
	case "", v1alpha1.PhaseNew:
		now := metav1.NewTime(a.Opts.Clock.Now())
		st.Phase, st.StartTimestamp = v1alpha1.PhaseInProgress, &now
		if err := a.Client.Status().Update(ctx, o); err != nil {
			if apierrors.IsConflict(err) {
				return false, nil // another writer won; its update triggers a new reconcile
			}
			return false, err
		}
		return true, nil
	case v1alpha1.PhaseInProgress:
		// The cache may lag behind this agent's own last update.
		if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		a.mu.Lock()
		outcome, ok := a.unwritten[o.GetUID()]
		a.mu.Unlock()
		if ok && st.Phase == v1alpha1.PhaseInProgress {
			// This agent finished it but could not write the outcome.
			return false, a.write(ctx, o, outcome)
		}
		if st.Phase == v1alpha1.PhaseInProgress {
			a.Log.Warn("pod volume left InProgress by a stopped node agent: marked Failed", "name", o.GetName())
			return false, a.finish(ctx, o, st, "the node agent running it stopped before it finished")
		}
	}
	return false, nil
}

// finish ends the object: Completed, or Failed with message failure.
func (a *Reconciler) finish(ctx context.Context, o client.Object, st *v1alpha1.PodVolumeStatus, failure string) error {
	now := metav1.NewTime(a.Opts.Clock.Now())
	st.CompletionTimestamp = &now
	st.Phase, st.Message = v1alpha1.PhaseCompleted, ""
	if failure != "" {
		st.Phase, st.Message = v1alpha1.PhaseFailed, failure
	}
	return a.write(ctx, o, st.DeepCopy())
}

// write puts outcome into o's status, retrying transient errors and
// conflicts. If the server gave up on it meanwhile (marked it Failed),
// its word stands: each try reads the object as it is and updates from
// that version, so that a change in between is a conflict. An outcome
// that cannot be written is kept, so that the retried reconcile writes it
// rather than taking the object for one a stopped agent left.
func (a *Reconciler) write(ctx context.Context, o client.Object, outcome *v1alpha1.PodVolumeStatus) error {
	err := retry.OnError(retry.DefaultBackoff, func(err error) bool { return !apierrors.IsNotFound(err) }, func() error {
		cur := o.DeepCopyObject().(client.Object)
		if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
			return err
		}
		if cur.GetUID() != o.GetUID() {
			a.Log.Warn("pod volume deleted and created again while this agent worked on it; its outcome here is dropped", "name", o.GetName())
			return nil
		}
		if cs := statusOf(cur); cs.Phase != v1alpha1.PhaseInProgress {
			a.Log.Warn("pod volume ended elsewhere; its outcome here is dropped", "name", o.GetName(), "phase", cs.Phase, "message", cs.Message, "outcome", outcome.Phase)
			return nil
		}
		*statusOf(cur) = *outcome
		return a.Client.Status().Update(ctx, cur)
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		if a.unwritten == nil {
			a.unwritten = map[types.UID]*v1alpha1.PodVolumeStatus{}
		}
		a.unwritten[o.GetUID()] = outcome
		return err
	}
	delete(a.unwritten, o.GetUID())
	return nil
}

// progressPeriod is how often a running volume's byte and file counts
// are written into its status.
const progressPeriod = time.Second

// errEnded is patchProgress's answer when the object it works on is gone:
// deleted, replaced by another of its name, or ended by the server.
var errEnded = errors.New("deleted, or ended by the server, while this agent worked on it")

// scheme holds the Kubernetes core types and ferry.dev/v1alpha1.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// statusOf is the status of a PodVolumeBackup or PodVolumeRestore.
func statusOf(o client.Object) *v1alpha1.PodVolumeStatus {
	switch x := o.(type) {
	case *v1alpha1.PodVolumeBackup:
		return &x.Status
	case *v1alpha1.PodVolumeRestore:
		return &x.Status
	}
	panic(fmt.Sprintf("statusOf %T", o))
}

// withProgress runs f, patching the status with its running byte and
// file counts every progressPeriod. f's context is cancelled when the
// object is deleted, or was ended by the server (it gave up on it), so
// that the agent stops uploading or writing for nobody.
func (a *Reconciler) withProgress(ctx context.Context, o client.Object, st *v1alpha1.PodVolumeStatus, f func(context.Context, func(volumes.Totals))) {
	var mu sync.Mutex
	var last volumes.Totals
	work, cancel := context.WithCancel(ctx)
	defer cancel()
	ticking, stopTicking := context.WithCancel(ctx)
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		_ = wait.PollUntilContextCancel(ticking, progressPeriod, false, func(context.Context) (bool, error) {
			mu.Lock()
			t := last
			mu.Unlock()
			err := a.patchProgress(ctx, o, t)
			switch {
			case errors.Is(err, errEnded):
				a.Log.Warn("pod volume deleted, or ended by the server, while this agent worked on it: stopped", "name", o.GetName(), "phase", st.Phase)
				cancel()
			case err != nil:
				a.Log.Info("writing pod volume progress", "name", o.GetName(), "err", err)
			}
			return false, nil
		})
	}()
	f(work, func(t volumes.Totals) {
		mu.Lock()
		last = t
		mu.Unlock()
	})
	stopTicking()
	<-ticked
}

// patchProgress writes the running counts into o's status with a JSON
// patch that first tests o's UID and that the phase is still InProgress,
// so that it never lands on another object of the name, nor undoes the
// server's giving up. errEnded when o is deleted, replaced or ended.
func (a *Reconciler) patchProgress(ctx context.Context, o client.Object, t volumes.Totals) error {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(o.GetUID())},
		{"op": "test", "path": "/status/phase", "value": string(v1alpha1.PhaseInProgress)},
		{"op": "add", "path": "/status/bytesDone", "value": t.Bytes},
		{"op": "add", "path": "/status/files", "value": t.Files},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	err = a.Client.Status().Patch(ctx, o.DeepCopyObject().(client.Object), client.RawPatch(types.JSONPatchType, data))
	if apierrors.IsNotFound(err) {
		return errEnded
	}
	if err != nil {
		// A failed test (422), or another error: look.
		cur := o.DeepCopyObject().(client.Object)
		gerr := a.APIReader.Get(ctx, client.ObjectKeyFromObject(o), cur)
		if apierrors.IsNotFound(gerr) || (gerr == nil && (cur.GetUID() != o.GetUID() || statusOf(cur).Phase != v1alpha1.PhaseInProgress)) {
			return errEnded
		}
	}
	return err
}
