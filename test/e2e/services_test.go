package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// TestServices checks docs/design.md#services: the target allocates its
// own clusterIP and node ports (so IPs and ports that are taken in the
// target never make a restore fail), headless Services stay headless, and
// --preserve-nodeports falls back to new ports with a warning when the
// source's ports are already allocated.
func TestServices(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)

	createNamespace(t, src, "svc")
	port := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}
	sel := map[string]string{"app": "web"}
	web := createService(t, src, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: sel, Ports: []corev1.ServicePort{port}},
	})
	lb := createService(t, src, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: "lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: sel, Ports: []corev1.ServicePort{port},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal},
	})
	np := createService(t, src, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: "np"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: sel, Ports: []corev1.ServicePort{port}},
	})
	createService(t, src, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: "headless"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel, Ports: []corev1.ServicePort{port}},
	})
	webIP, lbNodePort, lbHealth, npNodePort := web.Spec.ClusterIP, lb.Spec.Ports[0].NodePort, lb.Spec.HealthCheckNodePort, np.Spec.Ports[0].NodePort
	if webIP == "" || webIP == corev1.ClusterIPNone || lbNodePort == 0 || lbHealth == 0 || npNodePort == 0 {
		t.Fatalf("source did not allocate: web clusterIP %q, lb nodePort %d healthCheckNodePort %d, np nodePort %d", webIP, lbNodePort, lbHealth, npNodePort)
	}
	t.Logf("source: web clusterIP %s, lb nodePort %d healthCheckNodePort %d, np nodePort %d", webIP, lbNodePort, lbHealth, npNodePort)

	// The target already uses the source's clusterIP and lb's node ports.
	createNamespace(t, dst, "squatter")
	createService(t, dst, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "squatter", Name: "ip"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: webIP, Ports: []corev1.ServicePort{port}},
	})
	squatPort := port
	squatPort.NodePort = lbNodePort
	createService(t, dst, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "squatter", Name: "ports"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{squatPort},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: lbHealth},
	})

	e.backup(t, "svc", "--include-namespaces", "svc")
	rs, r := e.restore(t, "svc", "svc")
	if r.code != 0 || rs.Status.Phase != "Completed" || rs.Status.Counts.Failed != 0 {
		t.Errorf("restore svc: exit %d, phase %q, counts %+v, want exit 0, Completed, 0 failed\nstderr: %s\nfailed: %v",
			r.code, rs.Status.Phase, rs.Status.Counts, r.stderr, failedItems(t, e, "svc"))
	}
	if got := getService(t, dst, "svc", "web"); got != nil && (got.Spec.ClusterIP == "" || got.Spec.ClusterIP == corev1.ClusterIPNone || got.Spec.ClusterIP == webIP) {
		t.Errorf("target svc/web clusterIP %q, want a newly allocated one (the source's %s is taken by squatter/ip)", got.Spec.ClusterIP, webIP)
	}
	checkNewPorts(t, getService(t, dst, "svc", "lb"), "svc/lb", lbNodePort, lbHealth)
	checkHeadless(t, getService(t, dst, "svc", "headless"), "svc/headless")
	var firstNP int32
	if s := getService(t, dst, "svc", "np"); s != nil {
		firstNP = s.Spec.Ports[0].NodePort
	}

	// Again into svc2, keeping node ports: lb's are taken, np's is free
	// (unless the first restore happened to draw it).
	r = e.run(t, "restore", "create", "svc2", "--from-backup", "svc", "--context", "dst", "--preserve-nodeports", "--namespace-mappings", "svc:svc2")
	if r.code != 0 {
		t.Errorf("restore svc2 --preserve-nodeports: exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !contains(r.stdout, "Completed") || !contains(r.stdout, "failed 0") {
		t.Errorf("restore svc2 output does not say Completed with 0 failed:\n%s", r.stdout)
	}
	g := e.run(t, "restore", "get", "svc2", "-o", "json")
	if g.code != 0 {
		t.Fatalf("restore get svc2: exit %d: %s", g.code, g.stderr)
	}
	var rs2 struct {
		Status struct {
			Phase  string         `json:"phase"`
			Counts map[string]int `json:"counts"`
		} `json:"status"`
	}
	mustJSON(t, g.stdout, &rs2)
	if rs2.Status.Phase != "Completed" || rs2.Status.Counts["failed"] != 0 {
		t.Errorf("restore svc2: phase %q counts %v, want Completed with 0 failed", rs2.Status.Phase, rs2.Status.Counts)
	}
	d := e.run(t, "restore", "describe", "svc2")
	if !hasPortWarning(r.stdout) && !hasPortWarning(d.stdout) {
		t.Errorf("restore svc2 reports no warning about an already allocated node port\nrestore create output:\n%s\nrestore describe output:\n%s", r.stdout, d.stdout)
	}
	checkNewPorts(t, getService(t, dst, "svc2", "lb"), "svc2/lb", lbNodePort, lbHealth)
	checkHeadless(t, getService(t, dst, "svc2", "headless"), "svc2/headless")
	if firstNP != npNodePort {
		if s := getService(t, dst, "svc2", "np"); s != nil && s.Spec.Ports[0].NodePort != npNodePort {
			t.Errorf("svc2/np nodePort %d, want the source's %d kept by --preserve-nodeports (it is free in the target)", s.Spec.Ports[0].NodePort, npNodePort)
		}
	}
}

func hasPortWarning(out string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Warning:") && strings.Contains(l, "already allocated") {
			return true
		}
	}
	return false
}

func checkNewPorts(t *testing.T, s *corev1.Service, what string, takenNodePort, takenHealth int32) {
	t.Helper()
	if s == nil {
		return
	}
	if len(s.Spec.Ports) == 0 {
		t.Errorf("target %s has no ports", what)
		return
	}
	if p := s.Spec.Ports[0].NodePort; p == 0 || p == takenNodePort {
		t.Errorf("target %s nodePort %d, want a new one (the source's %d is taken by squatter/ports)", what, p, takenNodePort)
	}
	if p := s.Spec.HealthCheckNodePort; p == 0 || p == takenHealth {
		t.Errorf("target %s healthCheckNodePort %d, want a new one (the source's %d is taken by squatter/ports)", what, p, takenHealth)
	}
}

func checkHeadless(t *testing.T, s *corev1.Service, what string) {
	t.Helper()
	if s == nil {
		return
	}
	if s.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("target %s clusterIP %q, want None (headless)", what, s.Spec.ClusterIP)
	}
	if len(s.Spec.ClusterIPs) != 1 || s.Spec.ClusterIPs[0] != corev1.ClusterIPNone {
		t.Errorf("target %s clusterIPs %v, want [None]", what, s.Spec.ClusterIPs)
	}
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

func createService(t *testing.T, cs kubernetes.Interface, s *corev1.Service) *corev1.Service {
	t.Helper()
	got, err := cs.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating service %s/%s: %v", s.Namespace, s.Name, err)
	}
	return got
}

// getService reads a target Service; nil (and a test error) if it is missing.
func getService(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Service {
	t.Helper()
	s, err := cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("target service %s/%s: %v", ns, name, err)
		return nil
	}
	return s
}
