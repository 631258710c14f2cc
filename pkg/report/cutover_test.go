package report

import (
	"strings"
	"testing"
	"time"
)

// TestCutoverSection: a report with a cutover shows its stages and each
// step's predicted and actual seconds; one without has no such section.
func TestCutoverSection(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	v := &Verification{Backup: "m", Cutover: &Cutover{
		Stages: []CutoverStage{{Number: 1, Started: t0, Seconds: 26, Claims: 1, ScannedBytes: 16 << 20, ChangedBytes: 16 << 20}, {Number: 2, Started: t0.Add(time.Minute), Seconds: 19, Claims: 1, ChangedBytes: 1130, Vanished: 1}},
		Steps:  []CutoverStep{{Step: "quiesce (source pods gone)", Predicted: 2, Actual: 6}},
		Total:  CutoverStep{Step: "downtime", Predicted: 24, Actual: 20},
		Basis:  []string{"quiesce: at least 2s"},
	}}
	b, err := v.HTML()
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{`id="cutover-downtime">Downtime 20.0 s, predicted 24.0 s`, `<td>2</td>`, `16.0 MiB`, `data-step="quiesce (source pods gone)"`, `<td class="num">2.0 s</td><td class="num">6.0 s</td>`, "quiesce: at least 2s", `width:25.0%`} {
		if !strings.Contains(html, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	v.Cutover = nil
	if b, _ = v.HTML(); strings.Contains(string(b), "cutover-steps") {
		t.Error("a report without a cutover has a cutover section")
	}
}
