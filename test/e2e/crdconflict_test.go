package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

const crdSource = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: bars.conf.test}
spec:
  group: conf.test
  scope: Namespaced
  names: {plural: bars, singular: bar, kind: Foo}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: v1
kind: Namespace
metadata: {name: crdns}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: plain, namespace: crdns}
data: {k: v}
---
apiVersion: conf.test/v1
kind: Foo
metadata: {name: f1, namespace: crdns}
spec: {x: 1}
`

const crdTarget = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: foos.conf.test}
spec:
  group: conf.test
  scope: Namespaced
  names: {plural: foos, singular: foo, kind: Foo}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

// TestCRDNeverEstablished: a restored CRD that the target cannot
// establish (its kind is taken) is a warning; the rest of the restore goes on.
func TestCRDNeverEstablished(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	dir := t.TempDir()
	srcFile, dstFile := filepath.Join(dir, "src.yaml"), filepath.Join(dir, "dst.yaml")
	_ = os.WriteFile(srcFile, []byte(crdSource), 0o644)
	_ = os.WriteFile(dstFile, []byte(crdTarget), 0o644)
	if _, err := testenv.Apply(ctx, e.src.Config, "crdns", srcFile); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Apply(ctx, e.dst.Config, "default", dstFile); err != nil {
		t.Fatal(err)
	}
	e.backup(t, "crdc", "--include-namespaces", "crdns")
	start := time.Now()
	r := e.run(t, "restore", "create", "crdc", "--from-backup", "crdc", "--context", "dst", "--crd-timeout", "5s")
	took := time.Since(start)
	if r.code == 1 || !strings.Contains(r.stdout, "bars.conf.test is not Established") {
		t.Fatalf("restore: exit %d after %s\n%s\n%s", r.code, took, r.stdout, r.stderr)
	}
	if took > 45*time.Second {
		t.Errorf("restore took %s with --crd-timeout 5s", took)
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	if _, err := dst.CoreV1().ConfigMaps("crdns").Get(ctx, "plain", metav1.GetOptions{}); err != nil {
		t.Errorf("the rest of the restore did not go on: %v", err)
	}
	var foo map[string]any
	for _, it := range e.results(t, "crdc") {
		if it["name"] == "f1" {
			foo = it
		}
	}
	if foo == nil || (foo["outcome"] != "skipped" && foo["outcome"] != "failed") {
		t.Errorf("the custom resource of the unestablished CRD: %v, want skipped or failed with a reason", foo)
	}
}
