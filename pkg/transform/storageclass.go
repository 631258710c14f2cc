package transform

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/kube"
)

// betaStorageClassAnnotation is the deprecated way a claim names its class
// (still used, e.g. by the cassandra example's volumeClaimTemplate).
const betaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

// StorageClasses applies the storage-class mapping (spec.storageClassMapping,
// old to new) to the four places a class is named: PersistentVolumeClaims,
// PersistentVolumes, the volumeClaimTemplates of StatefulSets, and the
// ephemeral volumes of pod specs, in spec.storageClassName and in the
// deprecated volume.beta.kubernetes.io/storage-class annotation.
func StorageClasses(c *Context, u *unstructured.Unstructured) []string {
	if len(c.StorageClassMapping) == 0 {
		return nil
	}
	var notes []string
	switch u.GetKind() {
	case "PersistentVolumeClaim", "PersistentVolume":
		notes = append(notes, mapClaim(c, u.Object, "")...)
	case "StatefulSet":
		tpls, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates")
		for i, t := range tpls {
			if m, ok := t.(map[string]any); ok {
				notes = append(notes, mapClaim(c, m, fmt.Sprintf("volumeClaimTemplates[%d] ", i))...)
			}
		}
		if len(tpls) > 0 {
			_ = unstructured.SetNestedSlice(u.Object, tpls, "spec", "volumeClaimTemplates")
		}
	}
	if path, ok := kube.PodSpecPathOf(u.GroupVersionKind().Group, u.GetKind()); ok {
		vols, _, _ := unstructured.NestedSlice(u.Object, append(append([]string{}, path...), "volumes")...)
		changed := false
		for _, v := range vols {
			vm, _ := v.(map[string]any)
			tpl, ok, _ := unstructured.NestedMap(vm, "ephemeral", "volumeClaimTemplate")
			if !ok {
				continue
			}
			if n := mapClaim(c, tpl, fmt.Sprintf("ephemeral volume %v ", vm["name"])); len(n) > 0 {
				_ = unstructured.SetNestedMap(vm, tpl, "ephemeral", "volumeClaimTemplate")
				notes = append(notes, n...)
				changed = true
			}
		}
		if changed {
			_ = unstructured.SetNestedSlice(u.Object, vols, append(append([]string{}, path...), "volumes")...)
		}
	}
	return notes
}

// mapClaim maps the class of one claim-shaped object (metadata + spec).
func mapClaim(c *Context, obj map[string]any, where string) []string {
	var notes []string
	if sc, ok, _ := unstructured.NestedString(obj, "spec", "storageClassName"); ok {
		if t, mapped := c.StorageClassMapping[sc]; mapped {
			_ = unstructured.SetNestedField(obj, t, "spec", "storageClassName")
			notes = append(notes, fmt.Sprintf("%sstorageClassName %s mapped to %s", where, sc, t))
		}
	}
	if sc, ok, _ := unstructured.NestedString(obj, "metadata", "annotations", betaStorageClassAnnotation); ok {
		if t, mapped := c.StorageClassMapping[sc]; mapped {
			_ = unstructured.SetNestedField(obj, t, "metadata", "annotations", betaStorageClassAnnotation)
			notes = append(notes, fmt.Sprintf("%sannotation %s %s mapped to %s", where, betaStorageClassAnnotation, sc, t))
		}
	}
	return notes
}
