package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/hub/controller"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// hubProc is a `ferry hub` child process on its data dir.
type hubProc struct {
	cmd     *exec.Cmd
	log     bytes.Buffer
	dataDir string
	args    []string
	env     []string // added to the environment
}

// startHub runs `ferry hub` on dataDir (a free port, 3s Migration leases)
// with extra flags, and waits until it is ready.
func startHub(t *testing.T, dataDir string, extra ...string) *hubProc {
	t.Helper()
	p := &hubProc{dataDir: dataDir, args: append([]string{"hub", "--data-dir", dataDir, "--secure-port", "0", "--migration-lease-duration", "3s", "-v"}, extra...)}
	p.start(t)
	return p
}

func (p *hubProc) start(t *testing.T) {
	t.Helper()
	_ = os.Remove(filepath.Join(p.dataDir, "admin.kubeconfig"))
	p.cmd = exec.Command(ferryBin, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.log.Reset()
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := p.cmd
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(time.Minute)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dataDir, "admin.kubeconfig"))
		if err != nil {
			continue
		}
		rc, err := rest.UnversionedRESTClientFor(withCodec(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if body, err := rc.Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil && string(body) == "ok" {
			return
		}
	}
	t.Fatalf("ferry hub did not become ready in a minute:\n%s", p.log.String())
}

// stop SIGTERMs the hub and waits for it to end.
func (p *hubProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// kill SIGKILLs the hub.
func (p *hubProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func withCodec(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// hubClient is a controller-runtime client of the hub, with watch.
func (p *hubProc) client(t *testing.T) (crclient.WithWatch, *rest.Config) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := crclient.NewWithWatch(cfg, crclient.Options{Scheme: controller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// addCluster creates member cluster c's ClusterCredential and Cluster in
// the hub's default namespace.
func addCluster(t *testing.T, c crclient.Client, name, kubeconfig string) {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	meta := metav1.ObjectMeta{Namespace: "default", Name: name}
	if err := c.Create(ctx, &v1beta1.ClusterCredential{ObjectMeta: meta, Kubeconfig: data}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &v1beta1.Cluster{ObjectMeta: meta, Spec: v1beta1.ClusterSpec{CredentialRef: v1beta1.LocalObjectReference{Name: name}}}); err != nil {
		t.Fatal(err)
	}
}

// newMigration is a Migration of namespaces from src to dst through storage.
func newMigration(name, storage string, namespaces ...string) *v1beta1.Migration {
	return &v1beta1.Migration{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1beta1.MigrationSpec{
			Source:  v1beta1.ClusterReference{Cluster: "src"},
			Target:  v1beta1.ClusterReference{Cluster: "dst"},
			Storage: v1beta1.MigrationStorage{Location: storage},
			Backup:  v1beta1.MigrationBackup{IncludedNamespaces: namespaces},
		},
	}
}

// watchPhases creates m and watches it until it ends or until stop says
// so, returning every phase it was seen in, in order.
func watchPhases(t *testing.T, c crclient.WithWatch, m *v1beta1.Migration, timeout time.Duration, stop func(*v1beta1.Migration) bool) ([]v1beta1.MigrationPhase, *v1beta1.Migration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := c.Watch(ctx, &v1beta1.MigrationList{}, crclient.InNamespace(m.Namespace), crclient.MatchingFields{"metadata.name": m.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if m.ResourceVersion == "" {
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var phases []v1beta1.MigrationPhase
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("migration %s did not end within %s; phases seen: %v", m.Name, timeout, phases)
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of migration %s closed; phases seen: %v", m.Name, phases)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", ev.Object)
			}
			got := ev.Object.(*v1beta1.Migration)
			if p := got.Status.Phase; p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
				phases = append(phases, p)
			}
			if terminalPhase(got.Status.Phase) || (stop != nil && stop(got)) {
				return phases, got
			}
		}
	}
}

func terminalPhase(p v1beta1.MigrationPhase) bool {
	return p == v1beta1.PhaseCompleted || p == v1beta1.PhaseFailed || p == v1beta1.PhasePartiallyFailed
}

// TestHubMigration: the hub (embedded etcd) carries a corpus Migration
// between two real clusters through its phases to Completed; the target
// matches the source object by object, and the hub serves the report.
// On the same clusters, hub Backups, Restores, Schedules and
// BackupStorageLocations run too (hubBackupKinds).
func TestHubMigration(t *testing.T) { testHubMigration(t, nil) }

// TestHubMigrationExternalEtcd is TestHubMigration with --etcd-servers.
func TestHubMigrationExternalEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	url, err := testenv.StartEtcd(t)
	if err != nil {
		t.Fatal(err)
	}
	testHubMigration(t, []string{"--etcd-servers", url})
}

func testHubMigration(t *testing.T, hubFlags []string) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	e := newEnv(t)
	sets := []corpusSet{corpus[1], corpus[3]} // istio-bookinfo, k8s-examples-guestbook
	objs := applyCorpus(t, e, sets)
	h := startHub(t, t.TempDir(), hubFlags...)
	c, cfg := h.client(t)
	addCluster(t, c, "src", writeContextKubeconfig(t, e.src))
	addCluster(t, c, "dst", writeContextKubeconfig(t, e.dst))
	var kinds *hubBackupKinds
	if hubFlags == nil {
		kinds = startHubBackupKinds(t, c, e, sets[1].namespace, objsIn(objs, sets[1].namespace))
	}

	m := newMigration("corpus", e.storage, sets[0].namespace, sets[1].namespace)
	phases, got := watchPhases(t, c, m, 5*time.Minute, nil)
	want := []v1beta1.MigrationPhase{v1beta1.PhasePending, v1beta1.PhaseBackup, v1beta1.PhaseImages, v1beta1.PhaseVolumes, v1beta1.PhaseRestore, v1beta1.PhaseVerify, v1beta1.PhaseCompleted}
	if !slices.Equal(phases, want) {
		t.Fatalf("phases %v, want %v; status %+v\nhub log:\n%s", phases, want, got.Status, h.log.String())
	}
	st := got.Status
	if st.Counts.BackedUp == 0 || st.Counts.Restored == 0 || st.Counts.Failed != 0 || st.Lease != nil || st.CompletionTime == nil || st.ReportLocation != reportPath("corpus") {
		t.Errorf("status of the completed migration: %+v", st)
	}
	checkTarget(t, e, "corpus", objs, nil)
	checkHubReport(t, cfg, "corpus", len(objs))
	for _, name := range []string{"src", "dst"} {
		cl := waitReachable(t, c, name)
		if r := meta.FindStatusCondition(cl.Status.Conditions, v1beta1.ClusterConditionReachable); r.Status != metav1.ConditionTrue || cl.Status.ServerVersion != "v1.37.2" {
			t.Errorf("Cluster %s: Reachable %+v, serverVersion %q; want True, v1.37.2", name, r, cl.Status.ServerVersion)
		}
	}
	if kinds != nil {
		t.Run("backup kinds", kinds.check)
		t.Run("same cluster under two addresses", func(t *testing.T) { checkSameCluster(t, c, e) })
		t.Run("same results by the three front ends", func(t *testing.T) { checkSameResults(t, c, e, sets[1].namespace, objsIn(objs, sets[1].namespace)) })
		t.Run("restore flags", func(t *testing.T) {
			checkHubRestoreFlags(t, c, cfg, e, sets[1].namespace, len(objsIn(objs, sets[1].namespace)))
		})
		t.Run("location credentials, encryption and verify", func(t *testing.T) {
			checkHubLocationAccess(t, c, e, sets[1].namespace, objsIn(objs, sets[1].namespace))
		})
		t.Run("step deadlines", func(t *testing.T) { checkHubDeadlines(t, c, e, sets[1].namespace) })
		t.Run("pre-flight only", func(t *testing.T) { checkHubPreflight(t, c, e) })
		t.Run("metrics", func(t *testing.T) { checkHubMetrics(t, cfg) })
		t.Run("events", func(t *testing.T) {
			checkHubEvents(t, cfg, map[[2]string][]string{
				{"Migration", "corpus"}:             {"Started", "Completed"},
				{"Backup", "sealed"}:                {"Started", "Completed"},
				{"Restore", "sealed"}:               {"Started", "Verified", "Completed"},
				{"BackupStorageLocation", "broken"}: {"Unavailable"},
			})
		})
	}
}

// checkHubDeadlines: a Migration whose backup, restore or verification
// does not end within its spec.timeouts fails, naming the field; the one
// cut short in its restore wrote nothing to the target (its namespace is
// mapped to one that stays absent).
func checkHubDeadlines(t *testing.T, c crclient.WithWatch, e *env, namespace string) {
	for _, step := range []string{"backup", "restore", "verify"} {
		m := newMigration("late-"+step, e.storage, namespace)
		m.Spec.Restore.NamespaceMapping = map[string]string{namespace: "late-" + step}
		short := &metav1.Duration{Duration: time.Nanosecond}
		switch step {
		case "backup":
			m.Spec.Timeouts = &v1beta1.MigrationTimeouts{Backup: short}
		case "restore":
			m.Spec.Timeouts = &v1beta1.MigrationTimeouts{Restore: short}
		case "verify":
			m.Spec.Timeouts = &v1beta1.MigrationTimeouts{Verify: short}
		}
		_, got := watchPhases(t, c, m, 3*time.Minute, nil)
		what := map[string]string{"backup": "backup", "restore": "restore", "verify": "verification"}[step]
		want := "spec.timeouts." + step + ": the " + what + " did not end within 1ns"
		if got.Status.Phase != v1beta1.PhaseFailed || !strings.Contains(got.Status.Message, want) {
			t.Errorf("Migration %s: %s: %s, want Failed naming %q", m.Name, got.Status.Phase, got.Status.Message, want)
		}
		if step == "restore" {
			if _, err := kubernetes.NewForConfigOrDie(e.dst.Config).CoreV1().Namespaces().Get(context.Background(), "late-restore", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the Migration cut short before its restore wrote namespace late-restore: %v", err)
			}
		}
	}
}

// checkHubPreflight: a Migration of spec.preflightOnly runs the engine's
// pre-flight (as ferry migrate --preflight): a workload the target's
// PodSecurity level refuses is a blocker in status.preflight, the
// Migration ends PartiallyFailed (PreflightBlocked), and nothing reaches
// the target.
func checkHubPreflight(t *testing.T, c crclient.WithWatch, e *env) {
	ctx := context.Background()
	src, dst := kubernetes.NewForConfigOrDie(e.src.Config), kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, src, "pf")
	if _, err := dst.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pf-target",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root, one := int64(0), int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: appsv1.DeploymentSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "root"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "root"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{RunAsUser: &root}}}}}}}
	if _, err := src.AppsV1().Deployments("pf").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := newMigration("preflight", e.storage, "pf")
	m.Spec.Restore.NamespaceMapping = map[string]string{"pf": "pf-target"}
	m.Spec.Images.Mode = "none"
	m.Spec.PreflightOnly = true
	phases, got := watchPhases(t, c, m, 3*time.Minute, nil)
	want := []v1beta1.MigrationPhase{v1beta1.PhasePending, v1beta1.PhasePreflight, v1beta1.PhasePartiallyFailed}
	if !slices.Equal(phases, want) || got.Status.Reason != "PreflightBlocked" {
		t.Fatalf("phases %v, reason %s; want %v, PreflightBlocked; status %+v", phases, got.Status.Reason, want, got.Status)
	}
	p := got.Status.Preflight
	if p == nil || p.Blockers == 0 || p.Objects == 0 || p.Estimate == nil || len(p.Risks) == 0 {
		t.Fatalf("status.preflight %+v", p)
	}
	found := false
	for _, r := range p.Risks {
		found = found || r.Check == "pod-security" && r.Severity == "blocker" && slices.Contains(r.Objects, "deployments.apps pf-target/root")
	}
	if !found {
		t.Errorf("status.preflight.risks %+v: no pod-security blocker naming deployments.apps pf-target/root", p.Risks)
	}
	if _, err := dst.AppsV1().Deployments("pf-target").Get(ctx, "root", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pre-flight wrote the Deployment into the target: %v", err)
	}
}

// checkHubMetrics: the hub's /metrics has the metrics server mode has
// (pkg/metrics, one set), counting what this hub ran.
func checkHubMetrics(t *testing.T, cfg *rest.Config) {
	rc, err := rest.UnversionedRESTClientFor(withCodec(cfg))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`ferry_migrations_total{phase="Completed"}`, `ferry_migrations_total{phase="Failed"}`, `ferry_backups_total{phase="Completed"}`,
		`ferry_restores_total{phase="Completed"}`, `ferry_restore_items_total{outcome="created"}`, `ferry_storage_location_available{location="default/primary"}`, "ferry_migration_duration_seconds_count"} {
		i := bytes.Index(raw, []byte(want))
		if i < 0 {
			t.Errorf("/metrics has no %s", want)
			continue
		}
		line, _, _ := bytes.Cut(raw[i:], []byte("\n"))
		if f := bytes.Fields(line); len(f) != 2 || string(f[1]) == "0" {
			t.Errorf("/metrics: %q, want a count above 0", line)
		}
	}
	if !bytes.Contains(raw, []byte(`ferry_storage_location_available{location="default/broken"} 0`)) {
		t.Errorf("/metrics does not say that location default/broken is unavailable")
	}
}

// checkSameResults: one namespace migrated by ferry migrate, by a hub
// Migration and by server mode (each into a namespace of its own in dst)
// gives the same objects in the target, checked object by object, and the
// same report counts, each report kept in the location (pkg/migration,
// one sequence, one verification).
func checkSameResults(t *testing.T, c crclient.WithWatch, e *env, namespace string, objs []applied) {
	ctx := context.Background()
	r := e.run(t, "migrate", "--from-context", "src", "--to-context", "dst", "--name", "same-cli", "--include-namespaces", namespace,
		"--namespace-mappings", namespace+":"+namespace+"-cli", "--report-dir", t.TempDir())
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	m := newMigration("same-hub", e.storage, namespace)
	m.Spec.Restore.NamespaceMapping = map[string]string{namespace: namespace + "-hub-same"}
	if _, got := watchPhases(t, c, m, 3*time.Minute, nil); got.Status.Phase != v1beta1.PhaseCompleted {
		t.Fatalf("Migration same-hub: %+v", got.Status)
	}
	checkTarget(t, e, "same-cli", objs, map[string]string{namespace: namespace + "-cli"})
	checkTarget(t, e, "same-hub", objs, map[string]string{namespace: namespace + "-hub-same"})
	loc, err := store.Open(ctx, e.storage)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	summary := func(name string) map[string]int {
		t.Helper()
		raw, err := migration.OpenReport(ctx, loc, name, false)
		if err != nil {
			t.Fatalf("the report of %s in the location: %v", name, err)
		}
		var v struct {
			Summary map[string]int `json:"summary"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v.Summary
	}
	if cli, hub := summary("same-cli"), summary("same-hub"); !maps.Equal(cli, hub) || cli["objects"] < len(objs) {
		t.Errorf("report counts: ferry migrate %v, the hub %v; want the same, with at least %d objects", cli, hub, len(objs))
	}
	migrateByServerMode(t, e, namespace)
	checkTarget(t, e, "same-server", objs, map[string]string{namespace: namespace + "-server"})
	if cli, srv := summary("same-cli"), summary("same-server"); !maps.Equal(cli, srv) {
		t.Errorf("report counts: ferry migrate %v, server mode %v; want the same", cli, srv)
	}
}

// migrateByServerMode moves namespace with server mode: a ferry server
// per cluster (installed with the same location), a Backup in the source
// and a Restore with spec.verify in the target, both named same-server.
func migrateByServerMode(t *testing.T, e *env, namespace string) {
	t.Helper()
	kcs := map[string]string{"src": writeContextKubeconfig(t, e.src), "dst": writeContextKubeconfig(t, e.dst)}
	for _, name := range []string{"src", "dst"} {
		if r := ferry(t, nil, "install", "--apply", "--no-node-agent", "--location-url", e.storage, "--kubeconfig", kcs[name]); r.code != 0 {
			t.Fatalf("install --apply in %s: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
		}
		startServer(t, kcs[name])
	}
	r := ferry(t, nil, "backup", "create", "same-server", "--server", "--wait", "--include-namespaces", namespace, "--kubeconfig", kcs["src"])
	if r.code != 0 {
		t.Fatalf("backup create --server: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = ferry(t, nil, "restore", "create", "same-server", "--from-backup", "same-server", "--server", "--wait", "--verify",
		"--namespace-mappings", namespace+":"+namespace+"-server", "--kubeconfig", kcs["dst"])
	if r.code != 0 || !strings.Contains(r.stdout, "report kept in the location: restores/same-server/report.json") {
		t.Fatalf("restore create --server --verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// checkHubRestoreFlags: a Migration with resource modifiers, cloud
// profiles and the other restore fields ferry migrate has (issue 29)
// completes, and its verification, which applies the same modifiers and
// profiles, finds the target matching object by object; the modifier's
// change is in the target.
func checkHubRestoreFlags(t *testing.T, c crclient.WithWatch, cfg *rest.Config, e *env, namespace string, n int) {
	ctx := context.Background()
	m := newMigration("shaped", e.storage, namespace)
	m.Spec.Restore = v1beta1.MigrationRestore{
		NamespaceMapping: map[string]string{namespace: namespace + "-shaped"},
		ResourceModifiers: "version: v1\nresourceModifierRules:\n- conditions: {groupResource: deployments.apps}\n" +
			"  patches:\n  - {operation: add, path: /metadata/labels/moved-by, value: hub}\n",
		FromCloud: "aws", ToCloud: "gcp", PreserveNodePorts: true, ExistingVolumeDataPolicy: "keep",
		CRDTimeout: &metav1.Duration{Duration: 30 * time.Second},
	}
	m.Spec.Backup.PreferredVersionOnly = true
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	key := &v1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Name: "age-key", Namespace: "default"}, Data: map[string][]byte{"key.txt": []byte(id.String() + "\n")}}
	if err := c.Create(ctx, key); err != nil {
		t.Fatal(err)
	}
	m.Spec.Encryption = v1beta1.Encryption{Recipients: []string{id.Recipient().String()}, IdentityRef: &v1beta1.CredentialKeyReference{Name: "age-key", Key: "key.txt"}}
	_, got := watchPhases(t, c, m, 3*time.Minute, nil)
	if got.Status.Phase != v1beta1.PhaseCompleted {
		t.Fatalf("Migration with modifiers, cloud profiles and encryption: %+v", got.Status)
	}
	// The report is read back through the Migration's identity; the
	// backup, its records and the report are sealed in the location.
	checkHubReport(t, cfg, "shaped", n)
	sealed := checkSealed(t, filepath.Join(strings.TrimPrefix(e.storage, "file://"), "backups", "shaped"), nil, "ferry-backup.json", "ferry-backup-started.json")
	if !sealed["shaped.tar.gz"] {
		t.Errorf("Migration shaped: the archive is not encrypted (sealed: %v)", sealed)
	}
	checkHubCredentialRefusals(t, c, e, namespace)
	deps, err := kubernetes.NewForConfigOrDie(e.dst.Config).AppsV1().Deployments(namespace+"-shaped").List(ctx, metav1.ListOptions{})
	if err != nil || len(deps.Items) == 0 {
		t.Fatalf("restored Deployments in %s-shaped: %v, %d", namespace, err, len(deps.Items))
	}
	for _, d := range deps.Items {
		if d.Labels["moved-by"] != "hub" {
			t.Errorf("Deployment %s: labels %v, want the modifier's moved-by: hub", d.Name, d.Labels)
		}
	}
}

// checkHubCredentialRefusals: a Migration whose Credentials are missing
// or wrong fails with the reason and the field, before anything is
// written: an identity that matches no recipient, a storage Credential
// that is not there, and one with keys the location's scheme does not
// take (file:// takes none: the hub used the Credential, not its own).
func checkHubCredentialRefusals(t *testing.T, c crclient.WithWatch, e *env, namespace string) {
	ctx := context.Background()
	creds := &v1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Name: "s3-keys", Namespace: "default"},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA0"), "AWS_SECRET_ACCESS_KEY": []byte("s3cr3t")}}
	if err := c.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	empty := &v1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Name: "s3-empty", Namespace: "default"},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": {}, "AWS_SECRET_ACCESS_KEY": []byte("s3cr3t")}}
	if err := c.Create(ctx, empty); err != nil {
		t.Fatal(err)
	}
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, reason, message string
		edit                  func(*v1beta1.Migration)
	}{
		{"wrong-identity", "InvalidSpec", "spec.encryption.identityRef: none of the age identities matches", func(m *v1beta1.Migration) {
			m.Spec.Encryption = v1beta1.Encryption{Recipients: []string{other.Recipient().String()}, IdentityRef: &v1beta1.CredentialKeyReference{Name: "age-key", Key: "key.txt"}}
		}},
		{"missing-key", "InvalidCredential", `spec.encryption.identityRef: Credential "age-key" has no key "nope"`, func(m *v1beta1.Migration) {
			m.Spec.Encryption = v1beta1.Encryption{IdentityRef: &v1beta1.CredentialKeyReference{Name: "age-key", Key: "nope"}}
		}},
		{"no-storage-credential", "CredentialNotFound", `spec.storage.credentialRef: Credential "absent" not found`, func(m *v1beta1.Migration) {
			m.Spec.Storage.CredentialRef = &v1beta1.LocalObjectReference{Name: "absent"}
		}},
		{"empty-credential", "InvalidCredential", `spec.storage.credentialRef: Credential "s3-empty": key AWS_ACCESS_KEY_ID is empty`, func(m *v1beta1.Migration) {
			m.Spec.Storage.CredentialRef = &v1beta1.LocalObjectReference{Name: "s3-empty"}
		}},
		{"file-credential", "InvalidCredential", `spec.storage.credentialRef: Credential "s3-keys"`, func(m *v1beta1.Migration) {
			m.Spec.Storage.CredentialRef = &v1beta1.LocalObjectReference{Name: "s3-keys"}
		}},
	}
	loc, err := store.Open(ctx, e.storage)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	for _, tc := range cases {
		m := newMigration(tc.name, e.storage, namespace)
		tc.edit(m)
		_, got := watchPhases(t, c, m, time.Minute, nil)
		if got.Status.Phase != v1beta1.PhaseFailed || got.Status.Reason != tc.reason || !strings.Contains(got.Status.Message, tc.message) {
			t.Errorf("Migration %s: %s %s %q; want Failed, %s, %q", tc.name, got.Status.Phase, got.Status.Reason, got.Status.Message, tc.reason, tc.message)
		}
		if _, err := loc.GetBackup(ctx, tc.name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Migration %s: its backup %v, want none written", tc.name, err)
		}
	}
}

// checkSameCluster: a Migration whose target is its source under another
// address (localhost for 127.0.0.1) is refused by its kube-system UID,
// as `ferry migrate` refuses it (pkg/migration.CheckClusters), before
// anything is written.
func checkSameCluster(t *testing.T, c crclient.WithWatch, e *env) {
	alias := &testenv.Cluster{Name: "src-alias", Config: rest.CopyConfig(e.src.Config)}
	alias.Config.Host = strings.Replace(alias.Config.Host, "127.0.0.1", "localhost", 1)
	if alias.Config.Host == e.src.Config.Host {
		t.Fatalf("source %s: no 127.0.0.1 to write as localhost", e.src.Config.Host)
	}
	addCluster(t, c, "src-alias", writeContextKubeconfig(t, alias))
	m := newMigration("same", e.storage, "default")
	m.Spec.Target.Cluster = "src-alias"
	_, got := watchPhases(t, c, m, time.Minute, nil)
	if got.Status.Phase != v1beta1.PhaseFailed || got.Status.Reason != "SameCluster" || !strings.Contains(got.Status.Message, "same cluster") {
		t.Fatalf("Migration to the source under another address: %+v; want Failed, SameCluster", got.Status)
	}
	r := ferry(t, nil, "migrate", "--from-kubeconfig", writeContextKubeconfig(t, e.src), "--to-kubeconfig", writeContextKubeconfig(t, alias),
		"--storage", e.storage, "--name", "same-cli", "--include-namespaces", "default")
	if r.code != 1 || !strings.Contains(r.stderr, "same cluster") {
		t.Errorf("migrate to the source under another address: exit %d, want 1 naming the same cluster\n%s", r.code, r.stderr)
	}
	loc, err := store.Open(context.Background(), e.storage)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	for _, name := range []string{"same", "same-cli"} {
		if _, err := loc.GetBackup(context.Background(), name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused migration %s: its backup %v, want none written", name, err)
		}
	}
}

// objsIn are the objects of objs in namespace.
func objsIn(objs []applied, namespace string) []applied {
	var out []applied
	for _, a := range objs {
		if a.obj.GetNamespace() == namespace {
			out = append(out, a)
		}
	}
	return out
}

// waitReachable waits until the hub checked Cluster name, and returns it.
func waitReachable(t *testing.T, c crclient.Client, name string) *v1beta1.Cluster {
	t.Helper()
	var cl v1beta1.Cluster
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, &cl); err != nil {
			t.Fatal(err)
		}
		if meta.FindStatusCondition(cl.Status.Conditions, v1beta1.ClusterConditionReachable) != nil {
			return &cl
		}
	}
	t.Fatalf("Cluster %s was not checked within a minute: %+v", name, cl.Status)
	return nil
}

// writeContextKubeconfig writes a kubeconfig of cluster c alone.
func writeContextKubeconfig(t *testing.T, c *testenv.Cluster) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), c.Name+".kubeconfig")
	if err := testenv.WriteKubeconfig(p, c); err != nil {
		t.Fatal(err)
	}
	return p
}

// reportPath is the subresource where the hub serves Migration name's
// report.
func reportPath(name string) string {
	return "/apis/ferry.dev/v1beta1/namespaces/default/migrations/" + name + "/report"
}

// checkHubReport fetches the report subresource of Migration name as HTML
// and JSON: the report says every one of at least n objects matched.
func checkHubReport(t *testing.T, cfg *rest.Config, name string, n int) {
	t.Helper()
	rc, err := rest.UnversionedRESTClientFor(withCodec(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	page, err := rc.Get().AbsPath(reportPath(name)).SetHeader("Accept", "text/html, */*;q=0.8").DoRaw(ctx)
	if err != nil || !bytes.Contains(page, []byte("<html")) || !bytes.Contains(page, []byte(name)) {
		t.Fatalf("GET %s as text/html: %v\n%.300s", reportPath(name), err, page)
	}
	raw, err := rc.Get().AbsPath(reportPath(name)).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s: %v", reportPath(name), err)
	}
	var v struct {
		Summary struct{ Objects, Matched, Differ, Missing, Unexpected int } `json:"summary"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("report JSON: %v\n%.300s", err, raw)
	}
	s := v.Summary
	if s.Objects < n || s.Differ != 0 || s.Missing != 0 || s.Unexpected != 0 {
		t.Errorf("report summary %+v, want at least %d objects, none different or missing", s, n)
	}
	body, err := rc.Get().AbsPath(reportPath("no-such-migration")).DoRaw(ctx)
	if !apierrors.IsNotFound(err) || !strings.Contains(string(body), `migrations.ferry.dev \"no-such-migration\" not found`) {
		t.Errorf("GET the report of a missing migration: %v %q, want 404 naming it", err, body)
	}
}

// TestHubKilledMidMigration SIGKILLs the hub while a Migration is in a
// step and starts it again on its data dir: every object is still there,
// and the Migration ends Failed with reason HubInterrupted naming the
// step; it is never seen Completed.
func TestHubKilledMidMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	e := newEnv(t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	createNamespace(t, src, "big")
	createConfigMaps(t, src, "big", 3000)
	h := startHub(t, t.TempDir())
	c, _ := h.client(t)
	addCluster(t, c, "src", writeContextKubeconfig(t, e.src))
	addCluster(t, c, "dst", writeContextKubeconfig(t, e.dst))
	m := newMigration("killed", e.storage, "big")
	phases, got := watchPhases(t, c, m, 3*time.Minute, func(m *v1beta1.Migration) bool {
		return m.Status.Phase == v1beta1.PhaseRestore
	})
	if got.Status.Phase != v1beta1.PhaseRestore {
		t.Fatalf("migration ended before it could be killed in its restore: %v, %+v", phases, got.Status)
	}
	time.Sleep(300 * time.Millisecond) // into the restore's writes
	h.kill()
	killedAt := time.Now()

	h.start(t)
	c, _ = h.client(t)
	var after v1beta1.Migration
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "killed"}, &after); err != nil {
		t.Fatal(err)
	}
	if after.UID != got.UID || after.Spec.Source.Cluster != "src" || len(after.Spec.Backup.IncludedNamespaces) != 1 {
		t.Fatalf("the Migration changed across the kill: %+v", after)
	}
	for name, member := range map[string]*testenv.Cluster{"src": e.src, "dst": e.dst} {
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, &v1beta1.Cluster{}); err != nil {
			t.Errorf("Cluster %s after the kill: %v", name, err)
		}
		// Nobody but the hub's controllers reads credentials: one that
		// exists refuses a create.
		data, err := os.ReadFile(writeContextKubeconfig(t, member))
		if err != nil {
			t.Fatal(err)
		}
		again := &v1beta1.ClusterCredential{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Kubeconfig: data}
		if err := c.Create(context.Background(), again); !apierrors.IsAlreadyExists(err) {
			t.Errorf("ClusterCredential %s after the kill: a create got %v, want AlreadyExists", name, err)
		}
	}
	more, end := watchPhases(t, c, &after, 2*time.Minute, nil)
	if end.Status.Phase != v1beta1.PhaseFailed || end.Status.Reason != "HubInterrupted" || !strings.Contains(end.Status.Message, "during step Restore") {
		t.Fatalf("after the restart: phases %v, status %+v\nhub log:\n%s", more, end.Status, h.log.String())
	}
	if slices.Contains(append(phases, more...), v1beta1.PhaseCompleted) {
		t.Errorf("the killed migration was shown Completed: %v then %v", phases, more)
	}
	t.Logf("failed %s after the kill: %s", time.Since(killedAt).Round(100*time.Millisecond), end.Status.Message)
}

// TestHubUnreachableCluster: a Cluster whose kubeconfig names an address
// nothing answers on fails the Migration with that reason, within the
// connect timeout; one whose kubeconfig runs an exec plugin is refused.
func TestHubUnreachableCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	e := newEnv(t)
	h := startHub(t, t.TempDir())
	c, _ := h.client(t)
	addCluster(t, c, "src", writeContextKubeconfig(t, e.src))
	dead := writeContextKubeconfig(t, e.dst)
	kc, err := clientcmd.LoadFromFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		cl.Server = "https://127.0.0.1:1" // nothing listens there
	}
	if err := clientcmd.WriteToFile(*kc, dead); err != nil {
		t.Fatal(err)
	}
	addCluster(t, c, "dst", dead)
	_, got := watchPhases(t, c, newMigration("unreachable", e.storage, "default"), time.Minute, nil)
	if got.Status.Phase != v1beta1.PhaseFailed || got.Status.Reason != "TargetUnreachable" ||
		!strings.Contains(got.Status.Message, "spec.target.cluster") || !strings.Contains(got.Status.Message, "127.0.0.1:1") {
		t.Fatalf("status %+v, want Failed, TargetUnreachable, naming spec.target.cluster and the address", got.Status)
	}
	cl := waitReachable(t, c, "dst")
	if r := meta.FindStatusCondition(cl.Status.Conditions, v1beta1.ClusterConditionReachable); r.Status != metav1.ConditionFalse || r.Reason != "Unreachable" || !strings.Contains(r.Message, "127.0.0.1:1") {
		t.Errorf("Cluster dst: Reachable %+v, want False, Unreachable, naming the address", r)
	}

	ran := filepath.Join(t.TempDir(), "ran")
	exec := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nclusters: [{name: x, cluster: {server: %q}}]\nusers: [{name: x, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/touch, args: [%q]}}}]\n",
		e.dst.Config.Host, ran)
	p := filepath.Join(t.TempDir(), "exec.kubeconfig")
	if err := os.WriteFile(p, []byte(exec), 0o600); err != nil {
		t.Fatal(err)
	}
	addCluster(t, c, "plugin", p)
	m := newMigration("plugin", e.storage, "default")
	m.Spec.Target.Cluster = "plugin"
	_, got = watchPhases(t, c, m, time.Minute, nil)
	if got.Status.Phase != v1beta1.PhaseFailed || got.Status.Reason != "InvalidClusterCredential" || !strings.Contains(got.Status.Message, "exec plugin") {
		t.Fatalf("status %+v, want Failed, InvalidClusterCredential, naming the exec plugin", got.Status)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the hub ran the kubeconfig's exec plugin")
	}
}

// TestHubWorkloadVolumes is TestMigrateWorkloadVolumes through the hub:
// the Clusters are added with `ferry hub cluster add` (with their nodes'
// pods directories), the Migration is created with `ferry migrate --hub
// --default-volumes-to-fs-backup --wait`, and the hub's helper pods move
// every workload kind's volume data, nothing installed in either cluster.
// In the target, each workload's pods run on the source's data, checked
// file by file.
func TestHubWorkloadVolumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters with nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	f := workloadFixture{ns: "shop", image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	f.create(ctx, t, kubernetes.NewForConfigOrDie(e.src.Config))
	want := f.sums(ctx, t, e.src, false)

	dir := t.TempDir()
	h := &hubProc{dataDir: dir, env: e.env, args: []string{"hub", "--data-dir", dir, "--secure-port", "0", "-v",
		"--repository-password-file", e.password, "--helper-image", e.image}}
	h.start(t)
	hubKC := filepath.Join(dir, "admin.kubeconfig")
	for _, c := range []*testenv.Cluster{e.src, e.dst} {
		r := ferry(t, nil, "hub", "cluster", "add", c.Name, "--kubeconfig", writeContextKubeconfig(t, c), "--hub", hubKC,
			"--node-pods-dir", filepath.Join(c.Node.RootDir, "pods"))
		if r.code != 0 {
			t.Fatalf("hub cluster add %s: exit %d\n%s", c.Name, r.code, r.stderr)
		}
	}
	hubPreflightVolumes(ctx, t, e, h, hubKC)
	r := ferry(t, nil, "migrate", "--hub", hubKC, "--from-cluster", "src", "--to-cluster", "dst", "--storage", e.location,
		"--name", "vols", "--include-namespaces", "shop", "--default-volumes-to-fs-backup", "--wait", "--wait-timeout", "15m")
	t.Logf("migrate --hub: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 0 {
		dumpCluster(ctx, t, e.dst)
		t.Fatalf("migrate --hub: exit %d\nhub log:\n%s", r.code, h.log.String())
	}
	for _, step := range []string{"Backup", "Volumes", "Restore", "Verify", "Completed"} {
		if !strings.Contains(r.stderr+r.stdout, "migration vols: "+step) {
			t.Errorf("migrate --hub --wait did not show step %s", step)
		}
	}
	got := f.sums(ctx, t, e.dst, true)
	for k, w := range want {
		if strings.TrimSpace(got[k]) != strings.TrimSpace(w) {
			t.Errorf("%s: target's data has checksums\n%s\nwant the source's\n%s", k, got[k], w)
		}
	}
	// The runtime checks ran through the one engine: their counts are in
	// the Migration's status.
	hc, _ := h.client(t)
	m := &v1beta1.Migration{}
	if err := hc.Get(ctx, crclient.ObjectKey{Namespace: "default", Name: "vols"}, m); err != nil {
		t.Fatal(err)
	}
	if c := m.Status.Counts; c.Workloads < 4 || c.WorkloadsRunning != c.Workloads || c.ServicesServing != 1 || c.ClaimsWithData != 5 || c.ClaimsEqual != 5 || c.RuntimeFailed != 0 {
		t.Errorf("hub Migration vols: status.counts %+v, want every workload running, the Service serving and 5 of 5 claims equal", c)
	}
	checkHubExpiryPrunes(ctx, t, e, h, "shop")
	noHelperLeft(ctx, t, e.src)
	noHelperLeft(ctx, t, e.dst)
}

// hubPreflightVolumes: the hub's pre-flight (a Migration of
// spec.preflightOnly) measures the volume data through its own helper
// pods, as the CLI's does: each of status.preflight's backup, restore and
// verify parts counts the fixture's claims, and no probe pod is left.
func hubPreflightVolumes(ctx context.Context, t *testing.T, e *volumeEnv, h *hubProc, hubKC string) {
	t.Helper()
	r := ferry(t, nil, "migrate", "--hub", hubKC, "--from-cluster", "src", "--to-cluster", "dst", "--storage", e.location,
		"--name", "vols-pf", "--include-namespaces", "shop", "--default-volumes-to-fs-backup", "--preflight", "--wait", "--wait-timeout", "10m")
	t.Logf("migrate --hub --preflight: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 0 && r.code != 2 {
		t.Fatalf("migrate --hub --preflight: exit %d\nhub log:\n%s", r.code, h.log.String())
	}
	hc, _ := h.client(t)
	m := &v1beta1.Migration{}
	if err := hc.Get(ctx, crclient.ObjectKey{Namespace: "default", Name: "vols-pf"}, m); err != nil {
		t.Fatal(err)
	}
	p := m.Status.Preflight
	if p == nil {
		t.Fatalf("hub Migration vols-pf: no status.preflight (phase %s: %s)", m.Status.Phase, m.Status.Message)
	}
	for _, step := range []string{"backup", "restore", "verify"} {
		found := false
		for _, pt := range p.EstimateParts {
			found = found || pt.Step == step && strings.Contains(pt.Basis, "volume data: ") && !strings.Contains(pt.Basis, "volume data: 0 volume")
		}
		if !found {
			t.Errorf("hub Migration vols-pf: the %s part does not count the claims: %+v (skipped: %v)", step, p.EstimateParts, p.Skipped)
		}
	}
	noHelperLeft(ctx, t, e.src)
	noHelperLeft(ctx, t, e.dst)
}

// checkHubExpiryPrunes is the hub's lost fix (issue 29): a hub Backup with
// volume data whose store folder was deleted out of band (by hand, or by
// another process sharing the location without the password) still has
// its kopia snapshots pruned when it expires; the migration's backup,
// still in the location, keeps its own.
func checkHubExpiryPrunes(ctx context.Context, t *testing.T, e *volumeEnv, h *hubProc, namespace string) {
	t.Helper()
	c, _ := h.client(t)
	const name = "out-of-band"
	for _, o := range []crclient.Object{
		&v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("primary"), Spec: v1beta1.BackupStorageLocationSpec{URL: e.location, Default: true}},
		&v1beta1.Backup{ObjectMeta: hubMeta(name), Spec: v1beta1.BackupSpec{Cluster: "src", IncludedNamespaces: []string{namespace},
			DefaultVolumesToFsBackup: true, TTL: &metav1.Duration{Duration: time.Hour}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	b := waitFor(t, c, &v1beta1.Backup{ObjectMeta: hubMeta(name)}, 5*time.Minute, func(b *v1beta1.Backup) bool { return ended(b.Status.Phase) })
	if b.Status.Phase != v1beta1.RunCompleted || b.Status.PodVolumes == nil || b.Status.PodVolumes.Completed == 0 {
		t.Fatalf("hub Backup %s: %s %q, pod volumes %+v; want Completed with volume data\nhub log:\n%s", name, b.Status.Phase, b.Status.FailureReason, b.Status.PodVolumes, h.log.String())
	}
	creds := map[string]string{}
	for _, kv := range e.env {
		k, v, _ := strings.Cut(kv, "=")
		creds[k] = v
	}
	creds[store.EnvAWSRegion] = testenv.S3Region
	loc, err := store.Open(ctx, e.location, store.WithCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	pw, err := volumes.ReadPassword(e.password)
	if err != nil {
		t.Fatal(err)
	}
	snapshots := func(backup string) int {
		t.Helper()
		repo, err := volumes.Open(ctx, loc, pw, volumes.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer repo.Close(context.WithoutCancel(ctx))
		ids, err := repo.ListSnapshots(ctx, backup)
		if err != nil {
			t.Fatal(err)
		}
		return len(ids)
	}
	if n := snapshots(name); n == 0 {
		t.Fatalf("hub Backup %s: no kopia snapshot in the repository", name)
	}
	// Out of band: the folder goes, the snapshots stay.
	if err := loc.DeleteBackup(ctx, name); err != nil {
		t.Fatal(err)
	}
	expire := crclient.RawPatch(types.MergePatchType, []byte(`{"status":{"expiration":"2001-01-01T00:00:00Z"}}`))
	if err := c.Status().Patch(ctx, b, expire); err != nil {
		t.Fatal(err)
	}
	waitBackupGone(ctx, t, c, b, "expired hub Backup "+name+" still in the hub")
	if n := snapshots(name); n != 0 {
		t.Errorf("expired hub Backup %s, whose folder was deleted out of band: %d kopia snapshots left in the repository, want them pruned", name, n)
	}
	if n := snapshots("vols"); n == 0 {
		t.Errorf("migration vols: its snapshots were pruned with the expired Backup's")
	}
	checkHubDeletePrunes(ctx, t, c, loc, snapshots, namespace)
}

// waitBackupGone waits a minute at most until b is gone from the hub; what
// names it in the failure.
func waitBackupGone(ctx context.Context, t *testing.T, c crclient.Client, b *v1beta1.Backup, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		err := c.Get(ctx, crclient.ObjectKeyFromObject(b), &v1beta1.Backup{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after a minute: %v", what, err)
		}
	}
}

// checkHubDeletePrunes: deleting a hub Backup with volume data deletes
// its folder in the location and its kopia snapshots (its finalizer),
// and leaves another backup's snapshots.
func checkHubDeletePrunes(ctx context.Context, t *testing.T, c crclient.Client, loc *store.Location, snapshots func(string) int, namespace string) {
	t.Helper()
	const name = "deleted-by-user"
	b := &v1beta1.Backup{ObjectMeta: hubMeta(name), Spec: v1beta1.BackupSpec{Cluster: "src", IncludedNamespaces: []string{namespace}, DefaultVolumesToFsBackup: true}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = waitFor(t, c, b, 5*time.Minute, func(b *v1beta1.Backup) bool { return ended(b.Status.Phase) })
	if b.Status.Phase != v1beta1.RunCompleted || b.Status.PodVolumes == nil || b.Status.PodVolumes.Completed == 0 || !slices.Contains(b.Finalizers, v1beta1.BackupDataFinalizer) {
		t.Fatalf("hub Backup %s: %s, pod volumes %+v, finalizers %v; want Completed with volume data and %s", name, b.Status.Phase, b.Status.PodVolumes, b.Finalizers, v1beta1.BackupDataFinalizer)
	}
	if _, err := loc.GetBackup(ctx, name); err != nil {
		t.Fatalf("hub Backup %s: not in the location: %v", name, err)
	}
	if n := snapshots(name); n == 0 {
		t.Fatalf("hub Backup %s: no kopia snapshot in the repository", name)
	}
	if err := c.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitBackupGone(ctx, t, c, b, "deleted hub Backup "+name+" still in the hub")
	if _, err := loc.GetBackup(ctx, name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted hub Backup %s: its folder in the location: %v, want not found", name, err)
	}
	if n := snapshots(name); n != 0 {
		t.Errorf("deleted hub Backup %s: %d kopia snapshots left, want them pruned", name, n)
	}
	if n := snapshots("vols"); n == 0 {
		t.Errorf("migration vols: its snapshots were pruned with the deleted Backup's")
	}
	checkHubVanishedLeaves(ctx, t, c, loc)
}

// checkHubVanishedLeaves: a hub Backup whose folder is deleted from the
// location out of band leaves the hub at the location's next store sync.
func checkHubVanishedLeaves(ctx context.Context, t *testing.T, c crclient.Client, loc *store.Location) {
	t.Helper()
	const name = "vanished"
	b := &v1beta1.Backup{ObjectMeta: hubMeta(name), Spec: v1beta1.BackupSpec{Cluster: "src", IncludedNamespaces: []string{"default"}}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = waitFor(t, c, b, 3*time.Minute, func(b *v1beta1.Backup) bool { return ended(b.Status.Phase) })
	if b.Status.Phase != v1beta1.RunCompleted {
		t.Fatalf("hub Backup %s: %s %q, want Completed", name, b.Status.Phase, b.Status.FailureReason)
	}
	if err := loc.DeleteBackup(ctx, name); err != nil {
		t.Fatal(err)
	}
	// A spec change checks and syncs the location at once.
	bsl := &v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("primary")}
	if err := c.Patch(ctx, bsl, crclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"validationFrequency":"30s"}}`))); err != nil {
		t.Fatal(err)
	}
	waitBackupGone(ctx, t, c, b, "hub Backup "+name+", gone from the location, still in the hub after the location's sync")
}

// TestHubStalledCluster: a member API server that accepts connections and
// then never answers (its requests held by a proxy from the moment the
// Migration starts its backup) fails the Migration within the hub's
// --member-request-timeout, naming the Cluster, and the lease is
// released: no worker is held forever.
func TestHubStalledCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	e := newEnv(t)
	h := startHub(t, t.TempDir(), "--member-request-timeout", "3s")
	c, _ := h.client(t)
	addCluster(t, c, "src", writeContextKubeconfig(t, e.src))
	proxy, stalled := stallableKubeconfig(t, e.dst)
	addCluster(t, c, "dst", stalled)
	m := newMigration("stalled", e.storage, "default")
	phases, _ := watchPhases(t, c, m, time.Minute, func(m *v1beta1.Migration) bool { return m.Status.Phase == v1beta1.PhaseBackup })
	if phases[len(phases)-1] != v1beta1.PhaseBackup {
		t.Fatalf("phases %v: the Migration ended before its backup", phases)
	}
	proxy.Stall()
	start := time.Now()
	phases, got := watchPhases(t, c, m, 2*time.Minute, nil)
	took := time.Since(start)
	if got.Status.Phase != v1beta1.PhaseFailed || !strings.Contains(got.Status.Message, "cluster dst: the API server did not answer") || got.Status.Lease != nil {
		t.Fatalf("phases %v; status %+v; want Failed, naming Cluster dst that did not answer, the lease released", phases, got.Status)
	}
	if took > time.Minute {
		t.Errorf("the Migration failed %s after the target stalled, want within a minute (3s per request)", took.Round(time.Second))
	}
	t.Logf("failed %s after the target stalled: %s", took.Round(time.Millisecond), got.Status.Message)
}
