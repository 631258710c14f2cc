package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestNewVerification(t *testing.T) {
	res := &Results{}
	res.Add(Result{Resource: "configmaps", Namespace: "a", Name: "same", Outcome: Match})
	res.Add(Result{Resource: "services", Namespace: "a", Name: "web", Outcome: Match, Changes: []string{"clusterIP cleared"}})
	res.Add(Result{Resource: "deployments.apps", Namespace: "a", TargetNamespace: "b", Name: "d", Outcome: Differs, Message: "first difference at .spec.replicas", Diff: "-  replicas: 7\n+  replicas: 2\n"})
	res.Add(Result{Resource: "secrets", Namespace: "b", Name: "gone", Outcome: Missing})
	res.Add(Result{Resource: "events", Namespace: "a", Name: "e", Outcome: Skipped, Reason: "never restored"})
	res.Add(Result{Resource: "storageclasses.storage.k8s.io", Name: "<script>alert(1)</script>", Outcome: Failed, Message: "forbidden"})
	res.Warnf("a warning")
	v := NewVerification("bk", res)
	want := Summary{Objects: 6, Matched: 2, Transformed: 1, Differ: 1, Missing: 1, Skipped: 1, Failed: 1, Unexpected: 3}
	if v.Summary != want {
		t.Errorf("summary %+v, want %+v", v.Summary, want)
	}
	if len(v.Differences) != 3 || len(v.Items) != 6 || len(v.Warnings) != 1 {
		t.Errorf("%d differences, %d items, %d warnings", len(v.Differences), len(v.Items), len(v.Warnings))
	}
	// Per target namespace: the Deployment restored from a into b counts for b.
	got := map[string]Summary{}
	for _, n := range v.Namespaces {
		got[n.Namespace] = n.Summary
	}
	if got["a"].Objects != 3 || got["b"].Objects != 2 || got["b"].Differ != 1 || got[""].Failed != 1 || len(got) != 3 {
		t.Errorf("namespaces %+v", got)
	}
	page, err := v.HTML()
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, w := range []string{`id="summary-unexpected">3<`, `id="summary-objects">6<`, "b/d", "-  replicas: 7", "&lt;script&gt;alert(1)&lt;/script&gt;", "a warning", "(cluster)"} {
		if !strings.Contains(s, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if strings.Contains(s, "<script>") || strings.Contains(s, "http://") || strings.Contains(s, "https://") {
		t.Error("page is not self-contained or not escaped")
	}
}

// TestVerificationMemory: a report is written to its files as it is
// rendered, and NewVerification takes the results' list instead of
// copying it. At 200,000 objects, a copy of the list and the JSON and HTML
// pages held whole put a migrate's peak RSS at 851 MiB (bench/load).
func TestVerificationMemory(t *testing.T) {
	const n = 50000
	res := &Results{}
	res.Grow(n)
	for i := range n {
		res.Add(Result{Resource: "configmaps", Namespace: fmt.Sprintf("ns-%03d", i%200), Name: fmt.Sprintf("cm-%06d", i), Outcome: Match, Changes: []string{"labels added"}})
	}
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	listBytes := uint64(n) * uint64(unsafe.Sizeof(Result{}))
	var v *Verification
	if a := allocated(func() { v = NewVerification("bk", res) }); a > listBytes/2 {
		t.Errorf("NewVerification allocated %d bytes for %d results: it copies their list (%d bytes)", a, n, listBytes)
	}
	if len(v.Items) != n || v.Summary.Matched != n {
		t.Fatalf("%d items, %d matched", len(v.Items), v.Summary.Matched)
	}
	// What each writer keeps live while it writes: the heap in use after
	// a collection, every MiB written, above what it was before.
	for _, w := range []struct {
		name   string
		render func(io.Writer) error
	}{{"WriteJSON", v.WriteJSON}, {"WriteHTML", v.WriteHTML}} {
		p := &heapProbe{}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p.base = ms.HeapAlloc
		if err := w.render(p); err != nil {
			t.Fatal(err)
		}
		if p.peak > p.base && p.peak-p.base > uint64(p.n)/8 {
			t.Errorf("%s kept %d bytes live while writing %d bytes: it renders the file whole before writing it", w.name, p.peak-p.base, p.n)
		}
	}
	dir := t.TempDir()
	jsonPath, htmlPath, err := v.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fis, _ := os.ReadDir(dir); len(fis) != 2 {
		t.Errorf("report folder holds %d files, want report.json and report.html only", len(fis))
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil || !strings.Contains(string(page), `id="summary-objects">50000<`) {
		t.Errorf("report.html: %v, %d bytes", err, len(page))
	}
	var back Verification
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &back); err != nil || len(back.Items) != n || back.Summary != v.Summary {
		t.Errorf("report.json: %v, %d items, summary %+v", err, len(back.Items), back.Summary)
	}
}

// heapProbe is a writer that counts what it is given and, every MiB,
// collects garbage and records the heap in use.
type heapProbe struct {
	n, next    int
	base, peak uint64
}

func (p *heapProbe) Write(b []byte) (int, error) {
	p.n += len(b)
	if p.n >= p.next {
		p.next = p.n + 1<<20
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p.peak = max(p.peak, ms.HeapAlloc)
	}
	return len(b), nil
}
