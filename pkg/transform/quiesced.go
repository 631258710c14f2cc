package transform

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// quiescedKinds are the kinds a cutover quiesces, by group.
var quiescedKinds = map[string]string{"Deployment": "apps", "StatefulSet": "apps", "ReplicaSet": "apps", "CronJob": "batch"}

func isQuiescable(group, kind string) bool { return quiescedKinds[kind] == group && group != "" }

// Quiesced gives a workload that a staged migration's cutover scaled to
// zero (or suspended) in the source, before its final backup, back the
// replica count (or suspension) recorded before the quiesce
// (spec.quiescedWorkloads): the target runs what the source ran.
func Quiesced(c *Context, u *unstructured.Unstructured) []string {
	for _, w := range c.Quiesced {
		if w.Kind != u.GetKind() || w.Name != u.GetName() || c.MapNamespace(w.Namespace) != u.GetNamespace() {
			continue
		}
		switch {
		case w.Replicas != nil:
			cur, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			if cur == int64(*w.Replicas) {
				return nil
			}
			_ = unstructured.SetNestedField(u.Object, int64(*w.Replicas), "spec", "replicas")
			return []string{fmt.Sprintf("spec.replicas %d -> %d: the count before the cutover quiesced the source (spec.quiescedWorkloads)", cur, *w.Replicas)}
		case w.Suspended != nil:
			cur, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
			if cur == *w.Suspended {
				return nil
			}
			_ = unstructured.SetNestedField(u.Object, *w.Suspended, "spec", "suspend")
			return []string{fmt.Sprintf("spec.suspend %t -> %t: as before the cutover quiesced the source (spec.quiescedWorkloads)", cur, *w.Suspended)}
		}
	}
	return nil
}
