package report

import "time"

// Cutover is a staged migration's cutover in its report: the stages that
// preceded it, and each step's predicted time against its actual one.
type Cutover struct {
	Stages []CutoverStage `json:"stages"`
	// Steps are quiesce, final delta, restore and start until Ready, in
	// order; Total their sums.
	Steps []CutoverStep `json:"steps"`
	Total CutoverStep   `json:"total"`
	// Basis says what the prediction was computed from.
	Basis []string `json:"basis,omitempty"`
}

// CutoverStage is one stage: its claims' bytes, summed.
type CutoverStage struct {
	Number        int       `json:"number"`
	Started       time.Time `json:"started"`
	Seconds       float64   `json:"seconds"`
	Claims        int       `json:"claims"`
	ScannedBytes  int64     `json:"scannedBytes"`
	ChangedBytes  int64     `json:"changedBytes"`
	UploadedBytes int64     `json:"uploadedBytes"`
	Vanished      int64     `json:"vanished"`
}

// CutoverStep is one step of the downtime: predicted and actual seconds,
// and when it ran.
type CutoverStep struct {
	Step      string    `json:"step"`
	Predicted float64   `json:"predictedSeconds"`
	Actual    float64   `json:"actualSeconds"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
}

// Bar is the step's share of the longest of the total's two figures,
// for the timeline (0-100).
func (c *Cutover) Bar(seconds float64) float64 {
	m := max(c.Total.Predicted, c.Total.Actual)
	if m <= 0 {
		return 0
	}
	return seconds / m * 100
}
