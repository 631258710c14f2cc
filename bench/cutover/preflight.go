package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/pkg/report"
)

// preflightResult is the pre-flight's estimate of the stop-the-world
// migration, made with the same flags just before it, against the
// migration's own time: the "estimate against the actual" for a
// claim of the data set's size on real nodes.
type preflightResult struct {
	// Seconds is how long the pre-flight itself took.
	Seconds  float64          `json:"seconds"`
	Estimate *report.Estimate `json:"estimate"`
	// EstimateOverActual is the estimate's total ÷ the migrate's time
	// (within 0.5–1.5: the issue's ±50%).
	EstimateOverActual float64 `json:"estimateOverActual"`
	// Blockers are the risks the pre-flight ranked as blockers (none
	// expected).
	Blockers int `json:"blockers"`
}

// preflight runs "ferry migrate --preflight -o json" with the
// stop-the-world migration's flags (the writer still running, as a user
// checks before stopping anything) and returns its estimate.
func (b *bench) preflight(ctx context.Context, loc, name string) (*preflightResult, error) {
	reports := filepath.Join(os.TempDir(), "ferry-bench-cutover-preflight")
	defer os.RemoveAll(reports)
	args := []string{"migrate", "--name", name, "--preflight", "-o", "json", "--kubeconfig", b.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", loc,
		"--repository-password-file", b.password, "--insecure", "--helper-image", b.image,
		"--node-pods-dir", filepath.Join(b.src.Node.RootDir, "pods"), "--to-node-pods-dir", filepath.Join(b.dst.Node.RootDir, "pods")}
	args = append(args, stwFlags(name, reports)...)
	start := time.Now()
	cmd := exec.CommandContext(ctx, b.ferry, args...)
	cmd.Env = append(os.Environ(), b.env...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	took := time.Since(start).Seconds()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 2) { // 2: a blocker, still a report
		return nil, fmt.Errorf("ferry migrate --preflight: %w\n%s", err, stderr.String())
	}
	var p report.Preflight
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("ferry migrate --preflight -o json: %w", err)
	}
	if p.Estimate == nil {
		return nil, fmt.Errorf("ferry migrate --preflight: no estimate (skipped: %v)", p.Skipped)
	}
	benchutil.Logf(prog, "pre-flight: %.1f s; estimate %.1f s; skipped: %v", took, p.Estimate.Seconds, p.Skipped)
	return &preflightResult{Seconds: took, Estimate: p.Estimate, Blockers: p.Counts[report.Blocker]}, nil
}

// SetActual records the migrate's time (and its steps', from its
// verification report) against the estimate.
func (r *preflightResult) SetActual(seconds float64, timings []report.Timing) {
	r.Estimate.SetActual(timings)
	r.Estimate.Actual = seconds
	r.EstimateOverActual = r.Estimate.Seconds / seconds
}

// print prints the estimate's parts and its ratio to the actual.
func (r *preflightResult) print() {
	fmt.Printf("\n| pre-flight estimate of the stop-the-world migrate | estimated | actual | estimate ÷ actual |\n|---|--:|--:|--:|\n")
	fmt.Printf("| total (%d blocker(s); the check took %.1f s) | %.1f s | %.1f s | **%.2f** |\n", r.Blockers, r.Seconds, r.Estimate.Seconds, r.Estimate.Actual, r.EstimateOverActual)
	for _, p := range r.Estimate.Parts {
		ratio := "–"
		if p.Actual > 0 {
			ratio = fmt.Sprintf("%.2f", p.Seconds/p.Actual)
		}
		fmt.Printf("| %s: %s | %.1f s | %.1f s | %s |\n", p.Step, p.Basis, p.Seconds, p.Actual, ratio)
	}
}

// limitedBuffer keeps the last 16 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > 16<<10 {
		l.b = l.b[len(l.b)-16<<10:]
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
