package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/pkg/report"
)

// EstimateCheck is the pre-flight's time estimate against the migrate
// that ran right after it, on the same clusters: per step and in all,
// Ratio is estimated ÷ actual (the bound: within ±50%, 0.5 to 1.5).
type EstimateCheck struct {
	// Seconds is the pre-flight's own wall time.
	Seconds float64         `json:"seconds"`
	Parts   []EstimateRatio `json:"parts"`
	Total   EstimateRatio   `json:"total"`
	Error   string          `json:"error,omitempty"`
}

// EstimateRatio is one step's estimate and actual time.
type EstimateRatio struct {
	Step      string  `json:"step"`
	Estimated float64 `json:"estimated"`
	Actual    float64 `json:"actual"`
	Ratio     float64 `json:"ratio"`
	Basis     string  `json:"basis,omitempty"`
}

// preflightRun runs "ferry migrate --preflight" of the same migration as
// the migrate run that follows it, and returns its report.
func (e *ferryRuns) preflightRun(ctx context.Context) (*report.Preflight, *EstimateCheck) {
	args := []string{"migrate", "--preflight", "--from-context", srcContext, "--to-context", dstContext, "--name", "load",
		"--report-dir", filepath.Join(e.reportDir, "preflight"), "--images", e.o.images,
		"--kubeconfig", e.kubeconfig, "--storage", e.storage, "-o", "json"}
	out, stderr, u, err := launch(ctx, e.launcher, ferryEnv, e.ferry, args...)
	c := &EstimateCheck{Seconds: u.Seconds}
	if err != nil && u.Code != 2 {
		c.Error = fmt.Sprintf("ferry migrate --preflight: %v; stderr: %s", err, benchutil.Tail(string(stderr), 2000))
		return nil, c
	}
	p := &report.Preflight{}
	if err := json.Unmarshal(out, p); err != nil || p.Estimate == nil {
		c.Error = fmt.Sprintf("decoding the pre-flight report: %v (estimate %v); stdout: %s", err, p.Estimate, benchutil.Tail(string(out), 500))
		return nil, c
	}
	return p, c
}

// compareEstimate fills c with the estimate of p against migrate run m:
// its backup, restore and verification times, and its wall time.
func compareEstimate(c *EstimateCheck, p *report.Preflight, m *Run) {
	if p == nil || m == nil {
		return
	}
	actual := map[string]float64{"backup": m.FerryBackupSeconds, "restore": m.FerryRestoreSeconds, "verify": m.FerryVerifySeconds}
	for _, part := range p.Estimate.Parts {
		c.Parts = append(c.Parts, estimateRatio(part.Step, part.Seconds, actual[part.Step], part.Basis))
	}
	c.Total = estimateRatio("total", p.Estimate.Seconds, m.Seconds, "")
}

func estimateRatio(step string, est, act float64, basis string) EstimateRatio {
	r := EstimateRatio{Step: step, Estimated: est, Actual: act, Basis: basis}
	if act > 0 {
		r.Ratio = est / act
	}
	return r
}

func logEstimate(c *EstimateCheck) {
	if c.Error != "" {
		logf("preflight: ERROR: %s", c.Error)
		return
	}
	logf("preflight: %.1fs; estimate against the migrate that followed:", c.Seconds)
	for _, r := range append(c.Parts, c.Total) {
		logf("  %-8s estimated %6.1fs, actual %6.1fs, ratio %.2f %s", r.Step, r.Estimated, r.Actual, r.Ratio, mark(r.Ratio >= 0.5 && r.Ratio <= 1.5))
	}
}
