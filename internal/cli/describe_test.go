package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/report"
)

// TestSummarizeSkips: routine skips shared by many items are one line
// each, so that the failed items and the rare skips are not buried under
// them (issue 28: 40 skipped Events buried the warnings).
func TestSummarizeSkips(t *testing.T) {
	res := &report.Results{}
	for range 40 {
		res.Add(report.Result{Resource: "events", Name: "e", Outcome: report.Skipped, Reason: "events are history, not state"})
	}
	res.Add(report.Result{Resource: "configmaps", Name: "c", Outcome: report.Skipped, Reason: "exists, differs"})
	res.Add(report.Result{Resource: "deployments.apps", Name: "d", Outcome: report.Failed, Reason: "Forbidden"})
	res.Add(report.Result{Resource: "secrets", Name: "s", Outcome: report.Created})
	var b bytes.Buffer
	keep := summarizeSkips(&b, res)
	if b.String() != "Skipped: 40 items: events are history, not state (--details lists them)\n" {
		t.Errorf("summary %q", b.String())
	}
	b.Reset()
	if err := res.WriteTable(&b, keep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "events") || !strings.Contains(out, "configmaps") || !strings.Contains(out, "deployments.apps") || strings.Contains(out, "secrets") {
		t.Errorf("table:\n%s", out)
	}
}
