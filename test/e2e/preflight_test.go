package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// wantRisk is one risk the fault fixture must raise: its check and
// severity, and an object it names.
type wantRisk struct {
	check    string
	severity report.Severity
	object   string
	// what is a part of what it says will happen.
	what string
}

// preflightFaults are the risks of testdata/preflight: every check of the
// issue, each found, naming the right objects, at the right severity.
var preflightFaults = []wantRisk{
	// The source's own APIService has no endpoint: its group cannot be read.
	{"source", report.Blocker, "", "discovery of metrics.k8s.io/v1beta1 failed"},
	{"storage-class", report.Blocker, "persistentvolumeclaims shop/data", "its provisioner ebs.csi.aws.com does not run in the target"},
	{"storage-class", report.Blocker, "persistentvolumeclaims shop/orphan", "storage class gone does not exist in the target"},
	{"storage-class", report.Warning, "persistentvolumeclaims shop/big", "binds WaitForFirstConsumer"},
	{"storage-class", report.Warning, "persistentvolumeclaims shop/big", "reclaims Delete, the source's Retain"},
	{"storage-class", report.Note, "persistentvolumeclaims shop/big", "provisioned by pd.csi.storage.gke.io"},
	{"quota", report.Blocker, "persistentvolumeclaims shop/big", "ResourceQuota shop/storage allows 2Gi of requests.storage"},
	{"quota", report.Blocker, "persistentvolumeclaims shop/big", "LimitRange shop/claims allows at most 3Gi"},
	{"api", report.Warning, "customresourcedefinitions.apiextensions.k8s.io widgets.example.com", "not the source's v2"},
	{"api", report.Blocker, "customresourcedefinitions.apiextensions.k8s.io gadgets.example.com", "none of the source's v1"},
	{"webhook", report.Blocker, "validatingwebhookconfigurations.admissionregistration.k8s.io policy-check", "has no ready endpoint"},
	{"webhook", report.Blocker, "configmaps in monitoring (1)", "refuses every create it intercepts"},
	{"webhook", report.Blocker, "pods of deployments.apps shop/db", "has no ready endpoint"},
	{"webhook", report.Blocker, "mutatingwebhookconfigurations.admissionregistration.k8s.io sidecar-injector", "in neither the backup nor the target"},
	{"apiservice", report.Warning, "apiservices.apiregistration.k8s.io v1beta1.metrics.k8s.io", "served by Service metrics/metrics-server"},
	{"pod-security", report.Blocker, "deployments.apps shop/db", `enforces PodSecurity "restricted:v1.37"`},
	{"pod-security", report.Blocker, "persistentvolumeclaims shop/data", "refuses ferry's helper pods"},
	{"scheduling", report.Blocker, "deployments.apps monitoring/gpu", "nodeSelector accelerator=nvidia"},
	{"scheduling", report.Blocker, "deployments.apps monitoring/infra", "dedicated=infra:NoSchedule"},
	{"scheduling", report.Warning, "poddisruptionbudgets.policy shop/db", "allows no eviction"},
	{"image", report.Blocker, "deployments.apps shop/db", "not for linux/arm64"},
	{"image", report.Blocker, "deployments.apps monitoring/gpu", "is not in its registry"},
	{"image", report.Warning, "deployments.apps monitoring/infra", "refuses the pull Secrets"},
	{"service", report.Warning, "services shop/lb", "loadBalancerIP 10.20.30.40"},
	{"service", report.Warning, "services shop/lb", "load-balancer annotations of aws"},
	{"service", report.Warning, "services shop/np", "node port 30080 is taken in the target by Service other/np-clash"},
	{"ingress", report.Warning, "ingresses.networking.k8s.io shop/web", "ingress class alb does not exist"},
	{"dry-run", report.Warning, "configmaps shop/settings", "exists in the target and differs"},
}

// TestPreflightFaults: ferry migrate --preflight against a target
// prepared to clash finds every fault of the fixture, names its objects,
// ranks it, exits 2, and writes nothing to either cluster.
func TestPreflightFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	ctx := context.Background()
	e := newEnv(t)
	// The migration moves volume data through helper pods.
	e.storageEnv = append(e.storageEnv, volumes.EnvPassword+"=preflight")
	pub, err := testenv.StartRegistry(ctx, t, testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	priv, err := testenv.StartRegistry(ctx, t, testenv.RegistryOptions{User: "puller", Password: "pull-secret-pw"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.PushIndex("shop/db:1", "linux/amd64"); err != nil {
		t.Fatal(err)
	}
	if _, err := priv.PushIndex("ops/agent:1", "linux/arm64"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, side := range []struct {
		file string
		cfg  *rest.Config
	}{{"source.yaml", e.src.Config}, {"target.yaml", e.dst.Config}} {
		b, err := os.ReadFile(filepath.Join("testdata", "preflight", side.file))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer("${REGISTRY}", pub.Host, "${PRIVATE}", priv.Host).Replace(string(b))
		path := filepath.Join(dir, side.file)
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := testenv.Apply(ctx, side.cfg, "", path); err != nil {
			t.Fatalf("%s: %v", side.file, err)
		}
	}
	for _, c := range []string{"data", "orphan", "big"} {
		waitClaimBound(t, kubernetes.NewForConfigOrDie(e.src.Config), "shop", c)
	}
	srcBefore, dstBefore := settledVersions(t, e.src.Config), settledVersions(t, e.dst.Config)
	storeDir := strings.TrimPrefix(e.storage, "file://")

	reportDir := filepath.Join(dir, "report")
	r := e.run(t, "migrate", "--preflight", "--from-context", "src", "--to-context", "dst", "--name", "pf", "--insecure", "-o", "json", "--report-dir", reportDir)
	if r.code != 2 {
		t.Fatalf("preflight with blockers: exit %d, want 2\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var p report.Preflight
	mustJSON(t, r.stdout, &p)
	checkRisks(t, &p, preflightFaults)
	if p.Objects == 0 || p.Estimate == nil || p.Estimate.Seconds <= 0 {
		t.Errorf("report: %d objects, estimate %+v; want both", p.Objects, p.Estimate)
	}

	// Nothing written: every object of both clusters keeps its
	// resourceVersion, and the location was not created.
	compareVersions(t, "source", srcBefore, resourceVersions(t, e.src.Config))
	compareVersions(t, "target", dstBefore, resourceVersions(t, e.dst.Config))
	if _, err := os.Stat(storeDir); !os.IsNotExist(err) {
		t.Errorf("the location %s was written to: %v", storeDir, err)
	}
	checkPreflightPage(t, reportDir, &p)
	// The terminal summary: counts, then the top risks, blockers first.
	s := e.run(t, "migrate", "--preflight", "--from-context", "src", "--to-context", "dst", "--name", "pf", "--insecure", "--report-dir", reportDir)
	if s.code != 2 || !strings.Contains(s.stdout, "BLOCKED") || !strings.Contains(s.stdout, "Top 10 of") {
		t.Errorf("summary: exit %d\n%s\n%s", s.code, s.stdout, s.stderr)
	}
	t.Logf("summary:\n%s", s.stdout)

	// Found by a reviewer: a selection that matches nothing said "the
	// move can start", silently.
	n := e.run(t, "migrate", "--preflight", "--from-context", "src", "--to-context", "dst", "--name", "pf", "--include-namespaces", "nothing-here", "-o", "json", "--report-dir", reportDir)
	var np report.Preflight
	mustJSON(t, n.stdout, &np)
	checkRisks(t, &np, []wantRisk{{"source", report.Warning, "", `"nothing-here": no such namespace`}, {"dry-run", report.Warning, "", "matches no object"}})
	// Found by a reviewer: without a repository password no volume data
	// moves, and a pod that asks for its data would lose it: a blocker.
	np2 := ferry(t, []string{volumes.EnvPassword + "="}, "migrate", "--preflight", "--from-context", "src", "--to-context", "dst", "--name", "pf", "--include-namespaces", "shop", "--insecure", "-o", "json",
		"--report-dir", reportDir, "--kubeconfig", e.kubeconfig, "--storage", e.storage)
	var nopw report.Preflight
	mustJSON(t, np2.stdout, &nopw)
	checkRisks(t, &nopw, []wantRisk{{"pod-security", report.Blocker, "deployments.apps shop/db volume data", "no volume data moves"}})

	// Found by a reviewer: a report that could not be kept lost what was
	// found; now it is printed, and the file error is a warning.
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(filepath.Join(bad, "preflight.html"), 0o755); err != nil {
		t.Fatal(err)
	}
	k := e.run(t, "migrate", "--preflight", "--from-context", "src", "--to-context", "dst", "--name", "pf", "--insecure", "--report-dir", bad)
	if k.code != 2 || !strings.Contains(k.stdout, "BLOCKED") || !strings.Contains(k.stderr, "could not be kept") {
		t.Errorf("report folder unwritable: exit %d\n%s\n%s", k.code, k.stdout, k.stderr)
	}

	// From a stored backup: restore create --preflight finds the same.
	// PartiallyFailed: the source's metrics.k8s.io cannot be read.
	if b := e.run(t, "backup", "create", "pf", "--context", "src", "--images", "none"); b.code != 2 {
		t.Fatalf("backup pf: exit %d, want 2 (metrics.k8s.io unavailable)\n%s", b.code, b.stderr)
	}
	state := t.TempDir()
	sr := ferry(t, append(e.storageEnv, "XDG_STATE_HOME="+state), "restore", "create", "pf-r", "--from-backup", "pf", "--context", "dst", "--insecure", "--preflight", "-o", "json",
		"--kubeconfig", e.kubeconfig, "--storage", e.storage)
	if sr.code != 2 {
		t.Fatalf("restore create --preflight: exit %d, want 2\n%s", sr.code, sr.stderr)
	}
	var sp report.Preflight
	mustJSON(t, sr.stdout, &sp)
	var fromBackup []wantRisk
	for _, w := range preflightFaults {
		if w.check != "source" {
			fromBackup = append(fromBackup, w)
		}
	}
	checkRisks(t, &sp, fromBackup)
	if sp.Source != "backup pf" {
		t.Errorf("source %q, want backup pf", sp.Source)
	}
	if _, err := os.Stat(filepath.Join(state, "ferry", "reports", "pf-r", "preflight.html")); err != nil {
		t.Errorf("restore create --preflight kept no page: %v", err)
	}
	if g := e.run(t, "restore", "get", "pf-r"); g.code != 1 {
		t.Errorf("restore create --preflight left a restore record: %s", g.stdout)
	}
}

// checkPreflightPage renders dir/preflight.html in headless Chromium:
// it renders (a screenshot that is not blank), and the page shows the
// counts and the risks of dir/preflight.json, in its order.
func checkPreflightPage(t *testing.T, dir string, p *report.Preflight) {
	t.Helper()
	dom := renderPage(t, filepath.Join(dir, "preflight.html"))
	for _, sev := range []report.Severity{report.Blocker, report.Warning, report.Note} {
		m := regexp.MustCompile(`id="count-` + string(sev) + `">(\d+)<`).FindSubmatch(dom)
		if m == nil || string(m[1]) != strconv.Itoa(p.Counts[sev]) {
			t.Errorf("page's %s count %q, preflight.json %d", sev, m, p.Counts[sev])
		}
	}
	rows := regexp.MustCompile(`<tr class="risk" data-severity="([a-z]+)" data-check="([a-z-]+)">`).FindAllSubmatch(dom, -1)
	if len(rows) != len(p.Risks) {
		t.Fatalf("page lists %d risks, preflight.json %d", len(rows), len(p.Risks))
	}
	for i, r := range rows {
		if string(r[1]) != string(p.Risks[i].Severity) || string(r[2]) != p.Risks[i].Check {
			t.Errorf("page's risk %d is %s %s, preflight.json's %s %s", i, r[1], r[2], p.Risks[i].Severity, p.Risks[i].Check)
		}
	}
}

// checkRisks finds each wanted risk in p, and checks the ranking.
func checkRisks(t *testing.T, p *report.Preflight, want []wantRisk) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, r := range p.Risks {
			if r.Check == w.check && r.Severity == w.severity && strings.Contains(r.What, w.what) && (w.object == "" || containsObject(r.Objects, w.object)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no %s %s risk naming %q and saying %q", w.severity, w.check, w.object, w.what)
		}
	}
	rank := map[report.Severity]int{report.Blocker: 0, report.Warning: 1, report.Note: 2}
	for i := 1; i < len(p.Risks); i++ {
		if rank[p.Risks[i].Severity] < rank[p.Risks[i-1].Severity] {
			t.Errorf("risk %d (%s) ranked after a %s", i, p.Risks[i].Severity, p.Risks[i-1].Severity)
		}
	}
	if t.Failed() {
		for _, r := range p.Risks {
			t.Logf("risk: %s %s %v: %s (fix: %s)", r.Severity, r.Check, r.Objects, r.What, r.Fix)
		}
		t.Logf("skipped: %v", p.Skipped)
	}
}

func containsObject(objs []string, want string) bool {
	for _, o := range objs {
		if o == want {
			return true
		}
	}
	return false
}

// resourceVersions lists every object of the cluster that the API
// server lists, but Events and Leases (the control plane's own heartbeats
// write those all the time), by "resource namespace/name".
func resourceVersions(t *testing.T, cfg *rest.Config) map[string]string {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	lists, err := dc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !contains(strings.Join(r.Verbs, ","), "list") || r.Name == "events" || r.Name == "leases" {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, it := range items.Items {
				out[r.Name+"."+gv.Group+" "+it.GetNamespace()+"/"+it.GetName()] = it.GetResourceVersion()
			}
		}
	}
	return out
}

// settledVersions is resourceVersions once the cluster's controllers
// have settled what the test created: two lists a second apart agree.
func settledVersions(t *testing.T, cfg *rest.Config) map[string]string {
	t.Helper()
	prev := resourceVersions(t, cfg)
	for i := 0; i < 60; i++ {
		time.Sleep(time.Second)
		cur := resourceVersions(t, cfg)
		if maps.Equal(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatal("the cluster's objects did not settle within a minute")
	return nil
}

func compareVersions(t *testing.T, side string, before, after map[string]string) {
	t.Helper()
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			changed = append(changed, k+" (gone)")
		}
	}
	sort.Strings(changed)
	if len(changed) > 0 {
		t.Errorf("the pre-flight changed the %s: %v", side, changed)
	}
}
