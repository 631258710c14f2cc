package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeferry/ferry/internal/testenv"
)

// frontEndSvc is sock-shop's front-end Service
// (microservices-demo/microservices-demo,
// deploy/kubernetes/manifests/10-front-end-svc.yaml): it pins nodePort
// 30001, which external load balancers and firewall rules point at.
const frontEndSvc = `---
apiVersion: v1
kind: Service
metadata:
  name: front-end
  annotations:
        prometheus.io/scrape: 'true'
  labels:
    name: front-end
  namespace: sock-shop
spec:
  type: LoadBalancer
  ports:
  - port: 80
    targetPort: 8079
    nodePort: 30001
  selector:
    name: front-end
`

// TestNodePorts checks docs/design.md#services: by default a restore
// keeps the node ports a client set and clears the ones the source's API
// server allocated (told apart by managedFields, or by the last-applied
// configuration where managedFields were stripped), says which in each
// item's changes, and a kept port the target already uses falls back to
// a new one with a warning.
func TestNodePorts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	ctx := context.Background()
	e := newEnv(t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)

	// front-end, created from its manifest (a client-go create, as kubectl create does).
	file := filepath.Join(t.TempDir(), "10-front-end-svc.yaml")
	if err := os.WriteFile(file, []byte(frontEndSvc), 0o644); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, src, "sock-shop")
	if _, err := testenv.Apply(ctx, e.src.Config, "sock-shop", file); err != nil {
		t.Fatal(err)
	}
	port := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}
	// ssa: pinned by server-side apply.
	ap := applycorev1.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromInt32(8080)).WithNodePort(30002)
	if _, err := src.CoreV1().Services("sock-shop").Apply(ctx, applycorev1.Service("ssa", "sock-shop").
		WithSpec(applycorev1.ServiceSpec().WithType(corev1.ServiceTypeNodePort).WithPorts(ap)), metav1.ApplyOptions{FieldManager: "team-a", Force: true}); err != nil {
		t.Fatal(err)
	}
	// applied: pinned by kubectl's client-side apply (its annotation), then
	// its managedFields stripped, as some tools and archives do.
	pinned := port
	pinned.NodePort = 30003
	createService(t, src, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sock-shop", Name: "applied", Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service","metadata":{"name":"applied","namespace":"sock-shop"},"spec":{"ports":[{"name":"http","nodePort":30003,"port":80,"targetPort":8080}],"type":"NodePort"}}`}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{pinned}},
	})
	if _, err := src.CoreV1().Services("sock-shop").Patch(ctx, "applied", types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// allocated: no nodePort asked for.
	alloc := createService(t, src, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sock-shop", Name: "allocated"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{port}},
	})
	allocPort := alloc.Spec.Ports[0].NodePort
	if s, _ := src.CoreV1().Services("sock-shop").Get(ctx, "applied", metav1.GetOptions{}); s == nil || len(s.ManagedFields) != 0 {
		t.Fatalf("sock-shop/applied still has managedFields: %v", s)
	}

	e.backup(t, "shop", "--include-namespaces", "sock-shop")
	rs, r := e.restore(t, "shop", "shop")
	if r.code != 0 || rs.Status.Phase != "Completed" {
		t.Fatalf("restore shop: exit %d, phase %q\nstderr: %s", r.code, rs.Status.Phase, r.stderr)
	}
	want := map[string]int32{"front-end": 30001, "ssa": 30002, "applied": 30003}
	for name, np := range want {
		if s := getService(t, dst, "sock-shop", name); s != nil && s.Spec.Ports[0].NodePort != np {
			t.Errorf("target sock-shop/%s nodePort %d, want the client-set %d kept", name, s.Spec.Ports[0].NodePort, np)
		}
	}
	// The restore did not send the allocated port: the target allocated
	// it, so no field manager owns it there (while ferry's owns 30001).
	if s := getService(t, dst, "sock-shop", "allocated"); s != nil {
		if owner := nodePortOwner(t, s); owner != "" {
			t.Errorf("target sock-shop/allocated nodePort %d (source's %d) is owned by %q: the restore sent it instead of clearing it", s.Spec.Ports[0].NodePort, allocPort, owner)
		}
	}
	if s := getService(t, dst, "sock-shop", "front-end"); s != nil && nodePortOwner(t, s) == "" {
		t.Errorf("target sock-shop/front-end: no field manager owns nodePort %d", s.Spec.Ports[0].NodePort)
	}
	changes := itemChanges(t, e, "shop", "services")
	for name, note := range map[string]string{
		"front-end": `nodePort 30001 of port 80/TCP kept: set by field manager`,
		"ssa":       `nodePort 30002 of port 80/TCP kept: set by field manager "team-a"`,
		"applied":   "nodePort 30003 of port 80/TCP kept: set in the kubectl.kubernetes.io/last-applied-configuration annotation",
		"allocated": "cleared: allocated by the source's API server",
	} {
		if !strings.Contains(changes[name], note) {
			t.Errorf("restore shop: sock-shop/%s changes %q do not say %q", name, changes[name], note)
		}
	}

	// Into sock-shop2 of the same target: the kept ports are taken now, so
	// they fall back to new ones, with a warning, and the restore completes.
	rs, r = e.restore(t, "shop2", "shop", "--namespace-mappings", "sock-shop:sock-shop2")
	if r.code != 0 || rs.Status.Phase != "Completed" {
		t.Fatalf("restore shop2: exit %d, phase %q\nstderr: %s", r.code, rs.Status.Phase, r.stderr)
	}
	d := e.run(t, "restore", "describe", "shop2")
	if !hasPortWarning(d.stdout) {
		t.Errorf("restore shop2 describe shows no warning about an already allocated node port:\n%s", d.stdout)
	}
	for name, np := range want {
		if s := getService(t, dst, "sock-shop2", name); s != nil && (s.Spec.Ports[0].NodePort == np || s.Spec.Ports[0].NodePort == 0) {
			t.Errorf("target sock-shop2/%s nodePort %d, want a new one (%d is taken by sock-shop/%s)", name, s.Spec.Ports[0].NodePort, np, name)
		}
	}
	// The same restore again: the Services with new node ports are
	// unchanged, not "exists, differs".
	if rs, r = e.restore(t, "shop2-again", "shop", "--namespace-mappings", "sock-shop:sock-shop2"); r.code != 0 || rs.Status.Counts.Created != 0 || rs.Status.Counts.Skipped != 3 {
		t.Errorf("restore shop2 again: exit %d, counts %+v, want 0 created and only the 3 never-restored items skipped\n%s", r.code, rs.Status.Counts, r.stderr)
	}
	// Under policy update, a Service that differs and whose kept port is
	// taken is updated with the target's node ports, with a warning (the
	// API server refuses the CREATE for the port before it finds the name
	// taken, and the restore's fallback clears the ports).
	fe := getService(t, dst, "sock-shop2", "front-end")
	if fe == nil {
		t.FailNow()
	}
	fe.Spec.Selector = map[string]string{"name": "changed"}
	if _, err := dst.CoreV1().Services("sock-shop2").Update(ctx, fe, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs, r = e.restore(t, "shop2-update", "shop", "--namespace-mappings", "sock-shop:sock-shop2", "--existing-resource-policy", "update")
	if r.code != 0 || rs.Status.Counts.Failed != 0 || rs.Status.Counts.Updated != 1 {
		t.Errorf("restore shop2 --existing-resource-policy update: exit %d, counts %+v, want front-end updated, 0 failed\n%s\nfailed: %v", r.code, rs.Status.Counts, r.stderr, failedItems(t, e, "shop2-update"))
	}
	if s := getService(t, dst, "sock-shop2", "front-end"); s != nil && (s.Spec.Selector["name"] != "front-end" || s.Spec.Ports[0].NodePort != fe.Spec.Ports[0].NodePort) {
		t.Errorf("sock-shop2/front-end after the update: selector %v nodePort %d, want the backup's selector and the target's %d", s.Spec.Selector, s.Spec.Ports[0].NodePort, fe.Spec.Ports[0].NodePort)
	}
	// The warning and the change say what happened: the target's node
	// ports were kept, not new ones allocated.
	if d := e.run(t, "restore", "describe", "shop2-update"); !hasPortWarning(d.stdout) || !strings.Contains(d.stdout, "keeping the target's node ports") || strings.Contains(d.stdout, "new node ports") {
		t.Errorf("restore shop2-update describe: want a warning about an already allocated node port that says the target's node ports were kept:\n%s", d.stdout)
	}
	if c := itemChanges(t, e, "shop2-update", "services")["front-end"]; !strings.Contains(c, "node ports already allocated in the target: the target's kept") || strings.Contains(c, "new ones allocated") {
		t.Errorf("restore shop2-update: sock-shop2/front-end changes %q, want the target's node ports kept", c)
	}

	// Verification counts the fallback as a change on purpose.
	dir := filepath.Join(t.TempDir(), "report")
	vr := e.run(t, "verify", "--backup", "shop", "--restore", "shop2", "--to-context", "dst", "--report-dir", dir)
	if v := readVerification(t, dir); vr.code != 0 || v.Summary["unexpected"] != 0 {
		t.Errorf("verify shop2: exit %d, %d unexpected differences: %+v\n%s", vr.code, v.Summary["unexpected"], v.Differences, vr.stderr)
	}
}

// nodePortOwner is the field manager that owns the first port's nodePort
// of s, "" for none.
func nodePortOwner(t *testing.T, s *corev1.Service) string {
	t.Helper()
	p := s.Spec.Ports[0]
	path := fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyByFields("port", int64(p.Port), "protocol", string(p.Protocol)), "nodePort")
	for _, m := range s.ManagedFields {
		set := &fieldpath.Set{}
		if err := set.FromJSON(m.FieldsV1.GetRawReader()); err != nil {
			t.Fatal(err)
		}
		if set.Has(path) {
			return m.Manager
		}
	}
	return ""
}

// itemChanges returns each item of resource's changes in restore name,
// joined, by source name.
func itemChanges(t *testing.T, e *env, name, resource string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, it := range e.results(t, name) {
		if it["resource"] != resource {
			continue
		}
		var cs []string
		for _, c := range asSlice(it["changes"]) {
			cs = append(cs, c.(string))
		}
		out[it["name"].(string)] = strings.Join(cs, "\n")
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
