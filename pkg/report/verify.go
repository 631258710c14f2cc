package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Outcomes of a verification item: how the target's object compares with
// the backup's object after the restore's expected transforms.
const (
	// Match: the target holds everything the expected object says.
	Match Outcome = "match"
	// Differs: the target's object has a different value somewhere; Message
	// names the first differing field and Diff shows all of them.
	Differs Outcome = "differs"
	// Missing: the target has no such object.
	Missing Outcome = "missing"
)

// Verification is a verification report: every backed-up object compared
// with the target after the restore's expected transforms (namespace and
// storage-class mappings, cloud profiles, resource modifiers, the built-in
// transforms of docs/design.md#transforms). It is written as report.json and as a
// self-contained report.html (WriteFiles).
type Verification struct {
	Backup  string `json:"backup"`
	Restore string `json:"restore,omitempty"`
	// SourceServer and TargetServer are the API server URLs.
	SourceServer string    `json:"sourceServer,omitempty"`
	TargetServer string    `json:"targetServer,omitempty"`
	Created      time.Time `json:"created"`
	Summary      Summary   `json:"summary"`
	// Namespaces counts outcomes per target namespace, sorted by name;
	// cluster-scoped objects are under "" (shown as "(cluster)").
	Namespaces []NamespaceSummary `json:"namespaces"`
	// Differences are the items that differ, are missing or could not be
	// compared: every unexpected difference.
	Differences []Result `json:"differences"`
	// Items are all compared and skipped items, sorted.
	Items    []Result `json:"items"`
	Warnings []string `json:"warnings,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	// Images and Volumes are the backup's image and volume results, when
	// it has them.
	Images  []Artifact `json:"images"`
	Volumes []Artifact `json:"volumes"`
	// Timings are the phases of the migration, in order.
	Timings []Timing `json:"timings"`
}

// Summary counts a verification's items. Unexpected is
// Differ + Missing + Failed: zero means the target matches the backup.
type Summary struct {
	Objects    int `json:"objects"`
	Matched    int `json:"matched"`
	Differ     int `json:"differ"`
	Missing    int `json:"missing"`
	Skipped    int `json:"skipped"`
	Failed     int `json:"failed"`
	Unexpected int `json:"unexpected"`
	// Transformed counts matched objects the restore changed on purpose
	// (their Changes list says how).
	Transformed int `json:"transformed"`
}

// NamespaceSummary is Summary for one target namespace.
type NamespaceSummary struct {
	Namespace string `json:"namespace"`
	Summary
}

// Artifact is one image or volume result shown in the report.
type Artifact struct {
	Name    string `json:"name"`
	Detail  string `json:"detail,omitempty"`
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
}

// Timing is one phase of a migration: backup, restore or verify.
type Timing struct {
	Phase   string    `json:"phase"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Seconds float64   `json:"seconds"`
}

// NewTiming returns the phase from start to end.
func NewTiming(phase string, start, end time.Time) Timing {
	return Timing{Phase: phase, Start: start, End: end, Seconds: end.Sub(start).Seconds()}
}

// NewVerification builds a report from the per-item outcomes of a
// verification run (Match, Differs, Missing, Skipped or Failed).
func NewVerification(backup string, res *Results) *Verification {
	v := &Verification{Backup: backup, Created: time.Now().UTC(), Images: []Artifact{}, Volumes: []Artifact{}, Differences: []Result{}}
	v.Items = res.Sorted()
	res.mu.Lock()
	v.Warnings = append([]string(nil), res.Warnings...)
	v.Errors = append([]string(nil), res.Errors...)
	res.mu.Unlock()
	byNS := map[string]*NamespaceSummary{}
	for _, it := range v.Items {
		ns := it.Namespace
		if it.TargetNamespace != "" {
			ns = it.TargetNamespace
		}
		n := byNS[ns]
		if n == nil {
			n = &NamespaceSummary{Namespace: ns}
			byNS[ns] = n
		}
		for _, s := range []*Summary{&v.Summary, &n.Summary} {
			s.add(it)
		}
		if it.Outcome == Differs || it.Outcome == Missing || it.Outcome == Failed {
			v.Differences = append(v.Differences, it)
		}
	}
	for _, n := range byNS {
		v.Namespaces = append(v.Namespaces, *n)
	}
	sort.Slice(v.Namespaces, func(i, j int) bool { return v.Namespaces[i].Namespace < v.Namespaces[j].Namespace })
	return v
}

func (s *Summary) add(it Result) {
	s.Objects++
	switch it.Outcome {
	case Match:
		s.Matched++
		if len(it.Changes) > 0 {
			s.Transformed++
		}
	case Differs:
		s.Differ++
	case Missing:
		s.Missing++
	case Skipped:
		s.Skipped++
	default:
		s.Failed++
	}
	s.Unexpected = s.Differ + s.Missing + s.Failed
}

// WriteFiles writes dir/report.json and dir/report.html (creating dir)
// and returns their paths. The HTML page is self-contained: inline styles,
// no scripts or external resources, so it opens offline and can be
// attached to a change ticket.
func (v *Verification) WriteFiles(dir string) (jsonPath, htmlPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("report directory: %w", err)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", "", err
	}
	jsonPath, htmlPath = filepath.Join(dir, "report.json"), filepath.Join(dir, "report.html")
	if err := os.WriteFile(jsonPath, append(data, '\n'), 0o644); err != nil {
		return "", "", fmt.Errorf("writing %s: %w", jsonPath, err)
	}
	page, err := v.HTML()
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(htmlPath, page, 0o644); err != nil {
		return "", "", fmt.Errorf("writing %s: %w", htmlPath, err)
	}
	return jsonPath, htmlPath, nil
}

//go:embed verify.html.tmpl
var verifyTemplate string

var verifyPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"nsName": func(ns string) string {
		if ns == "" {
			return "(cluster)"
		}
		return ns
	},
	"target": func(r Result) string {
		ns, name := r.Namespace, r.Name
		if r.TargetNamespace != "" {
			ns = r.TargetNamespace
		}
		if r.TargetName != "" {
			name = r.TargetName
		}
		if ns == "" {
			return name
		}
		return ns + "/" + name
	},
	"secs": func(f float64) string { return fmt.Sprintf("%.1f s", f) },
	"ts":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}).Parse(verifyTemplate))

// HTML renders the report as one self-contained page.
func (v *Verification) HTML() ([]byte, error) {
	var b bytes.Buffer
	if err := verifyPage.Execute(&b, v); err != nil {
		return nil, fmt.Errorf("rendering the report: %w", err)
	}
	return b.Bytes(), nil
}
