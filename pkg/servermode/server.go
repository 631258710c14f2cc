// Package servermode is ferry's server mode: controller-runtime
// reconcilers for Backups, Restores, Schedules, expired backups (GC),
// BackupStorageLocations (validation) and store sync. Each reconciler
// calls the same engine as the CLI (pkg/backup, pkg/restore, pkg/store);
// the manager, caches, leader election, probes and metrics are wiring.
// The pod volume data of a Backup or Restore is handed to the node agents
// as PodVolumeBackups and PodVolumeRestores (podVolumes); the node agent
// that carries them out is pkg/nodeagent.
package servermode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/nodeagent"
)

// Options configure the server. Zero values take the defaults given.
type Options struct {
	// Namespace holds the server's objects (Backups, Restores, Schedules,
	// locations, their Secrets, the leader-election Lease). Required.
	Namespace string
	// Config talks to the cluster the server backs up and restores into.
	Config *rest.Config
	// MetricsAddr serves /metrics ("0" disables it; default ":8085").
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz ("0" disables it; default ":8086").
	ProbeAddr string
	// LeaderElect runs the controllers only while this process holds the
	// Lease "ferry-server" in Namespace.
	LeaderElect bool
	// LeaseDuration of the leader-election Lease (default 15s); the renew
	// deadline is 2/3 of it and the retry period 1/5.
	LeaseDuration time.Duration
	// SyncPeriod is how often store sync runs per location (default 1m).
	SyncPeriod time.Duration
	// ValidationPeriod is how often a location is validated when its spec
	// does not say (default 1m).
	ValidationPeriod time.Duration
	// MaxWait bounds how long a Schedule or an unexpired Backup waits
	// before it is looked at again (default 1m): with a fake Clock, time
	// moves as the test says, and controllers notice within MaxWait.
	MaxWait time.Duration
	// Clock is the time source of schedules, expirations and status
	// timestamps (default the real clock).
	Clock clock.PassiveClock
	Log   *slog.Logger
	// SeveralPerProcess allows more than one server in a process (tests
	// run a source's and a target's); their metrics are shared.
	SeveralPerProcess bool
	// RepositoryPassword opens the locations' volume repositories (kopia)
	// for pod volume backups, and is given to the helper pods that back up
	// claims no pod mounts and fill restored claims. Without it, those
	// volumes fail with the reason (the backup or restore is
	// PartiallyFailed).
	RepositoryPassword string
	// BackupDeadline and RestoreDeadline bound each Backup and Restore,
	// VerifyDeadline a Restore's spec.verify (ferry server
	// --backup-timeout, --restore-timeout, --verify-timeout); 0 is none.
	BackupDeadline, RestoreDeadline, VerifyDeadline time.Duration
	// PodVolumeTimeout bounds how long a backup or restore waits for the
	// node agents to finish its PodVolumeBackups or PodVolumeRestores, and
	// a restore for each restored pod to be scheduled (default
	// DefaultPodVolumeTimeout).
	PodVolumeTimeout time.Duration
	// AgentGrace is how long a node agent may take to show up (its heartbeat
	// Lease) before its volumes fail (default nodeagent.Grace).
	AgentGrace time.Duration
	// RestoreHelperImage is ferry's image: it runs the ferry-restore-wait
	// init container of restored pods that wait for their volume data, and
	// the helper pods (default restore.DefaultRestoreHelperImage).
	RestoreHelperImage string
	// NodePodsDir, HelperUnschedulable and SparseFiles are the helper
	// pods' settings (helperpod.Settings): the kubelet's pods directory on
	// the nodes, how long the scheduler may find no node for a helper, and
	// whether the claims they fill are written sparsely.
	NodePodsDir         string
	HelperUnschedulable time.Duration
	SparseFiles         bool
}

// helperSettings are the settings of the server's helper pods, the same
// as the CLI's and the hub's (helperpod.New); the location's credentials
// and the log are added per run.
func (o *Options) helperSettings() helperpod.Settings {
	return helperpod.Settings{Image: o.RestoreHelperImage, Password: o.RepositoryPassword, StartTimeout: o.PodVolumeTimeout,
		NodePodsDir: o.NodePodsDir, Unschedulable: o.HelperUnschedulable, Sparse: o.SparseFiles}
}

func (o *Options) defaults() error {
	if o.Namespace == "" {
		return errors.New("server: no namespace")
	}
	if o.Config == nil {
		return errors.New("server: no cluster config")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.LeaseDuration, 15*time.Second)
	def(&o.SyncPeriod, time.Minute)
	def(&o.ValidationPeriod, time.Minute)
	def(&o.MaxWait, time.Minute)
	def(&o.PodVolumeTimeout, DefaultPodVolumeTimeout)
	def(&o.AgentGrace, nodeagent.Grace)
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8085"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = ":8086"
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Scheme holds the Kubernetes core types and ferry.dev/v1alpha1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// NewManager connects to the cluster and returns a manager with every
// controller registered; Start runs it until ctx ends.
func NewManager(ctx context.Context, opts Options) (manager.Manager, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	metrics.Register(ctrlmetrics.Registry)
	cluster, err := kube.Connect(ctx, "", opts.Config)
	if err != nil {
		return nil, err
	}
	renew := opts.LeaseDuration * 2 / 3
	retry := opts.LeaseDuration / 5
	mgr, err := ctrl.NewManager(opts.Config, ctrl.Options{
		Scheme:     Scheme(),
		Controller: config.Controller{SkipNameValidation: &opts.SeveralPerProcess},
		Logger:     logr.FromSlogHandler(opts.Log.Handler()),
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			// Secrets are read uncached (only "get" is needed).
			ByObject: map[client.Object]cache.ByObject{},
		},
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:        opts.ProbeAddr,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              "ferry-server",
		LeaderElectionNamespace:       opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	rec := mgr.GetEventRecorder("ferry-server")
	log := opts.Log
	type reg struct {
		name string
		obj  client.Object
		r    interface {
			Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
		}
		preds []predicate.Predicate
	}
	gen := predicate.GenerationChangedPredicate{}
	regs := []reg{
		{"backup", &v1alpha1.Backup{}, &BackupReconciler{Client: c, APIReader: reader, Cluster: cluster, Clock: opts.Clock, Log: log.With("controller", "backup"),
			RepositoryPassword: opts.RepositoryPassword, PodVolumeTimeout: opts.PodVolumeTimeout, AgentGrace: opts.AgentGrace, HelperImage: opts.RestoreHelperImage, Helpers: opts.helperSettings(), Events: rec, Deadline: opts.BackupDeadline}, nil},
		{"restore", &v1alpha1.Restore{}, &RestoreReconciler{Client: c, APIReader: reader, Cluster: cluster, Clock: opts.Clock, Log: log.With("controller", "restore"),
			PodVolumeTimeout: opts.PodVolumeTimeout, AgentGrace: opts.AgentGrace, HelperImage: opts.RestoreHelperImage, RepositoryPassword: opts.RepositoryPassword, Helpers: opts.helperSettings(), Events: rec, Deadline: opts.RestoreDeadline, VerifyDeadline: opts.VerifyDeadline}, nil},
		{"schedule", &v1alpha1.Schedule{}, &ScheduleReconciler{Client: c, Clock: opts.Clock, MaxWait: opts.MaxWait, Log: log.With("controller", "schedule")}, []predicate.Predicate{gen}},
		{"backup-gc", &v1alpha1.Backup{}, &GCReconciler{Client: c, APIReader: reader, Clock: opts.Clock, MaxWait: opts.MaxWait, Log: log.With("controller", "gc"), RepositoryPassword: opts.RepositoryPassword, Events: rec}, nil},
		{"backupstoragelocation", &v1alpha1.BackupStorageLocation{}, &LocationReconciler{Client: c, APIReader: reader, Clock: opts.Clock, Period: opts.ValidationPeriod, Log: log.With("controller", "location"), Events: rec}, []predicate.Predicate{gen}},
		{"backup-sync", &v1alpha1.BackupStorageLocation{}, &SyncReconciler{Client: c, APIReader: reader, Clock: opts.Clock, Period: opts.SyncPeriod, Log: log.With("controller", "sync")}, []predicate.Predicate{gen}},
	}
	for _, x := range regs {
		if err := ctrl.NewControllerManagedBy(mgr).Named(x.name).For(x.obj, builder.WithPredicates(x.preds...)).Complete(x.r); err != nil {
			return nil, fmt.Errorf("server: controller %s: %w", x.name, err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the caches have synced.
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}
