package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// restored is u as a restore writes it: ferry's labels added, and for a
// ClusterIP Service the target's own cluster IP.
func restored(u *unstructured.Unstructured, clusterIP string) *unstructured.Unstructured {
	u = u.DeepCopy()
	l := u.GetLabels()
	l[v1alpha1.LabelBackup], l[v1alpha1.LabelRestore] = "b", "r"
	u.SetLabels(l)
	if clusterIP != "" {
		_ = unstructured.SetNestedField(u.Object, clusterIP, "spec", "clusterIP")
		_ = unstructured.SetNestedStringSlice(u.Object, []string{clusterIP}, "spec", "clusterIPs")
	}
	return u
}

func svcObject(clusterIP string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "svc-00000", "labels": map[string]any{"app": appLabel}},
		"spec":     map[string]any{"clusterIP": clusterIP, "clusterIPs": []any{clusterIP}, "ports": []any{map[string]any{"port": int64(80)}}},
	}}
}

func TestCompareContent(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "cm-00000", "labels": map[string]any{"app": appLabel}},
		"data":     map[string]any{"key0": "value"},
	}}
	changed := restored(cm, "")
	changed.Object["data"] = map[string]any{"key0": "other"}
	relabelled := restored(cm, "")
	relabelled.SetLabels(map[string]string{"app": "else"})

	for _, tc := range []struct {
		name, kind     string
		source, target *unstructured.Unstructured
		want           string // "" for no difference, else a part of it
	}{
		{"same apart from ferry's labels", "configmaps", cm, restored(cm, ""), ""},
		{"data changed", "configmaps", cm, changed, ".data differs"},
		{"label changed", "configmaps", cm, relabelled, ".metadata.labels differs"},
		{"new cluster IP", "services", svcObject("10.0.0.7"), restored(svcObject("10.0.0.7"), "10.0.0.9"), ""},
		{"headless kept", "services", svcObject("None"), restored(svcObject("None"), ""), ""},
		{"headless became ClusterIP", "services", svcObject("None"), restored(svcObject("None"), "10.0.0.9"), ".spec differs"},
	} {
		got := strings.Join(compareContent(tc.kind, tc.source, tc.target), "\n")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: compareContent = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSampleItems(t *testing.T) {
	s := &sampler{seed: Seed{Namespaces: 10, Objects: map[string]int{"widgets": 100, "configmaps": 400, "secrets": 260, "deployments": 120, "services": 120}}, every: 10}
	items := s.items()
	n := map[string]int{}
	for _, it := range items {
		n[it.kind]++
	}
	want := map[string]int{"namespaces": 1, "widgets": 10, "configmaps": 40, "secrets": 26, "deployments": 12, "services": 12}
	for k, v := range want {
		if n[k] != v {
			t.Errorf("%s: %d sampled, want %d", k, n[k], v)
		}
	}
	if it := items[len(items)-1]; it.namespace != "load-000" || it.name != "svc-00110" {
		t.Errorf("last item %s/%s, want load-000/svc-00110", it.namespace, it.name)
	}
}
