package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// verification is the part of report.json the tests read.
type verification struct {
	Backup  string         `json:"backup"`
	Summary map[string]int `json:"summary"`
	// Namespaces carry the same counts as Summary, per target namespace.
	Namespaces  []map[string]any `json:"namespaces"`
	Differences []struct {
		Resource, Namespace, Name, Outcome, Message, Diff string
	} `json:"differences"`
	Items []struct {
		Resource, Namespace, Name, Outcome string
	} `json:"items"`
	Timings []struct {
		Phase string `json:"phase"`
	} `json:"timings"`
}

func readVerification(t *testing.T, dir string) verification {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v verification
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	return v
}

// chromiumFlags run Debian's chromium headless on a machine without a
// display or network, as root (hack/install-packages.sh installs it).
func chromiumFlags(t *testing.T) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
}

// checkReportPage renders dir/report.html in headless Chromium and checks
// that it renders (a screenshot that is not blank) and that the numbers
// the rendered page shows are those of dir/report.json.
func checkReportPage(t *testing.T, dir string) {
	t.Helper()
	dom := renderPage(t, filepath.Join(dir, "report.html"))
	v := readVerification(t, dir)
	// The summary cards.
	for _, k := range []string{"objects", "matched", "transformed", "differ", "missing", "failed", "skipped", "unexpected"} {
		m := regexp.MustCompile(`id="summary-` + k + `">(\d+)<`).FindSubmatch(dom)
		if m == nil {
			t.Errorf("rendered page has no summary-%s", k)
			continue
		}
		if n, _ := strconv.Atoi(string(m[1])); n != v.Summary[k] {
			t.Errorf("page shows %s = %d, report.json %d", k, n, v.Summary[k])
		}
	}
	// The per-namespace table: one row per namespace, same numbers.
	rows := regexp.MustCompile(`(?s)<tr class="namespace" data-namespace="([^"]*)">(.*?)</tr>`).FindAllSubmatch(dom, -1)
	if len(rows) != len(v.Namespaces) {
		t.Errorf("page has %d namespace rows, report.json %d namespaces", len(rows), len(v.Namespaces))
	}
	byNS := map[string]map[string]any{}
	for _, n := range v.Namespaces {
		byNS[n["namespace"].(string)] = n
	}
	cell := regexp.MustCompile(`<td class="num">(\d+)</td>`)
	for _, r := range rows {
		n, ok := byNS[string(r[1])]
		if !ok {
			t.Errorf("page row for namespace %q not in report.json", r[1])
			continue
		}
		var got []string
		for _, c := range cell.FindAllSubmatch(r[2], -1) {
			got = append(got, string(c[1]))
		}
		var want []string
		for _, k := range []string{"objects", "matched", "transformed", "differ", "missing", "failed", "skipped"} {
			want = append(want, strconv.Itoa(int(n[k].(float64))))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("namespace %q: page shows %v, report.json %v", r[1], got, want)
		}
	}
	if got := bytes.Count(dom, []byte(`<tr class="difference">`)); got != len(v.Differences) {
		t.Errorf("page lists %d differences, report.json %d", got, len(v.Differences))
	}
}

// renderPage renders the page at path in headless Chromium and returns
// its DOM, after checking that it renders (a screenshot that is not
// blank).
func renderPage(t *testing.T, path string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (make control-plane installs it): %v", err)
	}
	page := "file://" + path
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(chromiumFlags(t), "--dump-dom", page)...)
	cmd.Stderr = &errb
	dom, err := cmd.Output()
	if err != nil || len(dom) == 0 {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, errb.String())
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	cmd = exec.CommandContext(ctx, bin, append(chromiumFlags(t), "--window-size=1280,1600", "--screenshot="+shot, page)...)
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, errb.String())
	}
	checkNotBlank(t, shot)
	return dom
}

// checkNotBlank fails unless the PNG has more than one colour.
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	first := img.At(b.Min.X, b.Min.Y)
	r0, g0, b0, _ := first.RGBA()
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 {
				return
			}
		}
	}
	t.Errorf("the rendered report is blank (%s)", path)
}
