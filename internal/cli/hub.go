package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/hub"
	"github.com/kubeferry/ferry/pkg/hub/controller"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// hubOptions are ferry hub's flags, in kubectl's shape.
type hubOptions struct {
	g              *globals
	dataDir        string
	bindAddress    string
	securePort     int
	etcdServers    []string
	tokenAuthFiles []string
	controllers    bool
	leaseDuration  time.Duration
	requestTimeout time.Duration
	policyFile     string
	workers        int
	volumes        volumeFlags
	deadlines      stepDeadlines

	opts hub.Options
}

func newHubCmd(g *globals) *cobra.Command {
	o := &hubOptions{g: g}
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run the hub: ferry's own API server for Clusters, Migrations, Backups, Restores and Schedules (group ferry.dev)",
		Long: `hub serves ferry's own Kubernetes-style API (group ferry.dev: Clusters, ClusterCredentials,
Credentials and Migrations at v1beta1 and v1alpha1, server mode's BackupStorageLocations, Backups,
Restores and Schedules at v1beta1 (ferry.dev/v1alpha1 of those is server mode's CRDs); and core/v1
Events, in which its controllers record what they run)
over HTTPS on --bind-address:--secure-port.
It needs no Kubernetes cluster: its objects are kept in an etcd embedded in the process (data in
DIR/etcd, on loopback ports), or in --etcd-servers. Its controllers (--controllers) carry
Migrations, Backups and Restores out, create Schedules' Backups, expire Backups past their TTL
and check the locations: they reach the member clusters through their ClusterCredentials'
kubeconfigs and the backup storage locations with their Credentials (a Migration's
spec.storage.credentialRef, a BackupStorageLocation's spec.credentialRef) or this process's
credentials (its environment, as ferry backup's),
and installs nothing in the clusters. Pod volume data moves through helper
pods running --helper-image in both clusters, with the repository password of
--repository-password-file (or $FERRY_REPOSITORY_PASSWORD); without one, the hub moves none.

Member clusters and Migrations are added with ferry itself (and --hub, or $FERRY_HUB_KUBECONFIG):

  ferry hub cluster add prod --kubeconfig prod.kubeconfig --context prod --hub DIR/admin.kubeconfig
  ferry migrate --hub DIR/admin.kubeconfig --from-cluster prod --to-cluster dr \
    --storage s3://bucket?region=eu-west-1 --include-namespaces shop --wait

cluster add stores the context's kubeconfig, minified, with its files embedded, as a
ClusterCredential, and a Cluster that refers to it; migrate --hub creates a Migration from the
migrate flags its spec carries, and with --wait follows it to its end.

On first start it makes, in --data-dir: a CA and a serving certificate signed by it (pki/), an
admin token (tokens.csv), the key that encrypts ClusterCredentials and Credentials at rest (encryption.yaml), and
admin.kubeconfig, which kubectl uses as it is:

  kubectl --kubeconfig DIR/admin.kubeconfig get migrations

Later starts reuse them. All secret files are mode 0600.

Authentication: client certificates signed by the hub's CA (user: the subject's common name,
groups: its organizations) and static tokens (tokens.csv and --token-auth-file, CSV lines
token,user,uid,"group1,group2" as kube-apiserver's --token-auth-file). Anything else is 401.

Authorization, in RBAC's shape: the groups system:masters and ferry:admins (ClusterRole ferry:admin) may
do everything and ferry:viewers (ferry:viewer) may get, list and watch every resource and GET every
non-resource path (/metrics); --authorization-policy-file adds ClusterRoles, Roles, ClusterRoleBindings and
RoleBindings, so that a team's group may run Migrations in its own namespace only (bind ClusterRole
ferry:editor there). Nobody but the hub's own controllers may read clustercredentials and credentials
(get, list, watch, patch, deletecollection): create or replace them whole (kubectl create, kubectl
replace; kubectl apply reads first and is refused). Any authenticated user may GET /healthz, /livez,
/readyz, /version, discovery (/apis) and OpenAPI; everything else is 403. A second hub on a --data-dir
in use (DIR/hub.lock) is refused.

SIGTERM or SIGINT stops it, and its etcd, cleanly.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.dataDir, "data-dir", "", "directory of the hub's certificates, tokens, encryption key, admin kubeconfig and embedded etcd data (required)")
	fl.StringVar(&o.bindAddress, "bind-address", "127.0.0.1", "IP address to serve HTTPS on")
	fl.IntVar(&o.securePort, "secure-port", 8443, "port to serve HTTPS on (0: a free one)")
	fl.StringSliceVar(&o.etcdServers, "etcd-servers", nil, "URLs of an existing etcd to keep the objects in, instead of the embedded one")
	fl.StringSliceVar(&o.tokenAuthFiles, "token-auth-file", nil, "more static-token files (kube-apiserver's CSV format), besides DIR/tokens.csv")
	fl.StringVar(&o.policyFile, "authorization-policy-file", "", "YAML of rbac.authorization.k8s.io/v1 ClusterRoles, Roles, ClusterRoleBindings and RoleBindings added to the default policy (read at start): a RoleBinding grants its role in its namespace only, e.g. ClusterRole ferry:editor to a team's group")
	fl.BoolVar(&o.controllers, "controllers", true, "run the controllers, which carry Migrations, Backups, Restores and Schedules out against their member clusters")
	fl.DurationVar(&o.leaseDuration, "migration-lease-duration", 30*time.Second, "how long a Migration's lease lasts unrenewed: after a hub stops, another hub (or its restart) takes over the Migrations it was running once their leases expire (a one-shot Migration in a step ends Failed, a staged one resumes from its journal)")
	fl.DurationVar(&o.requestTimeout, "member-request-timeout", kube.DefaultResponseTimeout, "how long each request to a member cluster's API server may wait for its answer to start: a member that accepts connections and never answers fails the Migration, Backup or Restore, naming the Cluster, instead of holding a worker")
	fl.IntVar(&o.workers, "migration-workers", 4, "how many Migrations run at once (and as many Backups, Restores and location checks)")
	o.volumes.registerPassword(cmd)
	fl.StringVar(&o.volumes.helperImage, "helper-image", defaultImage(), "ferry's image, run by the helper pods that move Migrations' volume data in the member clusters (and by the ferry-restore-wait init container); the only image a target needs to pull")
	fl.DurationVar(&o.volumes.wait, "volume-timeout", 10*time.Minute, "how long each helper pod may take to start, and how long to wait for each restored pod, before that volume fails")
	fl.DurationVar(&o.volumes.unschedulable, "helper-unschedulable-timeout", 30*time.Second, "how long the scheduler may find no node for a helper pod before its volume fails, naming the scheduler's reason")
	o.deadlines.register(fl, true)
	cmd.AddCommand(newHubClusterCmd(g))
	return cmd
}

// Complete builds the hub's options from the flags.
func (o *hubOptions) Complete(_ *cobra.Command, _ []string) error {
	o.opts = hub.Options{
		DataDir:        o.dataDir,
		BindAddress:    net.ParseIP(o.bindAddress),
		SecurePort:     o.securePort,
		EtcdServers:    o.etcdServers,
		TokenAuthFiles: o.tokenAuthFiles,
		PolicyFile:     o.policyFile,
	}
	if !o.controllers {
		return nil
	}
	// Without a password the hub moves no volume data, and says so in
	// each Migration that asks for it.
	pw, err := readPassword(o.volumes.passwordFile)
	if err != nil && !errors.Is(err, volumes.ErrNoPassword) {
		return err
	}
	o.opts.Controllers = &controller.Options{LeaseDuration: o.leaseDuration, Workers: o.workers, Log: o.g.log, RequestTimeout: o.requestTimeout,
		Volumes:   o.volumes.settings(pw, o.g.log),
		Deadlines: controller.Deadlines{Backup: o.deadlines.backup, Restore: o.deadlines.restore, Verify: o.deadlines.verify}}
	return nil
}

// Validate checks the flags without touching the data directory.
func (o *hubOptions) Validate() error {
	if o.dataDir == "" {
		return errors.New("--data-dir is required: the hub keeps its certificates, tokens, key and data there")
	}
	if o.opts.BindAddress == nil {
		return fmt.Errorf("--bind-address %q is not an IP address", o.bindAddress)
	}
	if o.securePort < 0 || o.securePort > 65535 {
		return fmt.Errorf("--secure-port %d is not a port", o.securePort)
	}
	for _, s := range o.etcdServers {
		if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
			return fmt.Errorf("--etcd-servers %q is not an http:// or https:// URL", s)
		}
	}
	if err := o.deadlines.validate(); err != nil {
		return err
	}
	if o.requestTimeout < time.Second {
		return fmt.Errorf("--member-request-timeout %s is under a second", o.requestTimeout)
	}
	if o.leaseDuration < 3*time.Second {
		return fmt.Errorf("--migration-lease-duration %s: must be at least 3s", o.leaseDuration)
	}
	if o.workers < 1 {
		return fmt.Errorf("--migration-workers %d: must be at least 1", o.workers)
	}
	return nil
}

// Run serves the hub until ctx ends (SIGTERM, SIGINT).
func (o *hubOptions) Run(ctx context.Context) error {
	s, err := hub.New(o.opts)
	if err != nil {
		return err
	}
	policy := "the default (ferry:admins may do everything, ferry:viewers read)"
	if o.policyFile != "" {
		policy = "the default and " + o.policyFile
	}
	etcd := "embedded, in " + filepath.Join(o.dataDir, "etcd")
	if len(o.etcdServers) > 0 {
		etcd = strings.Join(o.etcdServers, ",")
	}
	fmt.Fprintf(o.g.stderr, "ferry hub serving on https://%s; admin kubeconfig: %s\ndata: %s; etcd: %s; authorization policy: %s\n",
		net.JoinHostPort(o.bindAddress, fmt.Sprint(s.Port)), s.Kubeconfig, o.dataDir, etcd, policy)
	return s.Run(ctx)
}
