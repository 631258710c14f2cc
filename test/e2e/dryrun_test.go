package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestDryRun: a dry run into a target that already has some of the
// objects writes nothing (resourceVersions unchanged, no new objects, no
// restore record), says per object what would happen with a diff for the
// one that differs, and reports the quota error a real restore would hit.
func TestDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	for _, cs := range []kubernetes.Interface{src, dst} {
		createNamespace(t, cs, "dry")
	}
	cm := func(name, v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": v}}
	}
	for _, c := range []*corev1.ConfigMap{cm("same", "1"), cm("changed", "source"), cm("new-1", "x"), cm("new-2", "y")} {
		if _, err := src.CoreV1().ConfigMaps("dry").Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*corev1.ConfigMap{cm("same", "1"), cm("changed", "target")} {
		if _, err := dst.CoreV1().ConfigMaps("dry").Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The quota must see kube-root-ca.crt: published after the quota's
	// first count, it is not counted until a full resync (minutes).
	for i := 0; ; i++ {
		if _, err := dst.CoreV1().ConfigMaps("dry").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err == nil {
			break
		} else if i == 120 {
			t.Fatalf("kube-root-ca.crt never published in dry: %v", err)
		}
		sleep()
	}
	// Room for one more ConfigMap only: kube-root-ca.crt, same, changed, +1.
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("4")}}}
	if _, err := dst.CoreV1().ResourceQuotas("dry").Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.backup(t, "dry", "--include-namespaces", "dry", "--exclude-resources", "resourcequotas")
	versions := func() map[string]string {
		out := map[string]string{}
		l, err := dst.CoreV1().ConfigMaps("dry").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range l.Items {
			out[c.Name] = c.ResourceVersion
		}
		return out
	}
	// Wait for the quota controller to count what is there.
	waitQuotaUsed(t, dst, "dry", "small")
	before := versions()

	r := e.run(t, "restore", "create", "dry-1", "--from-backup", "dry", "--context", "dst", "--dry-run")
	t.Logf("dry run output:\n%s", r.stdout)
	if r.code != 2 {
		t.Errorf("dry run with a quota error: exit %d, want 2\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"same", "unchanged", "changed", "exists, differs", "-  v: target", "+  v: source", "would create", "would fail", "exceeded quota"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
	after := versions()
	if len(after) != len(before) {
		t.Errorf("the dry run created objects: %v, was %v", after, before)
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("ConfigMap %s resourceVersion changed by the dry run: %s -> %s", k, v, after[k])
		}
	}
	if g := e.run(t, "restore", "get", "dry-1"); g.code != 1 {
		t.Errorf("the dry run left a restore record: %s", g.stdout)
	}
	// Under policy update, the differing object would be updated.
	u := e.run(t, "restore", "create", "dry-2", "--from-backup", "dry", "--context", "dst", "--dry-run", "--existing-resource-policy", "update", "-o", "json")
	var out struct {
		Results struct {
			Items []map[string]any `json:"items"`
		} `json:"results"`
	}
	mustJSON(t, u.stdout, &out)
	found := false
	for _, it := range out.Results.Items {
		if it["name"] == "changed" {
			found = it["outcome"] == "updated" && strings.Contains(it["diff"].(string), "+  v: source")
		}
	}
	if !found {
		t.Errorf("policy update dry run: \"changed\" not planned as an update with a diff\n%s", u.stdout)
	}
	if after := versions(); after["changed"] != before["changed"] {
		t.Error("the update dry run changed the object")
	}
}

// waitQuotaUsed waits until the quota controller counts all three
// ConfigMaps the target has (kube-root-ca.crt, same, changed): usage
// counted before the root-ca controller published kube-root-ca.crt left
// room for both new ConfigMaps, and the dry run found no quota error.
func waitQuotaUsed(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	var used resource.Quantity
	for i := 0; i < 120; i++ {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			if used = q.Status.Used["count/configmaps"]; used.Value() == 3 {
				return
			}
		}
		sleep()
	}
	t.Fatalf("quota %s/%s never counted the target's 3 ConfigMaps (used %s)", ns, name, used.String())
}
