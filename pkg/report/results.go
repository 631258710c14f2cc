// Package report owns ferry's reports: the results of a backup or restore
// (one Result per item, plus warnings and errors, rendered as text or
// JSON), and the verification report of a target (Verification, written as
// report.json and report.html).
package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"text/tabwriter"
)

// Outcome is what happened to one item.
type Outcome string

// Outcomes of restore items (docs/design.md#results) and backup items.
const (
	Created   Outcome = "created"
	Updated   Outcome = "updated"
	Unchanged Outcome = "unchanged"
	Skipped   Outcome = "skipped"
	Failed    Outcome = "failed"
	BackedUp  Outcome = "backedUp"
)

// Result is the outcome of one item. Resource is the group-resource
// ("deployments.apps"); Namespace/Name are the source identity and
// TargetNamespace/TargetName the identity in the target where they differ.
// Reason is a short machine-readable reason; Message is the human text,
// for failures the API server's message.
type Result struct {
	Resource        string  `json:"resource"`
	Version         string  `json:"version,omitempty"`
	Namespace       string  `json:"namespace,omitempty"`
	Name            string  `json:"name"`
	TargetNamespace string  `json:"targetNamespace,omitempty"`
	TargetName      string  `json:"targetName,omitempty"`
	Outcome         Outcome `json:"outcome"`
	Reason          string  `json:"reason,omitempty"`
	Message         string  `json:"message,omitempty"`
	// Changes lists what the restore's transforms changed in the object.
	Changes []string `json:"changes,omitempty"`
	// Diff is a unified diff from the target's object to what the restore
	// writes (or would write), for objects that exist and differ.
	Diff string `json:"diff,omitempty"`
}

// Results collects item results, warnings and errors. It is safe for
// concurrent use.
type Results struct {
	mu       sync.Mutex
	Items    []Result `json:"items"`
	Warnings []string `json:"warnings,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	// Notes say what ran that is neither an item nor a problem (a backup
	// hook that succeeded), for the summary and describe.
	Notes []string `json:"notes,omitempty"`
}

// Notef records a note.
func (r *Results) Notef(format string, args ...any) {
	r.mu.Lock()
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// Add records one item result.
func (r *Results) Add(res Result) {
	r.mu.Lock()
	r.Items = append(r.Items, res)
	r.mu.Unlock()
}

// Grow makes room for n more item results, so that recording many does
// not copy the list as it grows.
func (r *Results) Grow(n int) {
	r.mu.Lock()
	r.Items = slices.Grow(r.Items, n)
	r.mu.Unlock()
}

// Warnf records a warning.
func (r *Results) Warnf(format string, args ...any) {
	r.mu.Lock()
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// Errorf records an error that is not tied to one item.
func (r *Results) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// Update lets f change recorded items in place, under the lock.
func (r *Results) Update(f func(items []Result)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.Items)
}

// Count returns how many items ended in outcome o.
func (r *Results) Count(o Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, it := range r.Items {
		if it.Outcome == o {
			n++
		}
	}
	return n
}

// Sorted returns the items ordered by resource, namespace and name.
func (r *Results) Sorted() []Result {
	r.mu.Lock()
	items := append([]Result(nil), r.Items...)
	r.mu.Unlock()
	sortResults(items)
	return items
}

func sortResults(items []Result) {
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// MarshalJSON writes items sorted, so that results files are stable.
func (r *Results) MarshalJSON() ([]byte, error) {
	items := r.Sorted()
	r.mu.Lock()
	defer r.mu.Unlock()
	return json.Marshal(struct {
		Items    []Result `json:"items"`
		Warnings []string `json:"warnings,omitempty"`
		Errors   []string `json:"errors,omitempty"`
	}{items, r.Warnings, r.Errors})
}

// WriteJSON writes what MarshalJSON gives (the items sorted, in place),
// one item at a time: the results of a restore of many objects are never
// encoded whole in memory. pkg/store writes results files with it.
func (r *Results) WriteJSON(w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sortResults(r.Items)
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	bw.WriteString(`{"items":[`)
	for i := range r.Items {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(&r.Items[i]); err != nil {
			return err
		}
	}
	bw.WriteByte(']')
	for _, l := range []struct {
		key  string
		list []string
	}{{"warnings", r.Warnings}, {"errors", r.Errors}} {
		if len(l.list) > 0 {
			fmt.Fprintf(bw, ",%q:", l.key)
			if err := enc.Encode(l.list); err != nil {
				return err
			}
		}
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// WriteTable prints the items that match keep (all when keep is nil) as
// an aligned table: RESOURCE NAMESPACE NAME OUTCOME REASON.
func (r *Results) WriteTable(w io.Writer, keep func(Result) bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tNAMESPACE\tNAME\tOUTCOME\tDETAIL")
	var items []Result
	r.mu.Lock()
	for _, it := range r.Items {
		if keep == nil || keep(it) {
			items = append(items, it)
		}
	}
	r.mu.Unlock()
	sortResults(items)
	for _, it := range items {
		ns, name := it.Namespace, it.Name
		if it.TargetNamespace != "" && it.TargetNamespace != ns {
			ns += "→" + it.TargetNamespace
		}
		if it.TargetName != "" && it.TargetName != name {
			name += "→" + it.TargetName
		}
		detail := it.Reason
		if it.Message != "" {
			if detail != "" {
				detail += ": "
			}
			detail += it.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", it.Resource, ns, name, it.Outcome, detail)
	}
	return tw.Flush()
}
