package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
)

// measureHub starts `ferry hub` on a fresh data directory, stores the
// objects and measures it.
func measureHub(ctx context.Context, ferry string, n int) (footprint, error) {
	dir, err := os.MkdirTemp("", "bench-hub-")
	if err != nil {
		return footprint{}, err
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	cmd := exec.Command(ferry, "hub", "--data-dir", dir, "--secure-port", "0", "--controllers=false")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return footprint{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	var cfg *rest.Config
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		c, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
		if err != nil {
			return false, nil
		}
		c.QPS = -1 // as the reference's: no client-side rate limit
		cfg = c
		return ready(cfg), nil
	})
	if err != nil {
		return footprint{}, fmt.Errorf("not ready: %w\n%s", err, benchutil.Tail(log.String(), 20))
	}
	f := footprint{Server: "ferry hub (embedded etcd)", ReadySeconds: time.Since(start).Seconds(), Objects: n}
	benchutil.Logf(program, "hub ready in %.2fs", f.ReadySeconds)
	gvr := schema.GroupVersionResource{Group: "ferry.dev", Version: "v1beta1", Resource: "migrations"}
	c := dynamic.NewForConfigOrDie(cfg)
	for _, name := range []string{"old", "new"} {
		cl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ferry.dev/v1beta1", "kind": "Cluster",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"credentialRef": map[string]any{"name": name}}}}
		if _, err := c.Resource(gvr.GroupVersion().WithResource("clusters")).Namespace("default").Create(ctx, cl, metav1.CreateOptions{}); err != nil {
			return f, err
		}
	}
	pids := func() []int { return []int{cmd.Process.Pid} }
	return f, measure(ctx, &f, c.Resource(gvr).Namespace("default"), "ferry.dev/v1beta1", pids)
}

// measureKube starts etcd and kube-apiserver with envtest, installs the
// CRD and measures them with the same objects.
func measureKube(ctx context.Context, n int) (footprint, error) {
	bin, err := testenv.BinDir()
	if err != nil {
		return footprint{}, err
	}
	api := &envtest.APIServer{Path: filepath.Join(bin, "kube-apiserver")}
	api.Configure().Set("advertise-address", "127.0.0.1").Set("endpoint-reconciler-type", "none")
	env := &envtest.Environment{BinaryAssetsDirectory: bin, ControlPlane: envtest.ControlPlane{APIServer: api, Etcd: &envtest.Etcd{Path: filepath.Join(bin, "etcd")}},
		ControlPlaneStartTimeout: time.Minute, ControlPlaneStopTimeout: 30 * time.Second}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		return footprint{}, err
	}
	defer func() { _ = env.Stop() }()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	f := footprint{Server: "kube-apiserver + etcd", ReadySeconds: time.Since(start).Seconds(), Objects: n}
	benchutil.Logf(program, "kube-apiserver and etcd ready in %.2fs", f.ReadySeconds)
	if err := installCRD(ctx, cfg); err != nil {
		return f, err
	}
	gvr := schema.GroupVersionResource{Group: "bench.ferry.dev", Version: "v1", Resource: "migrations"}
	pids := func() []int { return childrenNamed("kube-apiserver", "etcd") }
	if len(pids()) != 2 {
		return f, fmt.Errorf("found the processes %v, want kube-apiserver's and etcd's", pids())
	}
	return f, measure(ctx, &f, dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace("default"), "bench.ferry.dev/v1", pids)
}

// installCRD creates migrations.bench.ferry.dev, its spec and status kept
// as given, and waits until it is established.
func installCRD(ctx context.Context, cfg *rest.Config) error {
	cs := apiextensions.NewForConfigOrDie(cfg)
	keep := true
	schemaProps := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec":   {Type: "object", XPreserveUnknownFields: &keep},
		"status": {Type: "object", XPreserveUnknownFields: &keep},
	}}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "migrations.bench.ferry.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "bench.ferry.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "migrations", Singular: "migration", Kind: "Migration", ListKind: "MigrationList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schemaProps}}}}}
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// ready says whether cfg's server answers /readyz with 200.
func ready(cfg *rest.Config) bool {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false
	}
	resp, err := client.Get(cfg.Host + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// measure stores f.Objects objects of apiVersion in r, then reads the idle
// RSS of pids and the peak under load.
func measure(ctx context.Context, f *footprint, r dynamic.ResourceInterface, apiVersion string, pids func() []int) error {
	for i := range f.Objects {
		if _, err := r.Create(ctx, migration(apiVersion, i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("object %d: %w", i, err)
		}
	}
	time.Sleep(settle)
	idle, err := rssMiB(pids())
	if err != nil {
		return err
	}
	f.IdleMiB = idle
	f.LoadMiB, f.Lists, err = underLoad(ctx, r, pids)
	benchutil.Logf(program, "%s: idle %.0f MiB, %.0f MiB under load (%d lists)", f.Server, f.IdleMiB, f.LoadMiB, f.Lists)
	return err
}

// underLoad runs 8 listers and 8 watches for 15 s and returns the peak
// RSS of pids and how many lists completed.
func underLoad(ctx context.Context, r dynamic.ResourceInterface, pids func() []int) (float64, int, error) {
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var lists atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		w, err := r.Watch(lctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, err
		}
		defer w.Stop()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lctx.Err() == nil {
				if _, err := r.List(lctx, metav1.ListOptions{}); err == nil {
					lists.Add(1)
				}
			}
		}()
	}
	peak := 0.0
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for ; lctx.Err() == nil; <-t.C {
		if m, err := rssMiB(pids()); err == nil && m > peak {
			peak = m
		}
	}
	wg.Wait()
	return peak, int(lists.Load()), nil
}

// migration is Migration i, about 1 KiB of spec.
func migration(apiVersion string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": "Migration",
		"metadata": map[string]any{"name": fmt.Sprintf("move-%04d", i), "labels": map[string]any{"team": fmt.Sprintf("team-%d", i%20)}},
		"spec": map[string]any{
			"source":  map[string]any{"cluster": "old"},
			"target":  map[string]any{"cluster": "new"},
			"storage": map[string]any{"location": fmt.Sprintf("s3://ferry-migrations-bucket?prefix=team-%d/&region=eu-west-1", i%20)},
			"backup": map[string]any{"includedNamespaces": []any{"shop", "shop-db", "payments", "catalog"},
				"excludedResources": []any{"events", "events.events.k8s.io"}, "labelSelector": "app.kubernetes.io/part-of=shop"},
			"restore": map[string]any{
				"namespaceMapping":    map[string]any{"shop": "shop-eu", "shop-db": "shop-db-eu", "payments": "payments-eu"},
				"storageClassMapping": map[string]any{"gp3": "premium-rwo", "gp2": "standard-rwo"},
				"fromCloud":           "aws", "toCloud": "gcp", "existingResourcePolicy": "update",
			},
			"images":  map[string]any{"mode": "copy", "registryMappings": []any{"123456789012.dkr.ecr.eu-west-1.amazonaws.com/shop=europe-docker.pkg.dev/acme/shop"}},
			"volumes": true,
		},
	}}
}

// rssMiB is the summed VmRSS of pids.
func rssMiB(pids []int) (float64, error) {
	total := 0.0
	for _, pid := range pids {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, err
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				total += kb / 1024
			}
		}
		f.Close()
	}
	return total, nil
}

// childrenNamed are this process's children whose command is one of names.
func childrenNamed(names ...string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		comm := string(stat[open+1 : end])
		fields := strings.Fields(string(stat[end+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		for _, n := range names {
			if comm == n {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
