package controller

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
	"k8s.io/apimachinery/pkg/types"
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

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// NodeAgentOptions configure the node agent's controllers.
type NodeAgentOptions struct {
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
	// SparseFiles restores files sparsely (kopia's --write-sparse-files).
	SparseFiles bool
	// PodName and PodUID, when set (the DaemonSet gives them), make the
	// agent's Pod the owner of its heartbeat Lease, so that the Lease goes
	// with the Pod.
	PodName, PodUID string
	// MetricsAddr and ProbeAddr as in Options ("0" disables; defaults
	// ":8085" and ":8086").
	MetricsAddr, ProbeAddr string
	Clock                  clock.PassiveClock
	Log                    *slog.Logger
	// SeveralPerProcess allows more than one agent in a process (tests).
	SeveralPerProcess bool
}

// NewNodeAgentManager returns a manager that runs the node agent's two
// reconcilers (PodVolumeBackups and PodVolumeRestores of this node) until
// its Start's ctx ends. It does no leader election: each node has its
// own agent, and an object is taken by the agent of its spec.node only.
func NewNodeAgentManager(opts NodeAgentOptions) (manager.Manager, error) {
	switch {
	case opts.Namespace == "":
		return nil, errors.New("node agent: no namespace")
	case opts.Node == "":
		return nil, errors.New("node agent: no node name (--node, or $NODE_NAME from the pod's spec.nodeName)")
	case opts.HostPodsDir == "":
		return nil, errors.New("node agent: no --host-pods-dir")
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
		Scheme:                 Scheme(),
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
	a := &NodeAgentReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Opts: opts, Log: opts.Log.With("node", opts.Node)}
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

// NodeAgentReconciler backs up and restores the pod volumes that
// PodVolumeBackups and PodVolumeRestores of its node ask for, with
// pkg/volumes, in the kubelet pods directory.
//
// Phases: "" or New → InProgress → Completed or Failed. The move to
// InProgress is an optimistic-concurrency update. An object found
// InProgress that this agent is not running was left by an agent that
// stopped: it is marked Failed with the reason (its Backup or Restore
// names the volume as failed), never left InProgress.
type NodeAgentReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Opts      NodeAgentOptions
	Log       *slog.Logger

	mu        sync.Mutex
	repos     map[string]*agentRepo                   // by location name
	unwritten map[types.UID]*v1alpha1.PodVolumeStatus // outcomes not yet written
}

// agentRepo is a location's volume repository, kept open between objects.
type agentRepo struct {
	loc  *store.Location
	repo *volumes.Repository
}

// ReconcileBackup reconciles one PodVolumeBackup.
func (a *NodeAgentReconciler) ReconcileBackup(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
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
func (a *NodeAgentReconciler) ReconcileRestore(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
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
func (a *NodeAgentReconciler) claim(ctx context.Context, o client.Object, st *v1alpha1.PodVolumeStatus) (bool, error) {
	switch st.Phase {
	case "", v1alpha1.PhaseNew:
		now := metav1.NewTime(a.Opts.Clock.Now())
		st.Phase, st.StartTimestamp = v1alpha1.PhaseInProgress, &now
		if err := a.Client.Status().Update(ctx, o); err != nil {
			return false, ignoreConflict(err)
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
func (a *NodeAgentReconciler) finish(ctx context.Context, o client.Object, st *v1alpha1.PodVolumeStatus, failure string) error {
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
func (a *NodeAgentReconciler) write(ctx context.Context, o client.Object, outcome *v1alpha1.PodVolumeStatus) error {
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
func (a *NodeAgentReconciler) withProgress(ctx context.Context, o client.Object, st *v1alpha1.PodVolumeStatus, f func(context.Context, func(volumes.Totals))) {
	var mu sync.Mutex
	var last volumes.Totals
	work, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := every(ctx, progressPeriod, func() {
		mu.Lock()
		t := last
		mu.Unlock()
		err := a.patchProgress(ctx, o, t)
		switch {
		case errors.Is(err, errGone):
			a.Log.Warn("pod volume deleted, or ended by the server, while this agent worked on it: stopped", "name", o.GetName(), "phase", st.Phase)
			cancel()
		case err != nil:
			a.Log.Info("writing pod volume progress", "name", o.GetName(), "err", err)
		}
	})
	f(work, func(t volumes.Totals) {
		mu.Lock()
		last = t
		mu.Unlock()
	})
	stop()
}

// patchProgress writes the running counts into o's status with a JSON
// patch that first tests o's UID and that the phase is still InProgress,
// so that it never lands on another object of the name, nor undoes the
// server's giving up. errGone when o is deleted, replaced or ended.
func (a *NodeAgentReconciler) patchProgress(ctx context.Context, o client.Object, t volumes.Totals) error {
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
		return errGone
	}
	if err != nil {
		// A failed test (422), or another error: look.
		cur := o.DeepCopyObject().(client.Object)
		gerr := a.APIReader.Get(ctx, client.ObjectKeyFromObject(o), cur)
		if apierrors.IsNotFound(gerr) || (gerr == nil && (cur.GetUID() != o.GetUID() || statusOf(cur).Phase != v1alpha1.PhaseInProgress)) {
			return errGone
		}
	}
	return err
}

// repository returns the open volume repository of location name in ns
// (the default location for ""), refreshed so that it sees the snapshots
// other processes wrote since it was opened. Errors name the location.
func (a *NodeAgentReconciler) repository(ctx context.Context, ns, name string) (*volumes.Repository, error) {
	if a.Opts.Password == "" {
		return nil, fmt.Errorf("the node agent has no volume repository password ($%s, from the Secret that `ferry install --repository-password-file` creates): %w", volumes.EnvPassword, volumes.ErrNoPassword)
	}
	bsl, err := resolveLocation(ctx, a.Client, ns, name)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.repos[bsl.Name]; ok {
		if err := r.repo.Refresh(ctx); err != nil {
			return nil, err
		}
		return r.repo, nil
	}
	loc, err := openLocation(ctx, a.APIReader, bsl)
	if err != nil {
		return nil, fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
	}
	repo, err := volumes.Open(ctx, loc, a.Opts.Password, volumes.OpenOptions{})
	if err != nil {
		loc.Close()
		return nil, fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
	}
	repo.SparseFiles = a.Opts.SparseFiles
	if a.repos == nil {
		a.repos = map[string]*agentRepo{}
	}
	a.repos[bsl.Name] = &agentRepo{loc: loc, repo: repo}
	return repo, nil
}

func (a *NodeAgentReconciler) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, r := range a.repos {
		_ = r.repo.Close(context.Background())
		r.loc.Close()
		delete(a.repos, name)
	}
}

// Node agent heartbeat: each agent keeps a Lease (coordination.k8s.io)
// named NodeAgentLeaseName(node) in its namespace, renewed every
// LeaseRenewPeriod, so that the server can tell at once that a node has no
// agent (no Lease, or one not renewed within its duration), the way the
// kubelet's node Lease tells the control plane a node is alive.
const (
	LeaseRenewPeriod   = 10 * time.Second
	LeaseDurationSecs  = 40
	nodeAgentLeaseBase = "ferry-node-agent-"
)

// NodeAgentLeaseName is the Lease of node's agent: ferry-node-agent-<node>,
// the node cut and hashed so that the name stays within 253 characters.
func NodeAgentLeaseName(node string) string {
	if len(nodeAgentLeaseBase)+len(node) <= 253 {
		return nodeAgentLeaseBase + node
	}
	return objectName(nodeAgentLeaseBase+node[:200], node)
}

// heartbeat renews the agent's Lease until the manager stops.
type heartbeat struct{ a *NodeAgentReconciler }

// NeedLeaderElection implements manager.LeaderElectionRunnable: every agent
// runs it.
func (heartbeat) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (h heartbeat) Start(ctx context.Context) error {
	for {
		if err := h.a.renewLease(ctx); err != nil && ctx.Err() == nil {
			h.a.Log.Warn("renewing the node agent's Lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(LeaseRenewPeriod):
		}
	}
}

func (a *NodeAgentReconciler) renewLease(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	dur := int32(LeaseDurationSecs)
	node := a.Opts.Node
	l := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: a.Opts.Namespace, Name: NodeAgentLeaseName(node)}
	err := a.APIReader.Get(ctx, key, l)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "ferry", "app.kubernetes.io/component": "ferry-node-agent"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now}}
		if a.Opts.PodName != "" && a.Opts.PodUID != "" {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: a.Opts.PodName, UID: types.UID(a.Opts.PodUID)}}
		}
		return a.Client.Create(ctx, l)
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &node, &dur, &now
	if a.Opts.PodName != "" && a.Opts.PodUID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: a.Opts.PodName, UID: types.UID(a.Opts.PodUID)}}
	}
	return a.Client.Update(ctx, l)
}

// AgentGrace is how long the server watches a node agent's Lease before
// it calls the agent missing: an agent that is starting (a new node, a
// DaemonSet rollout, a slow image pull) has no Lease yet, or an old one.
const AgentGrace = 2 * time.Minute

// agentAlive reports whether node's agent is alive: its Lease was renewed
// within the Lease's duration by the server's clock, or, since the node's
// clock may be off, its renewTime changes while the server watches it
// (every second, for up to grace: the node lifecycle controller's way of
// judging node Leases). The error says why not, for the volume's record.
func agentAlive(ctx context.Context, c client.Reader, ns, node string, grace time.Duration) error {
	name := NodeAgentLeaseName(node)
	deadline := time.Now().Add(grace)
	var first *metav1.MicroTime
	seen := false
	for {
		l := &coordinationv1.Lease{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l)
		switch {
		case err == nil:
			rt := l.Spec.RenewTime
			if rt != nil && l.Spec.LeaseDurationSeconds != nil && time.Since(rt.Time) <= time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
				return nil
			}
			if seen && rt != nil && (first == nil || !rt.Equal(first)) {
				return nil // renewed while watched: alive, its clock is off
			}
			if !seen {
				first, seen = rt, true
			}
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("the node agent of node %s: reading its Lease %s/%s: %w", node, ns, name, err)
		}
		if !time.Now().Before(deadline) {
			if !seen {
				return fmt.Errorf("no node agent runs on node %s (no Lease %s/%s appeared within %s): is the ferry-node-agent DaemonSet installed, and can it run there (taints, node selector)?", node, ns, name, grace)
			}
			last := "never"
			if first != nil {
				last = first.UTC().Format(time.RFC3339)
			}
			return fmt.Errorf("the node agent of node %s is not running: its Lease %s/%s was last renewed %s, and not within %s", node, ns, name, last, grace)
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
}
