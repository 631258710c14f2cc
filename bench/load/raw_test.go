package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestSplitList(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		items      int
		cont       string
		wantErr    bool
	}{
		{"page with a continue token", `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"abc","remainingItemCount":3},` +
			`"items":[{"metadata":{"name":"a","annotations":{"items":"[]"}},"data":{"k":"v"}},{"metadata":{"name":"b"}}]}`, 2, "abc", false},
		{"last page", `{"metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a"}}]}`, 1, "", false},
		{"items before metadata", `{"items":[{},{},{}],"metadata":{"continue":"x"}}`, 3, "x", false},
		{"items null", `{"metadata":{},"items":null}`, 0, "", false},
		{"not an object", `[1,2]`, 0, "", true},
		{"truncated", `{"metadata":{},"items":[{"a":1}`, 0, "", true},
	} {
		items, cont, err := splitList([]byte(tc.body))
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (items != tc.items || cont != tc.cont) {
			t.Errorf("%s: %d items, continue %q; want %d, %q", tc.name, items, cont, tc.items, tc.cont)
		}
	}
}

func TestListTasks(t *testing.T) {
	rw := metav1.Verbs{"create", "delete", "get", "list", "watch"}
	d := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Verbs: rw},
			{Name: "namespaces", Verbs: rw},
			{Name: "pods/log", Namespaced: true, Verbs: metav1.Verbs{"get"}},
			{Name: "componentstatuses", Verbs: metav1.Verbs{"get", "list"}},
			{Name: "bindings", Namespaced: true, Verbs: metav1.Verbs{"create"}},
		}},
		// autoscaling's preferred version is the first its group lists.
		{GroupVersion: "autoscaling/v2", APIResources: []metav1.APIResource{{Name: "horizontalpodautoscalers", Namespaced: true, Verbs: rw}}},
		{GroupVersion: "autoscaling/v1", APIResources: []metav1.APIResource{{Name: "horizontalpodautoscalers", Namespaced: true, Verbs: rw}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Namespaced: true, Verbs: rw}}},
	}}}
	namespaced, cluster, err := listTasks(d)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tasks := range [][]listTask{namespaced, cluster} {
		for _, lt := range tasks {
			s := lt.gvr.String()
			if !lt.preferred {
				s += " (other)"
			}
			got = append(got, s)
		}
		got = append(got, "|")
	}
	want := "/v1, Resource=configmaps | apps/v1, Resource=deployments | autoscaling/v2, Resource=horizontalpodautoscalers | " +
		"autoscaling/v1, Resource=horizontalpodautoscalers (other) | | | /v1, Resource=namespaces | |"
	if g := strings.Join(got, " | "); g != want {
		t.Errorf("listTasks:\n got %s\nwant %s", g, want)
	}
}

func TestRatios(t *testing.T) {
	runs := []*Run{
		{Operation: "migrate", Seconds: 20, MaxRSSMiB: 300, UnderTarget: true},
		{Operation: "backup", Seconds: 5, MaxRSSMiB: 100, UnderTarget: true},
		{Operation: "restore", Seconds: 10, MaxRSSMiB: 600, UnderTarget: false},
	}
	refs := []*Reference{{Operation: "raw LIST", Seconds: 4.75}, {Operation: "raw CREATE", Seconds: 9.5}}
	got := ratios(runs, refs, 2000)
	if m := got[0]; m.Reference != "raw LIST + raw CREATE" || m.RawSeconds != 14.25 || m.Ratio != 14.25/20 || m.Target != 0 || !m.Met {
		t.Errorf("migrate: %+v", m)
	}
	if b := got[1]; b.Ratio != 0.95 || !b.Met || b.Applies {
		t.Errorf("backup at 2,000 objects: %+v, want ratio 0.95, met, not applying below %d objects", b, backupTargetFrom)
	}
	if r := got[2]; r.Ratio != 0.95 || !r.Met || !r.Applies || r.UnderRSSTarget || r.MaxRSSMiB != 600 {
		t.Errorf("restore: %+v", r)
	}
	if b := ratios(runs, refs, backupTargetFrom)[1]; !b.Applies {
		t.Errorf("backup at %d objects: the target does not apply", backupTargetFrom)
	}

	runs[2].Error = "verify: differs"
	refs[0].Error = "list failed"
	got = ratios(runs, refs, 2000)
	if got[0].Note == "" || got[0].Ratio != 0 || got[1].Note != "raw LIST failed" || got[2].Note != "ferry restore failed" || got[2].Met {
		t.Errorf("with failures: %+v", got)
	}
	if r := ratios(runs[:2], refs[:1], 2000)[2]; r.Note == "" || r.Reference != "raw CREATE" {
		t.Errorf("without a restore and a raw CREATE: %+v", r)
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 50000: "50,000", 200000: "200,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPrintMarkdown(t *testing.T) {
	runs := []*Run{
		{Operation: "migrate", Objects: 2000, Seconds: 10, MaxRSSMiB: 100, UnderTarget: true, FerryVerifySeconds: 1.5},
		{Operation: "backup", Objects: 2000, Seconds: 1, MaxRSSMiB: 90, UnderTarget: true},
		{Operation: "restore", Objects: 2000, Seconds: 8, MaxRSSMiB: 600, Error: "peak RSS"},
	}
	refs := []*Reference{
		{Operation: "raw LIST", Objects: 2000, Seconds: 0.5, Raw: &RawResult{Workers: 8, PageSize: 500, Items: 2965}},
		{Operation: "raw CREATE", Objects: 2000, Seconds: 4, Raw: &RawResult{Workers: 32, Created: 2011, Tiers: []Tier{{"CRDs", 1, 0.1}}}},
	}
	res := &Result{TargetMiB: 512, FerryEnv: ferryEnv, Images: "none", Seed: Seed{Total: 2000, Namespaces: 10}, Runs: runs, References: refs,
		Ratios: ratios(runs, refs, 2000)}
	var b strings.Builder
	printMarkdown(&b, res)
	out := b.String()
	for _, want := range []string{
		"| migrate | 10.0 s | raw LIST + raw CREATE | 4.5 s | **0.45** | – | – | 100 MiB | ✓ |",
		"| backup | 1.0 s | raw LIST | 0.5 s | **0.50** | ≥ 0.9 at ≥ 50,000 objects | n/a (✗) | 90 MiB | ✓ |",
		"| restore | 8.0 s | raw CREATE | 4.0 s | (ferry restore failed) | ≥ 0.9 | – | 600 MiB | ✗ |",
		"| raw CREATE | 2000 | 2011 created |",
		"| raw LIST | 2000 | 2965 listed |",
		"raw CREATE: 32 goroutines per tier",
		"verification of the target (1.5 s)",
		"GOMEMLIMIT=off",
		"**restore over the RSS target**",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
