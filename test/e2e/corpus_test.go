package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// corpusSet is one folder of the test corpus (corpusDir; CONTRIBUTING.md,
// "The test corpus") applied into its own namespace.
type corpusSet struct {
	dir, namespace string
	// objects is how many objects the source accepts from the set: a
	// file it newly rejects (or an object fewer) fails the test instead of
	// dropping out of it.
	objects int
	// rejected are the set's files the source refuses, by name, each with
	// a part of the refusal; applying stops at the refused object.
	rejected map[string]string
}

// corpus lists every set that applies to a bare v1.37 API server.
// Left out:
//   - velero-enable-api-group-versions: its case files are different
//     versions of one CRD meant for separate source and target clusters
//     (case-a-source-v1beta1 needs apiextensions v1beta1, gone since 1.22);
//     it is the acceptance case of the API-versions issue, not this one.
//   - velero-example-nginx-app-base conflicts with nginx-app-with-pv (same
//     namespace and names); it runs in TestCorpusNginxAppBase on its own clusters.
//
// objects is every object of the set's files: the source accepts them all
// (no set has a known rejection today).
//
// ksm-test-manifests-all-kinds goes first: its default IngressClass changes
// Ingresses created after it, so the source must see it before them as the
// target will.
var corpus = []corpusSet{
	{dir: "ksm-test-manifests-all-kinds", namespace: "ksm", objects: 29},
	{dir: "istio-bookinfo", namespace: "bookinfo", objects: 14},
	{dir: "online-boutique", namespace: "boutique", objects: 35},
	{dir: "k8s-examples-guestbook", namespace: "guestbook", objects: 6},
	{dir: "k8s-examples-guestbook-go", namespace: "guestbook-go", objects: 6},
	{dir: "k8s-examples-cassandra-statefulset", namespace: "cassandra", objects: 3},
	{dir: "cert-manager-v1.14.4", namespace: "cert-manager-set", objects: 46},
	{dir: "gke-samples-workload-kinds", namespace: "gke", objects: 10},
	{dir: "prometheus-operator-rbac-subset", namespace: "prom", objects: 15},
	{dir: "kube-state-metrics-standard", namespace: "ksm-standard", objects: 5},
	{dir: "velero-example-minio", namespace: "minio-set", objects: 4},
	{dir: "velero-example-nginx-app-with-pv", namespace: "nginx-pv-set", objects: 4},
}

func corpusDir(t *testing.T) string {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(root, "..", "shared", "testdata", "real")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("corpus not found at %s: %v", d, err)
	}
	return d
}

// applied is one object the source accepted.
type applied struct {
	set string
	obj *unstructured.Unstructured
}

// applyCorpus applies each file of each set to the source. The source
// must accept exactly the set's pinned number of objects and refuse
// exactly its known rejections: "nothing fails that the source accepted"
// is about what the source accepted, and that must not shrink unseen.
func applyCorpus(t *testing.T, e *env, sets []corpusSet) []applied {
	t.Helper()
	var out []applied
	base := corpusDir(t)
	for _, s := range sets {
		files, _ := filepath.Glob(filepath.Join(base, s.dir, "*.y*ml"))
		// Classes first (IngressClass, StorageClass): a default class
		// changes what admission does to later objects, and the target
		// restores classes before the objects that use them.
		sort.SliceStable(files, func(i, j int) bool {
			ci, cj := strings.Contains(filepath.Base(files[i]), "class."), strings.Contains(filepath.Base(files[j]), "class.")
			if ci != cj {
				return ci
			}
			return files[i] < files[j]
		})
		n := 0
		for _, f := range files {
			objs, err := testenv.Apply(context.Background(), e.src.Config, s.namespace, f)
			want, known := s.rejected[filepath.Base(f)]
			switch {
			case err != nil && known && strings.Contains(err.Error(), want):
				t.Logf("source rejected %s/%s, as known: %v", s.dir, filepath.Base(f), err)
			case err != nil:
				t.Errorf("source rejected %s/%s, not a known rejection (want %q): %v", s.dir, filepath.Base(f), want, err)
			case known:
				t.Errorf("source accepted %s/%s, listed as rejected with %q", s.dir, filepath.Base(f), want)
			}
			for _, o := range objs {
				out = append(out, applied{set: s.dir, obj: o})
			}
			n += len(objs)
		}
		if n != s.objects {
			t.Errorf("set %s: the source accepted %d objects, want %d", s.dir, n, s.objects)
		}
	}
	return out
}

// checkTarget asserts every applied object exists in the target (under
// the namespace mapping) with the source's content after the documented
// transforms.
func checkTarget(t *testing.T, e *env, restore string, objs []applied, nsMap map[string]string) {
	t.Helper()
	src, dst := newClient(t, e.src.Config), newClient(t, e.dst.Config)
	skipped := map[string]string{}
	for _, it := range e.results(t, restore) {
		if it["outcome"] == "skipped" {
			ns, _ := it["namespace"].(string)
			skipped[fmt.Sprintf("%s/%v/%v", ns, it["name"], it["resource"])] = fmt.Sprint(it["reason"])
		}
	}
	missing, differ := 0, 0
	for _, a := range objs {
		ns, name := a.obj.GetNamespace(), a.obj.GetName()
		if never[a.obj.GetKind()] {
			// Never restored (docs/design.md#left-to-controllers-and-never-restored): it must be reported so.
			found := false
			for k, reason := range skipped {
				if strings.HasPrefix(k, ns+"/"+name+"/") && strings.HasPrefix(reason, "never restored") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s %s/%s is never restored but not reported as skipped", a.obj.GetKind(), ns, name)
			}
			continue
		}
		live := src.get(t, a.obj, ns, name)
		if live == nil {
			t.Errorf("%s %s/%s (%s) vanished from the source", a.obj.GetKind(), ns, name, a.set)
			continue
		}
		tns, tname := ns, name
		if m, ok := nsMap[ns]; ok {
			tns = m
		}
		if a.obj.GetKind() == "Namespace" {
			if m, ok := nsMap[name]; ok {
				tname = m
			}
		}
		got := dst.get(t, a.obj, tns, tname)
		if got == nil {
			missing++
			t.Errorf("%s %s/%s (%s) is missing in the target", a.obj.GetKind(), tns, tname, a.set)
			continue
		}
		if same, diff := sameContent(live, got, nsMap); !same {
			differ++
			t.Errorf("%s %s/%s (%s) differs: %s", a.obj.GetKind(), tns, tname, a.set, diff)
		}
	}
	t.Logf("checked %d applied objects: %d missing, %d different", len(objs), missing, differ)
}

// never are kinds a restore never writes (docs/design.md#left-to-controllers-and-never-restored, Velero's
// nonRestorableResources); they must show up as skipped instead.
var never = map[string]bool{"VolumeAttachment": true, "Event": true, "Node": true, "Lease": true}

func failedItems(t *testing.T, e *env, restore string) []string {
	var out []string
	for _, it := range e.results(t, restore) {
		if it["outcome"] == "failed" {
			out = append(out, fmt.Sprintf("%v %v/%v: %v", it["resource"], it["namespace"], it["name"], it["message"]))
		}
	}
	return out
}

func TestCorpusMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	objs := applyCorpus(t, e, corpus)

	// Whole-cluster migration, verified, after its pre-flight into the
	// empty target: no false blocker.
	reportDir := filepath.Join(t.TempDir(), "report")
	estimate := checkCorpusPreflight(t, e, reportDir)
	r := e.run(t, "migrate", "--from-context", "src", "--to-context", "dst", "--name", "corpus", "-o", "json", "--report-dir", reportDir)
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s\n%s\nfailed items: %v", r.code, r.stdout, r.stderr, failedItems(t, e, "corpus"))
	}
	var out struct {
		Backup  map[string]any `json:"backup"`
		Restore struct {
			Status struct {
				Phase  string         `json:"phase"`
				Counts map[string]int `json:"counts"`
			} `json:"status"`
		} `json:"restore"`
		Verification struct {
			Summary map[string]int `json:"summary"`
		} `json:"verification"`
	}
	mustJSON(t, r.stdout, &out)
	// The verification report: 0 unexpected differences, every object
	// compared, and a page that shows the same numbers.
	v := readVerification(t, reportDir)
	t.Logf("verification: %v", v.Summary)
	if v.Summary["unexpected"] != 0 || out.Verification.Summary["unexpected"] != 0 {
		t.Errorf("verification after migrate: %d unexpected differences: %+v", v.Summary["unexpected"], v.Differences)
	}
	if v.Summary["matched"] < len(objs) {
		t.Errorf("verification matched %d objects, the source accepted %d", v.Summary["matched"], len(objs))
	}
	if len(v.Timings) != 3 || v.Timings[0].Phase != "backup" || v.Timings[1].Phase != "restore" || v.Timings[2].Phase != "verify" {
		t.Errorf("timings %+v, want backup, restore, verify", v.Timings)
	}
	checkReportPage(t, reportDir)
	checkStoredReport(t, e.storage, "corpus", v.Summary)
	checkEstimateInReport(t, reportDir, estimate)
	first := out.Restore.Status.Counts
	t.Logf("first restore: %v", first)
	if first["failed"] != 0 || first["created"] < len(objs) {
		t.Fatalf("first restore counts %v, want 0 failed and at least %d created", first, len(objs))
	}
	checkTarget(t, e, "corpus", objs, nil)
	// A statically bound PV and claim must bind again in the target, not end Lost.
	waitBound(t, e, "nginx-example", "nginx-logs")
	for _, it := range e.results(t, "corpus") {
		if it["outcome"] == "skipped" && strings.HasPrefix(fmt.Sprint(it["reason"]), "exists") {
			t.Logf("first restore: %v %v/%v exists and differs: %v", it["resource"], it["namespace"], it["name"], it["message"])
		}
	}

	// Idempotence: the same backup again changes nothing.
	second, res := e.restore(t, "corpus-again", "corpus")
	if res.code != 0 {
		t.Fatalf("second restore: exit %d: %s %s", res.code, res.stdout, res.stderr)
	}
	c := second.Status.Counts
	if c.Created != 0 || c.Failed != 0 || c.Updated != 0 || c.Skipped != first["skipped"] {
		t.Errorf("second restore counts %+v, want 0 created, 0 updated, 0 failed and the first restore's %d skipped", c, first["skipped"])
	}
	for _, it := range e.results(t, "corpus-again") {
		if it["outcome"] == "created" {
			t.Errorf("second restore created %v %v/%v", it["resource"], it["namespace"], it["name"])
		}
		if it["outcome"] == "skipped" && strings.HasPrefix(fmt.Sprint(it["reason"]), "exists") {
			t.Errorf("second restore: %v %v/%v exists and differs: %v", it["resource"], it["namespace"], it["name"], it["message"])
		}
	}

	checkMappedRestore(t, e, objs)

	// Tamper with one object in the target: the report shows exactly it.
	checkVerifyFindsTampering(t, e, v)
}

// checkMappedRestore restores backup corpus again with every set's
// namespace mapped to a new one and checks what landed there: each object
// with the source's content under the mapping, the claim of a statically
// bound PV bound to a renamed copy, and a verification whose differences
// are exactly the objects the restore left alone.
func checkMappedRestore(t *testing.T, e *env, objs []applied) {
	// Namespace mappings: every set again, into new namespaces of the target.
	var pairs []string
	nsMap := map[string]string{}
	for _, s := range corpus {
		nsMap[s.namespace] = s.namespace + "-copy"
		pairs = append(pairs, s.namespace+":"+s.namespace+"-copy")
	}
	// Namespaces the sets name themselves.
	for _, o := range objs {
		if o.obj.GetKind() == "Namespace" {
			if _, ok := nsMap[o.obj.GetName()]; !ok {
				nsMap[o.obj.GetName()] = o.obj.GetName() + "-copy"
				pairs = append(pairs, o.obj.GetName()+":"+o.obj.GetName()+"-copy")
			}
		}
	}
	mapped, res := e.restore(t, "corpus-mapped", "corpus", "--namespace-mappings", strings.Join(pairs, ","))
	if res.code != 0 || mapped.Status.Counts.Failed != 0 {
		t.Fatalf("mapped restore: exit %d counts %+v\n%s\nfailed: %v", res.code, mapped.Status.Counts, res.stderr, failedItems(t, e, "corpus-mapped"))
	}
	// Objects in unmapped namespaces (kube-system) and cluster-scoped
	// ones are the first restore's; check what landed in mapped namespaces.
	var mappedObjs []applied
	for _, o := range objs {
		_, inMapped := nsMap[o.obj.GetNamespace()]
		_, isMappedNS := nsMap[o.obj.GetName()]
		if inMapped || (o.obj.GetKind() == "Namespace" && isMappedNS) {
			mappedObjs = append(mappedObjs, o)
		}
	}
	checkTarget(t, e, "corpus-mapped", mappedObjs, nsMap)
	checkClonedPV(t, e, "nginx-example-copy", "nginx-logs", "persistentvolume")

	// The mapped restore is verified with its own expected changes. The
	// cluster-scoped objects it would change (ClusterRoleBindings naming a
	// mapped namespace) exist from the first restore and were left alone
	// under policy none: exactly those are the unexpected differences.
	mappedDir := filepath.Join(t.TempDir(), "mapped")
	vr := e.run(t, "verify", "--backup", "corpus", "--restore", "corpus-mapped", "--to-context", "dst", "--report-dir", mappedDir)
	var leftAlone []string
	for _, it := range e.results(t, "corpus-mapped") {
		if it["reason"] == "exists, differs" {
			ns, _ := it["namespace"].(string)
			leftAlone = append(leftAlone, fmt.Sprintf("%v %s/%v", it["resource"], ns, it["name"]))
		}
	}
	var differ []string
	for _, d := range readVerification(t, mappedDir).Differences {
		differ = append(differ, fmt.Sprintf("%v %v/%v", d.Resource, d.Namespace, d.Name))
	}
	sort.Strings(leftAlone)
	sort.Strings(differ)
	if strings.Join(differ, "\n") != strings.Join(leftAlone, "\n") || (len(differ) > 0) != (vr.code == 2) {
		t.Errorf("verify of the mapped restore (exit %d) lists\n%s\nthe restore left alone\n%s", vr.code, strings.Join(differ, "\n"), strings.Join(leftAlone, "\n"))
	}
	t.Logf("mapped restore: %d objects differ, each left alone by the restore", len(differ))
}

// checkVerifyFindsTampering changes one Deployment of the first restore
// (found in its verification report v) in the target, then adds fields to
// it: each time `ferry verify` reports exactly that object and field.
func checkVerifyFindsTampering(t *testing.T, e *env, v verification) {
	cs := kubernetes.NewForConfigOrDie(e.dst.Config)
	var dep *appsv1.Deployment
	for _, it := range v.Items {
		if it.Resource == "deployments.apps" && it.Outcome == "match" {
			d, err := cs.AppsV1().Deployments(it.Namespace).Get(context.Background(), it.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dep = d
			break
		}
	}
	if dep == nil {
		t.Fatal("no restored Deployment in the corpus")
	}
	replicas := int32(7)
	if dep.Spec.Replicas != nil && *dep.Spec.Replicas == 7 {
		replicas = 9
	}
	dep.Spec.Replicas = &replicas
	if _, err := cs.AppsV1().Deployments(dep.Namespace).Update(context.Background(), dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tamperDir := filepath.Join(t.TempDir(), "tampered")
	vr := e.run(t, "verify", "--backup", "corpus", "--restore", "corpus", "--to-context", "dst", "--report-dir", tamperDir)
	if vr.code != 2 {
		t.Errorf("verify after tampering: exit %d, want 2\n%s\n%s", vr.code, vr.stdout, vr.stderr)
	}
	tv := readVerification(t, tamperDir)
	if len(tv.Differences) != 1 || tv.Summary["unexpected"] != 1 {
		t.Fatalf("after tampering with deployment %s/%s: %d differences %+v", dep.Namespace, dep.Name, len(tv.Differences), tv.Differences)
	}
	d := tv.Differences[0]
	if d.Resource != "deployments.apps" || d.Namespace != dep.Namespace || d.Name != dep.Name || d.Outcome != "differs" ||
		!strings.Contains(d.Message, ".spec.replicas") || !strings.Contains(d.Diff, fmt.Sprintf("-  replicas: %d", replicas)) {
		t.Errorf("difference %+v, want deployments.apps %s/%s differing at .spec.replicas", d, dep.Namespace, dep.Name)
	}
	if !strings.Contains(vr.stdout, dep.Name) || !strings.Contains(vr.stdout, "1 differ") {
		t.Errorf("verify output does not name the tampered object:\n%s", vr.stdout)
	}
	checkReportPage(t, tamperDir)

	// An addition is a difference too: a label and hostNetwork on the
	// same Deployment's pod template.
	dep, err := cs.AppsV1().Deployments(dep.Namespace).Get(context.Background(), dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	*dep.Spec.Replicas = 2
	if d.Diff != "" {
		r0, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(regexp.MustCompile(`\+  replicas: \d+`).FindString(d.Diff), "+  replicas:")))
		*dep.Spec.Replicas = int32(r0)
	}
	dep.Spec.Template.Spec.HostNetwork = true
	if dep.Labels == nil {
		dep.Labels = map[string]string{}
	}
	dep.Labels["tampered"] = "yes"
	if _, err := cs.AppsV1().Deployments(dep.Namespace).Update(context.Background(), dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vr = e.run(t, "verify", "--backup", "corpus", "--restore", "corpus", "--to-context", "dst", "--report-dir", tamperDir)
	tv = readVerification(t, tamperDir)
	if vr.code != 2 || len(tv.Differences) != 1 || tv.Differences[0].Name != dep.Name ||
		tv.Differences[0].Message != "only in the target: .metadata.labels.tampered, .spec.template.spec.hostNetwork" {
		t.Errorf("after adding fields: exit %d, differences %+v", vr.code, tv.Differences)
	}
}

// TestCorpusNginxAppBase migrates the set that conflicts with
// nginx-app-with-pv, on clusters of its own.
func TestCorpusNginxAppBase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	objs := applyCorpus(t, e, []corpusSet{{dir: "velero-example-nginx-app-base", namespace: "nginx-base-set", objects: 3}})
	r := e.run(t, "migrate", "--from-context", "src", "--to-context", "dst", "--name", "nginx-base", "--include-namespaces", "nginx-example", "--report-dir", filepath.Join(t.TempDir(), "report"))
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checkTarget(t, e, "nginx-base", objs, nil)
}

// checkClonedPV asserts that the claim ns/claim in a mapped namespace is
// bound (by volumeName) to a renamed copy of source PV pv whose claimRef
// points back at it, while the original PV keeps its original claim.
func checkClonedPV(t *testing.T, e *env, ns, claim, pv string) {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(e.dst.Config)
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim %s/%s: %v", ns, claim, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Spec.VolumeName == pv {
		t.Fatalf("claim %s/%s has volumeName %q, want a renamed copy of %s", ns, claim, pvc.Spec.VolumeName, pv)
	}
	clone, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("renamed PV %s: %v", pvc.Spec.VolumeName, err)
	}
	if cr := clone.Spec.ClaimRef; cr == nil || cr.Namespace != ns || cr.Name != claim {
		t.Errorf("renamed PV %s claimRef %+v, want %s/%s", clone.Name, clone.Spec.ClaimRef, ns, claim)
	}
	orig, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("original PV %s: %v", pv, err)
	}
	if cr := orig.Spec.ClaimRef; cr != nil && cr.Namespace == ns {
		t.Errorf("original PV %s was taken by the clone's claim %s/%s", pv, cr.Namespace, cr.Name)
	}
}

// waitBound waits up to 30 s for claim ns/name in the target to be Bound.
func waitBound(t *testing.T, e *env, ns, name string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(e.dst.Config)
	var phase string
	for i := 0; i < 60; i++ {
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			phase = string(pvc.Status.Phase)
			if phase == "Bound" {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("claim %s/%s in the target is %q, want Bound", ns, name, phase)
}

// checkStoredReport: the location keeps migration name's report beside its
// restore (pkg/migration.ReportKeys), as the hub's Migrations do, with the
// same summary as the local copy.
func checkStoredReport(t *testing.T, storage, name string, want map[string]int) {
	t.Helper()
	ctx := context.Background()
	loc, err := store.Open(ctx, storage)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	raw, err := migration.OpenReport(ctx, loc, name, false)
	if err != nil {
		t.Fatalf("the report of migration %s in the location: %v", name, err)
	}
	var got struct {
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Summary, want) {
		t.Errorf("the report in the location says %v, the local copy %v", got.Summary, want)
	}
	if page, err := migration.OpenReport(ctx, loc, name, true); err != nil || !bytes.Contains(page, []byte("<html")) {
		t.Errorf("the HTML report of migration %s in the location: %v", name, err)
	}
}

// checkCorpusPreflight runs ferry migrate --preflight of the corpus into
// an empty target: real manifests by others raise no blocker (the
// target has no nodes, which is one warning), and the check exits 0. It
// returns the estimate.
func checkCorpusPreflight(t *testing.T, e *env, reportDir string) *report.Estimate {
	t.Helper()
	r := e.run(t, "migrate", "--preflight", "--from-context", "src", "--to-context", "dst", "--name", "corpus", "-o", "json", "--report-dir", reportDir)
	var p report.Preflight
	if r.code == 0 || r.code == 2 {
		mustJSON(t, r.stdout, &p)
	}
	for _, risk := range p.Risks {
		t.Logf("corpus pre-flight: %s %s %v: %s", risk.Severity, risk.Check, risk.Objects, risk.What)
	}
	if r.code != 0 || p.Counts[report.Blocker] != 0 {
		t.Errorf("pre-flight of the corpus into an empty target: exit %d, %d blocker(s)\n%s", r.code, p.Counts[report.Blocker], r.stderr)
	}
	if p.Estimate == nil || len(p.Estimate.Parts) != 3 {
		t.Fatalf("pre-flight estimate %+v; want backup, restore and verify", p.Estimate)
	}
	return p.Estimate
}

// checkEstimateInReport: the migrate that follows a pre-flight of the
// same name shows the pre-flight's estimate in its report, each step
// with its actual time.
func checkEstimateInReport(t *testing.T, dir string, want *report.Estimate) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v report.Verification
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	e := v.Estimate
	if e == nil || e.Seconds != want.Seconds || len(e.Parts) != len(want.Parts) || e.Actual <= 0 {
		t.Fatalf("the report's estimate %+v; want the pre-flight's %+v with the actual time", e, want)
	}
	for _, p := range e.Parts {
		if p.Actual <= 0 {
			t.Errorf("estimate part %s has no actual time", p.Step)
		}
		t.Logf("estimate %s: %.2fs, actual %.2fs", p.Step, p.Seconds, p.Actual)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !bytes.Contains(page, []byte(`id="estimate-total"`)) {
		t.Errorf("report.html shows no estimate (%v)", err)
	}
}
