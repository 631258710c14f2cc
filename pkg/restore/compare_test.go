package restore

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

func TestContains(t *testing.T) {
	existing := map[string]any{"spec": map[string]any{"a": int64(1), "defaulted": "x", "list": []any{map[string]any{"n": "p", "extra": true}}}}
	cases := []struct {
		desired map[string]any
		same    bool
		where   string
	}{
		{map[string]any{"spec": map[string]any{"a": float64(1)}}, true, ""},
		{map[string]any{"spec": map[string]any{"a": int64(2)}}, false, ".spec.a"},
		{map[string]any{"spec": map[string]any{"list": []any{map[string]any{"n": "p"}}}}, true, ""},
		{map[string]any{"spec": map[string]any{"list": []any{}}}, false, ".spec.list (0 items, target has 1)"},
		{map[string]any{"spec": map[string]any{"missing": nil, "empty": map[string]any{}}}, true, ""},
		{map[string]any{"spec": map[string]any{"new": "v"}}, false, ".spec.new"},
	}
	for i, c := range cases {
		same, where := contains(existing, c.desired, "")
		if same != c.same || (!same && where != c.where) {
			t.Errorf("case %d: contains = %v at %q, want %v at %q", i, same, where, c.same, c.where)
		}
	}
}

func TestOverlay(t *testing.T) {
	existing := map[string]any{"spec": map[string]any{"clusterIP": "10.0.0.1", "ports": []any{map[string]any{"port": int64(80), "nodePort": int64(30000)}}}}
	desired := map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(81)}}}}
	got := overlay(existing, desired).(map[string]any)["spec"].(map[string]any)
	p := got["ports"].([]any)[0].(map[string]any)
	if got["clusterIP"] != "10.0.0.1" || p["port"] != int64(81) || p["nodePort"] != int64(30000) {
		t.Errorf("overlay = %v", got)
	}
}

// A target Secret with a key the backup lacks is not "the same", and an
// update replaces the data whole (a stale credential must not survive).
func TestExactData(t *testing.T) {
	existing := map[string]any{"data": map[string]any{"a": "1", "extra": "stale"}, "metadata": map[string]any{"labels": map[string]any{"x": "y"}}}
	desired := map[string]any{"data": map[string]any{"a": "1"}, "metadata": map[string]any{"labels": map[string]any{}}}
	if same, where := contains(existing, desired, ""); same || !strings.HasPrefix(where, ".data.extra") {
		t.Errorf("contains = %v at %q, want a difference at .data.extra", same, where)
	}
	merged := overlay(existing, desired).(map[string]any)
	if d := merged["data"].(map[string]any); len(d) != 1 || d["a"] != "1" {
		t.Errorf("overlay kept stale data: %v", d)
	}
}

func TestValidateMappings(t *testing.T) {
	o := &Options{Name: "r", Spec: v1alpha1.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": "m", "b": "m"}}}
	if err := o.Validate(); err == nil {
		t.Error("two sources mapped to one target accepted")
	}
	o.Spec.NamespaceMapping = map[string]string{"a": "x", "b": "y"}
	if err := o.Validate(); err != nil {
		t.Errorf("valid mapping refused: %v", err)
	}
}

// Update replaces: a field the backup does not set is gone (a Deployment
// moved to Recreate must lose rollingUpdate), allocated fields stay.
func TestReplacement(t *testing.T) {
	cur := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "resourceVersion": "7", "uid": "u"},
		"spec":     map[string]any{"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25%"}}}}}
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d"}, "spec": map[string]any{"strategy": map[string]any{"type": "Recreate"}}}}
	got := replacement(cur, desired)
	if _, ok, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "strategy", "rollingUpdate"); ok || got.GetResourceVersion() != "7" {
		t.Errorf("replacement = %v", got.Object)
	}
	svc := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "metadata": map[string]any{"name": "s"},
		"spec": map[string]any{"clusterIP": "10.0.0.9", "ports": []any{map[string]any{"port": int64(80), "nodePort": int64(30001)}}}}}
	dsvc := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "metadata": map[string]any{"name": "s"},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}}
	g := replacement(svc, dsvc)
	ip, _, _ := unstructured.NestedString(g.Object, "spec", "clusterIP")
	ports, _, _ := unstructured.NestedSlice(g.Object, "spec", "ports")
	if ip != "10.0.0.9" || ports[0].(map[string]any)["nodePort"] != int64(30001) {
		t.Errorf("allocated fields lost: %v", g.Object)
	}
}

// TestDiffRedactsSecrets: a Secret's values never appear in a diff; the
// keys that differ are still shown.
func TestDiffRedactsSecrets(t *testing.T) {
	cur := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"},
		"data": map[string]any{"same": "c2FtZS12YWx1ZQ==", "changed": "dGFyZ2V0LXNlY3JldA==", "extra": "ZXh0cmE="}}}
	want := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"},
		"data": map[string]any{"same": "c2FtZS12YWx1ZQ==", "changed": "YmFja3VwLXNlY3JldA=="}, "stringData": map[string]any{"plain": "hunter2"}}}
	d := diff(cur, want)
	for _, secret := range []string{"c2FtZS12YWx1ZQ==", "dGFyZ2V0LXNlY3JldA==", "YmFja3VwLXNlY3JldA==", "ZXh0cmE=", "hunter2"} {
		if strings.Contains(d, secret) {
			t.Errorf("diff shows a secret value %q:\n%s", secret, d)
		}
	}
	for _, line := range []string{"-  changed: '<redacted: target value>'", "+  changed: '<redacted: backup value>'", "-  extra: '<redacted: target value>'", "+  plain: '<redacted: backup value>'"} {
		if !strings.Contains(d, line) {
			t.Errorf("diff lacks %q:\n%s", line, d)
		}
	}
	if strings.Contains(d, "-  same:") {
		t.Errorf("an equal key shows as changed:\n%s", d)
	}
	// The objects themselves are untouched.
	if cur.Object["data"].(map[string]any)["same"] != "c2FtZS12YWx1ZQ==" {
		t.Error("diff changed its input")
	}
}

// TestDiffRedactsLastApplied: kubectl apply stores the whole Secret in an
// annotation; a diff never shows it.
func TestDiffRedactsLastApplied(t *testing.T) {
	mk := func(pw string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": "s", "annotations": map[string]any{lastApplied: `{"stringData":{"password":"` + pw + `"}}`}},
			"stringData": map[string]any{"password": pw}}}
	}
	d := diffAs("target", "expected", mk("ROTATED77"), mk("SUPERSECRET42"))
	if strings.Contains(d, "ROTATED77") || strings.Contains(d, "SUPERSECRET42") {
		t.Fatalf("diff shows a secret value:\n%s", d)
	}
	if !strings.Contains(d, "<redacted: target value>") || !strings.Contains(d, "<redacted: backup value>") {
		t.Errorf("diff does not say what differs:\n%s", d)
	}
}

// TestPruneAdded: fields only the target has are additions, except what
// the target's server and controllers own.
func TestPruneAdded(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}}}}
	live := desired.DeepCopy()
	live.SetAnnotations(map[string]string{"deployment.kubernetes.io/revision": "1", "team": "x"})
	live.SetLabels(map[string]string{"ferry.dev/restore": "r", "evil": "yes"})
	live.SetUID("u1")
	live.Object["status"] = map[string]any{"replicas": int64(2)}
	_ = unstructured.SetNestedField(live.Object, true, "spec", "template", "spec", "hostNetwork")
	cs, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
	cs[0].(map[string]any)["securityContext"] = map[string]any{"privileged": true}
	_ = unstructured.SetNestedSlice(live.Object, cs, "spec", "template", "spec", "containers")
	pruned, added := pruneAdded(live, desired)
	want := ".metadata.annotations.team,.metadata.labels.evil,.spec.template.spec.containers[0].securityContext.privileged,.spec.template.spec.hostNetwork"
	if got := strings.Join(added, ","); got != want {
		t.Errorf("added %s, want %s", got, want)
	}
	if pruned.GetUID() != "u1" || pruned.GetAnnotations()["deployment.kubernetes.io/revision"] != "1" || pruned.GetLabels()["ferry.dev/restore"] != "r" {
		t.Error("pruneAdded removed server-owned metadata")
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", "template", "spec", "hostNetwork"); !ok {
		t.Error("pruneAdded changed its input")
	}
	// A Service's allocated fields are not additions.
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s"},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}}
	lsvc := svc.DeepCopy()
	_ = unstructured.SetNestedField(lsvc.Object, "10.0.0.9", "spec", "clusterIP")
	lsvc.Object["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["nodePort"] = int64(30001)
	if _, added := pruneAdded(lsvc, svc); len(added) != 0 {
		t.Errorf("allocated Service fields reported as added: %v", added)
	}
	// An object without labels that gets one.
	nolabels := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}}
	l2 := nolabels.DeepCopy()
	l2.SetLabels(map[string]string{"x": "y"})
	if _, added := pruneAdded(l2, nolabels); strings.Join(added, ",") != ".metadata.labels.x" {
		t.Errorf("a label added to an object without labels: %v", added)
	}
}
