package report

import (
	"strings"
	"testing"
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
