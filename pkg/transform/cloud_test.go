package transform

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCloudProfilesLoad(t *testing.T) {
	names := CloudNames()
	if strings.Join(names, ",") != "alibaba,aws,azure,gcp,generic,tencent" {
		t.Fatalf("profiles %v", names)
	}
	for _, n := range names {
		if _, err := LoadCloudProfile(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := NewCloudTranslation("alibaba", "oracle"); err == nil || !strings.Contains(err.Error(), `unknown cloud "oracle"`) || !strings.Contains(err.Error(), "to: ") {
		t.Errorf("unknown cloud: %v", err)
	}
	if ct, err := NewCloudTranslation("", ""); ct != nil || err != nil {
		t.Errorf("no clouds: %v %v", ct, err)
	}
}

const aliService = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb","annotations":{
  "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type":"intranet",
  "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-spec":"slb.s1.small",
  "prometheus.io/scrape":"true"}},"spec":{"type":"LoadBalancer"}}`

func TestCloudService(t *testing.T) {
	for _, c := range []struct {
		to       string
		want     map[string]string
		noteWant string
	}{
		{"aws", map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true", "prometheus.io/scrape": "true"}, "internal load balancer"},
		{"gcp", map[string]string{"networking.gke.io/load-balancer-type": "Internal", "prometheus.io/scrape": "true"}, "internal load balancer"},
		{"tencent", map[string]string{"prometheus.io/scrape": "true"}, "set it by hand"},
		{"generic", map[string]string{"prometheus.io/scrape": "true"}, "no annotation for it"},
	} {
		ct, err := NewCloudTranslation("alibaba", c.to)
		if err != nil {
			t.Fatal(err)
		}
		u := obj(t, aliService)
		notes := Apply(&Context{Cloud: ct}, "", u)
		got := u.GetAnnotations()
		if len(got) != len(c.want) {
			t.Errorf("to %s: annotations %v, want %v", c.to, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("to %s: %s = %q, want %q", c.to, k, got[k], v)
			}
		}
		if j := strings.Join(notes, "\n"); !strings.Contains(j, c.noteWant) || !strings.Contains(j, "alibaba-cloud-loadbalancer-spec dropped") {
			t.Errorf("to %s: notes %q", c.to, j)
		}
	}
}

func TestCloudPodsStorageIngress(t *testing.T) {
	ct, _ := NewCloudTranslation("gcp", "alibaba")
	dep := obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{
	  "nodeSelector":{"cloud.google.com/gke-nodepool":"pool-1","failure-domain.beta.kubernetes.io/zone":"z1","disktype":"ssd"},
	  "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
	    {"matchExpressions":[{"key":"cloud.google.com/gke-spot","operator":"In","values":["true"]}]},
	    {"matchExpressions":[{"key":"topology.kubernetes.io/zone","operator":"In","values":["z1"]}]}]}}}}}}}`)
	notes := Apply(&Context{Cloud: ct}, "apps", dep)
	sel, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "spec", "nodeSelector")
	if len(sel) != 2 || sel["disktype"] != "ssd" || sel["topology.kubernetes.io/zone"] != "z1" {
		t.Errorf("nodeSelector %v", sel)
	}
	terms, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	if len(terms) != 1 {
		t.Errorf("node affinity terms %v, want only the zone term", terms)
	}
	if len(notes) < 3 {
		t.Errorf("notes %v", notes)
	}
	sc := obj(t, `{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"fast"},"provisioner":"pd.csi.storage.gke.io","parameters":{"type":"pd-ssd"}}`)
	Apply(&Context{Cloud: ct}, "storage.k8s.io", sc)
	if p, _, _ := unstructured.NestedString(sc.Object, "provisioner"); p != "diskplugin.csi.alibabacloud.com" || sc.Object["parameters"] != nil {
		t.Errorf("StorageClass %v", sc.Object)
	}
	ing := obj(t, `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"i","annotations":{"kubernetes.io/ingress.class":"gce"}},"spec":{"ingressClassName":"gce"}}`)
	Apply(&Context{Cloud: ct}, "networking.k8s.io", ing)
	if c, _, _ := unstructured.NestedString(ing.Object, "spec", "ingressClassName"); c != "alb" || ing.GetAnnotations()["kubernetes.io/ingress.class"] != "alb" {
		t.Errorf("Ingress %v", ing.Object)
	}
}
