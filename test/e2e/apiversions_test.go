package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubeferry/ferry/internal/testenv"
)

// apiVersionCase is one of Velero's EnableAPIGroupVersions cases
// (the test corpus's velero-enable-api-group-versions set, from
// brito-rafa/k8s-webhooks examples-for-projectvelero, whose README gives
// each case's expected version; Velero's e2e test
// test/e2e/basic/api-group/enable_api_group_versions.go runs them).
type apiVersionCase struct {
	name      string
	srcCRD    string
	srcCRs    []string // versions; music_<v>_rockband.yaml each, one namespace each
	tgtCRD    string   // "" leaves the target without the CRD
	want      string   // version every object must be restored at; "" = skipped
	wantOther bool     // the chosen version is not the source's preferred one
}

var apiVersionCases = []apiVersionCase{
	// Case A: source and target preferred versions match (v1).
	{name: "a", srcCRD: "case-a-source.yaml", srcCRs: []string{"v1", "v1alpha1"}, tgtCRD: "case-a-target.yaml", want: "v1"},
	// Case B: the source's preferred v1 is not served by the target; the
	// target's preferred v2beta2 is in the backup.
	{name: "b", srcCRD: "case-b-source-manually-added-mutations.yaml", srcCRs: []string{"v1", "v2beta1", "v2beta2"}, tgtCRD: "case-b-target-manually-added-mutations.yaml", want: "v2beta2", wantOther: true},
	// Case C: the target prefers v2, which the source lacks, but serves the
	// source's preferred v1.
	{name: "c", srcCRD: "case-a-source.yaml", srcCRs: []string{"v1", "v1alpha1"}, tgtCRD: "case-c-target-manually-added-mutations.yaml", want: "v1"},
	// Case D: neither preferred version is common; the best common one,
	// v2beta2, wins over v2beta1.
	{name: "d", srcCRD: "case-b-source-manually-added-mutations.yaml", srcCRs: []string{"v1", "v2beta1", "v2beta2"}, tgtCRD: "case-d-target-manually-added-mutations.yaml", want: "v2beta2", wantOther: true},
	// No common version: the objects are skipped with the reason.
	{name: "none", srcCRD: "case-a-source.yaml", srcCRs: []string{"v1", "v1alpha1"}, tgtCRD: "case-b-target-manually-added-mutations.yaml"},
	// The CRD does not exist in the target: it is restored, and with it the
	// source's preferred version.
	{name: "nocrd", srcCRD: "case-a-source.yaml", srcCRs: []string{"v1"}, want: "v1"},
}

// rerender gives case i its own group and kind, as Velero's test does, so
// that every case runs in one pair of clusters (the files stay untouched).
func rerender(t *testing.T, i int, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir(t), "velero-enable-api-group-versions", file))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\b(RockBand|RockBandList|rockband|rockbands)\b`)
	s := re.ReplaceAllStringFunc(string(data), func(w string) string {
		switch w {
		case "RockBand":
			return fmt.Sprintf("RockBand%d", i)
		case "RockBandList":
			return fmt.Sprintf("RockBand%dList", i)
		case "rockbands":
			return fmt.Sprintf("rockband%ds", i)
		}
		return fmt.Sprintf("rockband%d", i)
	})
	s = strings.ReplaceAll(s, "music.example.io", fmt.Sprintf("music%d.example.io", i))
	out := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAPIGroupVersions: Velero's API-group-versions cases. Each custom
// resource, created at one version, is backed up at every version the
// source serves; the restore picks the version the case expects, and the
// object arrives readable at it with its content.
func TestAPIGroupVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	var namespaces []string
	for i, c := range apiVersionCases {
		if _, err := testenv.Apply(ctx, e.src.Config, "", rerender(t, i, c.srcCRD)); err != nil {
			t.Fatalf("case %s: source CRD: %v", c.name, err)
		}
		if c.tgtCRD != "" {
			if _, err := testenv.Apply(ctx, e.dst.Config, "", rerender(t, i, c.tgtCRD)); err != nil {
				t.Fatalf("case %s: target CRD: %v", c.name, err)
			}
		}
	}
	for i, c := range apiVersionCases {
		for _, v := range c.srcCRs {
			ns := fmt.Sprintf("rb%d-%s", i, v)
			namespaces = append(namespaces, ns)
			nsFile := filepath.Join(t.TempDir(), "ns.yaml")
			_ = os.WriteFile(nsFile, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"), 0o644)
			if _, err := testenv.Apply(ctx, e.src.Config, "", nsFile); err != nil {
				t.Fatal(err)
			}
			if _, err := testenv.Apply(ctx, e.src.Config, ns, rerender(t, i, "music_"+v+"_rockband.yaml")); err != nil {
				t.Fatalf("case %s: CR at %s: %v", c.name, v, err)
			}
		}
	}

	e.backup(t, "apiv", "--include-namespaces", strings.Join(namespaces, ","))
	// The archive holds each object at every version the source serves.
	det := e.run(t, "backup", "describe", "apiv", "--details", "-o", "json")
	if det.code != 0 {
		t.Fatalf("describe: %s", det.stderr)
	}
	for i, c := range apiVersionCases {
		src := srcVersions(t, c)
		for _, v := range c.srcCRs {
			for j, sv := range src {
				p := fmt.Sprintf("resources/rockband%ds.music%d.example.io/%snamespaces/rb%d-%s/beatles.json", i, i, sv+"/", i, v)
				if j == 0 {
					p = fmt.Sprintf("resources/rockband%ds.music%d.example.io/namespaces/rb%d-%s/beatles.json", i, i, i, v)
				}
				if !strings.Contains(det.stdout, p) {
					t.Errorf("case %s: archive lacks %s", c.name, p)
				}
			}
		}
	}

	rs, r := e.restore(t, "apiv", "apiv")
	if r.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	items := e.results(t, "apiv")
	desc := e.run(t, "restore", "describe", "apiv", "-o", "json")
	var d struct {
		Results struct {
			Warnings []string `json:"warnings"`
		} `json:"results"`
	}
	mustJSON(t, desc.stdout, &d)
	warnings := strings.Join(d.Results.Warnings, "\n")
	dyn := dynamic.NewForConfigOrDie(e.dst.Config)
	for i, c := range apiVersionCases {
		res := fmt.Sprintf("rockband%ds.music%d.example.io", i, i)
		for _, v := range c.srcCRs {
			ns := fmt.Sprintf("rb%d-%s", i, v)
			var got map[string]any
			for _, it := range items {
				if it["resource"] == res && it["namespace"] == ns {
					got = it
				}
			}
			if got == nil {
				t.Errorf("case %s: no result for %s in %s", c.name, res, ns)
				continue
			}
			if c.want == "" {
				if got["outcome"] != "skipped" || !strings.Contains(fmt.Sprint(got["message"]), "no common version") {
					t.Errorf("case %s: want skipped with no common version, got %v", c.name, got)
				}
				continue
			}
			if got["outcome"] != "created" || got["version"] != c.want {
				t.Errorf("case %s (%s): want created at %s, got %v", c.name, ns, c.want, got)
				continue
			}
			gvr := schema.GroupVersionResource{Group: fmt.Sprintf("music%d.example.io", i), Version: c.want, Resource: fmt.Sprintf("rockband%ds", i)}
			u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, "beatles", metav1.GetOptions{})
			if err != nil {
				t.Errorf("case %s: reading %s at %s: %v", c.name, ns, c.want, err)
				continue
			}
			if a := u.GetAnnotations()[fmt.Sprintf("rockband%ds.music%d.example.io/originalVersion", i, i)]; a != v {
				t.Errorf("case %s: originalVersion annotation %q, want %q", c.name, a, v)
			}
			if g := fmt.Sprint(u.Object["spec"].(map[string]any)["genre"]); g != "60s rock" {
				t.Errorf("case %s: spec.genre %q", c.name, g)
			}
		}
		// A version other than the source's preferred one is never silent.
		warned := strings.Contains(warnings, res+": restored at version "+c.want)
		if warned != c.wantOther {
			t.Errorf("case %s: version-change warning shown=%v, want %v\n%s", c.name, warned, c.wantOther, warnings)
		}
		if c.want == "" && !strings.Contains(warnings, res+": every object skipped: no common version") {
			t.Errorf("case %s: no summary warning for the skipped group\n%s", c.name, warnings)
		}
	}
	if rs.Status.Phase != "Completed" {
		t.Errorf("phase %s", rs.Status.Phase)
	}
}

// srcVersions returns the versions the case's source CRD serves, the
// preferred (storage, highest priority) first, as written in the file.
func srcVersions(t *testing.T, c apiVersionCase) []string {
	switch c.srcCRD {
	case "case-a-source.yaml":
		return []string{"v1", "v1alpha1"}
	case "case-b-source-manually-added-mutations.yaml":
		return []string{"v1", "v2beta2", "v2beta1"}
	}
	t.Fatalf("unknown source %s", c.srcCRD)
	return nil
}
