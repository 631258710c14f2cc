package migration

import (
	"strings"
	"testing"
	"time"
)

// TestPredict: the final delta is the change rate between the last two
// stages over the time since the last, at the throughput of the stage
// that moved the most, plus the last stage's overhead; the restore is
// the object count at the measured create rate.
func TestPredict(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	stage := func(n int, start time.Time, d time.Duration, changed int64) StageRecord {
		return StageRecord{Number: n, Started: start, Ended: start.Add(d), Claims: []ClaimStage{{ChangedBytes: changed}},
			Rates: MeasuredRates{CreatesPerSecond: 100, Objects: 50, Start: 4 * time.Second}}
	}
	j := &Journal{Name: "m", Stages: []StageRecord{
		stage(1, t0, 100*time.Second, 1000<<20),                   // 10 MiB/s
		stage(2, t0.Add(200*time.Second), 12*time.Second, 20<<20), // 2 s of data, 10 s overhead
	}}
	now := t0.Add(300 * time.Second) // 100 s after stage 2 began
	p, err := Predict(j, now)
	if err != nil {
		t.Fatal(err)
	}
	// 20 MiB over the 200 s between the stages: 0.1 MiB/s, for 100 s.
	if p.DeltaBytes != 10<<20 {
		t.Errorf("delta bytes %d, want %d", p.DeltaBytes, 10<<20)
	}
	// 10 s overhead + 10 MiB at 10 MiB/s.
	if p.Delta != 11*time.Second {
		t.Errorf("delta %s, want 11s", p.Delta)
	}
	if p.Restore != 500*time.Millisecond || p.Quiesce != minQuiesce || p.Start != 4*time.Second {
		t.Errorf("prediction %+v", p)
	}
	if p.Total != p.Quiesce+p.Delta+p.Restore+p.Start || !strings.Contains(p.String(), "cutover will take about 18s (downtime)") {
		t.Errorf("total %s: %s", p.Total, p)
	}
	// A stage that did not finish is not a basis.
	j.Stages = append(j.Stages, StageRecord{Number: 3, Started: now})
	if q, _ := Predict(j, now); q.Delta != p.Delta {
		t.Errorf("an unfinished stage changed the prediction: %s", q.Delta)
	}
	// A clock behind the last stage's start predicts no change, not a
	// negative one.
	if q, _ := Predict(j, t0.Add(100*time.Second)); q.DeltaBytes != 0 || q.Delta < 0 {
		t.Errorf("a clock behind the stages: %+v", q)
	}
	// The throughput is the claims' own time, not the stage's: 1000 MiB
	// in 20 s of data time is 50 MiB/s, whatever the helper pods cost.
	j.Stages[0].Claims[0].Snapshot, j.Stages[0].Claims[0].Write = 10*time.Second, 10*time.Second
	if q, _ := Predict(j, now); q.Delta != 12*time.Second-400*time.Millisecond+200*time.Millisecond {
		t.Errorf("delta with claim times %s, want 11.8s (11.6s overhead + 10 MiB at 50 MiB/s)", q.Delta)
	}
	if _, err := Predict(&Journal{Name: "m"}, now); err == nil {
		t.Error("a journal without stages predicted")
	}
}
