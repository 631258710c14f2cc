// Package controller is the hub's controllers: the Migration controller
// carries each ferry.dev Migration out against its member clusters
// (pkg/migration), holding a lease on it in its status, and records there
// the step, the counts, the report's location and how it ended; the
// Backup and Restore controllers do the same for hub Backups and Restores
// of one member cluster, the Schedule controller creates Backups on a cron
// schedule, the location controller checks BackupStorageLocations, and the
// Cluster controller records whether each member cluster answers. They run
// in `ferry hub`, against the hub's own API, with controller-runtime.
package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/metrics"
)

// Options configure the hub's controllers.
type Options struct {
	// Config reaches the hub (its loopback client config).
	Config *rest.Config
	// Identity names this hub process in the leases it holds; default
	// the host name and a random suffix.
	Identity string
	// LeaseDuration is how long a Migration's lease lasts unrenewed; default
	// 30s. It is renewed every third of it.
	LeaseDuration time.Duration
	// Workers is how many Migrations run at once; default 4.
	Workers int
	// ConnectTimeout bounds reaching a member cluster; default 30s.
	ConnectTimeout time.Duration
	// RequestTimeout bounds how long each request to a member cluster
	// waits for its answer to start (kube.WithResponseTimeout); default
	// kube.DefaultResponseTimeout.
	RequestTimeout time.Duration
	// Deadlines bound the steps of a Migration whose spec.timeouts does
	// not, and each Backup and Restore; 0 is none.
	Deadlines Deadlines
	// CheckPeriod is how often each Cluster is checked; default 5m.
	CheckPeriod time.Duration
	// ValidationPeriod is how often a BackupStorageLocation is checked
	// when its spec.validationFrequency is not set; default 1m.
	ValidationPeriod time.Duration
	// Volumes are the settings of the helper pods that move pod volume
	// data (NodePodsDir comes from each Cluster). Without a Password no
	// volume data is moved: a Migration with spec.volumes fails, and a
	// volume a pod asks for fails with the reason.
	Volumes helperpod.Settings
	// Events records Events on the objects the controllers run (the
	// hub's core/v1 Events, pkg/events' reasons, as server mode's); Run
	// sets it when nil.
	Events kevents.EventRecorder
	Log    *slog.Logger
	// OnStarted, if set, is called once the manager's caches have synced
	// and its controllers run.
	OnStarted func()
	// Runs, if set, counts the reconciles of Migrations, Backups and
	// Restores in progress across managers: one that outlives its stopped
	// manager's graceful shutdown may still hold its lease under this
	// process's identity, which a new manager would take as interrupted,
	// so the hub's supervisor waits for Runs.Idle before it starts one.
	Runs *Runs
	// observed are other processes' leases as this one saw them change.
	observed *observations
	// claimed are the times this process sent its claims, by claimKey.
	claimed *sync.Map
	// Clock is the controllers' time (timestamps, leases, expiry,
	// Schedules); default the real clock.
	Clock clock.PassiveClock
}

func (o *Options) complete() {
	if o.Identity == "" {
		o.Identity = NewIdentity()
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 30 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = kube.DefaultResponseTimeout
	}
	if o.CheckPeriod <= 0 {
		o.CheckPeriod = 5 * time.Minute
	}
	if o.ValidationPeriod <= 0 {
		o.ValidationPeriod = defaultValidationPeriod
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.observed == nil {
		o.observed = &observations{}
	}
	if o.claimed == nil {
		o.claimed = &sync.Map{}
	}
}

// Deadlines are the hub's step deadlines (ferry hub --backup-timeout,
// --restore-timeout, --verify-timeout).
type Deadlines struct {
	Backup, Restore, Verify time.Duration
}

// NewIdentity names a hub process in the leases it holds: the host name
// and a random suffix.
func NewIdentity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// now is the controllers' clock's time, for status timestamps.
func (o *Options) now() metav1.Time { return metav1.NewTime(o.Clock.Now()) }

// Scheme holds the ferry.dev/v1beta1 types the controllers read and write.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// startEvents sets o.Events to a recorder that writes core/v1 Events into
// the hub (which serves no events.k8s.io), as component ferry-hub; stop
// flushes and ends it.
func (o *Options) startEvents(ctx context.Context) (stop func(), err error) {
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	o.Events = record.NewEventRecorderAdapter(b.NewRecorder(Scheme(), corev1.EventSource{Component: "ferry-hub"}))
	return b.Shutdown, nil
}

var setLoggerOnce sync.Once

// Run runs the controllers until ctx is done.
func Run(ctx context.Context, o Options) error {
	metrics.Register(legacyregistry.Registerer())
	o.complete()
	// controller-runtime's package-level logger, which its clients and
	// caches use, logs through the controllers' own (otherwise it prints
	// "log.SetLogger(...) was never called" with a stack).
	setLoggerOnce.Do(func() { ctrllog.SetLogger(logr.FromSlogHandler(o.Log.Handler())) })
	skip := true
	mgr, err := ctrl.NewManager(o.Config, ctrl.Options{
		Scheme: Scheme(),
		// A manager that stopped is replaced by a new one in the same
		// process (the hub's supervisor), with the same controller names.
		Controller:             config.Controller{SkipNameValidation: &skip},
		Logger:                 logr.FromSlogHandler(o.Log.Handler()),
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("hub controllers: %w", err)
	}
	if o.Events == nil {
		stop, err := o.startEvents(ctx)
		if err != nil {
			return fmt.Errorf("hub controllers: %w", err)
		}
		defer stop()
	}
	r := &MigrationReconciler{Client: mgr.GetClient(), Options: o, Reader: mgr.GetAPIReader()}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&v1beta1.Migration{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Workers}).
		Complete(counted(o.Runs, r))
	if err != nil {
		return fmt.Errorf("hub controllers: %w", err)
	}
	cr := &ClusterReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: o}
	err = ctrl.NewControllerManagedBy(mgr).
		// Its own status updates do not bring a Cluster back.
		For(&v1beta1.Cluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1beta1.ClusterCredential{}, handler.EnqueueRequestsFromMapFunc(cr.clustersOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(cr)
	if err != nil {
		return fmt.Errorf("hub controllers: %w", err)
	}
	if err := addBackupControllers(mgr, o); err != nil {
		return fmt.Errorf("hub controllers: %w", err)
	}
	if o.OnStarted != nil {
		// Runnables that need no leader election start once the caches
		// have synced.
		err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			o.OnStarted()
			<-ctx.Done()
			return nil
		}))
		if err != nil {
			return fmt.Errorf("hub controllers: %w", err)
		}
	}
	return mgr.Start(ctx)
}

// addBackupControllers adds the controllers of the kinds of server mode:
// BackupStorageLocations, Backups, Restores and Schedules. Backups and
// Restores run Workers at a time each.
func addBackupControllers(mgr ctrl.Manager, o Options) error {
	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	// Their own status updates do not bring a location or a Schedule back.
	changed := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	lr := &LocationReconciler{Client: c, Reader: reader, Options: o}
	// A changed Credential is checked at once in the locations using it;
	// a location that does not answer (up to ConnectTimeout) holds up
	// only its own worker.
	err := ctrl.NewControllerManagedBy(mgr).For(&v1beta1.BackupStorageLocation{}, changed).
		Watches(&v1beta1.Credential{}, handler.EnqueueRequestsFromMapFunc(lr.locationsOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Workers}).
		Complete(lr)
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).For(&v1beta1.Backup{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Workers}).
		Complete(counted(o.Runs, &BackupReconciler{Client: c, Reader: reader, Options: o}))
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).For(&v1beta1.Restore{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Workers}).
		Complete(counted(o.Runs, &RestoreReconciler{Client: c, Reader: reader, Options: o}))
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).For(&v1beta1.Schedule{}, changed).
		Complete(&ScheduleReconciler{Client: c, Reader: reader, Options: o})
}
