package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/nodeagent"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// nodeAgentOptions are the flags of ferry node-agent, in kubectl's shape:
// Complete, a pure Validate, then Run.
type nodeAgentOptions struct {
	g                                 *globals
	vf                                volumeFlags
	node                              string
	interval                          time.Duration
	once, server                      bool
	namespace, metricsAddr, probeAddr string
	// changed reports whether a flag was given (set by Complete).
	changed func(name string) bool
}

func newNodeAgentCmd(g *globals) *cobra.Command {
	o := &nodeAgentOptions{g: g}
	cmd := &cobra.Command{
		Use:   "node-agent --host-pods-dir DIR",
		Short: "Run on each node (a DaemonSet): restore the volume data of restored pods scheduled to this node",
		Long: `node-agent watches the pods on its node. A pod that a restore made wait for its
volume data (init container ferry-restore-wait, ferry restore create
--volumes-by-node-agent) gets the data of its volumes from the backup's kopia
snapshots, written into <host-pods-dir>/<pod UID>/volumes/<plugin>/<volume>, and
then the done-marker that lets the pod start.

With --server (as ferry install runs it) it instead carries out the PodVolumeBackup and
PodVolumeRestore objects of its node that ferry server creates for Backups and Restores, and
writes each one's outcome into its status.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.vf.registerHostPodsDir(cmd, "restore")
	o.vf.registerPassword(cmd)
	o.vf.registerSparse(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.node, "node", os.Getenv("NODE_NAME"), "the node whose pods to serve (default $NODE_NAME; empty: every pod, for a single-machine cluster)")
	fl.DurationVar(&o.interval, "interval", 5*time.Second, "how often to look for pods waiting for their data")
	fl.DurationVar(&o.vf.wait, "volume-timeout", time.Minute, "how long to wait for a pod's claim binding and volume directory")
	fl.BoolVar(&o.server, "server", false, "server mode (env "+EnvMode+"=server): carry out the PodVolumeBackups and PodVolumeRestores of --node in --namespace that ferry server creates, instead of polling for waiting pods (--storage is then not used: each object names its BackupStorageLocation)")
	fl.StringVarP(&o.namespace, "namespace", "n", serverNamespace(), "server mode: namespace of the PodVolumeBackups, PodVolumeRestores and locations (env "+EnvNamespace+")")
	fl.StringVar(&o.metricsAddr, "metrics-addr", ":8085", "server mode: address for Prometheus metrics on /metrics (0 disables)")
	fl.StringVar(&o.probeAddr, "probe-addr", ":8086", "server mode: address for /healthz and /readyz (0 disables)")
	fl.BoolVar(&o.once, "once", false, "look once, restore what is waiting, and exit (exit 1 if a volume failed)")
	return cmd
}

// Complete takes server mode from the environment as well as --server,
// notes which flags were given, and checks that --host-pods-dir, when
// given, is a directory (the only check that reads the machine).
func (o *nodeAgentOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.server = o.server || os.Getenv(EnvMode) == "server"
	o.changed = cmd.Flags().Changed
	if o.vf.hostPodsDir != "" {
		if st, err := os.Stat(o.vf.hostPodsDir); err != nil || !st.IsDir() {
			return fmt.Errorf("--host-pods-dir %s: not a directory", o.vf.hostPodsDir)
		}
	}
	return nil
}

// Validate refuses a missing --host-pods-dir and the flags of the other
// mode.
func (o *nodeAgentOptions) Validate() error {
	if o.vf.hostPodsDir == "" {
		return errors.New("--host-pods-dir is required (the kubelet's pods directory, /var/lib/kubelet/pods, mounted into the agent)")
	}
	changed := o.changed
	if changed == nil {
		changed = func(string) bool { return false }
	}
	if o.server {
		for _, f := range []string{"once", "interval", "storage"} {
			if changed(f) {
				return fmt.Errorf("--%s is for the polling node agent, not --server (which takes the PodVolumeBackups and PodVolumeRestores of its node, each naming its location)", f)
			}
		}
		if o.node == "" {
			return errors.New("--server needs --node (or $NODE_NAME): the node whose PodVolumeBackups and PodVolumeRestores it carries out")
		}
		return nil
	}
	for _, f := range []string{"namespace", "metrics-addr", "probe-addr"} {
		if changed(f) {
			return fmt.Errorf("--%s is for --server", f)
		}
	}
	return nil
}

// Run runs the agent until ctx ends (or, polling with --once, looks once).
func (o *nodeAgentOptions) Run(ctx context.Context) error {
	if o.server {
		return o.runServer(ctx)
	}
	return o.runPolling(ctx)
}

// runPolling is the polling node agent (nodeagent.Poller).
func (o *nodeAgentOptions) runPolling(ctx context.Context) error {
	g := o.g
	loc, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	defer loc.Close()
	repo, err := o.vf.openRepository(ctx, loc, false)
	if err != nil {
		return err
	}
	defer repo.Close(context.WithoutCancel(ctx))
	cluster, err := connect(ctx, g.kubeconfig, g.context)
	if err != nil {
		return err
	}
	poller := &nodeagent.Poller{Location: loc, Repo: repo, Client: cluster.Typed, Node: o.node, HostPodsDir: o.vf.hostPodsDir,
		Wait: o.vf.wait, Interval: o.interval, Out: g.stdout, Log: g.log}
	failures, err := poller.Run(ctx, o.once)
	if err != nil {
		return err
	}
	if o.once && failures > 0 {
		return &exitError{code: ExitFailed, msg: fmt.Sprintf("%d pod volumes failed", failures)}
	}
	return nil
}

// runServer runs the node agent's controllers (server mode) until ctx
// ends.
func (o *nodeAgentOptions) runServer(ctx context.Context) error {
	g := o.g
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pw, err := readPassword(o.vf.passwordFile)
	if err != nil && (o.vf.passwordFile != "" || !errors.Is(err, volumes.ErrNoPassword)) {
		return err
	}
	if pw == "" {
		log.Warn("no volume repository password: every PodVolumeBackup and PodVolumeRestore will fail", "env", volumes.EnvPassword)
	}
	cfg, err := kube.RESTConfig(g.kubeconfig, g.context)
	if err != nil {
		return err
	}
	mgr, err := nodeagent.NewManager(nodeagent.Options{
		Namespace: o.namespace, Node: o.node, HostPodsDir: o.vf.hostPodsDir, Config: cfg, Password: pw,
		Wait: o.vf.wait, SparseFiles: o.vf.sparse, MetricsAddr: o.metricsAddr, ProbeAddr: o.probeAddr, Log: log,
		PodName: os.Getenv("POD_NAME"), PodUID: os.Getenv("POD_UID"),
	})
	if err != nil {
		return err
	}
	log.Info("ferry node agent starting", "version", Version, "namespace", o.namespace, "node", o.node, "hostPodsDir", o.vf.hostPodsDir)
	return mgr.Start(ctx)
}
