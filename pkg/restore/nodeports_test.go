package restore

import (
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestClearTakenNodePorts: of a Service whose pinned ports 30201 and
// 30202 are restored where only 30201 is taken, only 30201 is cleared (a
// new-user run found both lost, and with them the free pinned one).
func TestClearTakenNodePorts(t *testing.T) {
	svc := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"healthCheckNodePort": int64(30300),
			"ports": []any{
				map[string]any{"port": int64(80), "nodePort": int64(30201)},
				map[string]any{"port": int64(81), "nodePort": int64(30202)},
			}}}}
	}
	taken := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "two", field.ErrorList{
		field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), 30201, "provided port is already allocated"),
	})
	if !isPortAllocated(taken) {
		t.Fatal("not seen as a port clash")
	}
	u := svc()
	if got := clearTakenNodePorts(u, taken, false); !reflect.DeepEqual(got, []string{"spec.ports[0].nodePort 30201"}) {
		t.Errorf("cleared %q", got)
	}
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	if _, ok := ports[0].(map[string]any)["nodePort"]; ok {
		t.Error("the taken port is still set")
	}
	if ports[1].(map[string]any)["nodePort"] != int64(30202) {
		t.Errorf("the free pinned port was cleared: %v", ports[1])
	}
	if hc, _, _ := unstructured.NestedInt64(u.Object, "spec", "healthCheckNodePort"); hc != 30300 {
		t.Errorf("healthCheckNodePort %d", hc)
	}
	// An error that names no port: all are cleared, as before.
	u = svc()
	plain := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "two", nil)
	if got := clearTakenNodePorts(u, plain, false); len(got) != 3 {
		t.Errorf("cleared %q, want all three", got)
	}
}
