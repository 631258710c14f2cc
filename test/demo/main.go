// Command demo is `make demo`: it starts a source and a target cluster
// (real kube-apiserver, etcd and kube-controller-manager), applies a
// sample app to the source in namespace demo, runs `ferry migrate` with a
// local file:// store, and prints the restore summary and the source and
// target objects side by side. It stops everything it started.
//
// Usage: go run ./test/demo -ferry bin/ferry
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/internal/testenv"
)

const app = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.demo.ferry.dev
spec:
  group: demo.ferry.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
---
apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  namespace: demo
  labels: {app: nginx}
spec:
  replicas: 2
  selector:
    matchLabels: {app: nginx}
  template:
    metadata:
      labels: {app: nginx}
    spec:
      containers:
      - name: nginx
        image: nginx:1.7.9
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: nginx
  namespace: demo
spec:
  type: LoadBalancer
  selector: {app: nginx}
  ports:
  - port: 80
    targetPort: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: nginx-config
  namespace: demo
data:
  index.html: "<h1>moved by ferry</h1>"
---
apiVersion: v1
kind: Secret
metadata:
  name: nginx-credentials
  namespace: demo
type: Opaque
stringData:
  password: not-a-real-password
---
apiVersion: demo.ferry.dev/v1
kind: Widget
metadata:
  name: blue-widget
  namespace: demo
spec:
  size: 3
  color: blue
`

func main() {
	ferry := flag.String("ferry", "bin/ferry", "path to the ferry binary")
	flag.Parse()
	if err := run(*ferry); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ferry string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ferry, err := filepath.Abs(ferry)
	if err != nil {
		return err
	}
	fmt.Println("==> starting a source and a target cluster (kube-apiserver, etcd, kube-controller-manager)")
	clusters, err := testenv.StartNamedClusters(ctx, nil, "source", "target")
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range clusters {
			_ = c.Stop()
		}
	}()
	dir, err := os.MkdirTemp("", "ferry-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, clusters...); err != nil {
		return err
	}
	appFile := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(appFile, []byte(app), 0o644); err != nil {
		return err
	}
	fmt.Println("==> applying the sample app to the source cluster, namespace demo")
	if _, err := testenv.Apply(ctx, clusters[0].Config, "demo", appFile); err != nil {
		return err
	}
	storage := "file://" + filepath.Join(dir, "store")
	// The verification report outlives the demo's clusters: open it after.
	reportDir, err := filepath.Abs(filepath.Join("bin", "demo-report"))
	if err != nil {
		return err
	}
	fmt.Printf("==> ferry migrate --from-context source --to-context target --include-namespaces demo --storage %s\n\n", storage)
	cmd := exec.CommandContext(ctx, ferry, "migrate", "--kubeconfig", kubeconfig, "--from-context", "source", "--to-context", "target",
		"--include-namespaces", "demo", "--storage", storage, "--name", "demo", "--report-dir", reportDir)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ferry migrate: %w", err)
	}
	fmt.Println("\n==> source and target, side by side")
	return sideBySide(ctx, clusters[0].Config, clusters[1].Config)
}

func sideBySide(ctx context.Context, srcCfg, dstCfg *rest.Config) error {
	src, err := dynamic.NewForConfig(srcCfg)
	if err != nil {
		return err
	}
	dst, err := dynamic.NewForConfig(dstCfg)
	if err != nil {
		return err
	}
	kinds := []struct {
		gvr    schema.GroupVersionResource
		kind   string
		detail func(map[string]any) string
	}{
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", func(o map[string]any) string {
			return fmt.Sprintf("replicas=%v image=%v", dig(o, "spec", "replicas"), dig(o, "spec", "template", "spec", "containers", 0, "image"))
		}},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service", func(o map[string]any) string {
			return fmt.Sprintf("type=%v clusterIP=%v", dig(o, "spec", "type"), dig(o, "spec", "clusterIP"))
		}},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", func(o map[string]any) string {
			return fmt.Sprintf("data=%v", dig(o, "data"))
		}},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", func(o map[string]any) string {
			keys := []string{}
			if d, ok := dig(o, "data").(map[string]any); ok {
				for k := range d {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			return fmt.Sprintf("type=%v keys=%s", dig(o, "type"), strings.Join(keys, ","))
		}},
		{schema.GroupVersionResource{Group: "demo.ferry.dev", Version: "v1", Resource: "widgets"}, "Widget", func(o map[string]any) string {
			return fmt.Sprintf("spec=%v", dig(o, "spec"))
		}},
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSOURCE\tTARGET")
	for _, k := range kinds {
		sl, err := src.Resource(k.gvr).Namespace("demo").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range sl.Items {
			if o.GetName() == "kube-root-ca.crt" {
				continue
			}
			t, err := dst.Resource(k.gvr).Namespace("demo").Get(ctx, o.GetName(), metav1.GetOptions{})
			target := "MISSING"
			if err == nil {
				target = k.detail(t.Object)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.kind, o.GetName(), k.detail(o.Object), target)
		}
	}
	return tw.Flush()
}

func dig(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || len(l) <= k {
				return nil
			}
			o = l[k]
		}
	}
	return o
}
