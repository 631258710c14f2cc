package report

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
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
	// Running is whether the restored applications run in the target:
	// workloads healthy, Services with ready endpoints, claims bound,
	// images present (nil when the runtime checks were not asked for).
	Running *Running `json:"running,omitempty"`
	// Cutover is a staged migration's cutover: its stages, and its
	// predicted downtime against the actual one.
	Cutover *Cutover `json:"cutover,omitempty"`
	// Estimate is the pre-flight's time estimate of this migration, with
	// the actual times of its steps (Estimate.SetActual), when a
	// pre-flight of it ran before.
	Estimate *Estimate `json:"estimate,omitempty"`
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
	// The report takes the results' list, sorted in place: a copy of a
	// list of 200,000 results is tens of MiB at the peak of a migrate.
	res.mu.Lock()
	sortResults(res.Items)
	v.Items = res.Items
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
// attached to a change ticket. Each file is rendered straight into a
// temporary file beside it, renamed into place when complete: neither is
// ever held whole in memory (a report of 200,000 objects is hundreds of
// MiB of JSON and HTML).
func (v *Verification) WriteFiles(dir string) (jsonPath, htmlPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("report directory: %w", err)
	}
	jsonPath, htmlPath = filepath.Join(dir, "report.json"), filepath.Join(dir, "report.html")
	if err := writeFile(jsonPath, v.WriteJSON); err != nil {
		return "", "", err
	}
	if err := writeFile(htmlPath, v.WriteHTML); err != nil {
		return "", "", err
	}
	return jsonPath, htmlPath, nil
}

// writeFile renders into a temporary file in path's folder and renames it
// to path when render and the writes succeed; else it removes it.
func writeFile(path string, render func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	err = render(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// WriteJSON writes the report as indented JSON (report.json), its items
// one at a time, so that the list is never encoded whole in memory. The
// items come last.
func (v *Verification) WriteJSON(w io.Writer) error {
	head := *v
	head.Items = nil
	data, err := json.MarshalIndent(&head, "", "  ")
	if err != nil {
		return err
	}
	before, after, ok := bytes.Cut(data, []byte(`"items": null`))
	if !ok {
		return fmt.Errorf("rendering the report: no items field")
	}
	if _, err := w.Write(before); err != nil {
		return err
	}
	if _, err := io.WriteString(w, `"items": [`); err != nil {
		return err
	}
	for i := range v.Items {
		item, err := json.MarshalIndent(&v.Items[i], "    ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n    "
		if i == 0 {
			sep = "\n    "
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		if _, err := w.Write(item); err != nil {
			return err
		}
	}
	if len(v.Items) > 0 {
		if _, err := io.WriteString(w, "\n  "); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, "]"); err != nil {
		return err
	}
	if _, err := w.Write(after); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
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
	"mib":  func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) },
	"ts":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}).Parse(verifyTemplate))

// WriteHTML renders the report as one self-contained page (report.html),
// written as it is rendered.
func (v *Verification) WriteHTML(w io.Writer) error {
	if err := verifyPage.Execute(w, v); err != nil {
		return fmt.Errorf("rendering the report: %w", err)
	}
	return nil
}

// HTML renders the report as one self-contained page, in memory.
func (v *Verification) HTML() ([]byte, error) {
	var b bytes.Buffer
	if err := v.WriteHTML(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
