package backup

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/kube"
)

// in returns a membership test for "namespace/name" keys.
func in(keys ...string) func(namespace, name string) bool {
	return func(namespace, name string) bool {
		for _, k := range keys {
			if k == namespace+"/"+name {
				return true
			}
		}
		return false
	}
}

func TestBindingReasons(t *testing.T) {
	b := &rbacv1.ClusterRoleBinding{Subjects: []rbacv1.Subject{
		{Kind: "ServiceAccount", Namespace: "cm", Name: "controller"},
		{Kind: "ServiceAccount", Namespace: "other", Name: "controller"}, // namespace not included
		{Kind: "User", Name: "cm/controller"},                            // not a ServiceAccount
		{Kind: "Group", Name: "system:serviceaccounts:cm"},
		{Kind: "ServiceAccount", Namespace: "cm", Name: "webhook"},
		{Kind: "User", Name: "system:serviceaccount:cm:injector"},
		{Kind: "User", Name: "system:serviceaccount:other:injector"},
		{Kind: "Group", Name: "system:serviceaccounts:other"},
		{Kind: "Group", Name: "system:serviceaccounts"}, // every namespace's: not this backup's
	}}
	got := bindingReasons(b, in("cm/controller", "cm/webhook", "cm/injector", "cm/"))
	want := []string{"bound to serviceaccount cm/controller", "bound to the serviceaccounts of namespace cm (group system:serviceaccounts:cm)",
		"bound to serviceaccount cm/webhook", "bound to serviceaccount cm/injector (as user system:serviceaccount:cm:injector)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := bindingReasons(b, in("elsewhere/x")); got != nil {
		t.Errorf("no included subject: got %q", got)
	}
}

func TestIncludedWebhooks(t *testing.T) {
	svc := func(ns, name string) admissionv1.WebhookClientConfig {
		return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: ns, Name: name}}
	}
	url := "https://example.com/hook"
	rule := func(group string) []admissionv1.RuleWithOperations {
		return []admissionv1.RuleWithOperations{{Rule: admissionv1.Rule{APIGroups: []string{group}, Resources: []string{"*"}}}}
	}
	hooks := []webhook{
		{ClientConfig: svc("cm", "webhook"), Rules: rule("a.example")},
		{ClientConfig: svc("cm", "webhook"), Rules: rule("b.example")}, // same Service: one reason
		{ClientConfig: svc("other", "webhook"), Rules: rule("c.example")},
		{ClientConfig: admissionv1.WebhookClientConfig{URL: &url}, Rules: rule("d.example")},
	}
	reasons, rules := includedWebhooks(hooks, in("cm/webhook"))
	if want := []string{"webhook service cm/webhook"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("reasons %q, want %q", reasons, want)
	}
	if len(rules) != 2 || rules[0].APIGroups[0] != "a.example" || rules[1].APIGroups[0] != "b.example" {
		t.Errorf("rules %v: want those of the included webhooks only", rules)
	}
	if reasons, rules := includedWebhooks(hooks, in("cm/other")); reasons != nil || rules != nil {
		t.Errorf("no included Service: got %q, %v", reasons, rules)
	}
	// The configuration as the API server returns it decodes into webhooks.
	var cfg struct {
		Webhooks []webhook `json:"webhooks"`
	}
	raw := `{"webhooks":[{"name":"w","clientConfig":{"service":{"namespace":"cm","name":"webhook","path":"/validate"}},
		"rules":[{"apiGroups":["cert-manager.io"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["*/*"]}]}]}`
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	if _, rules := includedWebhooks(cfg.Webhooks, in("cm/webhook")); len(rules) != 1 || !ruleCovers(rules[0], "cert-manager.io", "issuers") {
		t.Errorf("decoded rules %+v: want cert-manager.io */*", rules)
	}
}

func TestRuleCovers(t *testing.T) {
	for _, c := range []struct {
		groups, resources []string
		want              bool
	}{
		{[]string{"cert-manager.io"}, []string{"*/*"}, true},
		{[]string{"cert-manager.io"}, []string{"*"}, true},
		{[]string{"cert-manager.io"}, []string{"issuers"}, true},
		{[]string{"cert-manager.io"}, []string{"issuers/status"}, true},
		{[]string{"cert-manager.io"}, []string{"certificates"}, false},
		{[]string{"acme.cert-manager.io", "cert-manager.io"}, []string{"*"}, true},
		{[]string{"*"}, []string{"*"}, false}, // every group: no CRD in particular
		{[]string{"other.io"}, []string{"*"}, false},
	} {
		r := admissionv1.Rule{APIGroups: c.groups, Resources: c.resources}
		if got := ruleCovers(r, "cert-manager.io", "issuers"); got != c.want {
			t.Errorf("ruleCovers(%v %v, issuers.cert-manager.io) = %v, want %v", c.groups, c.resources, got, c.want)
		}
	}
}

func TestCRDReasons(t *testing.T) {
	var c crd
	raw := `{"metadata":{"name":"widgets.example.io"},"spec":{"group":"example.io","names":{"plural":"widgets"},
		"conversion":{"strategy":"Webhook","webhook":{"clientConfig":{"service":{"namespace":"app","name":"conv","path":"/convert"}},"conversionReviewVersions":["v1"]}}}}`
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	admits := map[string][]admissionv1.Rule{
		"validatingwebhookconfiguration app-hooks": {{APIGroups: []string{"example.io"}, Resources: []string{"widgets"}}},
		"mutatingwebhookconfiguration pods":        {{APIGroups: []string{""}, Resources: []string{"pods"}}},
	}
	got := crdReasons(&c, in("app/conv"), admits)
	want := []string{"conversion webhook service app/conv", "resources admitted by validatingwebhookconfiguration app-hooks"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := crdReasons(&c, in("other/conv"), nil); got != nil {
		t.Errorf("conversion Service not included: got %q", got)
	}
	var none crd
	if err := json.Unmarshal([]byte(`{"metadata":{"name":"a.b"},"spec":{"group":"b","names":{"plural":"a"},"conversion":{"strategy":"None"}}}`), &none); err != nil {
		t.Fatal(err)
	}
	if got := crdReasons(&none, in("app/conv"), nil); got != nil {
		t.Errorf("no conversion webhook: got %q", got)
	}
}

func TestOnlyOnCRDs(t *testing.T) {
	crds := map[string]map[string]bool{"cert-manager.io": {"certificates": true, "issuers": true}, "acme.cert-manager.io": {"orders": true}}
	rule := func(groups []string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: []string{"get"}}
	}
	for _, c := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		want  []string
	}{
		{"one group", []rbacv1.PolicyRule{rule([]string{"cert-manager.io"}, "certificates", "issuers/status")}, []string{"cert-manager.io"}},
		{"two groups", []rbacv1.PolicyRule{rule([]string{"cert-manager.io"}, "issuers"), rule([]string{"acme.cert-manager.io"}, "*")}, []string{"acme.cert-manager.io", "cert-manager.io"}},
		{"a resource of no included CRD", []rbacv1.PolicyRule{rule([]string{"cert-manager.io"}, "clusterissuers")}, nil},
		{"a core resource too", []rbacv1.PolicyRule{rule([]string{"cert-manager.io"}, "issuers"), rule([]string{""}, "secrets")}, nil},
		{"every group", []rbacv1.PolicyRule{rule([]string{"*"}, "*")}, nil},
		{"non-resource URLs", []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, nil},
		{"no rules (aggregated)", nil, nil},
	} {
		if got := onlyOnCRDs(c.rules, crds); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAggregated(t *testing.T) {
	role := func(name string, lbl map[string]string, selects ...map[string]string) clusterRole {
		cr := clusterRole{ClusterRole: rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}}}
		if len(selects) > 0 {
			cr.AggregationRule = &rbacv1.AggregationRule{}
			for _, s := range selects {
				cr.AggregationRule.ClusterRoleSelectors = append(cr.AggregationRule.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: s})
			}
		}
		return cr
	}
	roles := []clusterRole{
		role("app-admin", nil, map[string]string{"to-admin": "true"}),
		role("app-edit", map[string]string{"to-admin": "true"}, map[string]string{"to-edit": "true"}),
		role("app-view", map[string]string{"to-edit": "true", "to-admin": "true"}),
		role("loop", map[string]string{"to-edit": "true"}, map[string]string{"to-admin": "true"}), // cycles back
		role("unrelated", map[string]string{"to-view": "true"}),
	}
	got := aggregated(roles, []string{"app-admin"})
	want := map[string][]string{
		"app-edit": {"aggregated into clusterrole app-admin", "aggregated into clusterrole loop"},
		"app-view": {"aggregated into clusterrole app-admin", "aggregated into clusterrole app-edit", "aggregated into clusterrole loop"},
		"loop":     {"aggregated into clusterrole app-edit"},
	}
	for name, w := range want {
		g := append([]string(nil), got[name]...)
		if len(g) != len(w) {
			t.Errorf("%s: got %q, want %q", name, g, w)
			continue
		}
		for _, r := range w {
			if !slices.Contains(g, r) {
				t.Errorf("%s: got %q, want %q", name, g, w)
			}
		}
	}
	if _, ok := got["unrelated"]; ok {
		t.Error("unrelated is aggregated into nothing included")
	}
	if _, ok := got["app-admin"]; ok {
		t.Error("app-admin has no labels: nothing aggregates it")
	}
	if got := aggregated(roles, []string{"unrelated"}); len(got) != 0 {
		t.Errorf("a role without aggregationRule aggregates nothing: %v", got)
	}
}

// TestAggregatedSkipsBootstrapRoles: a RoleBinding to the built-in admin
// role must not bring every application's aggregate-to-admin roles (nor
// system:aggregate-to-admin): the target's API server keeps its own
// admin, and its aggregation controller fills it from what the target has.
func TestAggregatedSkipsBootstrapRoles(t *testing.T) {
	builtin := map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	admin := clusterRole{ClusterRole: rbacv1.ClusterRole{
		ObjectMeta:      metav1.ObjectMeta{Name: "admin", Labels: builtin},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}}},
	}}
	toAdmin := map[string]string{"rbac.authorization.k8s.io/aggregate-to-admin": "true"}
	roles := []clusterRole{
		admin,
		{ClusterRole: rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-admin", Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults", "rbac.authorization.k8s.io/aggregate-to-admin": "true"}}}},
		{ClusterRole: rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "other-app-edit", Labels: toAdmin}}},
	}
	if got := aggregated(roles, []string{"admin"}); len(got) != 0 {
		t.Errorf("the built-in admin role brought %v", got)
	}
}

// TestReasonsMessage: an object's reasons are sorted, three spelled out,
// and the rest counted, also past the bound on those kept; one given
// twice counts once.
func TestReasonsMessage(t *testing.T) {
	r := newReferences()
	r.add(grPriority, "high", "priority class of pod a/p000") // the same twice: once
	for i := 0; i < maxReasons+10; i++ {
		r.add(grPriority, "high", fmt.Sprintf("priority class of pod a/p%03d", i))
	}
	r.add(grPriority, "low", "priority class of pod a/x")
	r.written(grPriority, "high", "v1")
	res := r.results()
	if len(res) != 1 || res[0].Name != "high" || res[0].Resource != "priorityclasses.scheduling.k8s.io" || res[0].Version != "v1" {
		t.Fatalf("results %+v: want only the written object", res)
	}
	want := fmt.Sprintf("priority class of pod a/p000; priority class of pod a/p001; priority class of pod a/p002 (and %d more)", maxReasons+10-3)
	if res[0].Message != want || res[0].Reason != RelatedReason {
		t.Errorf("message %q\nwant    %q", res[0].Message, want)
	}
}

// TestObjectRefs: what each kind of namespaced object names, and why.
func TestObjectRefs(t *testing.T) {
	obj := func(s string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(s)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	res := func(group, version, resource, kind string) kube.Resource {
		return kube.Resource{GroupVersionResource: schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, Kind: kind, Namespaced: true}
	}
	for _, c := range []struct {
		res  kube.Resource
		obj  string
		want []ref
	}{
		{res("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
			`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"a"},"spec":{"volumeName":"pv-1","storageClassName":"fast"}}`,
			[]ref{{grPV, "pv-1", "volume of persistentvolumeclaim a/data"}, {grStorageClass, "fast", "storage class of persistentvolumeclaim a/data"}, {grStorageClass, "", "storage class of persistentvolumeclaim a/data"}}},
		{res("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
			`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"rb","namespace":"a"},"roleRef":{"kind":"ClusterRole","name":"view"}}`,
			[]ref{{grClusterRole, "view", "bound by rolebinding a/rb"}}},
		{res("cert-manager.io", "v1", "certificates", "Certificate"),
			`{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"c","namespace":"a"}}`,
			[]ref{{grCRD, "certificates.cert-manager.io", "CRD of included custom resources"}}},
	} {
		got := objectRefs(c.res, obj(c.obj))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v\nwant %+v", c.res.GroupResource(), got, c.want)
		}
	}
}
