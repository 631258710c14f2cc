package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/servermode"
)

// EnvMode selects server mode for backup create and restore create when
// set to "server" (as --server does).
const EnvMode = "FERRY_MODE"

// serverMode are the flags of backup create and restore create in server
// mode: they then create a Backup or Restore object for `ferry server`
// instead of running the engine in this process.
type serverMode struct {
	on        bool
	namespace string
	location  string
	wait      bool
	ttl       time.Duration
	// identitySecret is restore's --encryption-identity-secret NAME[:KEY].
	identitySecret string

	// Set by complete: the flags of the other mode that were set, and
	// identitySecret parsed.
	changed  []string
	identity *v1alpha1.SecretKeyReference
}

func (s *serverMode) register(cmd *cobra.Command, withTTL bool) {
	fl := cmd.Flags()
	fl.BoolVar(&s.on, "server", false, "server mode: create the object in the cluster for ferry server to run, instead of running here (env "+EnvMode+"=server)")
	fl.StringVarP(&s.namespace, "namespace", "n", serverNamespace(), "server mode: the ferry server's namespace (env "+EnvNamespace+")")
	fl.StringVar(&s.location, "storage-location", "", "server mode: the BackupStorageLocation to use (default: the one marked default)")
	fl.BoolVar(&s.wait, "wait", false, "server mode: wait until it finishes, showing progress from its status")
	if withTTL {
		fl.DurationVar(&s.ttl, "ttl", 0, "server mode: delete the backup (store and cluster) this long after it starts (default: keep)")
	} else {
		fl.StringVar(&s.identitySecret, "encryption-identity-secret", "", "server mode: NAME[:KEY] of a Secret in the server's namespace whose key (default \"identity\") holds the age identities that decrypt an encrypted backup")
	}
}

// serverOnly are the flags only server mode uses.
var serverOnly = []string{"namespace", "storage-location", "wait", "ttl", "encryption-identity-secret"}

// complete sets whether server mode is on (--server or $FERRY_MODE), and
// notes the flags of the other mode that were set.
func (s *serverMode) complete(cmd *cobra.Command) {
	s.on = s.on || os.Getenv(EnvMode) == "server"
	if s.on {
		s.changed = changedFlags(cmd, directOnly...)
	} else {
		s.changed = changedFlags(cmd, serverOnly...)
	}
	if s.identitySecret != "" {
		name, key, _ := strings.Cut(s.identitySecret, ":")
		s.identity = &v1alpha1.SecretKeyReference{Name: name, Key: key}
	}
}

// validate refuses the flags of the other mode, and server mode's own
// bad values.
func (s *serverMode) validate() error {
	if !s.on {
		if len(s.changed) > 0 {
			return fmt.Errorf("--%s is for server mode (--server or %s=server)", s.changed[0], EnvMode)
		}
		return nil
	}
	if len(s.changed) > 0 {
		return fmt.Errorf("--%s is not supported in server mode: %s", s.changed[0], directOnlyWhy[s.changed[0]])
	}
	if s.ttl < 0 {
		return fmt.Errorf("--ttl %s is negative (omit it to keep the backup)", s.ttl)
	}
	if s.identity != nil && s.identity.Name == "" {
		return fmt.Errorf("--encryption-identity-secret %q: want NAME[:KEY]", s.identitySecret)
	}
	return nil
}

// directOnly are the flags that only a run in this process uses; in
// server mode the server's own configuration decides (its location, its
// repository password, the node agents), so they are refused rather than
// silently ignored.
var directOnly = []string{"storage", "encryption-identity", "dry-run", "host-pods-dir", "repository-password-file",
	"volumes-by-node-agent", "restore-helper-image", "helper-image", "node-pods-dir", "helper-unschedulable-timeout", "volume-timeout", "write-sparse-files",
	"platform", "image-concurrency", "image-jobs", "image-retries", "insecure", "timeout", "verify-timeout"}

var directOnlyWhy = map[string]string{
	"storage":                      "the server uses its BackupStorageLocation (--storage-location)",
	"encryption-identity":          "the server cannot read a local key file",
	"dry-run":                      "run the dry run in direct mode",
	"host-pods-dir":                "the node agents (ferry node-agent --server) read and write pod volume data",
	"repository-password-file":     "the server and node agents take it from their Secret (ferry install --repository-password-file)",
	"volumes-by-node-agent":        "server mode always hands pod volume data to the node agents",
	"restore-helper-image":         "set it on the server (ferry server --restore-helper-image)",
	"helper-image":                 "set it on the server (ferry server --restore-helper-image)",
	"node-pods-dir":                "set it on the server (ferry server --node-pods-dir) and the node agents (ferry install --host-pods-dir)",
	"helper-unschedulable-timeout": "set it on the server (ferry server --helper-unschedulable-timeout)",
	"volume-timeout":               "set it on the server (ferry server --pod-volume-timeout)",
	"write-sparse-files":           "set it on the server (ferry server --write-sparse-files) and the node agents",
	"platform":                     "a Backup or Restore object does not carry a platform filter",
	"image-concurrency":            "the server's image settings apply",
	"image-jobs":                   "the server's image settings apply",
	"image-retries":                "the server's image settings apply",
	"insecure":                     "the server's image settings apply",
	"timeout":                      "set it on the server (ferry server --backup-timeout, --restore-timeout)",
	"verify-timeout":               "set it on the server (ferry server --verify-timeout)",
}

// serverClient returns a controller-runtime client for the cluster of
// --kubeconfig/--context, with ferry's types.
func serverClient(g *globals) (crclient.Client, error) {
	cfg, err := kube.RESTConfig(g.kubeconfig, g.context)
	if err != nil {
		return nil, err
	}
	return crclient.New(cfg, crclient.Options{Scheme: servermode.Scheme()})
}

func terminal(p v1alpha1.Phase) bool {
	return p == v1alpha1.PhaseCompleted || p == v1alpha1.PhasePartiallyFailed || p == v1alpha1.PhaseFailed
}

// createBackup creates Backup name with spec and, with --wait, follows
// its status until it ends.
func (s *serverMode) createBackup(ctx context.Context, g *globals, name string, spec v1alpha1.BackupSpec) (*v1alpha1.Backup, error) {
	c, err := serverClient(g)
	if err != nil {
		return nil, err
	}
	b := v1alpha1.NewBackup(name)
	b.Namespace = s.namespace
	b.Spec = spec
	b.Spec.StorageLocationName = s.location
	if s.ttl > 0 {
		b.Spec.TTL = &metav1.Duration{Duration: s.ttl}
	}
	if err := c.Create(ctx, b); err != nil {
		return nil, fmt.Errorf("creating Backup %s/%s: %w", s.namespace, name, err)
	}
	if !s.wait {
		return b, nil
	}
	pr := newProgress(g.stderr, "backup "+name)
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, crclient.ObjectKeyFromObject(b), b); err != nil {
			return false, err
		}
		pr.update(b.Status.Progress.ItemsBackedUp, b.Status.Progress.TotalItems)
		return terminal(b.Status.Phase), nil
	})
	pr.stop()
	return b, err
}

// printBackup prints a Backup just created or, with --wait, ended.
func (s *serverMode) printBackup(g *globals, b *v1alpha1.Backup) error {
	if !s.wait {
		return s.created(g, "Backup", b)
	}
	if err := printBackup(g, b, nil); err != nil {
		return err
	}
	return phaseExit(b.Status.Phase, "backup "+b.Name)
}

// createRestore is createBackup for a Restore.
func (s *serverMode) createRestore(ctx context.Context, g *globals, name string, spec v1alpha1.RestoreSpec, crdTimeout time.Duration) (*v1alpha1.Restore, error) {
	c, err := serverClient(g)
	if err != nil {
		return nil, err
	}
	r := v1alpha1.NewRestore(name)
	r.Namespace = s.namespace
	r.Spec = spec
	r.Spec.StorageLocationName = s.location
	r.Spec.CRDTimeout = &metav1.Duration{Duration: crdTimeout}
	r.Spec.EncryptionIdentitySecret = s.identity
	if err := c.Create(ctx, r); err != nil {
		return nil, fmt.Errorf("creating Restore %s/%s: %w", s.namespace, name, err)
	}
	if !s.wait {
		return r, nil
	}
	pr := newProgress(g.stderr, "restore "+name)
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, crclient.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		if p := r.Status.Progress; p != nil {
			pr.update(p.ItemsRestored, p.TotalItems)
		}
		return terminal(r.Status.Phase), nil
	})
	pr.stop()
	return r, err
}

// printRestore is printBackup for a Restore.
func (s *serverMode) printRestore(g *globals, r *v1alpha1.Restore) error {
	if !s.wait {
		return s.created(g, "Restore", r)
	}
	if err := printRestore(g, r, nil); err != nil {
		return err
	}
	return phaseExit(r.Status.Phase, "restore "+r.Name)
}

// created prints what was created, and how to follow it.
func (s *serverMode) created(g *globals, kind string, obj crclient.Object) error {
	if g.output != "table" {
		return printObject(g.stdout, g.output, obj)
	}
	fmt.Fprintf(g.stdout, "%s %s created in namespace %s; follow it with `kubectl -n %s get %ss %s` or --wait\n", kind, obj.GetName(), s.namespace, s.namespace, strings.ToLower(kind), obj.GetName())
	return nil
}
