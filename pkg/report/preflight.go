package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"
)

// Severity ranks a pre-flight risk.
type Severity string

// Severities, most serious first: a blocker makes the move fail or lose
// something; a warning makes part of it not work as it did in the source;
// a note is what the move changes that the user should know.
const (
	Blocker Severity = "blocker"
	Warning Severity = "warning"
	Note    Severity = "note"
)

func (s Severity) rank() int {
	switch s {
	case Blocker:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Risk is one thing a pre-flight check found: the objects it concerns,
// what will happen to them in the move, and how to avoid it.
type Risk struct {
	Severity Severity `json:"severity"`
	// Check names the check that found it ("storage-class", ...).
	Check string `json:"check"`
	// Objects are "resource namespace/name" (or "resource name" for a
	// cluster-scoped object), as the target will have them.
	Objects []string `json:"objects"`
	// What says what will happen.
	What string `json:"what"`
	// Fix says what avoids it: a flag, a mapping, a modifier.
	Fix string `json:"fix,omitempty"`
}

// EstimatePart is one part of a migration's time estimate.
type EstimatePart struct {
	// Step is "backup", "restore", "verify", "volumes" or "images".
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
	// Basis says what the figure was computed from.
	Basis string `json:"basis"`
	// Actual is the step's measured time, once a migration ran (0 before).
	Actual float64 `json:"actual,omitempty"`
}

// Estimate is how long a migration will take: the sum of its parts.
type Estimate struct {
	Seconds float64        `json:"seconds"`
	Parts   []EstimatePart `json:"parts"`
	// Actual is the migration's measured time, once it ran.
	Actual float64 `json:"actual,omitempty"`
	// Volumes and VolumeBytes are the volume data the estimate counts:
	// each volume at its used bytes (UpperBound of them at their claim's
	// size, when no used bytes could be measured).
	Volumes     int   `json:"volumes,omitempty"`
	VolumeBytes int64 `json:"volumeBytes,omitempty"`
	UpperBound  int   `json:"volumesAtClaimSize,omitempty"`
}

// Total sums the parts into Seconds.
func (e *Estimate) Total() {
	e.Seconds = 0
	for _, p := range e.Parts {
		e.Seconds += p.Seconds
	}
}

// AddTo adds seconds, on basis, to the part of step (a new part when it
// has none); zero seconds add nothing.
func (e *Estimate) AddTo(step string, seconds float64, basis string) {
	if seconds <= 0 {
		return
	}
	for i := range e.Parts {
		if e.Parts[i].Step == step {
			e.Parts[i].Seconds += seconds
			e.Parts[i].Basis += fmt.Sprintf("; plus %.1f s of %s", seconds, basis)
			return
		}
	}
	e.Parts = append(e.Parts, EstimatePart{Step: step, Seconds: seconds, Basis: fmt.Sprintf("%.1f s of %s", seconds, basis)})
}

// SetActual fills in the actual times of the estimate's parts from a
// migration's timings (the part of each step from the timing of that
// phase), and the migration's, their sum.
func (e *Estimate) SetActual(timings []Timing) {
	e.Actual = 0
	for _, t := range timings {
		e.Actual += t.Seconds
		for i := range e.Parts {
			if e.Parts[i].Step == t.Phase {
				e.Parts[i].Actual = t.Seconds
			}
		}
	}
}

// Preflight is a pre-flight check's report: the ranked risks of a planned
// migration and its time estimate, found before anything was written.
type Preflight struct {
	Created time.Time `json:"created"`
	// Source is the source cluster's server, or "backup NAME" when the
	// check read a stored backup.
	Source string `json:"source"`
	Target string `json:"target"`
	// Objects is the number of objects the migration would restore.
	Objects int `json:"objects"`
	// Counts are the risks by severity.
	Counts map[Severity]int `json:"counts"`
	// Risks are ranked: blockers first, then warnings, then notes; within
	// one severity, by check, then by their first object.
	Risks    []Risk    `json:"risks"`
	Estimate *Estimate `json:"estimate,omitempty"`
	// Checks are the checks that ran; Skipped those that could not, with why.
	Checks  []string `json:"checks"`
	Skipped []string `json:"skipped"`
}

// Add records a risk.
func (p *Preflight) Add(r Risk) { p.Risks = append(p.Risks, r) }

// Rank sorts the risks and counts them: by severity, then by the order
// of p.Checks (the order the checks ran in, most fundamental first), then
// by their first object.
func (p *Preflight) Rank() {
	for i := range p.Risks {
		sort.Strings(p.Risks[i].Objects)
	}
	order := map[string]int{}
	for i, c := range p.Checks {
		order[c] = i + 1
	}
	sort.SliceStable(p.Risks, func(i, j int) bool {
		a, b := p.Risks[i], p.Risks[j]
		if a.Severity.rank() != b.Severity.rank() {
			return a.Severity.rank() < b.Severity.rank()
		}
		if a.Check != b.Check {
			return order[a.Check] < order[b.Check]
		}
		return first(a.Objects) < first(b.Objects)
	})
	p.Counts = map[Severity]int{Blocker: 0, Warning: 0, Note: 0}
	if p.Risks == nil {
		p.Risks = []Risk{} // JSON [], not null
	}
	if p.Skipped == nil {
		p.Skipped = []string{}
	}
	for _, r := range p.Risks {
		p.Counts[r.Severity]++
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Count is the number of risks of severity s (for the page).
func (p *Preflight) Count(s string) int { return p.Counts[Severity(s)] }

// Blocked reports whether a risk is a blocker.
func (p *Preflight) Blocked() bool { return p.Counts[Blocker] > 0 }

// WriteJSON writes the report as indented JSON.
func (p *Preflight) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// WriteSummary writes the terminal summary: the counts by severity, the
// estimate, then the top n risks.
func (p *Preflight) WriteSummary(w io.Writer, n int) error {
	verdict := "no blocker: the move can start"
	if p.Blocked() {
		verdict = "BLOCKED: fix the blockers before the move"
	}
	fmt.Fprintf(w, "Pre-flight of %d object(s), %s -> %s: %s\n", p.Objects, p.Source, p.Target, verdict)
	fmt.Fprintf(w, "  %d blocker(s), %d warning(s), %d note(s)\n", p.Counts[Blocker], p.Counts[Warning], p.Counts[Note])
	if e := p.Estimate; e != nil {
		var parts []string
		for _, pt := range e.Parts {
			parts = append(parts, fmt.Sprintf("%s %s", pt.Step, durationString(pt.Seconds)))
		}
		fmt.Fprintf(w, "  estimated time: %s (%s)\n", durationString(e.Seconds), strings.Join(parts, ", "))
	}
	for _, s := range p.Skipped {
		fmt.Fprintf(w, "  not checked: %s\n", s)
	}
	if len(p.Risks) == 0 {
		return nil
	}
	if n > len(p.Risks) {
		n = len(p.Risks)
	}
	fmt.Fprintf(w, "\nTop %d of %d risk(s):\n", n, len(p.Risks))
	for _, r := range p.Risks[:n] {
		fmt.Fprintf(w, "\n%-8s %s: %s\n", strings.ToUpper(string(r.Severity)), r.Check, objectsString(r.Objects, 3))
		fmt.Fprintf(w, "  %s\n", r.What)
		if r.Fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", r.Fix)
		}
	}
	return nil
}

// objectsString lists at most n objects, then how many more.
func objectsString(objs []string, n int) string {
	if len(objs) <= n {
		return strings.Join(objs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(objs[:n], ", "), len(objs)-n)
}

func durationString(secs float64) string {
	d := time.Duration(secs * float64(time.Second))
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

//go:embed preflight.html.tmpl
var preflightTemplate string

var preflightPage = template.Must(template.New("preflight").Funcs(template.FuncMap{
	"dur": durationString,
	"ts":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"pct": func(part, total float64) string {
		if total <= 0 {
			return "0"
		}
		return fmt.Sprintf("%.1f", 100*part/total)
	},
}).Parse(preflightTemplate))

// WriteHTML renders the report as one self-contained page (preflight.html).
func (p *Preflight) WriteHTML(w io.Writer) error {
	if err := preflightPage.Execute(w, p); err != nil {
		return fmt.Errorf("rendering the pre-flight report: %w", err)
	}
	return nil
}
