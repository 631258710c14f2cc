package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestPreflightRank: risks rank by severity, then by the order the
// checks ran, then by object; the counts, the summary's top risks and the
// page follow.
func TestPreflightRank(t *testing.T) {
	p := &Preflight{Source: "src", Target: "dst", Objects: 3, Checks: []string{"dry-run", "storage-class", "image"}}
	p.Add(Risk{Severity: Note, Check: "dry-run", Objects: []string{"configmaps a/b"}, What: "n"})
	p.Add(Risk{Severity: Blocker, Check: "image", Objects: []string{"deployments.apps a/x"}, What: "b2"})
	p.Add(Risk{Severity: Warning, Check: "dry-run", Objects: []string{"configmaps a/c"}, What: "w"})
	p.Add(Risk{Severity: Blocker, Check: "storage-class", Objects: []string{"persistentvolumeclaims a/z", "persistentvolumeclaims a/d"}, What: "b1", Fix: "map it"})
	p.Rank()
	var got []string
	for _, r := range p.Risks {
		got = append(got, r.What)
	}
	if strings.Join(got, ",") != "b1,b2,w,n" {
		t.Errorf("ranked %v, want b1,b2,w,n", got)
	}
	if p.Risks[0].Objects[0] != "persistentvolumeclaims a/d" {
		t.Errorf("objects not sorted: %v", p.Risks[0].Objects)
	}
	if !p.Blocked() || p.Count("blocker") != 2 || p.Count("warning") != 1 || p.Count("note") != 1 {
		t.Errorf("counts %v, blocked %v", p.Counts, p.Blocked())
	}
	var b bytes.Buffer
	if err := p.WriteSummary(&b, 2); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"BLOCKED", "2 blocker(s), 1 warning(s), 1 note(s)", "Top 2 of 4", "BLOCKER  storage-class: persistentvolumeclaims a/d, persistentvolumeclaims a/z", "fix: map it"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "WARNING") {
		t.Errorf("summary of the top 2 lists a warning:\n%s", s)
	}
	b.Reset()
	if err := p.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="count-blocker">2<`, `data-severity="blocker" data-check="storage-class"`, "Blocked: 2 blocker(s)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// AddTo adds a step's volume data to its part, or makes the part.
func TestEstimateAddTo(t *testing.T) {
	e := &Estimate{Parts: []EstimatePart{{Step: "restore", Seconds: 2, Basis: "objects"}}}
	e.AddTo("restore", 3, "volume data")
	e.AddTo("verify", 1.5, "the walk")
	e.AddTo("backup", 0, "nothing")
	e.Total()
	if len(e.Parts) != 2 || e.Parts[0].Seconds != 5 || e.Parts[0].Basis != "objects; plus 3.0 s of volume data" ||
		e.Parts[1].Step != "verify" || e.Parts[1].Seconds != 1.5 || e.Seconds != 6.5 {
		t.Fatalf("estimate %+v", e)
	}
}
