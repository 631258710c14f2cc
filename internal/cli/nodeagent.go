package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/volumes"
)

func newNodeAgentCmd(g *globals) *cobra.Command {
	var vf volumeFlags
	var node string
	var interval time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "node-agent --host-pods-dir DIR",
		Short: "Run on each node (a DaemonSet): restore the volume data of restored pods scheduled to this node",
		Long: `node-agent watches the pods on its node. A pod that a restore made wait for its
volume data (init container ferry-restore-wait, ferry restore create
--volumes-by-node-agent) gets the data of its volumes from the backup's kopia
snapshots, written into <host-pods-dir>/<pod UID>/volumes/<plugin>/<volume>, and
then the done-marker that lets the pod start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if vf.hostPodsDir == "" {
				return errors.New("--host-pods-dir is required (the kubelet's pods directory, /var/lib/kubelet/pods, mounted into the agent)")
			}
			if st, err := os.Stat(vf.hostPodsDir); err != nil || !st.IsDir() {
				return fmt.Errorf("--host-pods-dir %s: not a directory", vf.hostPodsDir)
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
			records := map[string]*volumes.BackupRecord{}
			failures := 0
			for {
				opts := metav1.ListOptions{}
				if node != "" {
					opts.FieldSelector = "spec.nodeName=" + node
				}
				pods, err := cluster.Typed.CoreV1().Pods(corev1.NamespaceAll).List(ctx, opts)
				if err != nil {
					g.log.Warn("listing pods", "node", node, "err", err)
				} else {
					pending := volumes.PendingRestores(pods.Items, vf.hostPodsDir)
					if len(pending) > 0 {
						// Snapshots made since the repository was opened
						// are seen only after a refresh of its indexes.
						if err := repo.Refresh(ctx); err != nil {
							g.log.Warn("refreshing the volume repository", "err", err)
						}
					}
					for _, p := range pending {
						rec, ok := records[p.Backup]
						if !ok {
							if rec, err = backupVolumeRecord(ctx, loc, p.Backup); err != nil || rec == nil {
								g.log.Warn("reading the backup's volume records", "backup", p.Backup, "pod", p.Pod.Namespace+"/"+p.Pod.Name, "err", err)
								continue
							}
							records[p.Backup] = rec
						}
						res := repo.RestorePending(ctx, cluster.Typed, vf.hostPodsDir, p, rec, vf.wait)
						for _, r := range res {
							if r.Error != "" {
								failures++
							}
						}
						fmt.Fprintf(g.stdout, "pod %s/%s: %s\n", p.Pod.Namespace, p.Pod.Name, volumes.Summary(res))
					}
				}
				if once {
					if failures > 0 {
						return &exitError{code: ExitFailed, msg: fmt.Sprintf("%d pod volumes failed", failures)}
					}
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	vf.registerHostPodsDir(cmd, "restore")
	vf.registerPassword(cmd)
	vf.registerSparse(cmd)
	cmd.Flags().StringVar(&node, "node", os.Getenv("NODE_NAME"), "the node whose pods to serve (default $NODE_NAME; empty: every pod, for a single-machine cluster)")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Second, "how often to look for pods waiting for their data")
	cmd.Flags().DurationVar(&vf.wait, "volume-timeout", time.Minute, "how long to wait for a pod's claim binding and volume directory")
	cmd.Flags().BoolVar(&once, "once", false, "look once, restore what is waiting, and exit (exit 1 if a volume failed)")
	return cmd
}
