// Command resources benchmarks ferry's backup and restore of many small
// objects against plain client-go doing the same API work, side by side in
// one run.
//
// What is measured. Two local clusters are started (internal/testenv: real
// etcd, kube-apiserver and kube-controller-manager). The source gets a
// namespace "bench" holding N ConfigMaps of about 1 KiB each. Then, for each
// round, four timed operations run, each as its own child process:
//
//   - backup, ferry: "ferry backup create bench-rN --include-namespaces bench"
//     to a file:// storage location; throughput is
//     .status.progress.itemsBackedUp per second.
//   - backup, raw: a client-go typed client LISTs the namespace's ConfigMaps
//     in pages (limit 500, continue tokens) and JSON-encodes every item, the
//     least API and serialisation work any backup has to do.
//   - restore, ferry: "ferry restore create --from-backup bench-rN
//     --namespace-mappings bench:bench-rN" into the target; throughput is
//     .status.counts.created per second.
//   - restore, raw: a client-go typed client creates namespace raw-rN and the
//     same N ConfigMaps in it with 32 goroutines (ferry's default restore
//     concurrency) and client-side rate limiting off.
//
// Each operation's time is the child process's wall-clock time, so process
// start, kubeconfig loading, and (for ferry) API discovery, storage I/O and
// archive (de)compression are included on both sides; peak RSS is the
// child's maximum resident set size (getrusage). The raw children are this
// same program re-executed in a hidden worker mode.
//
// After each round, ferry also backs up and restores a namespace without
// ConfigMaps of its own; the median time of those runs is reported as
// ferry's fixed cost per run (already included in the ratios), to tell
// per-object cost from per-run overhead.
//
// The machine is small and noisy, so ferry and raw rounds are interleaved
// (the order alternates every round) and the report uses medians.
//
// How to read the result. The ratio is ferry objects/s ÷ raw objects/s of
// the medians: 1.0 means ferry is as fast as the bare API calls it cannot
// avoid, 0.9 (the target) means it is at most about 10% slower. A ratio
// above 1 is possible (ferry may send fewer bytes or use more concurrency)
// and is not an error. The per-round ratios pair each ferry run with the
// raw run next to it and show how stable the result is.
//
// Run from the repository root:
//
//	go run ./bench/resources -n 10000 -rounds 3
//
// A Markdown table goes to stdout, progress to stderr, and the full result
// to bench/results/resources.json.
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
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kubeferry/ferry/bench/internal/benchutil"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

const (
	srcContext = "src"
	dstContext = "dst"
	srcNS      = "bench"
	// emptyNS is a source namespace without ConfigMaps of its own, whose
	// backup and restore measure ferry's fixed cost per run.
	emptyNS = "bench-empty"
	// target is the ratio ferry/raw the issue asks for.
	target = 0.9
)

// workerFlag selects the hidden worker mode (a raw client-go child).
const workerFlag = "worker"

func main() {
	if len(os.Args) > 1 && os.Args[1] == workerFlag {
		if err := runWorker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.n, "n", 10000, "number of ConfigMaps")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of each operation (ferry and raw alternate)")
	flag.IntVar(&o.workers, "workers", 32, "goroutines of the raw CREATE reference")
	flag.IntVar(&o.page, "page", 500, "page size (limit) of the raw LIST reference")
	flag.IntVar(&o.size, "size", 1024, "bytes of data per ConfigMap")
	flag.StringVar(&o.ferry, "ferry", "", "ferry binary to use (default: build ./cmd/ferry)")
	flag.StringVar(&o.out, "out", "", "JSON result file (default <repo>/bench/results/resources.json)")
	flag.Parse()
	if o.n <= 0 || o.rounds <= 0 || o.workers <= 0 || o.page <= 0 || o.size < 0 {
		fmt.Fprintln(os.Stderr, "bench: -n, -rounds, -workers and -page must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if res != nil {
		printMarkdown(os.Stdout, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	n, rounds, workers, page, size int
	ferry, out                     string
}

// Sample is one timed child process.
type Sample struct {
	Round   int     `json:"round"`
	Objects int     `json:"objects"`
	Seconds float64 `json:"seconds"`
	// PerSecond is Objects / Seconds.
	PerSecond float64 `json:"perSecond"`
	// InnerSeconds is the raw worker's own time for the API work, without
	// process start and client setup (raw samples only).
	InnerSeconds float64 `json:"innerSeconds,omitempty"`
	MaxRSSMiB    float64 `json:"maxRSSMiB"`
	Error        string  `json:"error,omitempty"`
}

// Side is one implementation (ferry or raw) of one operation.
type Side struct {
	Samples []Sample `json:"samples"`
	// MedianPerSecond is the median of the successful samples' PerSecond.
	MedianPerSecond float64 `json:"medianPerSecond"`
	// PeakRSSMiB is the largest MaxRSSMiB of all samples.
	PeakRSSMiB float64 `json:"peakRSSMiB"`
}

// Operation compares ferry with the raw reference.
type Operation struct {
	Name      string `json:"name"`
	Reference string `json:"reference"`
	Raw       Side   `json:"raw"`
	Ferry     Side   `json:"ferry"`
	// Ratio is Ferry.MedianPerSecond / Raw.MedianPerSecond.
	Ratio float64 `json:"ratio"`
	// RoundRatios pairs the ferry and raw sample of each round.
	RoundRatios []float64 `json:"roundRatios"`
	Pass        bool      `json:"pass"`
}

// Result is what the benchmark writes to the JSON file.
type Result struct {
	Time       time.Time    `json:"time"`
	Commit     string       `json:"commit,omitempty"`
	GoVersion  string       `json:"goVersion"`
	CPUs       int          `json:"cpus"`
	Objects    int          `json:"objects"`
	BytesEach  int          `json:"bytesEach"`
	Rounds     int          `json:"rounds"`
	Target     float64      `json:"target"`
	Seed       Sample       `json:"seed"`
	Operations []*Operation `json:"operations"`
	// FixedCost is ferry backing up and restoring a namespace without
	// ConfigMaps of its own (only what the cluster puts in every
	// namespace): process start, connect, discovery, storage and archive
	// overhead, paid once per run whatever the number of objects.
	FixedCost FixedCost `json:"fixedCost"`
}

// FixedCost holds the samples of ferry runs on an (almost) empty namespace.
type FixedCost struct {
	Backup  []Sample `json:"backup"`
	Restore []Sample `json:"restore"`
	// Median wall-clock seconds of the successful samples.
	BackupSeconds  float64 `json:"backupSeconds"`
	RestoreSeconds float64 `json:"restoreSeconds"`
}

func run(ctx context.Context, o options) (*Result, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bench", "results", "resources.json")
	}
	tmp, err := os.MkdirTemp("", "ferry-bench-")
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
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}

	logf("starting clusters %s and %s", srcContext, dstContext)
	clusters, err := testenv.StartNamedClusters(ctx, nil, srcContext, dstContext)
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
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, clusters...); err != nil {
		return nil, err
	}
	storage := "file://" + filepath.Join(tmp, "store")
	if err := os.MkdirAll(filepath.Join(tmp, "store"), 0o755); err != nil {
		return nil, err
	}

	res := &Result{
		Time: time.Now().UTC(), Commit: benchutil.GitCommit(root), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Objects: o.n, BytesEach: o.size, Rounds: o.rounds, Target: target,
	}
	backupOp := &Operation{Name: "backup", Reference: fmt.Sprintf("client-go paginated LIST (limit %d) + JSON encode", o.page)}
	restoreOp := &Operation{Name: "restore", Reference: fmt.Sprintf("client-go parallel CREATE (%d goroutines)", o.workers)}
	res.Operations = []*Operation{backupOp, restoreOp}

	worker := func(round int, args ...string) Sample {
		base := []string{workerFlag, "-kubeconfig", kubeconfig, "-n", fmt.Sprint(o.n), "-size", fmt.Sprint(o.size),
			"-workers", fmt.Sprint(o.workers), "-page", fmt.Sprint(o.page)}
		return runRaw(ctx, round, self, append(base, args...)...)
	}

	logf("seeding %d ConfigMaps into %s/%s", o.n, srcContext, srcNS)
	res.Seed = worker(0, "-op", "create", "-context", srcContext, "-namespace", srcNS)
	if res.Seed.Error != "" {
		return res, fmt.Errorf("seeding the source: %s", res.Seed.Error)
	}
	logSample("seed (raw create)", res.Seed)
	if s := worker(0, "-op", "create", "-context", srcContext, "-namespace", emptyNS, "-n", "0"); s.Error != "" {
		return res, fmt.Errorf("creating namespace %s: %s", emptyNS, s.Error)
	}

	for r := 1; r <= o.rounds; r++ {
		backupName := fmt.Sprintf("bench-r%d", r)
		ferryBackup := func() {
			s := runFerryBackup(ctx, r, ferry, "backup", "create", backupName, "--kubeconfig", kubeconfig,
				"--context", srcContext, "--storage", storage, "--include-namespaces", srcNS, "-o", "json")
			logSample("backup  ferry r"+fmt.Sprint(r), s)
			backupOp.Ferry.Samples = append(backupOp.Ferry.Samples, s)
		}
		rawList := func() {
			s := worker(r, "-op", "list", "-context", srcContext, "-namespace", srcNS)
			logSample("backup  raw   r"+fmt.Sprint(r), s)
			backupOp.Raw.Samples = append(backupOp.Raw.Samples, s)
		}
		ferryRestore := func() {
			dst := fmt.Sprintf("bench-r%d", r)
			s := runFerryRestore(ctx, r, ferry, "restore", "create", fmt.Sprintf("restore-r%d", r), "--from-backup", backupName,
				"--kubeconfig", kubeconfig, "--context", dstContext, "--storage", storage,
				"--namespace-mappings", srcNS+":"+dst, "-o", "json")
			if s.Error == "" {
				s.Error = verifyCount(ctx, kubeconfig, dst, o.n)
			}
			logSample("restore ferry r"+fmt.Sprint(r), s)
			restoreOp.Ferry.Samples = append(restoreOp.Ferry.Samples, s)
		}
		rawCreate := func() {
			s := worker(r, "-op", "create", "-context", dstContext, "-namespace", fmt.Sprintf("raw-r%d", r))
			logSample("restore raw   r"+fmt.Sprint(r), s)
			restoreOp.Raw.Samples = append(restoreOp.Raw.Samples, s)
		}
		// Alternate who goes first, so drift (a growing etcd, caches
		// warming) does not favour one side.
		if r%2 == 1 {
			ferryBackup()
			rawList()
			ferryRestore()
			rawCreate()
		} else {
			rawList()
			ferryBackup()
			rawCreate()
			ferryRestore()
		}
		fixedCost(ctx, &res.FixedCost, r, ferry, kubeconfig, storage)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}

	var errs []error
	res.FixedCost.BackupSeconds = medianSeconds(res.FixedCost.Backup)
	res.FixedCost.RestoreSeconds = medianSeconds(res.FixedCost.Restore)
	for _, op := range res.Operations {
		summarise(op)
		for _, side := range []struct {
			name string
			s    *Side
		}{{"ferry", &op.Ferry}, {"raw", &op.Raw}} {
			for _, s := range side.s.Samples {
				if s.Error != "" {
					errs = append(errs, fmt.Errorf("%s %s round %d: %s", op.Name, side.name, s.Round, s.Error))
				}
			}
		}
	}
	if err := benchutil.WriteJSON(o.out, res); err != nil {
		errs = append(errs, err)
	} else {
		logf("wrote %s", o.out)
	}
	return res, errors.Join(errs...)
}

// fixedCost backs up namespace emptyNS and restores it into the target as
// empty-rN with ferry, recording both runs in fc.
func fixedCost(ctx context.Context, fc *FixedCost, r int, ferry, kubeconfig, storage string) {
	name := fmt.Sprintf("empty-r%d", r)
	s := runFerryBackup(ctx, r, ferry, "backup", "create", name, "--kubeconfig", kubeconfig,
		"--context", srcContext, "--storage", storage, "--include-namespaces", emptyNS, "-o", "json")
	logSample("fixed   backup r"+fmt.Sprint(r), s)
	fc.Backup = append(fc.Backup, s)
	if s.Error != "" {
		return
	}
	s = runFerryRestore(ctx, r, ferry, "restore", "create", "restore-"+name, "--from-backup", name,
		"--kubeconfig", kubeconfig, "--context", dstContext, "--storage", storage,
		"--namespace-mappings", emptyNS+":"+name, "-o", "json")
	logSample("fixed   restore r"+fmt.Sprint(r), s)
	fc.Restore = append(fc.Restore, s)
}

func medianSeconds(samples []Sample) float64 {
	var xs []float64
	for _, s := range samples {
		if s.Error == "" {
			xs = append(xs, s.Seconds)
		}
	}
	return median(xs)
}

// summarise fills the medians, peaks and ratios of op.
func summarise(op *Operation) {
	for _, s := range []*Side{&op.Raw, &op.Ferry} {
		var rates []float64
		for _, x := range s.Samples {
			if x.Error == "" {
				rates = append(rates, x.PerSecond)
			}
			s.PeakRSSMiB = max(s.PeakRSSMiB, x.MaxRSSMiB)
		}
		s.MedianPerSecond = median(rates)
	}
	if op.Raw.MedianPerSecond > 0 {
		op.Ratio = op.Ferry.MedianPerSecond / op.Raw.MedianPerSecond
	}
	for i := range min(len(op.Raw.Samples), len(op.Ferry.Samples)) {
		f, r := op.Ferry.Samples[i], op.Raw.Samples[i]
		if f.Error == "" && r.Error == "" && r.PerSecond > 0 {
			op.RoundRatios = append(op.RoundRatios, f.PerSecond/r.PerSecond)
		}
	}
	op.Pass = op.Ratio >= target
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// child runs one process and returns its stdout, wall time and peak RSS.
// A non-zero exit is an error quoting the end of stderr; stdout is returned
// anyway (ferry prints its result before exiting 1 or 2).
func child(ctx context.Context, name string, args ...string) (stdout []byte, wall time.Duration, rssMiB float64, err error) {
	stdout, stderr, wall, rssMiB, _, err := benchutil.Child(ctx, name, args...)
	if err != nil {
		err = fmt.Errorf("%s %s: %w; stderr: %s", filepath.Base(name), strings.Join(args[:min(3, len(args))], " "), err, benchutil.Tail(string(stderr), 2000))
	}
	return stdout, wall, rssMiB, err
}

func runFerryBackup(ctx context.Context, round int, ferry string, args ...string) Sample {
	out, wall, rss, err := child(ctx, ferry, args...)
	s := Sample{Round: round, Seconds: wall.Seconds(), MaxRSSMiB: rss}
	var b v1alpha1.Backup
	if jerr := json.Unmarshal(out, &b); jerr != nil {
		s.Error = errors.Join(err, fmt.Errorf("decoding the Backup printed by ferry: %w; stdout: %s", jerr, benchutil.Tail(string(out), 500))).Error()
		return s
	}
	s.Objects = b.Status.Progress.ItemsBackedUp
	s.PerSecond = float64(s.Objects) / s.Seconds
	if err != nil {
		s.Error = fmt.Sprintf("%v (phase %s, failureReason %q, errors %d)", err, b.Status.Phase, b.Status.FailureReason, b.Status.Errors)
	}
	return s
}

func runFerryRestore(ctx context.Context, round int, ferry string, args ...string) Sample {
	out, wall, rss, err := child(ctx, ferry, args...)
	s := Sample{Round: round, Seconds: wall.Seconds(), MaxRSSMiB: rss}
	var r v1alpha1.Restore
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		s.Error = errors.Join(err, fmt.Errorf("decoding the Restore printed by ferry: %w; stdout: %s", jerr, benchutil.Tail(string(out), 500))).Error()
		return s
	}
	s.Objects = r.Status.Counts.Created
	s.PerSecond = float64(s.Objects) / s.Seconds
	if err != nil {
		s.Error = fmt.Sprintf("%v (phase %s, failureReason %q, counts %+v)", err, r.Status.Phase, r.Status.FailureReason, r.Status.Counts)
	}
	return s
}

// workerResult is what a raw worker prints on stdout.
type workerResult struct {
	Objects      int     `json:"objects"`
	Bytes        int64   `json:"bytes"`
	InnerSeconds float64 `json:"innerSeconds"`
}

func runRaw(ctx context.Context, round int, self string, args ...string) Sample {
	out, wall, rss, err := child(ctx, self, args...)
	s := Sample{Round: round, Seconds: wall.Seconds(), MaxRSSMiB: rss}
	if err != nil {
		s.Error = err.Error()
		return s
	}
	var w workerResult
	if err := json.Unmarshal(out, &w); err != nil {
		s.Error = fmt.Sprintf("decoding the worker result: %v", err)
		return s
	}
	s.Objects, s.InnerSeconds = w.Objects, w.InnerSeconds
	s.PerSecond = float64(s.Objects) / s.Seconds
	return s
}

// verifyCount checks, after a timed restore, that namespace ns of the
// target holds at least n ConfigMaps (the restore may add kube-root-ca.crt).
func verifyCount(ctx context.Context, kubeconfig, ns string, n int) string {
	cs, err := rawClient(kubeconfig, dstContext)
	if err != nil {
		return err.Error()
	}
	got := 0
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
		if err != nil {
			return fmt.Sprintf("verify: list configmaps in %s: %v", ns, err)
		}
		got += len(l.Items)
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if got < n {
		return fmt.Sprintf("verify: namespace %s of the target has %d ConfigMaps, want at least %d", ns, got, n)
	}
	return ""
}

// runWorker is the raw client-go reference, run as a child process:
// "-op create" creates the namespace and N ConfigMaps in it with W
// goroutines; "-op list" lists the namespace's ConfigMaps in pages and
// JSON-encodes each one. It prints a workerResult.
func runWorker(args []string) error {
	fs := flag.NewFlagSet(workerFlag, flag.ContinueOnError)
	op := fs.String("op", "", "create or list")
	kubeconfig := fs.String("kubeconfig", "", "")
	kctx := fs.String("context", "", "")
	ns := fs.String("namespace", "", "")
	n := fs.Int("n", 0, "")
	size := fs.Int("size", 1024, "")
	workers := fs.Int("workers", 32, "")
	page := fs.Int("page", 500, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cs, err := rawClient(*kubeconfig, *kctx)
	if err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	var w workerResult
	switch *op {
	case "create":
		w, err = rawCreate(ctx, cs, *ns, *n, *size, *workers)
	case "list":
		w, err = rawList(ctx, cs, *ns, *page)
	default:
		err = fmt.Errorf("unknown -op %q", *op)
	}
	if err != nil {
		return err
	}
	w.InnerSeconds = time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(w)
}

// rawClient is a plain typed clientset with client-side rate limiting off.
func rawClient(kubeconfig, kctx string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kctx}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1
	return kubernetes.NewForConfig(cfg)
}

func rawCreate(ctx context.Context, cs kubernetes.Interface, ns string, n, size, workers int) (workerResult, error) {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		return workerResult{}, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var created atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, i, size), metav1.CreateOptions{}); err != nil {
					cancel(fmt.Errorf("create configmap %s/%s: %w", ns, cmName(i), err))
					return
				}
				created.Add(1)
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
	if err := context.Cause(ctx); err != nil {
		return workerResult{}, err
	}
	return workerResult{Objects: int(created.Load())}, nil
}

func rawList(ctx context.Context, cs kubernetes.Interface, ns string, page int) (workerResult, error) {
	var w workerResult
	opts := metav1.ListOptions{Limit: int64(page)}
	for {
		l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
		if err != nil {
			return w, fmt.Errorf("list configmaps in %s: %w", ns, err)
		}
		for i := range l.Items {
			item := &l.Items[i]
			item.APIVersion, item.Kind = "v1", "ConfigMap"
			data, err := json.Marshal(item)
			if err != nil {
				return w, err
			}
			w.Objects++
			w.Bytes += int64(len(data))
		}
		if l.Continue == "" {
			return w, nil
		}
		opts.Continue = l.Continue
	}
}

func cmName(i int) string { return fmt.Sprintf("cm-%05d", i) }

// configMap returns ConfigMap i: a label and four data keys of size/4 bytes.
func configMap(ns string, i, size int) *corev1.ConfigMap {
	data := map[string]string{}
	for k := range 4 {
		line := fmt.Sprintf("object %d key %d ", i, k)
		data[fmt.Sprintf("key%d", k)] = strings.Repeat(line, size/4/len(line)+1)[:size/4]
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName(i), Namespace: ns, Labels: map[string]string{"app": "ferry-bench"}},
		Data:       data,
	}
}

func printMarkdown(w io.Writer, res *Result) {
	fmt.Fprintf(w, "%d ConfigMaps of %d B, %d rounds (ferry and raw alternating), %d CPUs, %s, commit %s, %s\n\n",
		res.Objects, res.BytesEach, res.Rounds, res.CPUs, res.GoVersion, benchutil.OrDash(res.Commit), res.Time.Format(time.RFC3339))
	fmt.Fprintln(w, "| Operation | raw client-go reference | raw objects/s | ferry objects/s | ferry / raw | per-round ratios | ferry peak RSS | raw peak RSS |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|---|--:|--:|")
	for _, op := range res.Operations {
		verdict := "✗"
		if op.Pass {
			verdict = "✓"
		}
		var rr []string
		for _, r := range op.RoundRatios {
			rr = append(rr, fmt.Sprintf("%.2f", r))
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | **%.2f** %s | %s | %.0f MiB | %.0f MiB |\n",
			op.Name, op.Reference, op.Raw.MedianPerSecond, op.Ferry.MedianPerSecond, op.Ratio, verdict,
			benchutil.OrDash(strings.Join(rr, ", ")), op.Ferry.PeakRSSMiB, op.Raw.PeakRSSMiB)
	}
	fmt.Fprintf(w, "\nMedians of objects/s, each over the whole child process (start, connect, work, exit). Target: ferry / raw ≥ %.1f.\n", res.Target)
	fmt.Fprintf(w, "ferry's fixed cost per run (same commands on a namespace without ConfigMaps), included above: backup %.2f s, restore %.2f s.",
		res.FixedCost.BackupSeconds, res.FixedCost.RestoreSeconds)
	for _, op := range res.Operations {
		fmt.Fprintf(w, " Median raw %s run: %.2f s (%.2f s of it API work).", op.Name, medianSeconds(op.Raw.Samples), medianInner(op.Raw.Samples))
	}
	fmt.Fprintf(w, " Seed (raw CREATE into the empty source): %.0f objects/s.\n", res.Seed.PerSecond)
}

func medianInner(samples []Sample) float64 {
	var xs []float64
	for _, s := range samples {
		if s.Error == "" {
			xs = append(xs, s.InnerSeconds)
		}
	}
	return median(xs)
}

func logSample(what string, s Sample) {
	if s.Error != "" {
		logf("%s: FAILED after %.1fs: %s", what, s.Seconds, s.Error)
		return
	}
	logf("%s: %d objects in %.2fs = %.0f/s, max RSS %.0f MiB", what, s.Objects, s.Seconds, s.PerSecond, s.MaxRSSMiB)
}

func logf(format string, args ...any) { benchutil.Logf("bench", format, args...) }
