package transform

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPodVolumes(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "db", "namespace": "prod-new"},
		"spec": map[string]any{"initContainers": []any{
			map[string]any{"name": RestoreWaitContainer, "image": "old"},
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
	if ic["name"] != RestoreWaitContainer || ic["image"] != "busybox:1.37" || cmd[2] != WaitScript([]string{"/restores/data/.ferry/uid-1", "/restores/logs/.ferry/uid-1"}) {
		t.Errorf("init container %v", ic)
	}
	if inits[1].(map[string]any)["name"] != "migrate" {
		t.Errorf("the pod's own init container moved: %v", inits)
	}
	a := u.GetAnnotations()
	if a[AnnotationRestoreUID] != "uid-1" || a[AnnotationSourceNamespace] != "prod" || a[AnnotationRestoreBackup] != "b1" || a[AnnotationRestoreVolumes] != "data,logs" {
		t.Errorf("annotations %v", a)
	}
	other := &unstructured.Unstructured{Object: map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": "prod-new"}}}
	if PodVolumes(c, other) != nil || other.Object["spec"] != nil {
		t.Errorf("a pod without restored volumes changed: %v", other.Object)
	}
}
