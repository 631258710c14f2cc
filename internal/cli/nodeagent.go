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

func newNodeAgentCmd(g *globals) *cobra.Command {
	var vf volumeFlags
	var node string
	var interval time.Duration
	var once, server bool
	var namespace, metricsAddr, probeAddr string
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
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if vf.hostPodsDir == "" {
				return errors.New("--host-pods-dir is required (the kubelet's pods directory, /var/lib/kubelet/pods, mounted into the agent)")
			}
			if st, err := os.Stat(vf.hostPodsDir); err != nil || !st.IsDir() {
				return fmt.Errorf("--host-pods-dir %s: not a directory", vf.hostPodsDir)
			}
			if server || os.Getenv(EnvMode) == "server" {
				for _, f := range []string{"once", "interval", "storage"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s is for the polling node agent, not --server (which takes the PodVolumeBackups and PodVolumeRestores of its node, each naming its location)", f)
					}
				}
				return runNodeAgentServer(cmd, g, &vf, node, namespace, metricsAddr, probeAddr)
			}
			for _, f := range []string{"namespace", "metrics-addr", "probe-addr"} {
				if cmd.Flags().Changed(f) {
					return fmt.Errorf("--%s is for --server", f)
				}
			}
			loc, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer loc.Close()
			repo, err := vf.openRepository(ctx, loc, false)
			if err != nil {
				return err
			}
			defer repo.Close(context.WithoutCancel(ctx))
			cluster, err := connect(ctx, g.kubeconfig, g.context)
			if err != nil {
				return err
			}
			poller := &nodeagent.Poller{Location: loc, Repo: repo, Client: cluster.Typed, Node: node, HostPodsDir: vf.hostPodsDir,
				Wait: vf.wait, Interval: interval, Out: g.stdout, Log: g.log}
			failures, err := poller.Run(ctx, once)
			if err != nil {
				return err
			}
			if once && failures > 0 {
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("%d pod volumes failed", failures)}
			}
			return nil
		},
	}
	vf.registerHostPodsDir(cmd, "restore")
	vf.registerPassword(cmd)
	vf.registerSparse(cmd)
	cmd.Flags().StringVar(&node, "node", os.Getenv("NODE_NAME"), "the node whose pods to serve (default $NODE_NAME; empty: every pod, for a single-machine cluster)")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Second, "how often to look for pods waiting for their data")
	cmd.Flags().DurationVar(&vf.wait, "volume-timeout", time.Minute, "how long to wait for a pod's claim binding and volume directory")
	cmd.Flags().BoolVar(&server, "server", false, "server mode (env "+EnvMode+"=server): carry out the PodVolumeBackups and PodVolumeRestores of --node in --namespace that `ferry server` creates, instead of polling for waiting pods (--storage is then not used: each object names its BackupStorageLocation)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", serverNamespace(), "server mode: namespace of the PodVolumeBackups, PodVolumeRestores and locations (env "+EnvNamespace+")")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", ":8085", "server mode: address for Prometheus metrics on /metrics (0 disables)")
	cmd.Flags().StringVar(&probeAddr, "probe-addr", ":8086", "server mode: address for /healthz and /readyz (0 disables)")
	cmd.Flags().BoolVar(&once, "once", false, "look once, restore what is waiting, and exit (exit 1 if a volume failed)")
	return cmd
}

// runNodeAgentServer runs the node agent's controllers (server mode) until
// the command's context ends.
func runNodeAgentServer(cmd *cobra.Command, g *globals, vf *volumeFlags, node, namespace, metricsAddr, probeAddr string) error {
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pw, err := volumes.ReadPassword(vf.passwordFile)
	if err != nil && (vf.passwordFile != "" || !errors.Is(err, volumes.ErrNoPassword)) {
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
		Namespace: namespace, Node: node, HostPodsDir: vf.hostPodsDir, Config: cfg, Password: pw,
		Wait: vf.wait, SparseFiles: vf.sparse, MetricsAddr: metricsAddr, ProbeAddr: probeAddr, Log: log,
		PodName: os.Getenv("POD_NAME"), PodUID: os.Getenv("POD_UID"),
	})
	if err != nil {
		return err
	}
	log.Info("ferry node agent starting", "version", Version, "namespace", namespace, "node", node, "hostPodsDir", vf.hostPodsDir)
	return mgr.Start(cmd.Context())
}
