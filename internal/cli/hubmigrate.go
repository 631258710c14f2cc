package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// hubMigrate are the flags of migrate --hub: it then creates a Migration
// in the hub, whose controller runs it, instead of running here.
type hubMigrate struct {
	kubeconfig   string
	from, to     string
	namespace    string
	wait         bool
	waitTimeout  time.Duration
	ttl          time.Duration
	fromEnv      bool
	changed      []string // by complete: the flags of the other mode that were set
	spec         hubv1beta1.MigrationSpec
	storageGiven bool
	// storageCredential names the hub Credential of the location.
	storageCredential string
	// identity is the --encryption-identity file's content, which
	// runHub stores in the hub as the Credential identityCredential names.
	identity []byte
	// waitTimeoutSet: --wait-timeout was given (it needs --wait).
	waitTimeoutSet bool
}

func (h *hubMigrate) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&h.kubeconfig, "hub", "", hubFlagHelp+": create a Migration in the hub, which runs it, instead of migrating from here")
	fl.StringVar(&h.from, "from-cluster", "", "with --hub: the hub's Cluster to migrate from (ferry hub cluster add)")
	fl.StringVar(&h.to, "to-cluster", "", "with --hub: the hub's Cluster to migrate to")
	fl.StringVarP(&h.namespace, "namespace", "n", metav1.NamespaceDefault, "with --hub: the hub namespace of the Migration and its Clusters")
	fl.BoolVar(&h.wait, "wait", false, "with --hub: follow the Migration, printing each phase, until it ends; exit as a local migrate would")
	fl.DurationVar(&h.waitTimeout, "wait-timeout", time.Hour, "with --wait: how long to follow it (it goes on in the hub after that)")
	fl.DurationVar(&h.ttl, "ttl", 0, "with --hub: how long the migration's backup is kept (default: until deleted)")
	fl.StringVar(&h.storageCredential, "storage-credential", "", "with --hub: the hub Credential holding the location's credentials (default: the hub's own, for users the hub's policy lets use hubstorage; a team names a Credential of its namespace)")
}

// identityCredential is the hub Credential migrate --hub stores the
// --encryption-identity in, for the Migration name.
func identityCredential(name string) string { return name + "-encryption-identity" }

// identityKey is its data key.
const identityKey = "identity"

// hubOnly are the flags only migrate --hub uses.
var hubOnly = []string{"from-cluster", "to-cluster", "namespace", "wait", "wait-timeout", "ttl", "storage-credential"}

// localOnly are the migrate flags a Migration's spec cannot carry, and why;
// with --hub they are refused rather than silently ignored.
var localOnly = []struct{ flag, why string }{
	{"kubeconfig", "the hub reaches the clusters with their ClusterCredentials (ferry hub cluster add)"},
	{"context", "the hub reaches the clusters with their ClusterCredentials (ferry hub cluster add)"},
	{"from-kubeconfig", "name the hub's Cluster with --from-cluster"},
	{"from-context", "name the hub's Cluster with --from-cluster"},
	{"to-kubeconfig", "name the hub's Cluster with --to-cluster"},
	{"to-context", "name the hub's Cluster with --to-cluster"},
	{"report-dir", "the hub writes the verification report into the storage location (status.reportLocation)"},
	{"repository-password-file", "a Migration carries no repository password, and the hub cannot read a local file"},
	{"push-images", "with --images=bundle the hub pushes the images to --image-registry-mappings itself"},
	{"platform", "a Migration's spec.images does not carry a platform filter"},
	{"image-concurrency", "the hub copies images with ferry's defaults (the flags' defaults here): no hub setting changes them yet"},
	{"image-jobs", "the hub copies images with ferry's defaults (the flags' defaults here): no hub setting changes them yet"},
	{"image-retries", "the hub copies images with ferry's defaults (the flags' defaults here): no hub setting changes them yet"},
	{"insecure", "the hub reaches registries as go-containerregistry does by default (plain HTTP only for loopback and private-network addresses): no hub setting changes that yet"},
	{"helper-image", "the hub's volume settings apply (ferry hub --helper-image, --volume-timeout, ...; a Cluster's spec.nodePodsDir)"},
	{"restore-helper-image", "the hub's volume settings apply (ferry hub --helper-image, --volume-timeout, ...; a Cluster's spec.nodePodsDir)"},
	{"node-pods-dir", "the hub's volume settings apply (ferry hub --helper-image, --volume-timeout, ...; a Cluster's spec.nodePodsDir)"},
	{"to-node-pods-dir", "the hub's volume settings apply (ferry hub --helper-image, --volume-timeout, ...; a Cluster's spec.nodePodsDir)"},
	{"volume-timeout", "the hub's volume settings apply (ferry hub --helper-image, --volume-timeout, ...; a Cluster's spec.nodePodsDir)"},
	{"helper-unschedulable-timeout", "the hub's volume settings apply (ferry hub --helper-image, --volume-timeout, ...; a Cluster's spec.nodePodsDir)"},
	{"write-sparse-files", "the hub writes restored files whole: no hub setting writes them sparsely yet"},
}

// complete turns hub mode on with --hub or $FERRY_HUB_KUBECONFIG, and
// notes the flags of the other mode that were set.
func (h *hubMigrate) complete(cmd *cobra.Command, storage string) {
	if !cmd.Flags().Changed("hub") && h.kubeconfig == "" {
		h.kubeconfig = os.Getenv(EnvHubKubeconfig)
		h.fromEnv = h.kubeconfig != ""
	}
	h.storageGiven = storage != ""
	h.waitTimeoutSet = cmd.Flags().Changed("wait-timeout")
	if h.on() {
		for _, l := range localOnly {
			h.changed = append(h.changed, changedFlags(cmd, l.flag)...)
		}
	} else {
		h.changed = changedFlags(cmd, hubOnly...)
	}
}

func (h *hubMigrate) on() bool { return h.kubeconfig != "" }

// validate refuses the flags of the other mode, and hub mode's own
// missing or bad values.
func (h *hubMigrate) validate() error {
	if !h.on() {
		if len(h.changed) > 0 {
			return fmt.Errorf("--%s is for migrate --hub (or $%s)", h.changed[0], EnvHubKubeconfig)
		}
		return nil
	}
	hub := "--hub"
	if h.fromEnv {
		hub = "--hub ($" + EnvHubKubeconfig + ")"
	}
	if len(h.changed) > 0 {
		for _, l := range localOnly {
			if l.flag == h.changed[0] {
				return fmt.Errorf("--%s is not supported with %s: %s", l.flag, hub, l.why)
			}
		}
	}
	switch {
	case h.from == "" || h.to == "":
		return fmt.Errorf("migrate %s needs --from-cluster and --to-cluster: the hub's Clusters (ferry hub cluster add)", hub)
	case !h.storageGiven:
		return fmt.Errorf("migrate %s needs --storage (or $FERRY_STORAGE): the backup storage location the hub opens", hub)
	case h.waitTimeout <= 0:
		return fmt.Errorf("--wait-timeout %s: must be positive", h.waitTimeout)
	case !h.wait && h.waitTimeoutSet:
		return errors.New("--wait-timeout is for --wait: without it, migrate --hub only creates the Migration")
	case h.ttl < 0:
		return fmt.Errorf("--ttl %s is negative (omit it to keep the backup)", h.ttl)
	}
	if msgs := validation.IsDNS1123Label(h.namespace); len(msgs) > 0 {
		return fmt.Errorf("--namespace %q: %s", h.namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(h.storageCredential); h.storageCredential != "" && len(msgs) > 0 {
		return fmt.Errorf("--storage-credential %q: %s", h.storageCredential, strings.Join(msgs, "; "))
	}
	return nil
}

// encrypt sets spec.encryption from the encryption flags: the recipients,
// and the identity (read by completeHub) as a Credential of the
// Migration name.
func (h *hubMigrate) encrypt(name string, c *cryptFlags) {
	h.spec.Encryption.Recipients = c.recipients
	if c.identity != "" {
		h.spec.Encryption.IdentityRef = &hubv1beta1.CredentialKeyReference{Name: identityCredential(name), Key: identityKey}
	}
	if h.storageCredential != "" {
		h.spec.Storage.CredentialRef = &hubv1beta1.LocalObjectReference{Name: h.storageCredential}
	}
}

// migrationSpec is the Migration a migrate's backup and restore specs
// make, through storage, with or without verification.
func (h *hubMigrate) migrationSpec(b v1alpha1.BackupSpec, r v1alpha1.RestoreSpec, storage string, verify bool, crdTimeout time.Duration) hubv1beta1.MigrationSpec {
	s := hubv1beta1.MigrationSpec{
		Source:  hubv1beta1.ClusterReference{Cluster: h.from},
		Target:  hubv1beta1.ClusterReference{Cluster: h.to},
		Storage: hubv1beta1.MigrationStorage{Location: storage},
		Backup: hubv1beta1.MigrationBackup{
			IncludedNamespaces: b.IncludedNamespaces, ExcludedNamespaces: b.ExcludedNamespaces,
			IncludedResources: b.IncludedResources, ExcludedResources: b.ExcludedResources,
			LabelSelector: b.LabelSelector, IncludeClusterResources: b.IncludeClusterResources,
			PreferredVersionOnly: b.PreferredVersionOnly,
		},
		Restore: hubv1beta1.MigrationRestore{
			NamespaceMapping: r.NamespaceMapping, StorageClassMapping: r.StorageClassMapping,
			ExistingResourcePolicy:   string(r.ExistingResourcePolicy),
			ExistingVolumeDataPolicy: string(r.ExistingVolumeDataPolicy),
			PreserveNodePorts:        r.PreserveNodePorts, RestoreStatus: r.RestoreStatus,
			ResourceModifiers: r.ResourceModifiers, FromCloud: r.FromCloud, ToCloud: r.ToCloud, DryRun: r.DryRun,
		},
		Images:  hubv1beta1.MigrationImages{Mode: b.Images, RegistryMappings: b.ImageRegistryMappings, Required: b.ImagesRequired || r.ImagesRequired},
		Verify:  &verify,
		Volumes: b.DefaultVolumesToFsBackup,
	}
	if h.ttl > 0 {
		s.Backup.TTL = &metav1.Duration{Duration: h.ttl}
	}
	if crdTimeout > 0 {
		s.Restore.CRDTimeout = &metav1.Duration{Duration: crdTimeout}
	}
	if rt := r.VerifyRuntime; rt != nil {
		s.VerifyRuntime = &hubv1beta1.RuntimeVerification{Skip: rt.Skip, Timeout: rt.Timeout}
	}
	return s
}
