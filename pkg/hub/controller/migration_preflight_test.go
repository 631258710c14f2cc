package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/preflight"
	"github.com/kubeferry/ferry/pkg/report"
)

// TestPreflightStatus: status.preflight keeps the counts, the first 50
// risks with their first 10 objects (and how many there were), and the
// estimate; the outcome is Completed without a blocker, PartiallyFailed
// with one, Failed when the check could not run.
func TestPreflightStatus(t *testing.T) {
	p := &report.Preflight{Objects: 7, Checks: []string{"dry-run"}, Estimate: &report.Estimate{Seconds: 2.5, Parts: []report.EstimatePart{{Step: "restore", Seconds: 2.5, Basis: "b"}}}}
	var objs []string
	for i := 0; i < 12; i++ {
		objs = append(objs, fmt.Sprintf("configmaps a/c%02d", i))
	}
	for i := 0; i < 60; i++ {
		p.Add(report.Risk{Severity: report.Warning, Check: "dry-run", Objects: objs, What: "w"})
	}
	p.Rank()
	if phase, reason, _ := preflightOutcome(p, nil); phase != v1beta1.PhaseCompleted || reason != reasonPreflightPassed {
		t.Errorf("no blocker: %s %s", phase, reason)
	}
	p.Add(report.Risk{Severity: report.Blocker, Check: "dry-run", Objects: []string{"x"}, What: "refused"})
	p.Rank()
	if phase, reason, msg := preflightOutcome(p, nil); phase != v1beta1.PhasePartiallyFailed || reason != reasonPreflightBlocked || !strings.Contains(msg, "1 blocker(s), 60 warning(s)") || !strings.Contains(msg, "refused") {
		t.Errorf("a blocker: %s %s %q", phase, reason, msg)
	}
	if phase, _, _ := preflightOutcome(nil, errors.New("target unreachable")); phase != v1beta1.PhaseFailed {
		t.Errorf("not run: %s", phase)
	}
	st := preflightStatus(p)
	if st.Objects != 7 || st.Blockers != 1 || st.Warnings != 60 || len(st.Risks) != preflight.MaxStatusRisks || st.Risks[0].Severity != "blocker" {
		t.Errorf("status %+v", st)
	}
	if r := st.Risks[1]; len(r.Objects) != preflight.MaxStatusObjects || r.ObjectCount != 12 {
		t.Errorf("risk objects %d of %d; want %d of 12", len(r.Objects), r.ObjectCount, preflight.MaxStatusObjects)
	}
	if st.Estimate == nil || st.Estimate.Seconds() != 2.5 || len(st.EstimateParts) != 1 || st.EstimateParts[0].Basis != "b" {
		t.Errorf("estimate %+v %+v", st.Estimate, st.EstimateParts)
	}
}
