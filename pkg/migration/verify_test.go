package migration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
)

// TestApplyVerification: the one rule for what a verification does to a
// restore's status (server mode's spec.verify, restore create --verify).
func TestApplyVerification(t *testing.T) {
	clean := &report.Verification{Summary: report.Summary{Objects: 5, Matched: 5}}
	differs := &report.Verification{Summary: report.Summary{Objects: 5, Matched: 4, Differ: 1, Unexpected: 1}}
	notRunning := &report.Verification{Summary: clean.Summary, Running: report.NewRunning([]report.Check{
		{Kind: report.KindClaim, Resource: "PersistentVolumeClaim", Namespace: "shop", Name: "data", Outcome: "bound, unequal", Data: report.DataUnequal, Bound: true,
			Reason: "ContentChanged", Message: "claim shop/data holds content sha256:b, not what the restore wrote (sha256:a)"}})}
	cases := []struct {
		name       string
		phase      v1alpha1.Phase
		v          *report.Verification
		err        error
		wantPhase  v1alpha1.Phase
		wantReason string // a substring; "" wants none
		wantReport bool
	}{
		{"matches", v1alpha1.PhaseCompleted, clean, nil, v1alpha1.PhaseCompleted, "", true},
		{"differs", v1alpha1.PhaseCompleted, differs, nil, v1alpha1.PhasePartiallyFailed, "verification: 1 of 5 object(s) differ", true},
		{"report not kept", v1alpha1.PhaseCompleted, clean, errors.New("keeping the report in the location: denied"), v1alpha1.PhasePartiallyFailed, "verification: keeping the report", false},
		{"could not verify", v1alpha1.PhaseCompleted, nil, errors.New("target unreachable"), v1alpha1.PhasePartiallyFailed, "verification: target unreachable", false},
		{"already partly failed keeps its reason", v1alpha1.PhasePartiallyFailed, differs, nil, v1alpha1.PhasePartiallyFailed, "", true},
		{"runtime check failed", v1alpha1.PhaseCompleted, notRunning, nil, v1alpha1.PhasePartiallyFailed, "first: PersistentVolumeClaim shop/data bound, unequal: ContentChanged", true},
	}
	for _, tc := range cases {
		rs := &v1alpha1.Restore{}
		rs.Name, rs.Status.Phase = "r", tc.phase
		ApplyVerification(rs, tc.v, tc.err)
		sum := rs.Status.Verification
		switch {
		case rs.Status.Phase != tc.wantPhase:
			t.Errorf("%s: phase %s, want %s", tc.name, rs.Status.Phase, tc.wantPhase)
		case tc.wantReason == "" && rs.Status.FailureReason != "", tc.wantReason != "" && !strings.Contains(rs.Status.FailureReason, tc.wantReason):
			t.Errorf("%s: failure reason %q, want %q", tc.name, rs.Status.FailureReason, tc.wantReason)
		case sum == nil:
			t.Errorf("%s: no status.verification", tc.name)
		case tc.wantReport != (len(sum.Report) == 2 && sum.Report[0] == "restores/r/report.json"):
			t.Errorf("%s: report keys %v, want them: %v", tc.name, sum.Report, tc.wantReport)
		case (tc.err != nil) != (sum.Error != ""):
			t.Errorf("%s: error %q, want it set: %v", tc.name, sum.Error, tc.err != nil)
		case tc.v != nil && (sum.Objects != tc.v.Summary.Objects || sum.Unexpected != tc.v.Summary.Unexpected):
			t.Errorf("%s: counts %+v, want the report's %+v", tc.name, sum, tc.v.Summary)
		case tc.v != nil && tc.v.Running != nil && (sum.Running == nil || sum.Running.Failed != 1 || sum.Running.ClaimsBound != 1 || sum.Running.ClaimsWithData != 1 || sum.Running.ClaimsEqual != 0):
			t.Errorf("%s: status.verification.running %+v, want the running section's counts", tc.name, sum.Running)
		}
	}
}

// TestVerifyAndRecordSkips: a failed restore and a dry run are not
// verified, and nothing is read or written for them.
func TestVerifyAndRecordSkips(t *testing.T) {
	for _, rs := range []*v1alpha1.Restore{
		{Status: v1alpha1.RestoreStatus{Phase: v1alpha1.PhaseFailed}},
		{Spec: v1alpha1.RestoreSpec{DryRun: true}, Status: v1alpha1.RestoreStatus{Phase: v1alpha1.PhaseCompleted}},
	} {
		// No cluster and no location: anything but the skip would panic.
		if err := VerifyAndRecord(context.Background(), nil, nil, restore.Options{}, rs, nil); err != nil || rs.Status.Verification != nil {
			t.Errorf("%+v: %v, verification %+v; want skipped", rs.Status, err, rs.Status.Verification)
		}
	}
}

// TestTimingsEstimateVerify: the estimate's verify part gets the
// verification's own time (found by TestCorpusMigration: after the
// verify step came to cover the runtime checks, its part had no actual).
func TestTimingsEstimateVerify(t *testing.T) {
	at := func(s int) *metav1.Time {
		tm := metav1.NewTime(time.Date(2026, 12, 5, 10, 0, s, 0, time.UTC))
		return &tm
	}
	b := &v1alpha1.Backup{Status: v1alpha1.BackupStatus{StartTimestamp: at(0), CompletionTimestamp: at(4)}}
	rs := &v1alpha1.Restore{Status: v1alpha1.RestoreStatus{StartTimestamp: at(5), CompletionTimestamp: at(15)}}
	verified := report.NewTiming("verify", at(16).Time, at(19).Time)
	est := &report.Estimate{Parts: []report.EstimatePart{{Step: "backup", Seconds: 3}, {Step: "restore", Seconds: 9}, {Step: "verify", Seconds: 2}}}
	ts, e := timings(b, rs, verified, est)
	if len(ts) != 3 || ts[2].Phase != "verify" {
		t.Fatalf("timings %+v", ts)
	}
	want := map[string]float64{"backup": 4, "restore": 10, "verify": 3}
	for _, p := range e.Parts {
		if p.Actual != want[p.Step] {
			t.Errorf("part %s: actual %v, want %v", p.Step, p.Actual, want[p.Step])
		}
	}
	if e.Actual != 17 || est.Parts[2].Actual != 0 {
		t.Errorf("estimate actual %v (want 17); the pre-flight's own estimate changed: %+v", e.Actual, est.Parts)
	}
	if ts, e := timings(nil, nil, verified, nil); len(ts) != 1 || e != nil {
		t.Errorf("without backup, restore or estimate: %+v %+v", ts, e)
	}
}
