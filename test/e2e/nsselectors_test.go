package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/internal/testenv"
)

// selectorObjects are the source objects of TestNamespaceSelectors: in
// shop (mapped to shop2) and ops (not mapped), each selecting shop by its
// name, as the usual "same namespace only" and "not in my own namespace"
// idioms do.
const selectorObjects = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: Namespace
metadata:
  name: ops
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: same-namespace
  namespace: shop
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: shop
  egress:
  - to:
    - namespaceSelector:
        matchExpressions:
        - {key: kubernetes.io/metadata.name, operator: In, values: [shop, kube-system]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: from-shop
  namespace: ops
spec:
  podSelector: {}
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: shop
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: shop-guard
webhooks:
- name: guard.shop.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig:
    service: {namespace: shop, name: guard, path: /validate}
  rules:
  - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}
  namespaceSelector:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, shop]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: shop-widgets
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: shop
  validations:
  - expression: "true"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: shop-widgets
spec:
  policyName: shop-widgets
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchExpressions:
      - {key: kubernetes.io/metadata.name, operator: In, values: [shop]}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: web, image: registry.example.com/web:1}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels: {app: web}
            namespaces: [shop]
        podAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 50
            podAffinityTerm:
              topologyKey: topology.kubernetes.io/zone
              labelSelector:
                matchLabels: {app: cache}
              namespaceSelector:
                matchLabels:
                  kubernetes.io/metadata.name: shop
---
apiVersion: v1
kind: ResourceQuota
metadata:
  name: cross-namespace-affinity
  namespace: shop
spec:
  hard:
    pods: "0"
  scopeSelector:
    matchExpressions:
    - {scopeName: CrossNamespacePodAffinity, operator: Exists}
`

// TestNamespaceSelectors checks docs/design.md#namespace-selectors on real
// API servers: restored with --namespace-mappings shop:shop2, every
// namespace selector on kubernetes.io/metadata.name and every pod affinity
// namespaces list that named shop names shop2, so a NetworkPolicy still
// selects its own namespace; each rewrite is in its item's changes, and
// the verification finds nothing unexpected.
func TestNamespaceSelectors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	ctx := context.Background()
	e := newEnv(t)
	applyYAML(t, e.src.Config, "selectors.yaml", selectorObjects)
	e.backup(t, "sel", "--include-namespaces", "shop,ops", "--include-cluster-resources", "true", "--include-resources",
		"namespaces,networkpolicies,deployments,resourcequotas,validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings")
	rs, r := e.restore(t, "sel", "sel", "--namespace-mappings", "shop:shop2")
	if r.code != 0 || rs.Status.Phase != "Completed" {
		t.Fatalf("restore: exit %d, phase %q\nstderr: %s\nfailed: %v", r.code, rs.Status.Phase, r.stderr, failedItems(t, e, "sel"))
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)

	// The restored NetworkPolicy selects its own namespace again.
	np, err := dst.NetworkingV1().NetworkPolicies("shop2").Get(ctx, "same-namespace", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := dst.CoreV1().Namespaces().Get(ctx, "shop2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, sel := range map[string]*metav1.LabelSelector{"ingress": np.Spec.Ingress[0].From[0].NamespaceSelector, "egress": np.Spec.Egress[0].To[0].NamespaceSelector} {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Matches(labels.Set(ns.Labels)) {
			t.Errorf("shop2/same-namespace %s selector %s does not match namespace shop2 (labels %v)", what, s, ns.Labels)
		}
	}
	if got := strings.Join(np.Spec.Egress[0].To[0].NamespaceSelector.MatchExpressions[0].Values, ","); got != "shop2,kube-system" {
		t.Errorf("shop2/same-namespace egress values %s, want shop2,kube-system", got)
	}
	if np, err := dst.NetworkingV1().NetworkPolicies("ops").Get(ctx, "from-shop", metav1.GetOptions{}); err != nil || np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "shop2" {
		t.Errorf("ops/from-shop: %v %v, want it to select shop2", err, np)
	}
	if w, err := dst.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "shop-guard", metav1.GetOptions{}); err != nil || strings.Join(w.Webhooks[0].NamespaceSelector.MatchExpressions[0].Values, ",") != "kube-system,shop2" {
		t.Errorf("shop-guard webhook: %v %+v, want NotIn kube-system,shop2", err, w)
	}
	if p, err := dst.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "shop-widgets", metav1.GetOptions{}); err != nil || p.Spec.MatchConstraints.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "shop2" {
		t.Errorf("shop-widgets policy: %v %+v, want it to select shop2", err, p)
	}
	if b, err := dst.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "shop-widgets", metav1.GetOptions{}); err != nil || strings.Join(b.Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Values, ",") != "shop2" {
		t.Errorf("shop-widgets binding: %v %+v, want In shop2", err, b)
	}
	d, err := dst.AppsV1().Deployments("shop2").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aff := d.Spec.Template.Spec.Affinity
	if got := strings.Join(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].Namespaces, ","); got != "shop2" {
		t.Errorf("shop2/web anti-affinity namespaces %s, want shop2", got)
	}
	if got := aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; got != "shop2" {
		t.Errorf("shop2/web affinity namespaceSelector selects %s, want shop2", got)
	}
	if q, err := dst.CoreV1().ResourceQuotas("shop2").Get(ctx, "cross-namespace-affinity", metav1.GetOptions{}); err != nil || q.Spec.ScopeSelector.MatchExpressions[0].ScopeName != "CrossNamespacePodAffinity" {
		t.Errorf("shop2/cross-namespace-affinity quota: %v %+v", err, q)
	}

	// Each rewrite is a change on purpose in its item's result.
	notes := map[string]string{}
	for _, res := range []string{"networkpolicies.networking.k8s.io", "validatingwebhookconfigurations.admissionregistration.k8s.io",
		"validatingadmissionpolicies.admissionregistration.k8s.io", "validatingadmissionpolicybindings.admissionregistration.k8s.io", "deployments.apps"} {
		for name, c := range itemChanges(t, e, "sel", res) {
			notes[name] += c
		}
	}
	for name, want := range map[string][]string{
		"same-namespace": {"spec.ingress[0].from[0].namespaceSelector: kubernetes.io/metadata.name shop mapped to shop2",
			"spec.egress[0].to[0].namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name In): shop mapped to shop2"},
		"from-shop":    {"spec.ingress[0].from[0].namespaceSelector: kubernetes.io/metadata.name shop mapped to shop2"},
		"shop-guard":   {"webhooks[0].namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name NotIn): shop mapped to shop2"},
		"shop-widgets": {"spec.matchConstraints.namespaceSelector: kubernetes.io/metadata.name shop mapped to shop2", "spec.matchResources.namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name In): shop mapped to shop2"},
		"web": {"spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces: shop mapped to shop2",
			"spec.template.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaceSelector: kubernetes.io/metadata.name shop mapped to shop2"},
	} {
		for _, w := range want {
			if !strings.Contains(notes[name], w) {
				t.Errorf("%s: changes %q do not say %q", name, notes[name], w)
			}
		}
	}

	dir := filepath.Join(t.TempDir(), "report")
	vr := e.run(t, "verify", "--backup", "sel", "--restore", "sel", "--to-context", "dst", "--report-dir", dir)
	if v := readVerification(t, dir); vr.code != 0 || v.Summary["unexpected"] != 0 {
		t.Errorf("verify: exit %d, %d unexpected differences: %+v\n%s", vr.code, v.Summary["unexpected"], v.Differences, vr.stderr)
	}
}

// applyYAML applies manifest (multi-document YAML) to the cluster at cfg.
func applyYAML(t *testing.T, cfg *rest.Config, name, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Apply(context.Background(), cfg, "", file); err != nil {
		t.Fatal(err)
	}
}
