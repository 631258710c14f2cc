package transform

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// subjectNamespaces returns "kind/name=namespace" for each subject of u.
func subjectNamespaces(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	subjects, _, err := unstructured.NestedSlice(u.Object, "subjects")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range subjects {
		m := s.(map[string]any)
		ns, _ := m["namespace"].(string)
		out = append(out, m["kind"].(string)+"/"+m["name"].(string)+"="+ns)
	}
	return out
}

// TestMapNamespacesSubjects: the namespace mapping reaches the subjects of
// RoleBindings and ClusterRoleBindings (a ServiceAccount subject names its
// namespace), leaves unmapped namespaces and subjects without one (User,
// Group) alone, and notes each change.
func TestMapNamespacesSubjects(t *testing.T) {
	c := &Context{NamespaceMapping: map[string]string{"shop": "shop-copy", "ops": "ops-copy"}}
	subjects := `"subjects":[
	  {"kind":"ServiceAccount","name":"app","namespace":"shop"},
	  {"kind":"ServiceAccount","name":"mon","namespace":"ops"},
	  {"kind":"ServiceAccount","name":"dns","namespace":"kube-system"},
	  {"kind":"User","name":"alice","apiGroup":"rbac.authorization.k8s.io"},
	  {"kind":"Group","name":"devs","apiGroup":"rbac.authorization.k8s.io"}]`
	want := []string{"ServiceAccount/app=shop-copy", "ServiceAccount/mon=ops-copy", "ServiceAccount/dns=kube-system", "User/alice=", "Group/devs="}
	for _, tc := range []struct{ kind, ns, wantNS string }{
		{"RoleBinding", "shop", "shop-copy"},
		{"RoleBinding", "other", "other"},
		{"ClusterRoleBinding", "", ""},
	} {
		u := obj(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"`+tc.kind+`","metadata":{"name":"b","namespace":"`+tc.ns+`"},
		  "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},`+subjects+`}`)
		notes := Apply(c, "rbac.authorization.k8s.io", u)
		if u.GetNamespace() != tc.wantNS {
			t.Errorf("%s in %q: namespace %q, want %q", tc.kind, tc.ns, u.GetNamespace(), tc.wantNS)
		}
		if got := subjectNamespaces(t, u); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s in %q: subjects %v, want %v", tc.kind, tc.ns, got, want)
		}
		joined := strings.Join(notes, "\n")
		for _, n := range []string{"subject ServiceAccount/app: namespace shop mapped to shop-copy", "subject ServiceAccount/mon: namespace ops mapped to ops-copy"} {
			if !strings.Contains(joined, n) {
				t.Errorf("%s in %q: note %q missing from %q", tc.kind, tc.ns, n, joined)
			}
		}
		if strings.Contains(joined, "kube-system") || strings.Contains(joined, "alice") {
			t.Errorf("%s in %q: a subject that was not changed is noted: %q", tc.kind, tc.ns, joined)
		}
	}
	// Without a mapping nothing changes and nothing is noted.
	u := obj(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b","namespace":"shop"},`+subjects+`}`)
	if notes := MapNamespaces(&Context{}, u); len(notes) != 0 || subjectNamespaces(t, u)[0] != "ServiceAccount/app=shop" || u.GetNamespace() != "shop" {
		t.Errorf("no mapping: notes %v, subjects %v, namespace %q", notes, subjectNamespaces(t, u), u.GetNamespace())
	}
}
