package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// cleanEnv clears the environment variables that change what the
// commands accept, so that the machine's own settings do not.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{EnvMode, store.EnvStorage, volumes.EnvPassword, EnvNamespace, EnvHubKubeconfig, "NODE_NAME"} {
		t.Setenv(k, "")
	}
}

// TestFlagRefusals: flags that would do nothing in a combination are
// refused with the reason before anything connects anywhere, rather than
// silently ignored. Moved from test/e2e (TestFlagRefusals): the same
// arguments, exit code and stderr, through Main instead of the binary.
func TestFlagRefusals(t *testing.T) {
	cleanEnv(t)
	storage := "file://" + t.TempDir()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	awsCreds := filepath.Join(t.TempDir(), "aws")
	if err := os.WriteFile(awsCreds, []byte("AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "--location-url", "azblob://c", "--credentials-file", awsCreds}, "--credentials-file " + awsCreds + " for --location-url: credential key AWS_ACCESS_KEY_ID is not used by azblob:// locations (they take AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY, AZURE_STORAGE_CONNECTION_STRING)"},
		{[]string{"backup", "create", "b", "--platform", "linux/amd64"}, "with --images=record nothing is copied"},
		{[]string{"backup", "create", "b", "--images", "none", "--platform", "linux/amd64"}, "with --images=none nothing is copied"},
		{[]string{"restore", "create", "--from-backup", "b", "--platform", "linux/amd64"}, "a restore pushes the platforms its backup kept"},
		{[]string{"node-agent", "--server", "--host-pods-dir", t.TempDir(), "--once"}, "--once is for the polling node agent"},
		{[]string{"node-agent", "--host-pods-dir", t.TempDir(), "--probe-addr", ":0"}, "--probe-addr is for --server"},
		{[]string{"node-agent", "--server", "--host-pods-dir", t.TempDir()}, "--server needs --node (or $NODE_NAME)"},
		{[]string{"schedule", "create", "s", "--schedule", "@hourly", "--ttl", "-1h"}, "--ttl -1h0m0s is negative"},
		{[]string{"migrate", "--from-context", "a", "--to-context", "b", "--restore-timeout", "-1s"}, "--restore-timeout -1s is negative (0: no deadline)"},
		{[]string{"backup", "create", "b", "--timeout", "-1m"}, "--timeout -1m0s is negative (0: no deadline)"},
		{[]string{"restore", "create", "--from-backup", "b", "--timeout", "-1m"}, "--timeout -1m0s is negative (0: no deadline)"},
		{[]string{"restore", "create", "--from-backup", "b", "--verify", "--verify-timeout", "-1m"}, "--verify-timeout -1m0s is negative (0: no deadline)"},
		{[]string{"restore", "create", "--from-backup", "b", "--verify-timeout", "1m"}, "--verify-timeout is for --verify"},
		{[]string{"backup", "create", "b", "--server", "--timeout", "1h"}, "--timeout is not supported in server mode: set it on the server (ferry server --backup-timeout, --restore-timeout)"},
		{[]string{"hub", "--data-dir", "/nonexistent", "--verify-timeout", "-1s"}, "--verify-timeout -1s is negative (0: no deadline)"},
		// Found by a reviewer: -o yaml printed the summary.
		{[]string{"migrate", "--preflight", "--from-context", "a", "--to-context", "b", "-o", "yaml"}, "-o yaml: a pre-flight prints a summary (-o table) or JSON (-o json)"},
		// Found by a reviewer: without a kubeconfig, the missing kubeconfig was reported instead.
		{[]string{"server", "--kubeconfig", "/nonexistent/kubeconfig", "--backup-timeout", "-1m"}, "--backup-timeout -1m0s is negative (0: no deadline)"},
		// Found by a new-user run: these were accepted, or their error
		// hidden behind the missing kubeconfig.
		{[]string{"schedule", "create", "s", "--schedule", "@every 0s"}, "runs must be at least 1m0s apart"},
		{[]string{"install", "-n", ""}, `--namespace "": a lowercase RFC 1123 label`},
		{[]string{"install", "--image", ""}, "--image is empty"},
		{[]string{"install", "--location-url", "s3://b", "--credentials-file", empty}, "no KEY=VALUE lines"},
		// Rendered without a word, then refused by every command (a
		// new user's finding).
		{[]string{"install", "--location-url", "nope://x"}, `--location-url: backup storage location nope://x: unknown scheme "nope"`},
		{[]string{"install", "--location-url", "gs://b1/some/path"}, "use gs://b1?prefix=some/path/"},
		{[]string{"install", "--location-url", "azblob://"}, "names no container"},
		{[]string{"backup", "create", "b", "--server", "--ttl", "-5m"}, "--ttl -5m0s is negative"},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--encryption-identity-secret", ":key"}, "want NAME[:KEY]"},
		// An unset $NS in --include-namespaces "$NS" must not mean every
		// namespace (every Secret of the cluster).
		{[]string{"backup", "create", "b", "--include-namespaces", ""}, `--include-namespaces "": names nothing`},
		{[]string{"restore", "create", "--from-backup", "b", "--include-namespaces", ""}, `--include-namespaces "": names nothing`},
		{[]string{"migrate", "--from-context", "a", "--to-context", "b", "--include-resources", ""}, `--include-resources "": names nothing`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append(c.args, "--kubeconfig", "/nonexistent")
			if !strings.Contains(strings.Join(c.args, " "), "--server") {
				args = append(args, "--storage", storage) // refused with --server
			}
			var stdout, stderr bytes.Buffer
			code := Main(args, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("ferry %s: exit %d, stderr %q; want %q", strings.Join(c.args, " "), code, stderr.String(), c.want)
			}
		})
	}
}

// validateArgs runs ferry with args through NewRoot, up to and including
// each command's Complete and Validate but never its Run: no cluster and
// no store are touched.
func validateArgs(args ...string) error {
	var stdout, stderr bytes.Buffer
	root := NewRoot(&stdout, &stderr)
	root.SetArgs(args)
	return flagNames(root.ExecuteContext(context.WithValue(context.Background(), validateOnly{}, true)))
}

// refusalFiles are files the refusal tests name.
type refusalFiles struct {
	dir, empty, password, identity, recipient, mods, badMods, syncConfig string
}

// otherRecipient is an age public key whose identity no test holds.
const otherRecipient = "age1jup9pnf5l76tm58nwts8l4fxkpnrr4d78ldv2c0yd0zpmudnkdqslr0yyz"

func newRefusalFiles(t *testing.T) refusalFiles {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := refusalFiles{dir: dir, recipient: id.Recipient().String()}
	for _, w := range []struct {
		into       *string
		name, data string
	}{
		{&f.empty, "empty", "# nothing\n"},
		{&f.password, "password", "secret\n"},
		{&f.identity, "identity", id.String() + "\n"},
		{&f.mods, "mods.yaml", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: configmaps}\n  patches:\n  - {operation: replace, path: /data/x, value: y}\n"},
		{&f.badMods, "bad-mods.yaml", "rules: [\n"},
		{&f.syncConfig, "sync.yaml", "images:\n  registry.a.com/web: registry.b.com/web\n"},
	} {
		*w.into = filepath.Join(dir, w.name)
		if err := os.WriteFile(*w.into, []byte(w.data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// validateCase is ferry's arguments and the parts of the error they must
// give; no want: they must pass Complete and Validate.
type validateCase struct {
	args []string
	want []string
}

// checkValidate runs each case through NewRoot and each command's
// Complete and Validate. Engine checks (restore.Options.Validate) are
// asserted by the flag and the value only, which both the engine's message
// and the CLI's field-to-flag table keep.
func checkValidate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			err := validateArgs(c.args...)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != nil && err == nil:
				t.Fatalf("accepted; want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want %q", err, w)
				}
			}
		})
	}
}

// TestValidateBackupCreate: every refusal of backup create that needs no cluster.
func TestValidateBackupCreate(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	s := "--storage=file://" + f.dir
	checkValidate(t, []validateCase{
		{[]string{"backup", "create", "b", s}, nil},
		{[]string{"backup", "create", "B_AD", s}, []string{`backup name "B_AD"`}},
		{[]string{"backup", "create", "b", s, "--encryption-recipient", "nope"}, []string{`--encryption-recipient: age recipient "nope": not an age public key`}},
		{[]string{"backup", "create", "b", s, "--encryption-recipient", f.recipient}, nil},
		{[]string{"backup", "create", "b", s, "--image-jobs", "0"}, []string{"--image-jobs 0: must be at least 1"}},
		{[]string{"backup", "create", "b", s, "--image-concurrency", "-1"}, []string{"--image-concurrency -1: must be at least 1"}},
		{[]string{"backup", "create", "b", s, "--image-retries", "0"}, []string{"--image-retries 0: must be at least 1"}},
		// The spec is checked before anything connects.
		{[]string{"backup", "create", "b", s, "--images", "merge"}, []string{`--images (spec.images): Unsupported value: "merge"`}},
		{[]string{"backup", "create", "b", s, "--include-cluster-resources", "maybe"}, []string{`--include-cluster-resources (spec.includeClusterResources): Unsupported value: "maybe"`}},
		{[]string{"backup", "create", "b", s, "-l", "a=b=c"}, []string{`--selector (spec.labelSelector): Invalid value: "a=b=c"`}},
		{[]string{"backup", "create", "b", s, "--images", "copy"}, []string{"--image-registry-mappings (spec.imageRegistryMappings): Required value"}},
		{[]string{"backup", "create", "b", s, "--server", "--images", "merge"}, []string{`--images (spec.images): Unsupported value: "merge"`}},
		{[]string{"backup", "create", "b", s, "--images", "copy", "--platform", "bad"}, []string{`--platform: platform "bad": want os/arch[/variant]`}},
		{[]string{"backup", "create", "b", s, "--platform", "linux/amd64"}, []string{"--platform filters the images ferry copies; with --images=record nothing is copied (use --images=copy or bundle)"}},
		{[]string{"backup", "create", "b", s, "--images", "none", "--platform", "linux/amd64"}, []string{"with --images=none nothing is copied"}},
		{[]string{"backup", "create", "b", s, "--images", "copy", "--image-registry-mappings", "a.io=b.io", "--platform", "linux/amd64"}, nil},
		{[]string{"backup", "create", "b", s, "--images", "bundle", "--platform", "linux/arm64/v8"}, nil},
		{[]string{"backup", "create", "b", s, "--default-volumes-to-fs-backup"}, []string{"--default-volumes-to-fs-backup: no repository password"}},
		{[]string{"backup", "create", "b", s, "--default-volumes-to-fs-backup", "--repository-password-file", filepath.Join(f.dir, "none")}, []string{"--default-volumes-to-fs-backup: --repository-password-file " + filepath.Join(f.dir, "none") + ": no such file or directory"}},
		{[]string{"backup", "create", "b", s, "--default-volumes-to-fs-backup", "--repository-password-file", f.empty}, nil},
		{[]string{"backup", "create", "b", s, "--default-volumes-to-fs-backup", "--repository-password-file", f.password}, nil},
		{[]string{"backup", "create", "b", s, "--default-volumes-to-fs-backup", "--host-pods-dir", f.dir}, nil},
	})
}

// TestValidateBackupCreateModes: backup create refuses the flags of the
// mode (direct or --server) it is not in.
func TestValidateBackupCreateModes(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	s := "--storage=file://" + f.dir
	checkValidate(t, []validateCase{
		{[]string{"backup", "create", "b", s, "--namespace", "x"}, []string{"--namespace is for server mode (--server or FERRY_MODE=server)"}},
		{[]string{"backup", "create", "b", s, "--storage-location", "x"}, []string{"--storage-location is for server mode"}},
		{[]string{"backup", "create", "b", s, "--wait"}, []string{"--wait is for server mode"}},
		{[]string{"backup", "create", "b", s, "--ttl", "1h"}, []string{"--ttl is for server mode"}},
		{[]string{"backup", "create", "b", "--server"}, nil},
		{[]string{"backup", "create", "b", "--server", "--default-volumes-to-fs-backup", "--wait", "--ttl", "1h", "-n", "x", "--storage-location", "l"}, nil},
		{[]string{"backup", "create", "b", "--server", "--ttl", "-5m"}, []string{"--ttl -5m0s is negative (omit it to keep the backup)"}},
		{[]string{"backup", "create", "b", "--server", s}, []string{"--storage is not supported in server mode: the server uses its BackupStorageLocation (--storage-location)"}},
		{[]string{"backup", "create", "b", "--server", "--platform", "linux/amd64"}, []string{"--platform is not supported in server mode: a Backup or Restore object does not carry a platform filter"}},
		{[]string{"backup", "create", "b", "--server", "--host-pods-dir", f.dir}, []string{"--host-pods-dir is not supported in server mode: the node agents"}},
		{[]string{"backup", "create", "b", "--server", "--repository-password-file", f.password}, []string{"--repository-password-file is not supported in server mode"}},
		{[]string{"backup", "create", "b", "--server", "--helper-image", "x"}, []string{"--helper-image is not supported in server mode"}},
		{[]string{"backup", "create", "b", "--server", "--image-jobs", "2"}, []string{"--image-jobs is not supported in server mode: the server's image settings apply"}},
		{[]string{"backup", "create", "b", "--server", "--insecure"}, []string{"--insecure is not supported in server mode"}},
	})
}

// TestValidateRestoreCreate: every refusal of restore create that needs no cluster.
func TestValidateRestoreCreate(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	s := "--storage=file://" + f.dir
	checkValidate(t, []validateCase{
		{[]string{"restore", "create", s}, []string{"--from-backup (or --from-velero-backup) is required"}},
		{[]string{"restore", "create", s, "--from-backup", "a", "--from-velero-backup", "b"}, []string{"--from-backup and --from-velero-backup: give one"}},
		{[]string{"restore", "create", s, "--from-backup", "b"}, nil},
		{[]string{"restore", "create", "r1", s, "--from-velero-backup", "b"}, nil},
		{[]string{"restore", "create", "R_1", s, "--from-backup", "b"}, []string{`restore name "R_1"`}},
		{[]string{"restore", "create", "r1", s, "--from-backup", "B_1"}, []string{`backup name "B_1"`}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--platform", "linux/amd64"}, []string{"--platform applies when a backup copies or bundles images; a restore pushes the platforms its backup kept"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--image-jobs", "0"}, []string{"--image-jobs 0: must be at least 1"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--namespace-mappings", "a"}, []string{`--namespace-mappings "a": want SRC:DST`}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--namespace-mappings", "a:b,a:c"}, []string{"--namespace-mappings: a is mapped twice (b and c)"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--storage-class-mappings", "=x"}, []string{`--storage-class-mappings "=x": want SRC:DST`}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--resource-modifiers", filepath.Join(f.dir, "none")}, []string{"--resource-modifiers: open"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--resource-modifiers", f.badMods}, []string{"resource modifiers: " + f.badMods}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--resource-modifiers", f.mods}, nil},
		{[]string{"restore", "create", s, "--from-backup", "b", "--encryption-identity", filepath.Join(f.dir, "none")}, []string{"--encryption-identity"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--encryption-identity", f.identity}, nil},
		{[]string{"restore", "create", s, "--from-backup", "b", "--verify"}, nil},
		{[]string{"restore", "create", s, "--from-backup", "b", "--verify", "--dry-run"}, []string{"--verify (spec.verify): Invalid value: true: a dry run (--dry-run) restores nothing to verify"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--existing-resource-policy", "merge"}, []string{"--existing-resource-policy", `"merge"`}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--existing-resource-policy", "update"}, nil},
		{[]string{"restore", "create", s, "--from-backup", "b", "--namespace-mappings", "a:c,b:c"}, []string{"--namespace-mappings", "a target namespace takes one source"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--from-cloud", "nocloud"}, []string{"--from-cloud", `"nocloud"`}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--push-images"}, []string{"--image-registry-mappings (spec.imageRegistryMappings): Required value: --push-images needs"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--push-images", "--image-registry-mappings", "a.io=b.io"}, nil},
		{[]string{"restore", "create", s, "--from-backup", "b", "--volumes-by-node-agent", "--host-pods-dir", f.dir}, []string{"--volumes-by-node-agent and --host-pods-dir: give one"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--volumes-by-node-agent"}, nil},
	})
}

// TestValidateRestoreCreateModes: restore create refuses the flags of the
// mode (direct or --server) it is not in.
func TestValidateRestoreCreateModes(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	s := "--storage=file://" + f.dir
	checkValidate(t, []validateCase{
		{[]string{"restore", "create", s, "--from-backup", "b", "--encryption-identity-secret", "age"}, []string{"--encryption-identity-secret is for server mode (--server or FERRY_MODE=server)"}},
		{[]string{"restore", "create", s, "--from-backup", "b", "--wait"}, []string{"--wait is for server mode"}},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--encryption-identity-secret", ":key"}, []string{`--encryption-identity-secret ":key": want NAME[:KEY]`}},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--encryption-identity-secret", "age:key", "--wait"}, nil},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--dry-run"}, []string{"--dry-run is not supported in server mode: run the dry run in direct mode"}},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--encryption-identity", f.identity}, []string{"--encryption-identity is not supported in server mode: the server cannot read a local key file"}},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--volumes-by-node-agent"}, []string{"--volumes-by-node-agent is not supported in server mode"}},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--write-sparse-files"}, []string{"--write-sparse-files is not supported in server mode: set it on the server (ferry server --write-sparse-files) and the node agents"}},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--volume-timeout", "1m"}, []string{"--volume-timeout is not supported in server mode"}},
	})
}

// TestValidateMigrate: every refusal of migrate that needs no cluster.
func TestValidateMigrate(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	s := "--storage=file://" + f.dir
	stg := func(op, name string, args ...string) []string {
		return append([]string{"migrate", op, name, s, "--from-context", "a", "--to-context", "b", "--repository-password-file", f.password}, args...)
	}
	checkValidate(t, []validateCase{
		{[]string{"migrate", s}, []string{"migrate needs two clusters: set --from-context and --to-context (or --from-kubeconfig and --to-kubeconfig)"}},
		{[]string{"migrate", s, "--from-kubeconfig", "a", "--to-kubeconfig", "a"}, []string{"migrate needs two clusters"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "a"}, []string{`--from-context and --to-context name the same cluster ("a"); migrate moves between two clusters`}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b"}, nil},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--encryption-recipient", otherRecipient, "--encryption-identity", f.identity}, []string{"none of the age identities matches an encryption recipient"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--storage-credential", "c"}, []string{"--storage-credential is for migrate --hub"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--images", "merge"}, []string{`--images (spec.images): Unsupported value: "merge"`}},
		{[]string{"migrate", s, "--from-kubeconfig", "a", "--to-kubeconfig", "b"}, nil},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--name", "M_1"}, []string{`backup name "M_1"`}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--encryption-recipient", f.recipient}, []string{"migrate with --encryption-recipient needs --encryption-identity too"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--encryption-recipient", f.recipient, "--encryption-identity", f.identity}, nil},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--encryption-recipient", "nope"}, []string{`--encryption-recipient: age recipient "nope": not an age public key`}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--platform", "linux/amd64"}, []string{"with --images=record nothing is copied"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--images", "copy", "--image-registry-mappings", "a.io=b.io", "--platform", "linux/amd64"}, nil},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--image-jobs", "0"}, []string{"--image-jobs 0: must be at least 1"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--default-volumes-to-fs-backup"}, []string{"--default-volumes-to-fs-backup: no repository password"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--default-volumes-to-fs-backup", "--repository-password-file", f.password}, nil},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--namespace-mappings", "x"}, []string{`--namespace-mappings "x": want SRC:DST`}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--resource-modifiers", f.badMods}, []string{"resource modifiers: " + f.badMods}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--encryption-identity", filepath.Join(f.dir, "none")}, []string{"--encryption-identity"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--existing-resource-policy", "merge"}, []string{"--existing-resource-policy", `"merge"`}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--push-images"}, []string{"--image-registry-mappings (spec.imageRegistryMappings): Required value: --push-images needs"}},
		// The staged subcommands: migrate's flags, the name as argument.
		{stg("stage", "m", "--include-namespaces", "shop"), nil},
		{stg("stage", "m"), nil}, // a later stage takes the journal's namespaces
		{stg("stage", "M_1"), []string{`migration name "M_1": lowercase letters, digits, '-' and '.'`}},
		{[]string{"migrate", "stage", "", s, "--from-context", "a", "--to-context", "b"}, []string{"migrate stage: NAME is empty"}},
		{stg("stage", strings.Repeat("a", 175)), []string{"175 characters, at most 169 (its cutovers are named NAME-cutover-999)"}},
		{stg("stage", strings.Repeat("a", 169)), nil},
		{[]string{"migrate", "stage", "m", s, "--repository-password-file", f.password, "--from-context", "a", "--to-context", "a"}, []string{"name the same cluster"}},
		{[]string{"migrate", "stage", "m", s, "--from-context", "a", "--to-context", "b"}, []string{"migrate stage moves every claim's data through the volume repository", "no repository password"}},
		{stg("stage", "m", "-l", "app=x"), []string{"spec.labelSelector: a staged migration moves whole namespaces"}},
		{stg("stage", "m", "--include-namespaces", "sh*"), []string{`spec.includedNamespaces "sh*": a staged migration names its namespaces`}},
		{stg("stage", "m", "--include-namespaces", "shop", "--exclude-namespaces", "x"), []string{"spec.excludedNamespaces"}},
		{stg("stage", "m", "--include-resources", "pods"), []string{"spec.includedResources"}},
		{stg("cutover", "m", "--max-downtime", "-1m"), []string{"--max-downtime -1m0s: must not be negative"}},
		{stg("cutover", "m", "--max-stages", "0"), []string{"--max-stages 0: must be at least 1"}},
		{stg("cutover", "m", "--max-stages", "3"), []string{"--max-stages bounds the stages that --max-downtime runs: give --max-downtime too"}},
		{stg("cutover", "m", "--max-stages", "3", "--max-downtime", "2m"), nil},
		{stg("cutover", "m", "--quiesce-timeout", "0s"), []string{"--quiesce-timeout 0s: must be positive"}},
		{stg("rollback", "m", "--delete-target"), nil},
		{[]string{"migrate", "rollback", "m", s, "--from-context", "a", "--to-context", "b"}, nil}, // a rollback moves no data
		{stg("cutover", "m", "--verify=false"), []string{"--verify=false: a cutover verifies"}},
		{stg("rollback", "m", "--dry-run"), []string{"--dry-run: migrate rollback changes the clusters"}},
	})
}

// TestValidateMigrateHub: migrate --hub refuses the flags a Migration
// cannot carry, naming them, and migrate without it the hub's flags.
func TestValidateMigrateHub(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	s := "--storage=file://" + f.dir
	h := "--hub=" + filepath.Join(f.dir, "hub.kubeconfig")
	ab := []string{"--from-cluster", "a", "--to-cluster", "b"}
	hub := func(args ...string) []string { return append(append([]string{"migrate", s, h}, ab...), args...) }
	checkValidate(t, []validateCase{
		{hub(), nil},
		{hub("--wait", "--wait-timeout", "5m", "-n", "team-a", "--ttl", "24h", "--name", "m1"), nil},
		{hub("--include-namespaces", "a*", "-l", "app=web", "--namespace-mappings", "a:b", "--images", "copy", "--image-registry-mappings", "a.io=b.io", "--verify=false", "--default-volumes-to-fs-backup"), nil},
		{[]string{"migrate", s, h}, []string{"migrate --hub needs --from-cluster and --to-cluster: the hub's Clusters (ferry hub cluster add)"}},
		{[]string{"migrate", s, h, "--from-cluster", "a"}, []string{"needs --from-cluster and --to-cluster"}},
		{append([]string{"migrate", h}, ab...), []string{"migrate --hub needs --storage (or $FERRY_STORAGE): the backup storage location the hub opens"}},
		{hub("--kubeconfig", "k"), []string{"--kubeconfig is not supported with --hub: the hub reaches the clusters with their ClusterCredentials"}},
		{hub("--context", "k"), []string{"--context is not supported with --hub"}},
		{hub("--from-context", "x"), []string{"--from-context is not supported with --hub: name the hub's Cluster with --from-cluster"}},
		{hub("--to-kubeconfig", "x"), []string{"--to-kubeconfig is not supported with --hub: name the hub's Cluster with --to-cluster"}},
		{hub("--report-dir", f.dir), []string{"--report-dir is not supported with --hub: the hub writes the verification report into the storage location"}},
		{hub("--encryption-recipient", f.recipient), []string{"migrate with --encryption-recipient needs --encryption-identity too"}},
		{hub("--encryption-recipient", f.recipient, "--encryption-identity", f.identity, "--storage-credential", "s3-creds"), nil},
		{hub("--encryption-identity", f.identity), nil},
		{hub("--encryption-recipient", otherRecipient, "--encryption-identity", f.identity), []string{"--encryption-identity " + f.identity + ": none of the age identities matches an encryption recipient"}},
		{hub("--encryption-identity", f.password), []string{"--encryption-identity", "not an age identity file"}},
		{hub("--storage-credential", "Bad_Name"), []string{`--storage-credential "Bad_Name"`}},
		{hub("--repository-password-file", f.password), []string{"--repository-password-file is not supported with --hub"}},
		// A Migration carries these (issue 29), checked as a local migrate
		// checks them.
		{hub("--resource-modifiers", f.mods, "--dry-run", "--from-cloud", "aws", "--to-cloud", "gcp", "--preserve-nodeports", "--preferred-version-only",
			"--restore-status", "deployments", "--existing-volume-data-policy", "keep", "--crd-timeout", "2m", "--images-required"), nil},
		{hub("--resource-modifiers", filepath.Join(f.dir, "none")), []string{"--resource-modifiers", "no such file"}},
		{hub("--resource-modifiers", f.badMods), []string{"--resource-modifiers"}},
		{hub("--from-cloud", "mars"), []string{"--from-cloud", "mars"}},
		{hub("--existing-volume-data-policy", "merge"), []string{"--existing-volume-data-policy", `"merge"`}},
		{hub("--crd-timeout", "-1m"), []string{"--crd-timeout", "must not be negative"}},
		{hub("--images", "bundle", "--image-registry-mappings", "a.io=b.io", "--push-images"), []string{"--push-images is not supported with --hub: with --images=bundle the hub pushes"}},
		{hub("--images", "copy", "--image-registry-mappings", "a.io=b.io", "--platform", "linux/amd64"), []string{"--platform is not supported with --hub"}},
		{hub("--image-jobs", "2"), []string{"--image-jobs is not supported with --hub"}},
		{hub("--helper-image", "x"), []string{"--helper-image is not supported with --hub: the hub's volume settings apply"}},
		{hub("--volume-timeout", "1m"), []string{"--volume-timeout is not supported with --hub"}},
		{hub("--write-sparse-files"), []string{"--write-sparse-files is not supported with --hub"}},
		{hub("--wait", "--wait-timeout", "0s"), []string{"--wait-timeout 0s: must be positive"}},
		{hub("--wait-timeout", "5s"), []string{"--wait-timeout is for --wait"}},
		{hub("--ttl", "-1h"), []string{"--ttl -1h0m0s is negative"}},
		{hub("-n", "Team_A"), []string{`--namespace "Team_A"`}},
		{hub("--name", "M_1"), []string{`backup name "M_1"`}},
		{hub("--images", "merge"), []string{`--images (spec.images): Unsupported value: "merge"`}},
		{hub("--existing-resource-policy", "merge"), []string{"--existing-resource-policy", `"merge"`}},
		{hub("--namespace-mappings", "x"), []string{`--namespace-mappings "x": want SRC:DST`}},
		// Without --hub, its flags do nothing.
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--from-cluster", "a"}, []string{"--from-cluster is for migrate --hub (or $FERRY_HUB_KUBECONFIG)"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "--wait"}, []string{"--wait is for migrate --hub"}},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b", "-n", "x"}, []string{"--namespace is for migrate --hub"}},
	})
	t.Setenv(EnvHubKubeconfig, filepath.Join(f.dir, "hub.kubeconfig"))
	checkValidate(t, []validateCase{
		{append([]string{"migrate", s}, ab...), nil},
		{[]string{"migrate", s, "--from-context", "a", "--to-context", "b"}, []string{"--from-context is not supported with --hub ($FERRY_HUB_KUBECONFIG): name the hub's Cluster with --from-cluster"}},
		{[]string{"migrate", s, "--hub", "", "--from-context", "a", "--to-context", "b"}, nil},
	})
}

// TestValidateHubClusterAdd: hub cluster add's refusals that read no
// kubeconfig (TestLoadMemberKubeconfig has those that do).
func TestValidateHubClusterAdd(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	h := "--hub=" + filepath.Join(dir, "hub.kubeconfig")
	missing := filepath.Join(dir, "missing")
	checkValidate(t, []validateCase{
		{[]string{"hub", "cluster", "add", "c"}, []string{"--hub is required (or $FERRY_HUB_KUBECONFIG): the hub's kubeconfig"}},
		{[]string{"hub", "cluster", "add", "c", h}, []string{"--kubeconfig is required: the kubeconfig of the cluster to add"}},
		{[]string{"hub", "cluster", "add", "C_1", h, "--kubeconfig", missing}, []string{`cluster name "C_1"`}},
		{[]string{"hub", "cluster", "add", "c", h, "-n", "A_B", "--kubeconfig", missing}, []string{`--namespace "A_B"`}},
		{[]string{"hub", "cluster", "add", "c", h, "--kubeconfig", missing}, []string{"--kubeconfig " + missing + ": open " + missing + ": no such file or directory"}},
		{[]string{"hub", "cluster", "add", h}, []string{"accepts 1 arg(s), received 0"}},
		{[]string{"hub", "cluster", "nosuch"}, []string{`unknown command "nosuch" for "ferry hub cluster"`}},
	})
}

// TestValidateVerify: every refusal of verify that needs no cluster.
func TestValidateVerify(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	s := "--storage=file://" + f.dir
	checkValidate(t, []validateCase{
		{[]string{"verify", s}, []string{"--backup is required"}},
		{[]string{"verify", s, "--backup", "b"}, nil},
		{[]string{"verify", s, "--backup", "b", "--restore", "r"}, nil},
		{[]string{"verify", s, "--backup", "b", "--from-cloud", "mars"}, []string{`--from-cloud (spec.fromCloud): Invalid value: "mars"`}},
		{[]string{"verify", s, "--backup", "b", "--existing-resource-policy", "merge"}, []string{`--existing-resource-policy (spec.existingResourcePolicy): Unsupported value: "merge"`}},
		{[]string{"verify", s, "--backup", "b", "--from-velero-backup", "--namespace-mappings", "a:b"}, nil},
		{[]string{"verify", s, "--backup", "b", "--restore", "r", "--from-velero-backup"}, []string{"--restore r gives the backup's kind; do not combine it with --from-velero-backup"}},
		{[]string{"verify", s, "--backup", "b", "--namespace-mappings", "x"}, []string{`--namespace-mappings "x": want SRC:DST`}},
		{[]string{"verify", s, "--backup", "b", "--resource-modifiers", filepath.Join(f.dir, "none")}, []string{"--resource-modifiers: open"}},
		{[]string{"verify", s, "--backup", "b", "--encryption-identity", filepath.Join(f.dir, "none")}, []string{"--encryption-identity"}},
	})
}

// TestValidateImageSync: every refusal of image sync that needs no cluster.
func TestValidateImageSync(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	checkValidate(t, []validateCase{
		{[]string{"image", "sync"}, []string{"give --config FILE or --from SRC --to DST"}},
		{[]string{"image", "sync", "--from", "a.io/x"}, []string{"--from and --to go together"}},
		{[]string{"image", "sync", "--to", "b.io/x"}, []string{"--from and --to go together"}},
		{[]string{"image", "sync", "--from", "a.io/x", "--to", "b.io/x"}, nil},
		{[]string{"image", "sync", "--from", "a.io/x", "--to", "b.io/x", "--tags", "1", "--tag-regex", "^1"}, []string{"--tags and --tag-regex exclude each other"}},
		{[]string{"image", "sync", "--from", "a.io/x:1", "--to", "b.io/x", "--tags", "2"}, []string{`--from "a.io/x:1": --tags and --tag-regex want a repository, without a tag or digest`}},
		{[]string{"image", "sync", "--from", "a.io/x@sha256:" + strings.Repeat("a", 64), "--to", "b.io/x", "--tag-regex", "^1"}, []string{"--tags and --tag-regex want a repository, without a tag or digest"}},
		{[]string{"image", "sync", "--from", "a.io/x", "--to", "b.io/x", "--tag-regex", "("}, []string{`--tag-regex "(": error parsing regexp`}},
		{[]string{"image", "sync", "--from", "a.io/x", "--to", "b.io/x", "--tags", "1"}, nil},
		{[]string{"image", "sync", "--config", f.syncConfig, "--tags", "1"}, []string{"--tags and --tag-regex go with --from"}},
		{[]string{"image", "sync", "--config", f.syncConfig, "--tag-regex", "^1"}, []string{"--tags and --tag-regex go with --from"}},
		{[]string{"image", "sync", "--config", f.syncConfig}, nil},
		{[]string{"image", "sync", "--config", filepath.Join(f.dir, "none")}, []string{"--config: open"}},
		{[]string{"image", "sync", "--config", f.empty}, []string{"--config " + f.empty + ": "}},
		{[]string{"image", "sync", "--from", "a.io/x", "--to", "b.io/x", "--concurrency", "0"}, []string{"--concurrency 0: must be at least 1"}},
		{[]string{"image", "sync", "--from", "a.io/x", "--to", "b.io/x", "--platform", "linux"}, []string{`--platform: platform "linux": want os/arch[/variant]`}},
	})
}

// TestValidateScheduleCreate: every refusal of schedule create that needs no cluster.
func TestValidateScheduleCreate(t *testing.T) {
	cleanEnv(t)
	checkValidate(t, []validateCase{
		{[]string{"schedule", "create", "s"}, []string{`required flag(s) "schedule" not set`}},
		{[]string{"schedule", "create", "s", "--schedule", "bogus"}, []string{`--schedule "bogus": `}},
		{[]string{"schedule", "create", "s", "--schedule", "@every 0s"}, []string{"runs must be at least 1m0s apart"}},
		{[]string{"schedule", "create", "s", "--schedule", "@hourly", "--ttl", "-1h"}, []string{"--ttl -1h0m0s is negative (omit it to keep the backups)"}},
		{[]string{"schedule", "create", "s", "--schedule", "@hourly", "--encryption-recipient", "nope"}, []string{`--encryption-recipient: age recipient "nope": not an age public key`}},
		{[]string{"schedule", "create", "s", "--schedule", "@hourly", "--ttl", "24h", "--paused", "--default-volumes-to-fs-backup"}, nil},
		{[]string{"schedule", "create", "s", "--schedule", "@hourly", "--include-cluster-resources", "maybe"}, []string{`--include-cluster-resources (spec.includeClusterResources): Unsupported value: "maybe"`}},
	})
}

// TestValidateInstall: every refusal of install that needs no cluster.
func TestValidateInstall(t *testing.T) {
	cleanEnv(t)
	f := newRefusalFiles(t)
	checkValidate(t, []validateCase{
		{[]string{"install"}, nil},
		{[]string{"install", "--apply", "--dry-run"}, []string{"--apply and --dry-run: give one"}},
		{[]string{"install", "-n", ""}, []string{`--namespace "": a lowercase RFC 1123 label`}},
		{[]string{"install", "-n", "Ferry"}, []string{`--namespace "Ferry": a lowercase RFC 1123 label`}},
		{[]string{"install", "--image", ""}, []string{"--image is empty: name the image of the server and the node agent"}},
		{[]string{"install", "--server-requests", "cpu=abc"}, []string{"--server-requests cpu=abc: "}},
		{[]string{"install", "--node-agent-limits", "disk=1Gi"}, []string{"--node-agent-limits"}},
		{[]string{"install", "--credentials-file", f.empty}, []string{"--credentials-file needs --location-url"}},
	})
}

// TestValidateOutput: every command refuses an unknown -o.
func TestValidateOutput(t *testing.T) {
	cleanEnv(t)
	s := "--storage=file://" + t.TempDir()
	checkValidate(t, []validateCase{
		{[]string{"backup", "get", s, "-o", "xml"}, []string{`-o "xml": want table, json or yaml`}},
		{[]string{"restore", "describe", "r", s, "-o", "wide"}, []string{`-o "wide": want table, json or yaml`}},
	})
}

// TestValidateArgs: wrong arguments and unknown subcommands are refused.
func TestValidateArgs(t *testing.T) {
	cleanEnv(t)
	s := "--storage=file://" + t.TempDir()
	checkValidate(t, []validateCase{
		{[]string{"backup", "create", s}, []string{"accepts 1 arg(s), received 0"}},
		{[]string{"migrate", "extra", s}, []string{`unknown command "extra" for "ferry migrate"`}},
		{[]string{"backup", "nosuch"}, []string{`unknown command "nosuch" for "ferry backup"`}},
	})
}

// TestValidateInServerMode: FERRY_MODE=server is --server.
func TestValidateInServerMode(t *testing.T) {
	cleanEnv(t)
	t.Setenv(EnvMode, "server")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "create", "b", "--wait"}, ""},
		{[]string{"backup", "create", "b", "--storage", "file:///tmp"}, "--storage is not supported in server mode"},
		{[]string{"restore", "create", "--from-backup", "b", "--encryption-identity-secret", "age"}, ""},
		{[]string{"restore", "create", "--from-backup", "b", "--host-pods-dir", "/tmp"}, "--host-pods-dir is not supported in server mode: the node agents"},
	} {
		err := validateArgs(c.args...)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("ferry %s: %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestValidateIsPure: Validate needs nothing but the options: not the
// command, the environment, a file or a cluster.
func TestValidateIsPure(t *testing.T) {
	g := &globals{output: "table"}
	m := &migrateOptions{globals: g, name: "m1", fromContext: "a", toContext: "a", fromKubeconfig: "k", toKubeconfig: "k"}
	m.images.mode, m.images.concurrency, m.images.jobs, m.images.retries = images.ModeRecord, 1, 1, 1
	m.rspec.BackupName = "m1"
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), `name the same cluster ("a")`) {
		t.Errorf("migrate: %v", err)
	}
	m.toContext = "b"
	if err := m.Validate(); err != nil {
		t.Errorf("migrate: %v", err)
	}
	is := &imageSyncOptions{globals: g, from: "a.io/x", to: "b.io/x", tags: []string{"1"}, tagRegex: "^1"}
	is.images.concurrency, is.images.jobs, is.images.retries = 1, 1, 1
	if err := is.Validate(); err == nil || !strings.Contains(err.Error(), "--tags and --tag-regex exclude each other") {
		t.Errorf("image sync: %v", err)
	}
	sm := serverMode{on: true, changed: []string{"dry-run"}}
	if err := sm.validate(); err == nil || !strings.Contains(err.Error(), "--dry-run is not supported in server mode") {
		t.Errorf("server mode: %v", err)
	}
	sc := &scheduleCreateOptions{globals: g, cron: "@daily", ttl: -time.Hour}
	if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "--ttl -1h0m0s is negative") {
		t.Errorf("schedule create: %v", err)
	}
	// Refused here, not left to the server's FailedValidation.
	long := &scheduleCreateOptions{globals: g, cron: "@daily", s: &v1alpha1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("n", 170)}}}
	if err := long.Validate(); err == nil || !strings.Contains(err.Error(), "is too long: its backups' names would have 185 characters, more than 181") {
		t.Errorf("schedule create with a long name: %v", err)
	}
}
