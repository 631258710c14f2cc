package migration

import (
	"fmt"
	"time"
)

// minQuiesce is the stop time assumed for pods without a preStop hook:
// SIGTERM, the kubelet's status update and the API's deletion.
const minQuiesce = 2 * time.Second

// Prediction is how long a cutover's downtime will be, from what the
// stages measured: the source's quiesce, the final delta, the resource
// restore and the target's start until Ready.
type Prediction struct {
	Quiesce time.Duration `json:"quiesce"`
	Delta   time.Duration `json:"delta"`
	Restore time.Duration `json:"restore"`
	Start   time.Duration `json:"start"`
	Total   time.Duration `json:"total"`
	// DeltaBytes is the predicted change since the last stage.
	DeltaBytes int64 `json:"deltaBytes"`
	Objects    int   `json:"objects"`
	// Basis says what each figure was computed from.
	Basis []string `json:"basis"`
}

// String is the one-line prediction.
func (p Prediction) String() string {
	return fmt.Sprintf("cutover will take about %s (downtime): quiesce %s, final delta %s (%s), restore of %d objects %s, start until Ready %s",
		round(p.Total), round(p.Quiesce), round(p.Delta), bytesString(p.DeltaBytes), p.Objects, round(p.Restore), round(p.Start))
}

// Predict is the downtime of a cutover of j started at now:
//   - quiesce: the longest grace a source pod with a preStop hook asks
//     for, at least minQuiesce;
//   - final delta: the change rate between the last two stages (changed
//     bytes over the time between their starts) times the time since the
//     last one started, at the throughput of the stage that moved the most,
//     plus the last stage's time beyond its own bytes (scans, helper pods);
//     with one stage, its own change is taken as the delta;
//   - restore: the last stage's object count at the target's measured
//     create rate;
//   - start: the longest time a source pod took from creation to Ready.
func Predict(j *Journal, now time.Time) (Prediction, error) {
	last := j.lastStage()
	if last == nil {
		return Prediction{}, fmt.Errorf("migration %s: no stage has finished, so there is nothing to predict from (ferry migrate stage %s)", j.Name, j.Name)
	}
	var p Prediction
	r := last.Rates
	p.Quiesce = max(r.Quiesce, minQuiesce)
	p.Basis = append(p.Basis, fmt.Sprintf("quiesce: the longest preStop grace of the source's pods (%s), at least %s", round(r.Quiesce), minQuiesce))
	// Throughput from the stage that moved the most bytes.
	best := last
	for i := range j.Stages {
		if s := &j.Stages[i]; s.Error == "" && !s.Ended.IsZero() && s.ChangedBytes() > best.ChangedBytes() {
			best = s
		}
	}
	// The data's throughput is the claims' own snapshot and write time
	// (claims move in parallel: the longest); the rest of a stage (helper
	// pods, the resources' backup) is overhead.
	rate := float64(best.ChangedBytes()) / max(best.dataTime().Seconds(), 0.001)
	overhead := last.Duration() - time.Duration(float64(last.ChangedBytes())/max(rate, 1)*float64(time.Second))
	overhead = max(overhead, 0)
	prev := j.stageBefore(last)
	since := max(now.Sub(last.Started), 0) // clocks that disagree never make it negative
	switch {
	case prev != nil:
		gap := max(last.Started.Sub(prev.Started).Seconds(), 1)
		change := float64(last.ChangedBytes()) / gap
		p.DeltaBytes = int64(change * since.Seconds())
		p.Basis = append(p.Basis, fmt.Sprintf("final delta: %s/s changed between stages %d and %d, for the %s since stage %d began", bytesString(int64(change)), prev.Number, last.Number, round(since), last.Number))
	default:
		p.DeltaBytes = last.ChangedBytes()
		p.Basis = append(p.Basis, fmt.Sprintf("final delta: one stage only, so its own change (%s) is taken as the delta", bytesString(p.DeltaBytes)))
	}
	p.Delta = overhead + time.Duration(float64(p.DeltaBytes)/max(rate, 1)*float64(time.Second))
	p.Basis = append(p.Basis, fmt.Sprintf("final delta: written at %s/s (stage %d), plus %s of scans and helper pods (stage %d)", bytesString(int64(rate)), best.Number, round(overhead), last.Number))
	p.Objects = r.Objects
	if r.CreatesPerSecond > 0 {
		p.Restore = time.Duration(float64(r.Objects) / r.CreatesPerSecond * float64(time.Second))
		p.Basis = append(p.Basis, fmt.Sprintf("restore: %d objects at the target's measured %.0f creates/s", r.Objects, r.CreatesPerSecond))
	} else {
		p.Basis = append(p.Basis, "restore: the target's create rate could not be measured (its dry-run creates failed); not counted")
	}
	p.Start = r.Start
	p.Basis = append(p.Basis, fmt.Sprintf("start: the longest a source pod took from creation to Ready (%s)", round(r.Start)))
	p.Total = p.Quiesce + p.Delta + p.Restore + p.Start
	return p, nil
}

// dataTime is how long the stage's claims took to move (the longest
// claim's snapshot and write: they move in parallel); the whole stage when
// no claim recorded its times.
func (s *StageRecord) dataTime() time.Duration {
	var d time.Duration
	for _, c := range s.Claims {
		d = max(d, c.Snapshot+c.Write)
	}
	if d <= 0 {
		return s.Duration()
	}
	return d
}

// stageBefore is the finished stage before s, nil for none.
func (j *Journal) stageBefore(s *StageRecord) *StageRecord {
	for i := len(j.Stages) - 1; i >= 0; i-- {
		t := &j.Stages[i]
		if t.Number < s.Number && t.Error == "" && !t.Ended.IsZero() {
			return t
		}
	}
	return nil
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
