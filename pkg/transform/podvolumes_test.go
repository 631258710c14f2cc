package transform

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

func TestPodVolumes(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "db", "namespace": "prod-new"},
		"spec": map[string]any{"initContainers": []any{
			map[string]any{"name": v1alpha1.RestoreWaitContainer, "image": "old"},
			map[string]any{"name": "migrate", "image": "app"},
		}},
	}}
	c := &Context{PodVolumeRestore: &PodVolumeRestore{
		RestoreUID: "uid-1", Image: "busybox:1.37", Backup: "b1",
		Volumes:          map[string][]string{"prod-new/db": {"logs", "data"}},
		SourceNamespaces: map[string]string{"prod-new": "prod"},
	}}
	notes := PodVolumes(c, u)
	if len(notes) != 1 || !strings.Contains(notes[0], "data, logs") {
		t.Errorf("notes %q", notes)
	}
	inits, _, _ := unstructured.NestedSlice(u.Object, "spec", "initContainers")
	if len(inits) != 2 {
		t.Fatalf("init containers %v", inits)
	}
	ic := inits[0].(map[string]any)
	cmd := ic["command"].([]any)
	if ic["name"] != v1alpha1.RestoreWaitContainer || ic["image"] != "busybox:1.37" || cmd[2] != WaitScript([]string{"/restores/data/.ferry/uid-1", "/restores/logs/.ferry/uid-1"}) {
		t.Errorf("init container %v", ic)
	}
	if inits[1].(map[string]any)["name"] != "migrate" {
		t.Errorf("the pod's own init container moved: %v", inits)
	}
	a := u.GetAnnotations()
	if a[v1alpha1.AnnotationRestoreUID] != "uid-1" || a[v1alpha1.AnnotationSourceNamespace] != "prod" || a[v1alpha1.AnnotationRestoreBackup] != "b1" || a[v1alpha1.AnnotationRestoreVolumes] != "data,logs" {
		t.Errorf("annotations %v", a)
	}
	other := &unstructured.Unstructured{Object: map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": "prod-new"}}}
	if PodVolumes(c, other) != nil || other.Object["spec"] != nil {
		t.Errorf("a pod without restored volumes changed: %v", other.Object)
	}
}
