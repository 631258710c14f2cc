package transform

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// mapped is the mapping of the namespace-selector tests: shop moves, ops
// moves, kube-system and monitoring stay.
var mapped = &Context{NamespaceMapping: map[string]string{"shop": "shop2", "ops": "ops2"}}

// at returns the JSON of u's field at path.
func at(t *testing.T, u *unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s: %v %v", strings.Join(path, "."), ok, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantNotes(t *testing.T, what string, notes []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !hasNote(notes, w) {
			t.Errorf("%s: no note says %q: %q", what, w, notes)
		}
	}
}

// TestMapNetworkPolicySelectors: a NetworkPolicy's peers that select
// namespaces by kubernetes.io/metadata.name (matchLabels, or
// matchExpressions In/NotIn) follow the namespace mapping, in ingress and
// egress; other labels, Exists and unmapped names stay.
func TestMapNetworkPolicySelectors(t *testing.T) {
	u := obj(t, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"allow-same","namespace":"shop"},
	  "spec":{"podSelector":{},"policyTypes":["Ingress","Egress"],
	    "ingress":[{"from":[
	      {"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"shop"}}},
	      {"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring","team":"shop"}},"podSelector":{"matchLabels":{"app":"prom"}}},
	      {"ipBlock":{"cidr":"10.0.0.0/8"}}]}],
	    "egress":[{"to":[
	      {"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"In","values":["ops","kube-system","shop"]},{"key":"kubernetes.io/metadata.name","operator":"Exists"},{"key":"tier","operator":"In","values":["shop"]}]}}]},
	      {"to":[{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}}]}]}}`)
	notes := Apply(mapped, "networking.k8s.io", u)
	if u.GetNamespace() != "shop2" {
		t.Errorf("namespace %q", u.GetNamespace())
	}
	for path, want := range map[string]string{
		"spec.ingress.0.from.0": `{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"shop2"}}}`,
		"spec.ingress.0.from.1": `{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring","team":"shop"}},"podSelector":{"matchLabels":{"app":"prom"}}}`,
		"spec.egress.0.to.0":    `{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"In","values":["ops2","kube-system","shop2"]},{"key":"kubernetes.io/metadata.name","operator":"Exists"},{"key":"tier","operator":"In","values":["shop"]}]}}`,
		"spec.egress.1.to.0":    `{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop2"]}]}}`,
	} {
		if got := peer(t, u, path); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	wantNotes(t, "NetworkPolicy", notes,
		"spec.ingress[0].from[0].namespaceSelector: kubernetes.io/metadata.name shop mapped to shop2",
		"spec.egress[0].to[0].namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name In): ops mapped to ops2",
		"spec.egress[0].to[0].namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name In): shop mapped to shop2",
		"spec.egress[1].to[0].namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name NotIn): shop mapped to shop2")
	if hasNote(notes, "monitoring") || hasNote(notes, "kube-system") || hasNote(notes, "tier") {
		t.Errorf("notes name what did not change: %q", notes)
	}
	// Without a mapping nothing changes.
	u = obj(t, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p","namespace":"shop"},
	  "spec":{"ingress":[{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"shop"}}}]}]}}`)
	if notes := MapNamespaceSelectors(&Context{}, u); len(notes) != 0 || !strings.Contains(peer(t, u, "spec.ingress.0.from.0"), `"shop"`) {
		t.Errorf("no mapping: notes %v, peer %s", notes, peer(t, u, "spec.ingress.0.from.0"))
	}
}

// peer returns the JSON at a dotted path whose numbers index lists.
func peer(t *testing.T, u *unstructured.Unstructured, dotted string) string {
	t.Helper()
	var v any = u.Object
	for _, p := range strings.Split(dotted, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i := int(p[0] - '0')
			if i >= len(x) {
				t.Fatalf("%s: index %d out of range", dotted, i)
			}
			v = x[i]
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMapWebhookSelectors: admission webhooks' namespaceSelector (the
// common "not in my own namespace" guard) and admission policies'
// namespace selectors follow the mapping.
func TestMapWebhookSelectors(t *testing.T) {
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		u := obj(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"`+kind+`","metadata":{"name":"shop-webhook"},
		  "webhooks":[{"name":"a.shop.dev","namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","shop"]}]}},
		              {"name":"b.shop.dev","namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ops"}}},
		              {"name":"c.shop.dev"}]}`)
		notes := Apply(mapped, "admissionregistration.k8s.io", u)
		if got, want := at(t, u, "webhooks"), `[{"name":"a.shop.dev","namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","shop2"]}]}},{"name":"b.shop.dev","namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ops2"}}},{"name":"c.shop.dev"}]`; got != want {
			t.Errorf("%s webhooks = %s, want %s", kind, got, want)
		}
		wantNotes(t, kind, notes,
			"webhooks[0].namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name NotIn): shop mapped to shop2",
			"webhooks[1].namespaceSelector: kubernetes.io/metadata.name ops mapped to ops2")
	}
	for kind, path := range map[string][]string{
		"ValidatingAdmissionPolicy":        {"spec", "matchConstraints", "namespaceSelector"},
		"MutatingAdmissionPolicy":          {"spec", "matchConstraints", "namespaceSelector"},
		"ValidatingAdmissionPolicyBinding": {"spec", "matchResources", "namespaceSelector"},
		"MutatingAdmissionPolicyBinding":   {"spec", "matchResources", "namespaceSelector"},
	} {
		u := obj(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"`+kind+`","metadata":{"name":"p"},"spec":{}}`)
		_ = unstructured.SetNestedField(u.Object, map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "shop"}}, path...)
		notes := Apply(mapped, "admissionregistration.k8s.io", u)
		if got := at(t, u, path...); got != `{"matchLabels":{"kubernetes.io/metadata.name":"shop2"}}` {
			t.Errorf("%s %s = %s", kind, strings.Join(path, "."), got)
		}
		wantNotes(t, kind, notes, strings.Join(path, ".")+": kubernetes.io/metadata.name shop mapped to shop2")
	}
}

// TestMapAffinitySelectors: pod affinity and anti-affinity terms, required
// and preferred, in every workload kind's pod spec: their
// namespaceSelector and their namespaces list follow the mapping.
func TestMapAffinitySelectors(t *testing.T) {
	affinity := `{"podAntiAffinity":{
	    "requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app":"db"}},"namespaces":["shop","monitoring"]}],
	    "preferredDuringSchedulingIgnoredDuringExecution":[{"weight":10,"podAffinityTerm":{"topologyKey":"zone","namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ops"}}}}]},
	  "podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"zone","namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"In","values":["shop"]}]}}]}}`
	want := `{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"In","values":["shop2"]}]},"topologyKey":"zone"}]},` +
		`"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"podAffinityTerm":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ops2"}},"topologyKey":"zone"},"weight":10}],` +
		`"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"db"}},"namespaces":["shop2","monitoring"],"topologyKey":"kubernetes.io/hostname"}]}}`
	for _, tc := range []struct{ group, kind, apiVersion, wrap, path string }{
		{"", "Pod", "v1", `"spec":%s`, "spec"},
		{"apps", "Deployment", "apps/v1", `"spec":{"template":{"spec":%s}}`, "spec.template.spec"},
		{"apps", "StatefulSet", "apps/v1", `"spec":{"template":{"spec":%s}}`, "spec.template.spec"},
		{"apps", "DaemonSet", "apps/v1", `"spec":{"template":{"spec":%s}}`, "spec.template.spec"},
		{"apps", "ReplicaSet", "apps/v1", `"spec":{"template":{"spec":%s}}`, "spec.template.spec"},
		{"", "ReplicationController", "v1", `"spec":{"template":{"spec":%s}}`, "spec.template.spec"},
		{"batch", "Job", "batch/v1", `"spec":{"template":{"spec":%s}}`, "spec.template.spec"},
		{"batch", "CronJob", "batch/v1", `"spec":{"jobTemplate":{"spec":{"template":{"spec":%s}}}}`, "spec.jobTemplate.spec.template.spec"},
	} {
		podSpec := `{"containers":[{"name":"c","image":"x"}],"affinity":` + affinity + `}`
		u := obj(t, `{"apiVersion":"`+tc.apiVersion+`","kind":"`+tc.kind+`","metadata":{"name":"w","namespace":"shop"},`+strings.Replace(tc.wrap, "%s", podSpec, 1)+`}`)
		notes := Apply(mapped, tc.group, u)
		path := append(strings.Split(tc.path, "."), "affinity")
		if got := at(t, u, path...); got != want {
			t.Errorf("%s affinity = %s\nwant %s", tc.kind, got, want)
		}
		wantNotes(t, tc.kind, notes,
			tc.path+".affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces: shop mapped to shop2",
			tc.path+".affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaceSelector: kubernetes.io/metadata.name ops mapped to ops2",
			tc.path+".affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector.matchExpressions[0] (kubernetes.io/metadata.name In): shop mapped to shop2")
	}
}

// TestResourceQuotaScopes: a ResourceQuota's scopes and scopeSelector
// name pod properties (Terminating, BestEffort, PriorityClass,
// CrossNamespacePodAffinity, ...), never namespaces, so the mapping
// changes nothing in them; the quota itself moves with its namespace.
func TestResourceQuotaScopes(t *testing.T) {
	u := obj(t, `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"shop"},
	  "spec":{"hard":{"pods":"10"},"scopes":["NotBestEffort"],"scopeSelector":{"matchExpressions":[{"scopeName":"PriorityClass","operator":"In","values":["shop"]},{"scopeName":"CrossNamespacePodAffinity","operator":"Exists"}]}}}`)
	before := at(t, u, "spec")
	notes := Apply(mapped, "", u)
	if u.GetNamespace() != "shop2" || at(t, u, "spec") != before || len(notes) != 0 {
		t.Errorf("ResourceQuota: namespace %q, spec %s (was %s), notes %v", u.GetNamespace(), at(t, u, "spec"), before, notes)
	}
}
