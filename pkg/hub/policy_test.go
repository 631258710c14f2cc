package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadPolicyRefusals: a policy file that cannot be applied as written
// is refused at start, naming the file and what is wrong.
func TestLoadPolicyRefusals(t *testing.T) {
	cases := []struct{ name, policy, want string }{
		{"not rbac", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "document 1"},
		{"unknown field", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\nrulez: []\n", "rulez"},
		{"missing ClusterRole", "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b, namespace: team}\nsubjects: [{kind: Group, name: x}]\nroleRef: {kind: ClusterRole, name: nope, apiGroup: rbac.authorization.k8s.io}\n", `RoleBinding team/b: roleRef names ClusterRole "nope"`},
		{"service account", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\nsubjects: [{kind: ServiceAccount, name: x, namespace: ops}]\nroleRef: {kind: ClusterRole, name: \"ferry:viewer\", apiGroup: rbac.authorization.k8s.io}\n", "subjects[0] is a ServiceAccount"},
		{"built-in role", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: \"ferry:viewer\"}\nrules: [{apiGroups: [\"*\"], resources: [\"*\"], verbs: [\"*\"]}]\n", `ClusterRole "ferry:viewer" is defined already`},
		{"no namespace", "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nsubjects: [{kind: Group, name: x}]\nroleRef: {kind: ClusterRole, name: \"ferry:viewer\", apiGroup: rbac.authorization.k8s.io}\n", "metadata.namespace is required"},
	}
	for _, c := range cases {
		f := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(f, []byte(c.policy), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPolicy(f)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), f) {
			t.Errorf("%s: %v, want an error naming %s and %q", c.name, err, f, c.want)
		}
	}
	// Documents of comments only (a header, a trailing "---") are not
	// objects (a reviewer's finding: they stopped the hub).
	f := filepath.Join(t.TempDir(), "policy.yaml")
	commented := "# team policy\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\nsubjects: [{kind: Group, name: ops}]\nroleRef: {kind: ClusterRole, name: \"ferry:viewer\", apiGroup: rbac.authorization.k8s.io}\n---\n# end\n"
	if err := os.WriteFile(f, []byte(commented), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(f); err != nil {
		t.Errorf("a policy with comment-only documents: %v", err)
	}
	if _, err := LoadPolicy(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a missing policy file: %v", err)
	}
}
