package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubeferry/ferry/bench/internal/benchutil"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/report"
)

// ---------------------------------------------------------------- counting and verifying

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

// finishRestore reads the restore's results back (ferry restore describe
// -o json), and compares the target with the source (verifyTarget).
func (e *ferryRuns) finishRestore(ctx context.Context, r *Run, dst *testenv.Cluster, want map[string]int) {
	if r.Restore == nil {
		return
	}
	var errs []error
	if r.Error != "" {
		errs = append(errs, errors.New(r.Error))
	}
	p, err := describeRestore(ctx, e.ferry, e.kubeconfig, e.storage, r.Restore.Name)
	if err != nil {
		errs = append(errs, err)
	}
	r.Problems = p
	var verr error
	r.Verify, r.Content, verr = verifyTarget(ctx, dst, want, e.sample)
	if err := errors.Join(append(errs, verr)...); err != nil {
		r.Error = err.Error()
	}
}

// verifyTarget compares dst's counts in the load namespaces with want
// (the source's), and the content of a sample of the seeded objects
// (sampler.check). Any difference is in the error.
func verifyTarget(ctx context.Context, dst *testenv.Cluster, want map[string]int, sample *sampler) ([]Check, *ContentCheck, error) {
	var errs []error
	var checks []Check
	mc, err := metadata.NewForConfig(dst.Config)
	if err == nil {
		var got map[string]int
		got, err = countAll(ctx, mc)
		for _, k := range compared {
			c := Check{Kind: k.name, Source: want[k.name], Target: got[k.name]}
			c.OK = c.Source == c.Target
			checks = append(checks, c)
			if !c.OK {
				errs = append(errs, fmt.Errorf("verify: %s in the load namespaces: source %d, %s %d", k.name, c.Source, dst.Name, c.Target))
			}
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("verify: %w", err))
	}
	content, err := sample.check(ctx, dst.Config)
	if err != nil {
		errs = append(errs, fmt.Errorf("verify content: %w", err))
	} else if content.MismatchTotal > 0 {
		errs = append(errs, fmt.Errorf("verify content: %d of %d sampled objects differ from the source in %s, first: %s",
			content.MismatchTotal, content.Total, dst.Name, content.Mismatches[0]))
	}
	return checks, content, errors.Join(errs...)
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

// storageMiB returns the etcd database size the API server at cfg reports
// (the sum of apiserver_storage_size_bytes in /metrics), in MiB.
func storageMiB(ctx context.Context, cfg *rest.Config) (float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var total float64
	found := false
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "apiserver_storage_size_bytes") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("apiserver_storage_size_bytes: %w", err)
		}
		total += v
		found = true
	}
	if !found {
		return 0, errors.New("no apiserver_storage_size_bytes in the API server's /metrics")
	}
	return total / (1 << 20), nil
}

// selfMaxRSSMiB is this process's peak RSS.
func selfMaxRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
