package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

const statusApp = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: jobs2.test.ferry.dev}
spec:
  group: test.ferry.dev
  scope: Namespaced
  names: {plural: jobs2, singular: job2, kind: Job2}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: v1
kind: Namespace
metadata: {name: pol}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: pol}
data: {mode: source}
---
apiVersion: test.ferry.dev/v1
kind: Job2
metadata: {name: j, namespace: pol}
spec: {steps: 3}
`

// TestExistingResourcePolicyAndStatus covers --existing-resource-policy
// none and update, and --restore-status.
func TestExistingResourcePolicyAndStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	f := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(f, []byte(statusApp), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Apply(ctx, e.src.Config, "pol", f); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "test.ferry.dev", Version: "v1", Resource: "jobs2"}
	srcDyn := dynamic.NewForConfigOrDie(e.src.Config)
	j, err := srcDyn.Resource(gvr).Namespace("pol").Get(ctx, "j", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(j.Object, "Succeeded", "status", "phase")
	if _, err := srcDyn.Resource(gvr).Namespace("pol").UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.backup(t, "pol", "--include-namespaces", "pol")

	// First restore, keeping the status of jobs2 only.
	if _, res := e.restore(t, "pol-1", "pol", "--restore-status", "jobs2.test.ferry.dev"); res.code != 0 {
		t.Fatalf("restore: exit %d: %s %s", res.code, res.stdout, res.stderr)
	}
	dstDyn := dynamic.NewForConfigOrDie(e.dst.Config)
	got, err := dstDyn.Resource(gvr).Namespace("pol").Get(ctx, "j", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Succeeded" {
		t.Errorf("restored status.phase = %q, want Succeeded (--restore-status)", phase)
	}

	// Someone changes the target; policy none reports and leaves it.
	cs := kubernetes.NewForConfigOrDie(e.dst.Config)
	cm, err := cs.CoreV1().ConfigMaps("pol").Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["mode"] = "drifted"
	if _, err := cs.CoreV1().ConfigMaps("pol").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r2, res := e.restore(t, "pol-2", "pol")
	if res.code != 0 || r2.Status.Counts.Skipped == 0 || r2.Status.Counts.Updated != 0 {
		t.Fatalf("policy none: exit %d counts %+v", res.code, r2.Status.Counts)
	}
	found := false
	for _, it := range e.results(t, "pol-2") {
		if it["name"] == "settings" && it["resource"] == "configmaps" {
			found = it["outcome"] == "skipped" && it["reason"] == "exists, differs" && strings.Contains(it["message"].(string), ".data.mode")
		}
	}
	if !found {
		t.Error("policy none: settings not reported as exists, differs at .data.mode")
	}
	if cm, _ := cs.CoreV1().ConfigMaps("pol").Get(ctx, "settings", metav1.GetOptions{}); cm.Data["mode"] != "drifted" {
		t.Errorf("policy none changed the target: mode = %q", cm.Data["mode"])
	}

	// Policy update puts the backup's content back, and only that object.
	r3, res := e.restore(t, "pol-3", "pol", "--existing-resource-policy", "update")
	if res.code != 0 || r3.Status.Counts.Updated != 1 || r3.Status.Counts.Failed != 0 || r3.Status.Counts.Created != 0 {
		t.Fatalf("policy update: exit %d counts %+v, want exactly 1 updated", res.code, r3.Status.Counts)
	}
	if cm, _ := cs.CoreV1().ConfigMaps("pol").Get(ctx, "settings", metav1.GetOptions{}); cm.Data["mode"] != "source" {
		t.Errorf("policy update: mode = %q, want source", cm.Data["mode"])
	}
	// And then everything is the same.
	r4, res := e.restore(t, "pol-4", "pol", "--existing-resource-policy", "update")
	if res.code != 0 || r4.Status.Counts.Updated != 0 || r4.Status.Counts.Created != 0 {
		t.Fatalf("after update: exit %d counts %+v, want 0 updated, 0 created", res.code, r4.Status.Counts)
	}
	// Bad policy value.
	if _, res := e.restore(t, "pol-5", "pol", "--existing-resource-policy", "overwrite"); res.code != 1 || !strings.Contains(res.stderr, "overwrite") {
		t.Errorf("bad policy: exit %d stderr %q", res.code, res.stderr)
	}
}
