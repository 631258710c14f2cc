package preflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeferry/ferry/pkg/report"
)

// newTestEnv is an env with no target objects and the planned objects objs.
func newTestEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	c := newCollector()
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		gr := strings.ToLower(u.GetKind()) + "s"
		if u.GetKind() == "Deployment" {
			gr = "deployments.apps"
		}
		c.observe(gr, u)
	}
	return &env{o: &Options{}, c: c, results: &report.Results{}, p: &report.Preflight{},
		t: &target{namespaces: map[string]corev1.Namespace{}, storageClasses: map[string]storagev1.StorageClass{}, csiDrivers: map[string]bool{}}}
}

func claim(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
}

// TestQuotaAddsUp: claims that each fit a quota but not together are
// refused together; a claim of another class does not count against a
// per-class key; a quota's use in the target counts.
func TestQuotaAddsUp(t *testing.T) {
	e := newTestEnv(t, claim("a", "one", "fast", "2Gi"), claim("a", "two", "fast", "2Gi"), claim("a", "three", "slow", "10Gi"))
	e.t.quotas = []corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "q"},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"fast.storageclass.storage.k8s.io/requests.storage": resource.MustParse("5Gi")}},
		Status: corev1.ResourceQuotaStatus{Used: corev1.ResourceList{"fast.storageclass.storage.k8s.io/requests.storage": resource.MustParse("2Gi")}}}}
	checkQuotas(context.Background(), e)
	if len(e.p.Risks) != 1 {
		t.Fatalf("risks %+v, want one", e.p.Risks)
	}
	r := e.p.Risks[0]
	if r.Severity != report.Blocker || len(r.Objects) != 2 || !strings.Contains(r.What, "2Gi is in use and the move adds 4Gi") || !strings.Contains(r.Fix, "to at least 6Gi") {
		t.Errorf("risk %+v", r)
	}
}

// TestSchedulingNoNodes: a target without nodes is one warning, not a
// blocker per workload.
func TestSchedulingNoNodes(t *testing.T) {
	e := newTestEnv(t)
	e.c.workloads = []workload{{resource: "deployments.apps", namespace: "a", name: "x", kind: "Deployment", replicas: 1, spec: corev1.PodSpec{NodeSelector: map[string]string{"k": "v"}}}}
	checkScheduling(context.Background(), e)
	if len(e.p.Risks) != 1 || e.p.Risks[0].Severity != report.Warning || e.p.Risks[0].Objects[0] != "nodes" {
		t.Errorf("risks %+v, want one warning about nodes", e.p.Risks)
	}
	e = newTestEnv(t)
	e.t.nodes = []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"k": "v"}}}}
	e.c.workloads = []workload{
		{resource: "deployments.apps", namespace: "a", name: "fits", kind: "Deployment", replicas: 1, spec: corev1.PodSpec{NodeSelector: map[string]string{"k": "v"}}},
		{resource: "deployments.apps", namespace: "a", name: "idle", kind: "Deployment", replicas: 0, spec: corev1.PodSpec{NodeSelector: map[string]string{"k": "w"}}},
		{resource: "daemonsets.apps", namespace: "a", name: "ds", kind: "DaemonSet", replicas: -1, spec: corev1.PodSpec{NodeSelector: map[string]string{"k": "w"}}},
	}
	checkScheduling(context.Background(), e)
	got := map[string]report.Severity{}
	for _, r := range e.p.Risks {
		got[r.Objects[0]] = r.Severity
	}
	if len(got) != 2 || got["deployments.apps a/idle"] != report.Note || got["daemonsets.apps a/ds"] != report.Warning {
		t.Errorf("risks %+v; want a note for the idle Deployment, a warning for the DaemonSet, nothing for the one that fits", e.p.Risks)
	}
}

// TestUnreadListSkipsCheck: a list the target refused does not run the
// checks that read it (found by a reviewer: a user who may not list
// storage classes got "storage class standard does not exist"), and the
// report says so.
func TestUnreadListSkipsCheck(t *testing.T) {
	e := newTestEnv(t, claim("a", "data", "standard", "1Gi"))
	e.t.unread = map[string]string{"storageclasses": "forbidden"}
	e.t.nodes = []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}}}
	e.run(context.Background())
	for _, r := range e.p.Risks {
		if r.Check == "storage-class" || r.Check == "quota" {
			t.Errorf("risk from a check whose list was refused: %+v", r)
		}
	}
	found := false
	for _, s := range e.p.Skipped {
		found = found || strings.Contains(s, "check storage-class: the target's storageclasses (forbidden) could not be read")
	}
	if !found {
		t.Errorf("skipped %v; want the storage-class check named", e.p.Skipped)
	}
}

// TestDisruptionBudgetIdle: a PodDisruptionBudget of a workload scaled to
// 0 has no pod to evict, so it is no risk (found by a reviewer).
func TestDisruptionBudgetIdle(t *testing.T) {
	pdb := func(name string) runtime.Object {
		one := intstr.FromInt32(1)
		return &policyv1.PodDisruptionBudget{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}, ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	}
	e := newTestEnv(t, pdb("idle"), pdb("busy"))
	for _, w := range []struct {
		name     string
		replicas int64
	}{{"idle", 0}, {"busy", 1}} {
		e.c.workloads = append(e.c.workloads, workload{resource: "deployments.apps", namespace: "a", name: w.name, kind: "Deployment", replicas: w.replicas,
			meta: metav1.ObjectMeta{Labels: map[string]string{"app": w.name}}})
	}
	checkDisruptionBudgets(e)
	if len(e.p.Risks) != 1 || !containsString(e.p.Risks[0].Objects, "poddisruptionbudgets.policy a/busy") {
		t.Errorf("risks %+v; want one, for busy", e.p.Risks)
	}
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestKeptObjectsNotJudged: an object the target has already, and keeps
// as it is, is not what the move writes, so no check judges it (found by
// a reviewer: a re-run after a partial move blocked on the target's own
// claims).
func TestKeptObjectsNotJudged(t *testing.T) {
	e := newTestEnv(t, claim("a", "kept", "gone", "1Gi"), claim("a", "new", "gone", "1Gi"))
	e.results.Add(report.Result{Resource: "persistentvolumeclaims", Namespace: "a", Name: "kept", Outcome: report.Skipped, Reason: "exists, differs"})
	e.c.drop(existingIn(e.results, false))
	checkStorageClasses(context.Background(), e)
	if len(e.p.Risks) != 1 || len(e.p.Risks[0].Objects) != 1 || e.p.Risks[0].Objects[0] != "persistentvolumeclaims a/new" {
		t.Errorf("risks %+v; want one, naming only the new claim", e.p.Risks)
	}
}

// TestUnreachableErr: only a network error or a timeout makes a registry
// unreachable; an answer is not (found by a reviewer: a 429 skipped every
// image of the registry).
func TestUnreachableErr(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{fmt.Errorf("image x: %w", context.DeadlineExceeded), true},
		{&transport.Error{StatusCode: 429}, false},
		{errors.New("malformed reference"), false},
	} {
		if got := unreachableErr(c.err); got != c.want {
			t.Errorf("unreachableErr(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
