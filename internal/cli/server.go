package cli

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/servermode"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// EnvNamespace names the environment variable that gives the server's
// namespace (set from the Pod's namespace by `ferry install`).
const EnvNamespace = "FERRY_NAMESPACE"

// DefaultNamespace is the namespace `ferry install` and server mode use
// unless told otherwise.
const DefaultNamespace = "ferry"

func serverNamespace() string {
	if ns := os.Getenv(EnvNamespace); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// serverOptions are the flags of ferry server, in kubectl's shape:
// Complete, a pure Validate, then Run.
type serverOptions struct {
	g            *globals
	opts         servermode.Options
	passwordFile string
	deadlines    stepDeadlines
}

func newServerCmd(g *globals) *cobra.Command {
	o := &serverOptions{g: g}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run ferry's controllers (server mode): Backups, Restores, Schedules, expiry, location validation and store sync",
		Long: `server runs the controllers of server mode against the cluster of --kubeconfig/--context
(in a Pod: its service account). It takes Backup and Restore objects in --namespace and runs them
with the same engine as the CLI, creates Backups for Schedules, deletes expired backups, validates
BackupStorageLocations and keeps the cluster's Backups in step with the store. Pod volume data
goes through PodVolumeBackups and PodVolumeRestores, which ferry node-agent --server on each node
carries out. It serves /healthz
and /readyz on --probe-addr and Prometheus metrics on --metrics-addr.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	opts := &o.opts
	fl := cmd.Flags()
	fl.StringVarP(&opts.Namespace, "namespace", "n", serverNamespace(), "namespace of the server's objects, their Secrets and its leader-election Lease (env "+EnvNamespace+")")
	fl.StringVar(&opts.MetricsAddr, "metrics-addr", ":8085", "address for Prometheus metrics on /metrics (0 disables)")
	fl.StringVar(&opts.ProbeAddr, "probe-addr", ":8086", "address for /healthz and /readyz (0 disables)")
	fl.BoolVar(&opts.LeaderElect, "leader-elect", true, "run the controllers only while holding the Lease ferry-server in --namespace, so that replicas never both run (without it, run one replica only)")
	fl.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a stopped leader's Lease blocks the next one (renewal deadline 2/3 of it)")
	fl.DurationVar(&opts.SyncPeriod, "sync-period", time.Minute, "how often each location's backups are synced into the cluster")
	fl.StringVar(&o.passwordFile, "repository-password-file", "", "file holding the password of the locations' volume repositories (kopia; default $"+volumes.EnvPassword+"), for pod volume backups")
	fl.DurationVar(&opts.PodVolumeTimeout, "pod-volume-timeout", servermode.DefaultPodVolumeTimeout, "how long a backup or restore waits for the node agents to finish its pod volumes, and a restore for a restored pod to be scheduled")
	fl.StringVar(&opts.RestoreHelperImage, "restore-helper-image", defaultImage(), "ferry's image: runs the ferry-restore-wait init container of restored pods and the helper pods that move claims' data")
	fl.StringVar(&opts.NodePodsDir, "node-pods-dir", helperpod.DefaultNodePodsDir, "the kubelet's pods directory on the nodes, which the server's helper pods mount to reach a claim that another pod holds")
	fl.DurationVar(&opts.HelperUnschedulable, "helper-unschedulable-timeout", 30*time.Second, "how long the scheduler may find no node for a helper pod before its volume fails, naming the scheduler's reason")
	fl.BoolVar(&opts.SparseFiles, "write-sparse-files", false, "the server's helper pods restore files sparsely: blocks of zeros become holes (the node agents have their own --write-sparse-files)")
	o.deadlines.register(fl, true)
	fl.DurationVar(&opts.ValidationPeriod, "location-validation-period", time.Minute, "how often a BackupStorageLocation is validated when its spec.validationFrequency is not set")
	return cmd
}

// Complete builds the cluster config and the log, and reads the volume
// repository password (a missing one is a warning: pod volume data then
// cannot be backed up). Deadline flags are checked first: a wrong flag is
// reported before a missing kubeconfig.
func (o *serverOptions) Complete(_ *cobra.Command, _ []string) error {
	if err := o.deadlines.validate(); err != nil {
		return err
	}
	cfg, err := kube.RESTConfig(o.g.kubeconfig, o.g.context)
	if err != nil {
		return err
	}
	o.opts.Config = cfg
	o.opts.BackupDeadline, o.opts.RestoreDeadline, o.opts.VerifyDeadline = o.deadlines.backup, o.deadlines.restore, o.deadlines.verify
	o.opts.Log = slog.New(slog.NewTextHandler(o.g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if pw, err := readPassword(o.passwordFile); err == nil {
		o.opts.RepositoryPassword = pw
	} else if o.passwordFile != "" || !errors.Is(err, volumes.ErrNoPassword) {
		return err
	} else {
		o.opts.Log.Warn("no volume repository password: pod volume data cannot be backed up (backups naming volumes end PartiallyFailed)", "env", volumes.EnvPassword)
	}
	return nil
}

// Validate refuses an empty helper image; the manager checks the rest of
// its options (servermode.NewManager).
func (o *serverOptions) Validate() error {
	if err := o.deadlines.validate(); err != nil {
		return err
	}
	if o.opts.RestoreHelperImage == "" {
		return errors.New("--restore-helper-image is empty: give ferry's image (it runs the restored pods' ferry-restore-wait init containers and the helper pods)")
	}
	return nil
}

// Run runs the server's controllers until ctx ends.
func (o *serverOptions) Run(ctx context.Context) error {
	mgr, err := servermode.NewManager(ctx, o.opts)
	if err != nil {
		return err
	}
	o.opts.Log.Info("ferry server starting", "version", Version, "namespace", o.opts.Namespace, "leaderElect", o.opts.LeaderElect)
	return mgr.Start(ctx)
}
