package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestCloudProfiles: a LoadBalancer Service annotated for Alibaba Cloud
// arrives with AWS's annotations (--from-cloud alibaba --to-cloud aws), or
// with none of Alibaba's (--to-cloud generic), each change listed; an
// unknown cloud is refused before anything is written.
func TestCloudProfiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, src, "shop")
	createService(t, src, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "front", Namespace: "shop", Annotations: map[string]string{
			"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet",
			"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-spec":         "slb.s2.small",
			"team": "web",
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "front"},
			Ports: []corev1.ServicePort{{Port: 80}}},
	})
	e.backup(t, "shop", "--include-namespaces", "shop")
	if _, r := e.restore(t, "bad-cloud", "shop", "--from-cloud", "alibaba", "--to-cloud", "oracle"); r.code != 1 || !strings.Contains(r.stderr, `unknown cloud "oracle"`) {
		t.Errorf("unknown cloud: exit %d %q", r.code, r.stderr)
	}
	if _, err := dst.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{}); err == nil {
		t.Fatal("the refused restore wrote namespace shop")
	}
	for _, c := range []struct {
		to, ns string
		want   map[string]string
	}{
		{"aws", "shop-aws", map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true", "team": "web"}},
		{"generic", "shop-generic", map[string]string{"team": "web"}},
	} {
		rs, r := e.restore(t, "to-"+c.to, "shop", "--from-cloud", "alibaba", "--to-cloud", c.to, "--namespace-mappings", "shop:"+c.ns)
		if r.code != 0 || rs.Status.Counts.Failed != 0 {
			t.Fatalf("restore to %s: exit %d %+v %s", c.to, r.code, rs.Status.Counts, r.stderr)
		}
		svc := getService(t, dst, c.ns, "front")
		got := map[string]string{}
		for k, v := range svc.Annotations {
			if !strings.HasPrefix(k, "ferry.dev/") {
				got[k] = v
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("to %s: annotations %v, want %v", c.to, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("to %s: %s = %q, want %q", c.to, k, got[k], v)
			}
		}
		listed := false
		for _, it := range e.results(t, "to-"+c.to) {
			if it["name"] == "front" && it["resource"] == "services" {
				listed = strings.Contains(strings.Join(toStrings(it["changes"]), "\n"), "alibaba-cloud-loadbalancer-spec dropped")
			}
		}
		if !listed {
			t.Errorf("to %s: the dropped annotation is not listed in the Service's changes", c.to)
		}
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
