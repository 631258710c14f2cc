package filter

import "testing"

func TestNamespaces(t *testing.T) {
	n, err := NewNamespaces([]string{"team-*", "demo"}, []string{"team-secret"})
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]bool{"team-a": true, "demo": true, "team-secret": false, "other": false} {
		if got := n.Match(ns); got != want {
			t.Errorf("Match(%q) = %v, want %v", ns, got, want)
		}
	}
	if n.All() {
		t.Error("All() = true for a filtered list")
	}
	if _, ok := n.Literal(); ok {
		t.Error("Literal() = true with a glob")
	}
	for _, bad := range []string{"[bad", "demo/../kube-system", ""} {
		if _, err := NewNamespaces([]string{bad}, nil); err == nil {
			t.Errorf("namespace pattern %q accepted", bad)
		}
	}
	all, _ := NewNamespaces(nil, []string{"kube-*"})
	if !all.All() || all.Match("kube-system") || !all.Match("x") {
		t.Error("empty include with exclude misbehaves")
	}
}

func TestResources(t *testing.T) {
	r := NewResources([]string{"deployments.apps", "ConfigMap", "secrets"}, []string{"secrets"})
	cases := []struct {
		group, res, kind string
		want             bool
	}{
		{"apps", "deployments", "Deployment", true},
		{"", "configmaps", "ConfigMap", true},
		{"", "secrets", "Secret", false},
		{"", "services", "Service", false},
		{"extensions", "deployments", "Deployment", false},
	}
	for _, c := range cases {
		if got := r.Match(c.group, c.res, c.kind); got != c.want {
			t.Errorf("Match(%s/%s) = %v, want %v", c.group, c.res, got, c.want)
		}
	}
	if !NewResources(nil, nil).Match("x", "y", "Z") {
		t.Error("empty include must match all")
	}
}

// TestNamespacesNamedTwice: a namespace given twice is listed once
// (a backup listed it twice and failed on its own archive).
func TestNamespacesNamedTwice(t *testing.T) {
	n, err := NewNamespaces([]string{"a", "b", "a"}, []string{"c", "c"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := n.Literal()
	if !ok || len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("Literal() = %v, %v; want [a b], true", got, ok)
	}
}
