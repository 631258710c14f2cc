// Command load is ferry's load test: a whole-cluster migration of 50,000
// objects in 200 namespaces, timed, with ferry's peak memory.
//
// What is measured. Three local clusters are started (internal/testenv:
// real etcd, kube-apiserver and kube-controller-manager each): "source",
// "target" and "target2". The source is seeded with client-go (48
// goroutines, client-side rate limiting off) with -namespaces namespaces
// load-000 .. load-199 and -objects objects spread round-robin over them:
//
//   - 10% Widgets, custom resources of the CRD widgets.load.ferry.dev
//     (namespaced, v1, status subresource, structural schema);
//   - 40% ConfigMaps (four data keys, 1 KiB);
//   - 26% Secrets (Opaque, three data keys, about 300 B);
//   - 12% Deployments (one nginx container, replicas 0 so that no Pods
//     exist; kube-controller-manager still makes one ReplicaSet each);
//   - 12% Services (selector, one port). The test API server's service CIDR
//     is envtest's 10.0.0.0/24, about 250 cluster IPs, so only the first
//     -clusterip-per-ns Services of each namespace (default 1, 200 in all)
//     are ClusterIP Services; the rest are headless (clusterIP: None). A
//     ClusterIP Service refused with "range is full" is created headless
//     instead, and counted.
//
// With the defaults that is 25 Widgets, 100 ConfigMaps, 65 Secrets, 30
// Deployments and 30 Services per namespace: 250 × 200 = 50,000 objects.
// The cluster adds its own (ReplicaSets, Endpoints, EndpointSlices, a
// ServiceAccount and the kube-root-ca.crt ConfigMap per namespace), which
// ferry backs up too, so ferry's item counts are higher than -objects. The
// benchmark waits until every Deployment has its ReplicaSet before the
// first ferry run, so all runs see the same source.
//
// Then three ferry runs, each ONE child process, timed by wall clock from
// start to exit, with its peak resident set size from getrusage (the
// child's ru_maxrss):
//
//   - migrate: "ferry migrate --from-context source --to-context target
//     --storage file://DIR --name load -o json", the whole cluster, no
//     filters: the figure;
//   - backup: "ferry backup create load-b --context source", the same
//     source again, to time the backup half alone;
//   - restore: "ferry restore create load-b --from-backup load-b --context
//     target2" into the third, empty cluster, to time the restore half alone.
//
// objects/s is the seeded objects (-objects) divided by the wall time of
// the run; ferry's own counts (items backed up, objects created) are shown
// next to it. The target is a peak RSS under 512 MiB (-rss-target-mib)
// for every run: a run over it fails the benchmark (exit status 1).
//
// Verification. Each restore must end in phase Completed with 0 failed
// items, and each target must hold, in the load namespaces, as many
// Namespaces, Widgets, ConfigMaps (without kube-root-ca.crt), Secrets,
// Deployments and Services as the source. Then a sample of the content is
// compared: every -sample-every'th (100th) seeded object of each kind, and
// every -sample-every'th namespace, is read from the source and the target
// and must have the same labels and the same spec (Widgets, Deployments,
// Services, cluster IPs aside), data (ConfigMaps, Secrets) and type
// (Secrets); ferry's own ferry.dev/backup and ferry.dev/restore labels are
// left out. Any difference fails the benchmark. Skipped items, failed items,
// warnings and errors are read back with "ferry restore describe -o json"
// (untimed) and summarised in the JSON result.
//
// Run from the repository root (about 5 to 10 minutes on 2 cores, 3
// clusters of about 450 MB each):
//
//	go run ./bench/load [-namespaces 200] [-objects 50000]
//
// or "make load". A Markdown table goes to stdout, progress to stderr, and
// the full result to bench/results/load.json (git-ignored). Other flags:
// -workers (seeding goroutines), -clusterip-per-ns, -rss-target-mib,
// -sample-every, -ferry (prebuilt binary instead of building ./cmd/ferry),
// -out (JSON path).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kubeferry/ferry/bench/internal/benchutil"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
)

const (
	srcContext  = "source"
	dstContext  = "target"
	dst2Context = "target2"
	// rssTargetMiB is the limit on ferry's peak RSS (-rss-target-mib).
	rssTargetMiB = 512.0
	nsPrefix     = "load-"
	crdName      = "widgets.load.ferry.dev"
	appLabel     = "ferry-load"
)

var (
	gvrNamespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrConfigMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrSecrets     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrServices    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrDeployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrReplicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	gvrWidgets     = schema.GroupVersionResource{Group: "load.ferry.dev", Version: "v1", Resource: "widgets"}
	gvrCRDs        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// mix is the share (percent) of each kind in the seeded objects; the last
// kind takes the rounding remainder.
var mix = []struct {
	resource string
	percent  int
}{
	{"widgets", 10},
	{"configmaps", 40},
	{"secrets", 26},
	{"deployments", 12},
	{"services", 12},
}

// compared are the kinds whose counts in the load namespaces must be equal
// in source and target, in report order.
var compared = []struct {
	name string
	gvr  schema.GroupVersionResource
}{
	{"namespaces", gvrNamespaces},
	{"widgets", gvrWidgets},
	{"configmaps", gvrConfigMaps},
	{"secrets", gvrSecrets},
	{"deployments", gvrDeployments},
	{"services", gvrServices},
}

func main() {
	var o options
	flag.IntVar(&o.namespaces, "namespaces", 200, "number of namespaces")
	flag.IntVar(&o.objects, "objects", 50000, "number of seeded objects (10% Widgets, 40% ConfigMaps, 26% Secrets, 12% Deployments, 12% Services)")
	flag.IntVar(&o.workers, "workers", 48, "goroutines seeding the source")
	flag.IntVar(&o.clusterIPPerNS, "clusterip-per-ns", 1, "ClusterIP Services per namespace (the others are headless; the test service CIDR is a /24)")
	flag.Float64Var(&o.rssTargetMiB, "rss-target-mib", rssTargetMiB, "peak RSS target in MiB: a ferry run above it fails the benchmark (exit 1)")
	flag.IntVar(&o.sampleEvery, "sample-every", 100, "after each restore, compare the content of every Nth seeded object of each kind (and every Nth namespace) with the source")
	flag.StringVar(&o.ferry, "ferry", "", "ferry binary to use (default: build ./cmd/ferry)")
	flag.StringVar(&o.out, "out", "", "JSON result file (default <repo>/bench/results/load.json)")
	flag.Parse()
	if o.namespaces <= 0 || o.objects <= 0 || o.workers <= 0 || o.clusterIPPerNS < 0 || o.rssTargetMiB <= 0 || o.sampleEvery <= 0 {
		fmt.Fprintln(os.Stderr, "load: -namespaces, -objects, -workers, -rss-target-mib and -sample-every must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if res != nil {
		printMarkdown(os.Stdout, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type options struct {
	namespaces, objects, workers, clusterIPPerNS, sampleEvery int
	rssTargetMiB                                              float64
	ferry, out                                                string
}

// Seed describes the seeding of the source.
type Seed struct {
	Namespaces int `json:"namespaces"`
	// Objects is what was created per kind (without the namespaces).
	Objects map[string]int `json:"objects"`
	Total   int            `json:"total"`
	Seconds float64        `json:"seconds"`
	// PerSecond is Total / Seconds.
	PerSecond float64 `json:"perSecond"`
	Workers   int     `json:"workers"`
	// ClusterIPServices and HeadlessServices split the Services;
	// RangeFullFallbacks counts ClusterIP Services refused with "range is
	// full" and created headless instead.
	ClusterIPServices  int `json:"clusterIPServices"`
	HeadlessServices   int `json:"headlessServices"`
	RangeFullFallbacks int `json:"rangeFullFallbacks"`
	// Retries counts creates retried after a transient error.
	Retries int `json:"retries"`
	// ReplicaSets is how many ReplicaSets kube-controller-manager had made
	// in the load namespaces when the ferry runs began, after
	// ReplicaSetWaitSeconds of waiting.
	ReplicaSets           int     `json:"replicaSets"`
	ReplicaSetWaitSeconds float64 `json:"replicaSetWaitSeconds"`
}

// Run is one timed ferry child process.
type Run struct {
	Operation string   `json:"operation"`
	Args      []string `json:"args"`
	// Objects is the seeded objects (Seed.Total); PerSecond is Objects
	// divided by Seconds, the child's wall-clock time.
	Objects   int     `json:"objects"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"perSecond"`
	MaxRSSMiB float64 `json:"maxRSSMiB"`
	// UnderTarget is MaxRSSMiB < the target (Result.TargetMiB); a run
	// over it fails the benchmark.
	UnderTarget bool `json:"underTarget"`
	ExitCode    int  `json:"exitCode"`

	Backup  *v1alpha1.Backup  `json:"backup,omitempty"`
	Restore *v1alpha1.Restore `json:"restore,omitempty"`
	// ItemsBackedUp and Created are ferry's own counts.
	ItemsBackedUp int `json:"itemsBackedUp,omitempty"`
	Created       int `json:"created,omitempty"`
	// FerryBackupSeconds and FerryRestoreSeconds come from the Backup's and
	// Restore's start and completion timestamps (whole seconds).
	FerryBackupSeconds  float64 `json:"ferryBackupSeconds,omitempty"`
	FerryRestoreSeconds float64 `json:"ferryRestoreSeconds,omitempty"`
	// Verification is migrate's verification summary, and
	// FerryVerifySeconds how long the verification took.
	Verification       *report.Summary `json:"verification,omitempty"`
	FerryVerifySeconds float64         `json:"ferryVerifySeconds,omitempty"`
	// Problems summarises "ferry restore describe -o json" after a restore.
	Problems *Problems `json:"problems,omitempty"`
	// Verify compares the target with the source after a restore.
	Verify []Check `json:"verify,omitempty"`
	// Content compares a sample of the restored objects' content with the
	// source's after a restore.
	Content *ContentCheck `json:"content,omitempty"`
	// StderrTail is the end of ferry's stderr.
	StderrTail string `json:"stderrTail,omitempty"`
	// Error is set when ferry failed, its output did not decode, a restore
	// was not Completed with 0 failed, verification (counts or sampled
	// content) found a difference, or the peak RSS was over the target.
	Error string `json:"error,omitempty"`
}

// Problems is what a restore did not create, from its results file.
type Problems struct {
	// Outcomes counts items per outcome.
	Outcomes map[string]int `json:"outcomes"`
	// ByResource counts items per "outcome resource".
	ByResource map[string]int `json:"byResource"`
	// Skipped counts skipped items per "resource: reason", the reason cut
	// before its object-specific part ("left to controllers: Deployment x
	// recreates it" counts as "left to controllers"); SkippedExample holds
	// one full reason of each.
	Skipped        map[string]int    `json:"skipped,omitempty"`
	SkippedExample map[string]string `json:"skippedExample,omitempty"`
	// Failed lists the first 50 failed items, verbatim; FailedByMessage
	// counts all of them per "resource: reason: message", with quoted
	// names in the message replaced by "…".
	Failed          []string       `json:"failed,omitempty"`
	FailedByMessage map[string]int `json:"failedByMessage,omitempty"`
	Warnings        []string       `json:"warnings,omitempty"`
	Errors          []string       `json:"errors,omitempty"`
	// WarningsTotal and ErrorsTotal are the full counts (the lists keep 20).
	WarningsTotal int `json:"warningsTotal"`
	ErrorsTotal   int `json:"errorsTotal"`
}

// Check is one kind's count in the load namespaces of source and target.
type Check struct {
	Kind   string `json:"kind"`
	Source int    `json:"source"`
	Target int    `json:"target"`
	OK     bool   `json:"ok"`
}

// Result is what the benchmark writes to the JSON file.
type Result struct {
	Time       time.Time `json:"time"`
	Commit     string    `json:"commit,omitempty"`
	GoVersion  string    `json:"goVersion"`
	CPUs       int       `json:"cpus"`
	Namespaces int       `json:"namespaces"`
	Objects    int       `json:"objects"`
	TargetMiB  float64   `json:"targetMiB"`
	Seed       Seed      `json:"seed"`
	// SourceCounts are the source's counts in the load namespaces.
	SourceCounts map[string]int `json:"sourceCounts"`
	Runs         []*Run         `json:"runs"`
}

func run(ctx context.Context, o options) (*Result, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bench", "results", "load.json")
	}
	tmp, err := os.MkdirTemp("", "ferry-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	ferry := o.ferry
	if ferry == "" {
		ferry = filepath.Join(tmp, "ferry")
		logf("building ferry")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", ferry, "./cmd/ferry")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/ferry: %w", err)
		}
	}

	logf("starting clusters %s, %s and %s", srcContext, dstContext, dst2Context)
	clusters, err := testenv.StartNamedClusters(ctx, nil, srcContext, dstContext, dst2Context)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range clusters {
			if err := c.Stop(); err != nil {
				logf("%v", err)
			}
		}
	}()
	src, dst, dst2 := clusters[0], clusters[1], clusters[2]
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, clusters...); err != nil {
		return nil, err
	}
	storeDir := filepath.Join(tmp, "store")
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		return nil, err
	}
	storage := "file://" + storeDir

	res := &Result{
		Time: time.Now().UTC(), Commit: benchutil.GitCommit(root), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Namespaces: o.namespaces, Objects: o.objects, TargetMiB: o.rssTargetMiB,
	}

	logf("seeding %s: %d namespaces, %d objects, %d goroutines", srcContext, o.namespaces, o.objects, o.workers)
	if res.Seed, err = seed(ctx, src.Config, o); err != nil {
		return res, fmt.Errorf("seeding the source: %w", err)
	}
	logf("seeded %d objects (+%d namespaces) in %.1fs = %.0f objects/s; Services: %d ClusterIP, %d headless (%d range-is-full fallbacks); %d retries",
		res.Seed.Total, res.Seed.Namespaces, res.Seed.Seconds, res.Seed.PerSecond,
		res.Seed.ClusterIPServices, res.Seed.HeadlessServices, res.Seed.RangeFullFallbacks, res.Seed.Retries)

	if err := countSource(ctx, src, res); err != nil {
		return res, err
	}

	srcDyn, err := dynamic.NewForConfig(src.Config)
	if err != nil {
		return res, err
	}
	e := &ferryRuns{
		ferry: ferry, kubeconfig: kubeconfig, storage: storage, reportDir: filepath.Join(tmp, "report"),
		dst: dst, dst2: dst2, rssTargetMiB: o.rssTargetMiB,
		sample: &sampler{src: srcDyn, seed: res.Seed, every: o.sampleEvery},
	}
	errs := e.runAll(ctx, res)

	if err := benchutil.WriteJSON(o.out, res); err != nil {
		errs = append(errs, err)
	} else {
		logf("wrote %s", o.out)
	}
	return res, errors.Join(errs...)
}

// countSource waits until kube-controller-manager has made every
// Deployment's ReplicaSet in the source, then counts the source's objects
// in the load namespaces into res.
func countSource(ctx context.Context, src *testenv.Cluster, res *Result) error {
	srcMeta, err := metadata.NewForConfig(src.Config)
	if err != nil {
		return err
	}
	deployments := res.Seed.Objects["deployments"]
	logf("waiting for kube-controller-manager to make %d ReplicaSets", deployments)
	waitStart := time.Now()
	res.Seed.ReplicaSets, err = waitReplicaSets(ctx, srcMeta, deployments, 10*time.Minute)
	res.Seed.ReplicaSetWaitSeconds = time.Since(waitStart).Seconds()
	if err != nil {
		return err
	}
	logf("%d ReplicaSets after %.0fs", res.Seed.ReplicaSets, res.Seed.ReplicaSetWaitSeconds)
	if res.SourceCounts, err = countAll(ctx, srcMeta); err != nil {
		return fmt.Errorf("counting the source: %w", err)
	}
	res.SourceCounts["replicasets"] = res.Seed.ReplicaSets
	logf("source counts in the load namespaces: %s", fmtCounts(res.SourceCounts))
	return nil
}

// ferryRuns is what the three timed ferry runs need.
type ferryRuns struct {
	ferry, kubeconfig, storage, reportDir string
	dst, dst2                             *testenv.Cluster
	rssTargetMiB                          float64
	sample                                *sampler
}

// runAll runs migrate, backup and restore, verifies each restore, adds the
// runs to res and returns what failed, a peak RSS over the target included.
func (e *ferryRuns) runAll(ctx context.Context, res *Result) []error {
	objects := res.Seed.Total
	var errs []error
	add := func(r *Run) {
		logRun(r)
		res.Runs = append(res.Runs, r)
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("%s: %s", r.Operation, r.Error))
		}
		if !r.UnderTarget {
			errs = append(errs, fmt.Errorf("%s: peak RSS %.0f MiB, over the %.0f MiB target", r.Operation, r.MaxRSSMiB, e.rssTargetMiB))
		}
	}

	logf("ferry migrate %s -> %s", srcContext, dstContext)
	m := ferryRun(ctx, "migrate", objects, e.rssTargetMiB, e.ferry, "migrate", "--kubeconfig", e.kubeconfig, "--from-context", srcContext,
		"--to-context", dstContext, "--storage", e.storage, "--name", "load", "-o", "json", "--report-dir", e.reportDir)
	finishRestore(ctx, m, e.ferry, e.kubeconfig, e.storage, e.dst, res.SourceCounts, e.sample)
	add(m)

	logf("ferry backup create load-b (%s)", srcContext)
	b := ferryRun(ctx, "backup", objects, e.rssTargetMiB, e.ferry, "backup", "create", "load-b", "--kubeconfig", e.kubeconfig,
		"--context", srcContext, "--storage", e.storage, "-o", "json")
	add(b)

	if b.Backup == nil || b.Backup.Status.Archive == nil {
		return append(errs, errors.New("restore: not run, the backup has no archive"))
	}
	logf("ferry restore create load-b (%s)", dst2Context)
	r := ferryRun(ctx, "restore", objects, e.rssTargetMiB, e.ferry, "restore", "create", "load-b", "--from-backup", "load-b",
		"--kubeconfig", e.kubeconfig, "--context", dst2Context, "--storage", e.storage, "-o", "json")
	finishRestore(ctx, r, e.ferry, e.kubeconfig, e.storage, e.dst2, res.SourceCounts, e.sample)
	add(r)
	return errs
}

// ---------------------------------------------------------------- seeding

// seeder creates the load objects in the source.
type seeder struct {
	cs             kubernetes.Interface
	dyn            dynamic.Interface
	nss            []string
	clusterIPPerNS int

	clusterIP, headless, rangeFull, retries atomic.Int64
}

func seed(ctx context.Context, cfg *rest.Config, o options) (Seed, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Seed{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Seed{}, err
	}
	s := &seeder{cs: cs, dyn: dyn, clusterIPPerNS: o.clusterIPPerNS}
	for i := range o.namespaces {
		s.nss = append(s.nss, nsName(i))
	}
	counts := map[string]int{}
	left := o.objects
	for i, k := range mix {
		n := o.objects * k.percent / 100
		if i == len(mix)-1 {
			n = left
		}
		counts[k.resource] = n
		left -= n
	}

	start := time.Now()
	// The CRD and the namespaces first, concurrently.
	var crdErr error
	var wg sync.WaitGroup
	wg.Go(func() { crdErr = createCRD(ctx, dyn) })
	nsErr := parallel(ctx, o.workers, len(s.nss), func(ctx context.Context, i int) error {
		return s.retry(ctx, func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: s.nss[i], Labels: map[string]string{"app": appLabel}}}, metav1.CreateOptions{})
			return err
		})
	})
	wg.Wait()
	if err := errors.Join(crdErr, nsErr); err != nil {
		return Seed{}, err
	}
	logf("CRD %s established and %d namespaces created after %.1fs", crdName, len(s.nss), time.Since(start).Seconds())

	// Then every object, the kinds interleaved.
	type task struct {
		resource string
		i        int
	}
	var tasks []task
	for i := 0; ; i++ {
		more := false
		for _, k := range mix {
			if i < counts[k.resource] {
				tasks = append(tasks, task{k.resource, i})
				more = true
			}
		}
		if !more {
			break
		}
	}
	var done atomic.Int64
	stopProgress := progress("seeded", &done, len(tasks))
	err = parallel(ctx, o.workers, len(tasks), func(ctx context.Context, i int) error {
		t := tasks[i]
		if err := s.retry(ctx, func() error { return s.create(ctx, t.resource, t.i) }); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
	stopProgress()
	if err != nil {
		return Seed{}, err
	}
	secs := time.Since(start).Seconds()
	return Seed{
		Namespaces: len(s.nss), Objects: counts, Total: len(tasks), Seconds: secs,
		PerSecond: float64(len(tasks)) / secs, Workers: o.workers,
		ClusterIPServices: int(s.clusterIP.Load()), HeadlessServices: int(s.headless.Load()),
		RangeFullFallbacks: int(s.rangeFull.Load()), Retries: int(s.retries.Load()),
	}, nil
}

// parallel runs fn(0..n-1) on w goroutines and returns the first error,
// cancelling the others.
func parallel(ctx context.Context, w, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range w {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// retry calls create up to 6 times while it fails with an error other than
// a validation error, with a growing pause. An AlreadyExists after a failed
// attempt means that attempt went through.
func (s *seeder) retry(ctx context.Context, create func() error) error {
	var err error
	for attempt := range 6 {
		if attempt > 0 {
			s.retries.Add(1)
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
			}
		}
		err = create()
		switch {
		case err == nil:
			return nil
		case attempt > 0 && apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsInvalid(err), apierrors.IsAlreadyExists(err), apierrors.IsBadRequest(err), ctx.Err() != nil:
			return err
		}
	}
	return err
}

// create creates object i of resource in namespace i mod N.
func (s *seeder) create(ctx context.Context, res string, i int) error {
	ns := s.nss[i%len(s.nss)]
	j := i / len(s.nss) // index inside the namespace
	opts := metav1.CreateOptions{}
	var err error
	switch res {
	case "widgets":
		_, err = s.dyn.Resource(gvrWidgets).Namespace(ns).Create(ctx, widget(ns, i), opts)
	case "configmaps":
		_, err = s.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, i), opts)
	case "secrets":
		_, err = s.cs.CoreV1().Secrets(ns).Create(ctx, secret(ns, i), opts)
	case "deployments":
		_, err = s.cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, i, j), opts)
	case "services":
		svc := service(ns, i, j, j < s.clusterIPPerNS)
		_, err = s.cs.CoreV1().Services(ns).Create(ctx, svc, opts)
		if err != nil && svc.Spec.ClusterIP == "" && strings.Contains(err.Error(), "range is full") {
			s.rangeFull.Add(1)
			svc.Spec.ClusterIP = corev1.ClusterIPNone
			_, err = s.cs.CoreV1().Services(ns).Create(ctx, svc, opts)
		}
		if err == nil {
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				s.headless.Add(1)
			} else {
				s.clusterIP.Add(1)
			}
		}
	default:
		err = fmt.Errorf("unknown resource %q", res)
	}
	if err != nil {
		return fmt.Errorf("create %s %s/%d: %w", res, ns, i, err)
	}
	return nil
}

const crdYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.load.ferry.dev
spec:
  group: load.ferry.dev
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size:
                type: integer
                minimum: 0
              color:
                type: string
              owner:
                type: string
              tags:
                type: array
                items:
                  type: string
          status:
            type: object
            properties:
              ready:
                type: boolean
              observedSize:
                type: integer
`

// createCRD creates the Widget CRD and waits until it is Established.
func createCRD(ctx context.Context, dyn dynamic.Interface) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(crdYAML), &u.Object); err != nil {
		return err
	}
	if _, err := dyn.Resource(gvrCRDs).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CRD %s: %w", crdName, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := dyn.Resource(gvrCRDs).Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get CRD %s: %w", crdName, err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok && cm["type"] == "Established" && cm["status"] == "True" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not Established after 60s: conditions %v", crdName, conds)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var colors = []string{"red", "green", "blue", "amber", "violet"}

func widget(ns string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "load.ferry.dev/v1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name": objectName("widgets", i), "namespace": ns,
			"labels": map[string]any{"app": appLabel, "color": colors[i%len(colors)]},
		},
		"spec": map[string]any{
			"size":  int64(i),
			"color": colors[i%len(colors)],
			"owner": fmt.Sprintf("team-%d", i%17),
			"tags":  []any{"load", fmt.Sprintf("batch-%d", i%50)},
		},
	}}
}

func configMap(ns string, i int) *corev1.ConfigMap {
	data := map[string]string{}
	for k := range 4 {
		line := fmt.Sprintf("configmap %d key %d ", i, k)
		data[fmt.Sprintf("key%d", k)] = strings.Repeat(line, 256/len(line)+1)[:256]
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: objectName("configmaps", i), Namespace: ns, Labels: map[string]string{"app": appLabel}},
		Data:       data,
	}
}

func secret(ns string, i int) *corev1.Secret {
	token := fmt.Sprintf("token-%d-", i)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: objectName("secrets", i), Namespace: ns, Labels: map[string]string{"app": appLabel}},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"username": []byte(fmt.Sprintf("user-%d", i)),
			"password": []byte(fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)),
			"token":    []byte(strings.Repeat(token, 200/len(token)+1)[:200]),
		},
	}
}

func deployment(ns string, i, j int) *appsv1.Deployment {
	app := fmt.Sprintf("web-%d", j)
	labels := map[string]string{"app": app, "part-of": appLabel}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: objectName("deployments", i), Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:   []corev1.EnvVar{{Name: "INSTANCE", Value: fmt.Sprint(i)}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					}},
				}}},
			},
		},
	}
}

func service(ns string, i, j int, clusterIP bool) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: objectName("services", i), Namespace: ns, Labels: map[string]string{"app": appLabel}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": fmt.Sprintf("web-%d", j)},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if !clusterIP {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

// ---------------------------------------------------------------- counting

// isLoadNS tells the seeded namespaces from the cluster's own.
func isLoadNS(ns string) bool { return strings.HasPrefix(ns, nsPrefix) }

// count lists gvr cluster-wide (metadata only, pages of 500) and counts
// the items in the load namespaces (for namespaces: the load namespaces
// themselves), leaving out items named skip.
func count(ctx context.Context, mc metadata.Interface, gvr schema.GroupVersionResource, skip string) (int, error) {
	n := 0
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := mc.Resource(gvr).List(ctx, opts)
		if err != nil {
			return n, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for _, it := range l.Items {
			ns := it.Namespace
			if gvr == gvrNamespaces {
				ns = it.Name
			}
			if isLoadNS(ns) && it.Name != skip {
				n++
			}
		}
		if l.Continue == "" {
			return n, nil
		}
		opts.Continue = l.Continue
	}
}

// countAll counts every compared kind in the load namespaces.
func countAll(ctx context.Context, mc metadata.Interface) (map[string]int, error) {
	out := map[string]int{}
	for _, k := range compared {
		skip := ""
		if k.gvr == gvrConfigMaps {
			skip = "kube-root-ca.crt"
		}
		n, err := count(ctx, mc, k.gvr, skip)
		if err != nil {
			return out, err
		}
		out[k.name] = n
	}
	return out, nil
}

// waitReplicaSets waits until the load namespaces hold want ReplicaSets.
func waitReplicaSets(ctx context.Context, mc metadata.Interface, want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	last := time.Now()
	for {
		n, err := count(ctx, mc, gvrReplicaSets, "")
		if err != nil {
			return n, err
		}
		if n >= want {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("only %d of %d ReplicaSets after %s", n, want, timeout)
		}
		if time.Since(last) > 15*time.Second {
			logf("  %d of %d ReplicaSets", n, want)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}

// ---------------------------------------------------------------- ferry runs

// ferryRun runs one timed ferry command and decodes what it printed:
// {"backup","restore"} for migrate, a Backup or a Restore otherwise.
func ferryRun(ctx context.Context, op string, objects int, rssTarget float64, ferry string, args ...string) *Run {
	out, stderr, wall, rss, code, err := benchutil.Child(ctx, ferry, args...)
	r := &Run{
		Operation: op, Args: args, Objects: objects, Seconds: wall.Seconds(), MaxRSSMiB: rss,
		UnderTarget: rss < rssTarget, ExitCode: code, StderrTail: benchutil.Tail(string(stderr), 4000),
	}
	r.PerSecond = float64(objects) / r.Seconds
	var jerr error
	switch op {
	case "migrate":
		var m struct {
			Backup       *v1alpha1.Backup  `json:"backup"`
			Restore      *v1alpha1.Restore `json:"restore"`
			Verification *struct {
				Summary report.Summary  `json:"summary"`
				Timings []report.Timing `json:"timings"`
			} `json:"verification"`
		}
		jerr = json.Unmarshal(out, &m)
		r.Backup, r.Restore = m.Backup, m.Restore
		if v := m.Verification; v != nil {
			r.Verification = &v.Summary
			for _, t := range v.Timings {
				if t.Phase == "verify" {
					r.FerryVerifySeconds = t.Seconds
				}
			}
		}
	case "backup":
		r.Backup = &v1alpha1.Backup{}
		jerr = json.Unmarshal(out, r.Backup)
	case "restore":
		r.Restore = &v1alpha1.Restore{}
		jerr = json.Unmarshal(out, r.Restore)
	}
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("ferry %s: %w", strings.Join(args[:min(3, len(args))], " "), err))
	}
	if jerr != nil {
		errs = append(errs, fmt.Errorf("decoding ferry's output: %w; stdout: %s", jerr, benchutil.Tail(string(out), 500)))
		r.Backup, r.Restore = nil, nil
	}
	if b := r.Backup; b != nil {
		r.ItemsBackedUp = b.Status.Progress.ItemsBackedUp
		r.FerryBackupSeconds = seconds(b.Status.StartTimestamp, b.Status.CompletionTimestamp)
		if b.Status.Phase != "Completed" {
			errs = append(errs, fmt.Errorf("backup phase %s (failureReason %q, %d errors, %d warnings)",
				b.Status.Phase, b.Status.FailureReason, b.Status.Errors, b.Status.Warnings))
		}
	}
	if rs := r.Restore; rs != nil {
		r.Created = rs.Status.Counts.Created
		r.FerryRestoreSeconds = seconds(rs.Status.StartTimestamp, rs.Status.CompletionTimestamp)
		if rs.Status.Phase != "Completed" || rs.Status.Counts.Failed != 0 {
			errs = append(errs, fmt.Errorf("restore phase %s (failureReason %q, counts %+v, %d errors, %d warnings)",
				rs.Status.Phase, rs.Status.FailureReason, rs.Status.Counts, rs.Status.Errors, rs.Status.Warnings))
		}
	} else if op != "backup" && jerr == nil {
		errs = append(errs, errors.New("ferry printed no restore"))
	}
	if op == "migrate" && jerr == nil {
		if v := r.Verification; v == nil {
			errs = append(errs, errors.New("migrate printed no verification"))
		} else if v.Unexpected != 0 {
			errs = append(errs, fmt.Errorf("migrate's verification: %d unexpected differences (%+v)", v.Unexpected, *v))
		}
	}
	if len(errs) > 0 {
		r.Error = errors.Join(errs...).Error()
		if len(stderr) > 0 {
			r.Error += "; stderr: " + benchutil.Tail(string(stderr), 2000)
		}
	}
	return r
}

// finishRestore reads the restore's results back (ferry restore describe
// -o json), compares the target's counts with the source's, and the
// content of a sample of the seeded objects (sampler.check).
func finishRestore(ctx context.Context, r *Run, ferry, kubeconfig, storage string, dst *testenv.Cluster, want map[string]int, sample *sampler) {
	if r.Restore == nil {
		return
	}
	var errs []error
	if r.Error != "" {
		errs = append(errs, errors.New(r.Error))
	}
	p, err := describeRestore(ctx, ferry, kubeconfig, storage, r.Restore.Name)
	if err != nil {
		errs = append(errs, err)
	}
	r.Problems = p
	mc, err := metadata.NewForConfig(dst.Config)
	if err == nil {
		var got map[string]int
		got, err = countAll(ctx, mc)
		for _, k := range compared {
			c := Check{Kind: k.name, Source: want[k.name], Target: got[k.name]}
			c.OK = c.Source == c.Target
			r.Verify = append(r.Verify, c)
			if !c.OK {
				errs = append(errs, fmt.Errorf("verify: %s in the load namespaces: source %d, %s %d", k.name, c.Source, dst.Name, c.Target))
			}
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("verify: %w", err))
	}
	r.Content, err = sample.check(ctx, dst.Config)
	if err != nil {
		errs = append(errs, fmt.Errorf("verify content: %w", err))
	} else if r.Content.MismatchTotal > 0 {
		errs = append(errs, fmt.Errorf("verify content: %d of %d sampled objects differ from the source in %s, first: %s",
			r.Content.MismatchTotal, r.Content.Total, dst.Name, r.Content.Mismatches[0]))
	}
	if len(errs) > 0 {
		r.Error = errors.Join(errs...).Error()
	}
}

func describeRestore(ctx context.Context, ferry, kubeconfig, storage, name string) (*Problems, error) {
	out, stderr, _, _, _, err := benchutil.Child(ctx, ferry, "restore", "describe", name, "--kubeconfig", kubeconfig, "--storage", storage, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("ferry restore describe %s: %w; stderr: %s", name, err, benchutil.Tail(string(stderr), 1000))
	}
	var d struct {
		Results report.Results `json:"results"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, fmt.Errorf("decoding ferry restore describe %s: %w", name, err)
	}
	p := &Problems{
		Outcomes: map[string]int{}, ByResource: map[string]int{}, Skipped: map[string]int{},
		SkippedExample: map[string]string{}, FailedByMessage: map[string]int{},
		WarningsTotal: len(d.Results.Warnings), ErrorsTotal: len(d.Results.Errors),
	}
	for _, it := range d.Results.Items {
		p.Outcomes[string(it.Outcome)]++
		p.ByResource[string(it.Outcome)+" "+it.Resource]++
		switch it.Outcome {
		case report.Skipped:
			reason, _, _ := strings.Cut(it.Reason, ":")
			k := it.Resource + ": " + reason
			if p.Skipped[k]++; p.Skipped[k] == 1 {
				p.SkippedExample[k] = it.Reason
			}
		case report.Failed:
			p.FailedByMessage[it.Resource+": "+it.Reason+": "+quoted.ReplaceAllString(it.Message, `"…"`)]++
			if len(p.Failed) < 50 {
				p.Failed = append(p.Failed, fmt.Sprintf("%s %s/%s: %s: %s", it.Resource, it.Namespace, it.Name, it.Reason, it.Message))
			}
		}
	}
	p.Warnings = d.Results.Warnings[:min(20, len(d.Results.Warnings))]
	p.Errors = d.Results.Errors[:min(20, len(d.Results.Errors))]
	return p, nil
}

// quoted matches a double-quoted name in an API server message.
var quoted = regexp.MustCompile(`"[^"]*"`)

func seconds(start, end *metav1.Time) float64 {
	if start == nil || end == nil {
		return 0
	}
	return end.Sub(start.Time).Seconds()
}

// ---------------------------------------------------------------- output

func logRun(r *Run) {
	logf("%s: %.1fs, %.0f objects/s, peak RSS %.0f MiB, exit %d, %d backed up, %d created",
		r.Operation, r.Seconds, r.PerSecond, r.MaxRSSMiB, r.ExitCode, r.ItemsBackedUp, r.Created)
	if v := r.Verification; v != nil {
		logf("  verification: %.1fs, %d objects, %d match, %d unexpected", r.FerryVerifySeconds, v.Objects, v.Matched, v.Unexpected)
	}
	if p := r.Problems; p != nil {
		logf("  outcomes %v; %d warnings, %d errors", p.Outcomes, p.WarningsTotal, p.ErrorsTotal)
		for _, k := range sortedKeys(p.ByResource) {
			logf("  %6d  %s", p.ByResource[k], k)
		}
		for _, k := range sortedKeys(p.Skipped) {
			logf("  skipped %6d  %s (e.g. %q)", p.Skipped[k], k, p.SkippedExample[k])
		}
		for _, k := range sortedKeys(p.FailedByMessage) {
			logf("  FAILED %6d  %s", p.FailedByMessage[k], k)
		}
		for i, f := range p.Failed {
			if i == 10 {
				logf("  (the JSON result lists the first %d failed items)", len(p.Failed))
				break
			}
			logf("  FAILED %s", f)
		}
		for _, w := range p.Warnings {
			logf("  warning: %s", w)
		}
		for _, e := range p.Errors {
			logf("  error: %s", e)
		}
	}
	for _, c := range r.Verify {
		logf("  verify %-12s source %6d target %6d %s", c.Kind, c.Source, c.Target, mark(c.OK))
	}
	if c := r.Content; c != nil {
		logf("  verify content: %d sampled objects (every %d of each kind: %s), %d differ %s",
			c.Total, c.Every, fmtCounts(c.Sampled), c.MismatchTotal, mark(c.MismatchTotal == 0))
		for _, m := range c.Mismatches {
			logf("  DIFFERS %s", m)
		}
	}
	if r.Error != "" {
		logf("  ERROR: %s", r.Error)
	}
}

func printMarkdown(w io.Writer, res *Result) {
	fmt.Fprintf(w, "%d objects in %d namespaces (%s), %d CPUs, %s, commit %s, %s\n\n",
		res.Seed.Total, res.Seed.Namespaces, fmtCounts(res.Seed.Objects), res.CPUs, res.GoVersion, benchutil.OrDash(res.Commit), res.Time.Format(time.RFC3339))
	fmt.Fprintf(w, "| operation | objects | ferry items | wall time | objects/s | ferry peak RSS | < %.0f MiB | result |\n", res.TargetMiB)
	fmt.Fprintln(w, "|---|--:|---|--:|--:|--:|:-:|---|")
	for _, r := range res.Runs {
		var items []string
		if r.Backup != nil {
			items = append(items, fmt.Sprintf("%d backed up", r.ItemsBackedUp))
		}
		if r.Restore != nil {
			items = append(items, fmt.Sprintf("%d created", r.Created))
		}
		result := "ok"
		switch {
		case r.Error != "":
			result = "FAILED (see stderr / JSON)"
		case r.Restore != nil:
			result = fmt.Sprintf("Completed, %d failed, counts match", r.Restore.Status.Counts.Failed)
			if c := r.Content; c != nil {
				result += fmt.Sprintf(", %d sampled objects' content matches", c.Total)
			}
		case r.Backup != nil:
			result = string(r.Backup.Status.Phase)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.1f s | %.0f | %.0f MiB | %s | %s |\n",
			r.Operation, r.Objects, benchutil.OrDash(strings.Join(items, ", ")), r.Seconds, r.PerSecond, r.MaxRSSMiB, mark(r.UnderTarget), result)
	}
	fmt.Fprintf(w, "\nEach row is one ferry process, timed from start to exit (wall clock), peak RSS from getrusage. "+
		"objects/s = seeded objects ÷ wall time; ferry's item counts include what the cluster adds "+
		"(ReplicaSets, Endpoints, EndpointSlices, ServiceAccounts, system namespaces). migrate: source → target; "+
		"backup and restore: the same source backed up again and restored into a third, empty cluster.\n")
	for _, r := range res.Runs {
		if !r.UnderTarget {
			fmt.Fprintf(w, "\n**%s over the RSS target**: peak RSS %.0f MiB, target %.0f MiB\n", r.Operation, r.MaxRSSMiB, res.TargetMiB)
		}
		if r.Error == "" {
			continue
		}
		fmt.Fprintf(w, "\n**%s failed**: %s\n", r.Operation, strings.ReplaceAll(benchutil.Tail(r.Error, 1500), "\n", "; "))
		if p := r.Problems; p != nil {
			for _, k := range sortedKeys(p.FailedByMessage) {
				fmt.Fprintf(w, "- %d × %s\n", p.FailedByMessage[k], k)
			}
		}
	}
	fmt.Fprintf(w, "\nSeed (client-go, %d goroutines): %.0f objects/s; Services: %d ClusterIP, %d headless (service CIDR /24).\n",
		res.Seed.Workers, res.Seed.PerSecond, res.Seed.ClusterIPServices, res.Seed.HeadlessServices)
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func fmtCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// progress logs done/total every 10 s until the returned func is called.
func progress(what string, done *atomic.Int64, total int) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				logf("  %s %d of %d", what, done.Load(), total)
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

func logf(format string, args ...any) { benchutil.Logf("load", format, args...) }
