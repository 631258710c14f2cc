package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub"
	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// syncBuffer is a buffer a command running in a goroutine writes while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testHub is a hub served in this process, as ferry hub serves it.
type testHub struct {
	dir, kubeconfig string
	port            int
	client          crclient.WithWatch
	// secrets reads credentials, as the hub's controllers do.
	secrets crclient.Client
	stop    func()
}

// requireHubServers skips under -short and fails outside a confined
// network, as every test that serves something does.
func requireHubServers(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a hub (-short)")
	}
	if err := testenv.RequireConfinedNetwork(); err != nil {
		t.Fatal(err)
	}
}

// startTestHub serves a hub on dir and port (0: a free one) until stop
// (also at cleanup), and waits until it is ready.
func startTestHub(t *testing.T, dir string, port int) *testHub {
	t.Helper()
	requireHubServers(t)
	s, err := hub.New(hub.Options{DataDir: dir, BindAddress: net.IPv4(127, 0, 0, 1), SecurePort: port})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("hub: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	waitHubReady(t, s.Kubeconfig)
	c, err := hubClient(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Only the hub's own identity reads credentials.
	secrets, err := crclient.New(s.LoopbackConfig(), crclient.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &testHub{dir: dir, kubeconfig: s.Kubeconfig, port: s.Port, client: c, secrets: secrets, stop: stop}
}

// waitHubReady waits until the hub's /readyz answers 200.
func waitHubReady(t *testing.T, kubeconfig string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := client.Get(cfg.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("hub at %s not ready: %v", cfg.Host, err)
	}
}

// ferry runs ferry with args and returns its exit code, stdout and stderr.
func ferry(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// writeMemberKubeconfig writes memberKubeconfigYAML and the files it
// names (real PEM: a CA whose own certificate and key serve as the
// client's), and sets pems to their contents.
func writeMemberKubeconfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := hub.LoadOrCreateCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	pems = [3]string{string(ca.PEM), string(ca.PEM), string(keyPEM)}
	for name, data := range map[string]string{"pki/ca.crt": pems[0], "pki/client.crt": pems[1], "pki/client.key": pems[2], "config": memberKubeconfigYAML,
		"bad-ca": strings.ReplaceAll(memberKubeconfigYAML, "pki/ca.crt", "config")} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "config")
}

// TestHubClusterAddAndMigrate: against a real hub, cluster add creates and
// then updates a ClusterCredential and a Cluster, and migrate --hub a
// Migration with every flag its spec carries; the hub's own refusal is
// printed as it is.
func TestHubClusterAddAndMigrate(t *testing.T) {
	cleanEnv(t)
	h := startTestHub(t, t.TempDir(), 0)
	kc := writeMemberKubeconfig(t)
	ctx := context.Background()
	addCluster(t, h, kc, "src", "certs", "https://a.example:6443", "added")
	// Added again with another context: both objects are updated.
	addCluster(t, h, kc, "src", "token", "https://b.example:6443", "updated")
	addCluster(t, h, kc, "src", "certs", "https://a.example:6443", "updated")
	addCluster(t, h, kc, "dst", "token", "https://b.example:6443", "added")
	code, stdout, stderr := ferry("hub", "cluster", "add", "dst", "--kubeconfig", kc, "--context", "token", "--hub", h.kubeconfig, "-n", "team", "-o", "yaml")
	if code != 0 || !strings.Contains(stdout, "kind: Cluster\n") || strings.Contains(stdout, "s3cr3t") {
		t.Errorf("cluster add -o yaml: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	storage := "s3://bucket?endpoint=http://127.0.0.1:9000"
	code, stdout, stderr = ferry("migrate", "--hub", h.kubeconfig, "-n", "team", "--from-cluster", "src", "--to-cluster", "dst",
		"--storage", storage, "--name", "m1", "--include-namespaces", "a*,b", "--exclude-namespaces", "c", "--include-resources", "deployments",
		"--exclude-resources", "secrets", "-l", "app=web", "--include-cluster-resources", "false", "--ttl", "24h",
		"--namespace-mappings", "a:a2", "--storage-class-mappings", "std:fast", "--existing-resource-policy", "update",
		"--images", "copy", "--image-registry-mappings", "old.io=new.io", "--verify=false", "--default-volumes-to-fs-backup")
	if code != 0 || !strings.HasPrefix(stdout, "migration m1 created in the hub (namespace team)") {
		t.Fatalf("migrate --hub: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	m := &hubv1beta1.Migration{}
	if err := h.client.Get(ctx, crclient.ObjectKey{Namespace: "team", Name: "m1"}, m); err != nil {
		t.Fatal(err)
	}
	no := false
	checkField(t, "spec.source", m.Spec.Source, hubv1beta1.ClusterReference{Cluster: "src"})
	checkField(t, "spec.target", m.Spec.Target, hubv1beta1.ClusterReference{Cluster: "dst"})
	checkField(t, "spec.storage", m.Spec.Storage, hubv1beta1.MigrationStorage{Location: storage})
	checkField(t, "spec.backup", m.Spec.Backup, hubv1beta1.MigrationBackup{
		IncludedNamespaces: []string{"a*", "b"}, ExcludedNamespaces: []string{"c"},
		IncludedResources: []string{"deployments"}, ExcludedResources: []string{"secrets"},
		LabelSelector: "app=web", IncludeClusterResources: "false", TTL: &metav1.Duration{Duration: 24 * time.Hour},
	})
	checkField(t, "spec.restore", m.Spec.Restore, hubv1beta1.MigrationRestore{
		NamespaceMapping: map[string]string{"a": "a2"}, StorageClassMapping: map[string]string{"std": "fast"}, ExistingResourcePolicy: "update",
		ExistingVolumeDataPolicy: "write",
	})
	checkField(t, "spec.images", m.Spec.Images, hubv1beta1.MigrationImages{Mode: "copy", RegistryMappings: []string{"old.io=new.io"}})
	checkField(t, "spec.volumes", m.Spec.Volumes, true)
	checkField(t, "spec.verify", m.Spec.Verify, &no)
	checkField(t, "spec.timeouts (none given: the hub's)", m.Spec.Timeouts, (*hubv1beta1.MigrationTimeouts)(nil))
	checkField(t, "status.phase", m.Status.Phase, hubv1beta1.PhasePending)

	// The flags a Migration gained in issue 29 reach its spec, through the
	// hub's API and storage.
	mods := filepath.Join(t.TempDir(), "mods.yaml")
	modRules := "version: v1\nresourceModifierRules:\n- conditions: {groupResource: configmaps}\n  patches:\n  - {operation: replace, path: /data/x, value: y}\n"
	if err := os.WriteFile(mods, []byte(modRules), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = ferry("migrate", "--hub", h.kubeconfig, "-n", "team", "--from-cluster", "src", "--to-cluster", "dst",
		"--storage", storage, "--name", "m2", "--resource-modifiers", mods, "--from-cloud", "aws", "--to-cloud", "gcp", "--dry-run",
		"--preserve-nodeports", "--restore-status", "deployments", "--existing-volume-data-policy", "keep", "--crd-timeout", "2m",
		"--preferred-version-only", "--images-required", "--backup-timeout", "90m", "--verify-timeout", "0")
	if code != 0 {
		t.Fatalf("migrate --hub with the restore flags: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if err := h.client.Get(ctx, crclient.ObjectKey{Namespace: "team", Name: "m2"}, m); err != nil {
		t.Fatal(err)
	}
	checkField(t, "m2 spec.restore", m.Spec.Restore, hubv1beta1.MigrationRestore{
		NamespaceMapping: m.Spec.Restore.NamespaceMapping, StorageClassMapping: m.Spec.Restore.StorageClassMapping, // none given
		ExistingResourcePolicy: "none", ExistingVolumeDataPolicy: "keep", PreserveNodePorts: true, RestoreStatus: []string{"deployments"}, ResourceModifiers: modRules,
		FromCloud: "aws", ToCloud: "gcp", DryRun: true, CRDTimeout: &metav1.Duration{Duration: 2 * time.Minute},
	})
	checkField(t, "m2 spec.backup.preferredVersionOnly", m.Spec.Backup.PreferredVersionOnly, true)
	checkField(t, "m2 spec.images.required", m.Spec.Images.Required, true)
	checkField(t, "m2 spec.timeouts", m.Spec.Timeouts, &hubv1beta1.MigrationTimeouts{Backup: &metav1.Duration{Duration: 90 * time.Minute}, Verify: &metav1.Duration{}})

	checkHubEncryption(t, h, storage)

	// The defaults: the hub's.
	code, stdout, stderr = ferry("migrate", "--hub", h.kubeconfig, "-n", "team", "--from-cluster", "src", "--to-cluster", "dst", "--storage", storage, "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"kind": "Migration"`) || !strings.Contains(stdout, `"name": "migrate-`) {
		t.Fatalf("migrate --hub -o json: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A Cluster the hub does not have: its field error, as it is.
	code, _, stderr = ferry("migrate", "--hub", h.kubeconfig, "-n", "team", "--from-cluster", "nosuch", "--to-cluster", "dst", "--storage", storage)
	if want := `spec.source.cluster: Not found: "nosuch"`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("migrate --hub from an unknown Cluster: exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// checkHubEncryption: migrate --hub with an identity stores it as a
// Credential (never overwriting one), points spec.encryption at it, and
// deletes it again when the hub refuses the Migration.
func checkHubEncryption(t *testing.T, h *testHub, storage string) {
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(t.TempDir(), "age.key")
	if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(name, from string) []string {
		return []string{"migrate", "--hub", h.kubeconfig, "-n", "team", "--from-cluster", from, "--to-cluster", "dst", "--storage", storage, "--name", name,
			"--encryption-recipient", id.Recipient().String(), "--encryption-identity", idFile, "--storage-credential", "s3-creds"}
	}
	code, stdout, stderr := ferry(args("m3", "src")...)
	if code != 0 || !strings.Contains(stderr, "Credential team/m3-encryption-identity") {
		t.Fatalf("migrate --hub with encryption: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	m := &hubv1beta1.Migration{}
	if err := h.client.Get(ctx, crclient.ObjectKey{Namespace: "team", Name: "m3"}, m); err != nil {
		t.Fatal(err)
	}
	checkField(t, "m3 spec.encryption", m.Spec.Encryption, hubv1beta1.Encryption{
		Recipients: []string{id.Recipient().String()}, IdentityRef: &hubv1beta1.CredentialKeyReference{Name: "m3-encryption-identity", Key: "identity"}})
	checkField(t, "m3 spec.storage.credentialRef", m.Spec.Storage.CredentialRef, &hubv1beta1.LocalObjectReference{Name: "s3-creds"})
	cred := &hubv1beta1.Credential{}
	if err := h.secrets.Get(ctx, crclient.ObjectKey{Namespace: "team", Name: "m3-encryption-identity"}, cred); err != nil {
		t.Fatal(err)
	}
	checkField(t, "Credential m3-encryption-identity data", string(cred.Data["identity"]), id.String()+"\n")
	// The same name again: the Migration exists, and its Credential stays.
	if code, _, stderr = ferry(args("m3", "src")...); code != 1 || !strings.Contains(stderr, "migration m3 already exists in the hub (namespace team)") {
		t.Errorf("migrate --hub of an existing Migration with an identity: exit %d, stderr %q", code, stderr)
	}
	if err := h.secrets.Get(ctx, crclient.ObjectKey{Namespace: "team", Name: "m3-encryption-identity"}, cred); err != nil {
		t.Errorf("the identity Credential of m3 after a refused rerun: %v", err)
	}
	// A Credential of that name without a Migration: another's, not overwritten.
	other := &hubv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Name: "m5-encryption-identity", Namespace: "team"}, Data: map[string][]byte{"identity": []byte("not ours")}}
	if err := h.client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr = ferry(args("m5", "src")...); code != 1 || !strings.Contains(stderr, "the hub already has Credential team/m5-encryption-identity") {
		t.Errorf("migrate --hub over an existing identity Credential: exit %d, stderr %q", code, stderr)
	}
	// A Migration the hub refuses leaves no Credential behind.
	if code, _, stderr = ferry(args("m4", "nosuch")...); code != 1 || !strings.Contains(stderr, "spec.source.cluster") {
		t.Errorf("migrate --hub from an unknown Cluster with encryption: exit %d, stderr %q", code, stderr)
	}
	err = h.secrets.Get(ctx, crclient.ObjectKey{Namespace: "team", Name: "m4-encryption-identity"}, &hubv1beta1.Credential{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the refused Migration's identity Credential: %v, want deleted", err)
	}
}

func checkField(t *testing.T, field string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: %+v; want %+v", field, got, want)
	}
}

// addCluster runs hub cluster add name for context of kc, into namespace
// team, and checks the ClusterCredential and the Cluster in the hub.
func addCluster(t *testing.T, h *testHub, kc, name, context, server, verb string) {
	t.Helper()
	code, stdout, stderr := ferry("hub", "cluster", "add", name, "--kubeconfig", kc, "--context", context, "--hub", h.kubeconfig, "-n", "team")
	if want := "cluster " + name + " " + verb + " (context " + context + ", server " + server + ")\n"; code != 0 || stdout != want {
		t.Fatalf("cluster add: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	if strings.Contains(stdout+stderr, "s3cr3t") || strings.Contains(stdout+stderr, "PRIVATE KEY") {
		t.Errorf("cluster add printed a secret: %q %q", stdout, stderr)
	}
	want, err := loadMemberKubeconfig(kc, context)
	if err != nil {
		t.Fatal(err)
	}
	key := crclient.ObjectKey{Namespace: "team", Name: name}
	cred := &hubv1beta1.ClusterCredential{}
	if err := h.secrets.Get(t.Context(), key, cred); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cred.Kubeconfig, want.data) {
		t.Errorf("ClusterCredential %s kubeconfig:\n%s\nwant:\n%s", name, cred.Kubeconfig, want.data)
	}
	cl := &hubv1beta1.Cluster{}
	if err := h.client.Get(t.Context(), key, cl); err != nil {
		t.Fatal(err)
	}
	checkField(t, "Cluster "+name+" spec", cl.Spec, hubv1beta1.ClusterSpec{CredentialRef: hubv1beta1.LocalObjectReference{Name: name}, Context: context})
}

// TestHubMigrateWait: migrate --hub --wait prints each phase the
// Migration's status goes through (set here through the status
// subresource, as the hub's controller sets it), then its counts, report,
// reason and message, and exits as the last phase says; it follows the
// Migration across a restart of the hub.
func TestHubMigrateWait(t *testing.T) {
	cleanEnv(t)
	h := startTestHub(t, t.TempDir(), 0)
	kc := writeMemberKubeconfig(t)
	for _, name := range []string{"src", "dst"} {
		if code, _, stderr := ferry("hub", "cluster", "add", name, "--kubeconfig", kc, "--context", "token", "--hub", h.kubeconfig); code != 0 {
			t.Fatalf("cluster add %s: %s", name, stderr)
		}
	}
	final := hubv1beta1.MigrationStatus{Counts: hubv1beta1.MigrationCounts{BackedUp: 12, Restored: 10, Failed: 1, Skipped: 1},
		ReportLocation: "s3://bucket/reports/m", Reason: "ItemsFailed", Message: "1 item failed to restore"}
	for _, c := range []struct {
		name    string
		last    hubv1beta1.MigrationPhase
		code    int
		restart bool
	}{
		{"done", hubv1beta1.PhaseCompleted, ExitOK, false},
		{"partly", hubv1beta1.PhasePartiallyFailed, ExitPartiallyFailed, false},
		{"failed", hubv1beta1.PhaseFailed, ExitFailed, false},
		// A hub stopped cleanly ends its watches only at its shutdown
		// timeout, a minute.
		{"restarted", hubv1beta1.PhaseCompleted, ExitOK, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- Main([]string{"migrate", "--hub", h.kubeconfig, "--from-cluster", "src", "--to-cluster", "dst", "--storage", "file:///data",
					"--name", c.name, "--wait", "--wait-timeout", "2m"}, &stdout, &stderr)
			}()
			waitOutput(t, &stderr, "migration "+c.name+": Pending\n", done)
			for _, p := range []hubv1beta1.MigrationPhase{hubv1beta1.PhaseBackup, hubv1beta1.PhaseRestore} {
				setStatus(t, h.client, c.name, hubv1beta1.MigrationStatus{Phase: p})
				waitOutput(t, &stderr, "migration "+c.name+": "+string(p)+"\n", done)
			}
			if c.restart {
				start := time.Now()
				h.stop()
				t.Logf("hub stopped in %s", time.Since(start))
				h = startTestHub(t, h.dir, h.port)
				t.Logf("hub restarted in %s", time.Since(start))
			}
			st := final
			st.Phase = c.last
			setStatus(t, h.client, c.name, st)
			var code int
			select {
			case code = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("migrate --wait still running; stderr %q", stderr.String())
			}
			wantErr := "migration " + c.name + ": Pending\nmigration " + c.name + ": Backup\nmigration " + c.name + ": Restore\nmigration " + c.name + ": " + string(c.last) + "\n"
			if code != c.code || !strings.HasPrefix(stderr.String(), wantErr) {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), c.code, wantErr)
			}
			wantOut := "Migration " + c.name + " " + string(c.last) + ": 12 backed up, 10 restored, 1 skipped, 1 failed\nReport: s3://bucket/reports/m\nReason: ItemsFailed\nMessage: 1 item failed to restore\n"
			if stdout.String() != wantOut {
				t.Errorf("stdout %q; want %q", stdout.String(), wantOut)
			}
		})
	}
}

// waitOutput waits until b holds want, failing if the command ended first.
func waitOutput(t *testing.T, b *syncBuffer, want string, done chan int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.String(), want) {
		select {
		case code := <-done:
			t.Fatalf("migrate ended (exit %d) before printing %q: %q", code, want, b.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", want, b.String())
		}
	}
}

// setStatus sets Migration name's status through the status subresource,
// as the hub's controller does.
func setStatus(t *testing.T, c crclient.Client, name string, st hubv1beta1.MigrationStatus) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		m := &hubv1beta1.Migration{}
		if err := c.Get(ctx, crclient.ObjectKey{Namespace: metav1.NamespaceDefault, Name: name}, m); err != nil {
			return false, err
		}
		m.Status = st
		if err := c.Status().Update(ctx, m); err != nil {
			t.Logf("status update: %v", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("setting the status of %s: %v", name, err)
	}
}
