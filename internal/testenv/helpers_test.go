package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello
spec:
  replicas: 1
  selector:
    matchLabels: {app: hello}
  template:
    metadata:
      labels: {app: hello}
    spec:
      containers:
      - name: hello
        image: registry.k8s.io/pause:3.10
`

// crdYAML has CRLF endings, a leading "---", a comment-only document, an
// empty document, and no final newline. The Widget comes before its CRD.
var crdYAML = strings.ReplaceAll(`---
# a comment-only document
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
---
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: extra
---
apiVersion: v1
kind: Namespace
metadata:
  name: extra
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true`, "\n", "\r\n")

// clientset returns a typed client for c or fails the test.
func clientset(t *testing.T, c *Cluster) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// poll calls cond every 100 ms until it returns true, failing the test
// after timeout (the last error, if any, is reported).
func poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	start := time.Now()
	var lastErr error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ok, err := cond()
		if ok {
			t.Logf("%s: after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not there after %s (last error: %v)", what, timeout, lastErr)
}

// writeFile writes content to a file in a test temp dir and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// cutEnv splits "K=V".
func cutEnv(kv string) (string, string, bool) {
	return strings.Cut(kv, "=")
}
