package preflight

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/report"
)

// Probe bounds: the create-rate probe sends at most probeCreates dry-run
// creates, for at most probeTime: long enough that a moment's load on the
// machine does not make the rate.
const (
	probeCreates = 5000
	probeTime    = 3 * time.Second
)

// estimate is the migration's time: the backup as long as the check's own
// read of the live source took (listing and archiving the same objects);
// the restore as the objects at the target's create rate (a short probe
// of dry-run creates, at the restore's concurrency); the verification,
// which reads each object back from the target and compares it, one
// request with an object's body each as the restore's, at the same rate.
// (bench/load measured, at 50,000 objects: the restore's requests went
// at 1,230/s, the verification's at 1,410/s: the per-object work of
// client and server, not the write, sets both.)
func (e *env) estimate(ctx context.Context, src *source) *report.Estimate {
	est := &report.Estimate{}
	n := e.p.Objects
	if src.took > 0 {
		est.Parts = append(est.Parts, report.EstimatePart{Step: "backup", Seconds: src.took.Seconds(),
			Basis: fmt.Sprintf("the pre-flight's own read of the source: %d object(s) listed and archived in %s (the upload to the location is not counted)", n, src.took.Round(time.Millisecond))})
	}
	workers := e.o.Restore.Workers
	if workers <= 0 {
		workers = 32
	}
	rate, sent, err := probeCreateRate(ctx, e.t, e.c.sample, workers)
	if err != nil {
		e.skip("the restore's and the verification's time: the create-rate probe failed: %v", err)
	} else {
		est.Parts = append(est.Parts, report.EstimatePart{Step: "restore", Seconds: float64(n) / rate,
			Basis: fmt.Sprintf("%d object(s) at the target's create rate, %.0f/s (a probe of %d dry-run creates of a sample of %d of the objects, %d at a time)", n, rate, sent, len(e.c.sample), workers)},
			report.EstimatePart{Step: "verify", Seconds: float64(n) / rate,
				Basis: fmt.Sprintf("%d object(s), each read back from the target and compared: a request with the object's body each, as the restore's, at the same rate", n)})
	}
	if b := e.copied; b != nil && b.total() > 0 {
		if rate, read, err := probePullRate(ctx, b, e.o.Images); err != nil {
			e.skip("the images' time: the pull-rate probe failed: %v", err)
		} else {
			est.Parts = append(est.Parts, report.EstimatePart{Step: "images", Seconds: float64(b.total()) / rate,
				Basis: fmt.Sprintf("%d image(s), %d unique blob(s) of %s, at the source registry's measured pull rate, %s/s (a probe read %s of one blob); the push to the target's registry is taken as fast", b.images, len(b.blobs), mib(b.total()), mib(int64(rate)), mib(read))})
		}
	}
	if vt := e.estimateVolumes(ctx, src); vt != nil {
		est.Volumes, est.VolumeBytes, est.UpperBound = vt.load.volumes, vt.load.bytes, vt.load.volumes-vt.load.measured
		est.AddTo("backup", vt.backup, vt.backupBasis)
		est.AddTo("restore", vt.restore, vt.restoreBasis)
		est.AddTo("verify", vt.verify, vt.verifyBasis)
	}
	est.Total()
	return est
}

// probeCreateRate sends dry-run creates of the sample of the planned
// objects (collector.sample), each into the target's default namespace
// (kube-system when it has none) under a generated name, round after
// round until probeCreates are sent or probeTime passed: the rate of the
// restore's requests, with its objects' kinds and bodies. Nothing is
// written: the API server runs validation and admission, and persists
// nothing.
func probeCreateRate(ctx context.Context, t *target, sample []sampled, workers int) (float64, int64, error) {
	ns := "default"
	if _, ok := t.namespaces[ns]; !ok {
		ns = "kube-system"
	}
	if len(sample) == 0 {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"probe": "a small object"}}}
		sample = []sampled{{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, u: cm}}
	}
	objs := make([]*unstructured.Unstructured, len(sample))
	for i, sm := range sample {
		u := sm.u.DeepCopy()
		u.SetNamespace(ns)
		u.SetName("")
		u.SetGenerateName("ferry-preflight-probe-")
		u.SetResourceVersion("")
		u.SetOwnerReferences(nil)
		objs[i] = u
	}
	var next atomic.Int64
	rate, n, err := probe(ctx, workers, func(ctx context.Context) error {
		i := int(next.Add(1)-1) % len(objs)
		_, err := t.cluster.Dynamic.Resource(sample[i].gvr).Namespace(ns).Create(ctx, objs[i], metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	if err != nil {
		return 0, n, fmt.Errorf("dry-run creates in namespace %s: %w", ns, err)
	}
	return rate, n, nil
}

// probe runs do on workers goroutines until probeCreates calls were made
// or probeTime passed, and returns the rate of the calls that were
// answered (an error answer is an answer: the API server did the work),
// failing only when none was, or every call failed.
func probe(ctx context.Context, workers int, do func(context.Context) error) (float64, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTime)
	defer cancel()
	var sent, done, failed atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= probeCreates && ctx.Err() == nil {
				err := do(ctx)
				if ctx.Err() != nil {
					return // cut short by the probe's time: not an answer
				}
				done.Add(1)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	n := done.Load()
	switch {
	case n > 0 && failed.Load() == n:
		return 0, n, firstErr
	case n == 0:
		return 0, 0, fmt.Errorf("no answer within %s", probeTime)
	}
	return float64(n) / max(took.Seconds(), 0.001), n, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
