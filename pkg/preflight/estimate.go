package preflight

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/report"
)

// Probe bounds: the create-rate probe sends at most probeCreates dry-run
// creates, for at most probeTime.
const (
	probeCreates = 400
	probeTime    = 10 * time.Second
)

// estimate is the migration's time: the backup as long as the check's own
// read of the live source took (listing and archiving the same objects),
// the restore as the objects at the target's create rate (a short probe
// of dry-run creates, at the restore's concurrency), and the verification
// as one more read of as many objects.
func (e *env) estimate(ctx context.Context, src *source, dryRunTook time.Duration) *report.Estimate {
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
	rate, sent, err := probeCreateRate(ctx, e.t, workers)
	switch {
	case err != nil:
		e.skip("the restore's time: the create-rate probe failed: %v", err)
	default:
		est.Parts = append(est.Parts, report.EstimatePart{Step: "restore", Seconds: float64(n) / rate,
			Basis: fmt.Sprintf("%d object(s) at the target's create rate, %.0f/s (a probe of %d dry-run creates, %d at a time)", n, rate, sent, workers)})
	}
	if src.took > 0 {
		est.Parts = append(est.Parts, report.EstimatePart{Step: "verify", Seconds: src.took.Seconds(),
			Basis: "one more read of as many objects, in the target, as long as the source's took"})
	}
	e.skip("the volume data's and the images' time: no throughput probe yet")
	est.Total()
	return est
}

// probeCreateRate sends dry-run creates of a small ConfigMap into the
// target's default namespace (kube-system when it has none), workers at
// a time, until probeCreates are sent or probeTime passed, and returns
// the rate of answered requests. Nothing is written: the API server runs
// validation and admission, and persists nothing.
func probeCreateRate(ctx context.Context, t *target, workers int) (float64, int64, error) {
	ns := "default"
	if _, ok := t.namespaces[ns]; !ok {
		ns = "kube-system"
	}
	ctx, cancel := context.WithTimeout(ctx, probeTime)
	defer cancel()
	cms := t.cluster.Typed.CoreV1().ConfigMaps(ns)
	var sent, failed atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= probeCreates && ctx.Err() == nil {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "ferry-preflight-probe-", Labels: map[string]string{"app.kubernetes.io/managed-by": "ferry"}},
					Data: map[string]string{"probe": "a small object, as most of a cluster's are"}}
				if _, err := cms.Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil && ctx.Err() == nil {
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
	done := min(sent.Load()-int64(workers), probeCreates)
	if done <= 0 || failed.Load() == done {
		if firstErr != nil {
			return 0, done, fmt.Errorf("namespace %s: %w", ns, firstErr)
		}
		return 0, done, fmt.Errorf("namespace %s: no create answered within %s", ns, probeTime)
	}
	return float64(done) / max(took.Seconds(), 0.001), done, nil
}
