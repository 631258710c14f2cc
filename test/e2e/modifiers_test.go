package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const modifierRules = `version: v1
resourceModifierRules:
- conditions:
    groupResource: configmaps
    resourceNameRegex: "^settings$"
    namespaces: [mod]
  patches:
  - operation: replace
    path: /data/endpoint
    value: "https://db.target.example"
- conditions:
    groupResource: configmaps
    namespaces: [mod]
    labelSelector: {matchLabels: {tier: cache}}
  mergePatches:
  - patchData: |
      {"metadata": {"annotations": {"source.example/only": null}}, "data": {"size": "2Gi"}}
- conditions:
    groupResource: deployments.apps
    namespaces: [mod]
    matches:
    - path: /spec/template/spec/containers/0/image
      value: registry.cn-hangzhou.aliyuncs.com/shop/web:1.2
  strategicPatches:
  - patchData: |
      {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "ccr.ccs.tencentyun.com/shop/web:1.2"}]}}}}
- conditions:
    groupResource: configmaps
    namespaces: [elsewhere]
  patches:
  - operation: remove
    path: /data
`

// TestResourceModifiers restores with a rule file holding a JSON patch, a
// merge patch, a strategic patch and conditions that hold and that do not:
// the target gets exactly the expected objects. A malformed file and a
// patch that cannot apply are refused with the rule and the field named.
func TestResourceModifiers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, src, "mod")
	for _, c := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"endpoint": "https://db.source.example", "mode": "prod"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cache", Labels: map[string]string{"tier": "cache"}, Annotations: map[string]string{"source.example/only": "x", "keep": "y"}}, Data: map[string]string{"size": "1Gi"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "untouched"}, Data: map[string]string{"a": "b"}},
	} {
		if _, err := src.CoreV1().ConfigMaps("mod").Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	zero := int32(0)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: &zero,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "web", Image: "registry.cn-hangzhou.aliyuncs.com/shop/web:1.2"}, {Name: "sidecar", Image: "envoy:1"}}}}}}
	if _, err := src.AppsV1().Deployments("mod").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.backup(t, "mod", "--include-namespaces", "mod")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Malformed: refused before anything is written, naming rule and field.
	bad := write("bad.yaml", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: configmaps}\n  patches:\n  - {operation: replace, path: data/x, value: y}\n")
	if _, r := e.restore(t, "mod-bad", "mod", "--resource-modifiers", bad); r.code != 1 || !strings.Contains(r.stderr, "rule 1") || !strings.Contains(r.stderr, "patches[0].path") {
		t.Errorf("malformed rules: exit %d stderr %q", r.code, r.stderr)
	}
	if _, err := dst.CoreV1().Namespaces().Get(ctx, "mod", metav1.GetOptions{}); err == nil {
		t.Fatal("a refused restore wrote namespace mod")
	}
	// A patch that cannot apply fails its object, naming the rule.
	cannot := write("cannot.yaml", "version: v1\nresourceModifierRules:\n- conditions: {groupResource: configmaps, resourceNameRegex: '^untouched$'}\n  patches:\n  - {operation: replace, path: /data/missing, value: x}\n")
	rs, r := e.restore(t, "mod-cannot", "mod", "--resource-modifiers", cannot, "--namespace-mappings", "mod:mod-cannot")
	if r.code != 2 || rs.Status.Counts.Failed != 1 {
		t.Errorf("unappliable patch: exit %d counts %+v", r.code, rs.Status.Counts)
	}
	failed := failedItems(t, e, "mod-cannot")
	if len(failed) != 1 || !strings.Contains(failed[0], "rule 1") || !strings.Contains(failed[0], "untouched") {
		t.Errorf("failed items %v, want untouched with rule 1 named", failed)
	}

	rules := write("rules.yaml", modifierRules)
	if _, r := e.restore(t, "mod-ok", "mod", "--resource-modifiers", rules); r.code != 0 {
		t.Fatalf("restore with rules: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	get := func(name string) *corev1.ConfigMap {
		c, err := dst.CoreV1().ConfigMaps("mod").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if s := get("settings"); s.Data["endpoint"] != "https://db.target.example" || s.Data["mode"] != "prod" {
		t.Errorf("JSON patch: settings = %v", s.Data)
	}
	if c := get("cache"); c.Data["size"] != "2Gi" || c.Annotations["source.example/only"] != "" || c.Annotations["keep"] != "y" {
		t.Errorf("merge patch: cache = %v %v", c.Data, c.Annotations)
	}
	if u := get("untouched"); len(u.Data) != 1 || u.Data["a"] != "b" {
		t.Errorf("a rule for another namespace changed untouched: %v", u.Data)
	}
	d, err := dst.AppsV1().Deployments("mod").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 2 || cs[0].Image != "ccr.ccs.tencentyun.com/shop/web:1.2" || cs[1].Image != "envoy:1" {
		t.Errorf("strategic patch: containers %+v", cs)
	}
}
