package restore

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ignoredLabelPrefix marks labels ferry itself sets; they differ between
// two restores of one backup and are not part of the object's content.
const ignoredLabelPrefix = "ferry.dev/"

// contains reports whether existing holds everything desired says: every
// field set in desired has the same value in existing, which may have more
// (server defaults, controller fields). Lists must have the same length and
// match element by element. A null in desired matches an absent field.
// It returns the path of the first difference.
func contains(existing, desired any, path string) (bool, string) {
	switch d := desired.(type) {
	case nil:
		return true, ""
	case map[string]any:
		e, ok := existing.(map[string]any)
		if !ok {
			if existing == nil && len(d) == 0 {
				return true, ""
			}
			return false, path
		}
		if exactMaps[path] && len(e) != len(d) {
			for _, k := range slices.Sorted(maps.Keys(e)) {
				if _, ok := d[k]; !ok {
					return false, path + "." + k + " (only in the target)"
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(d)) {
			dv := d[k]
			ev, present := e[k]
			if !present {
				if isEmpty(dv) {
					continue
				}
				return false, path + "." + k
			}
			if ok, p := contains(ev, dv, path+"."+k); !ok {
				return false, p
			}
		}
		return true, ""
	case []any:
		e, ok := existing.([]any)
		if !ok {
			return len(d) == 0 && existing == nil, path
		}
		if len(e) != len(d) {
			return false, fmt.Sprintf("%s (%d items, target has %d)", path, len(d), len(e))
		}
		for i := range d {
			if ok, p := contains(e[i], d[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return false, p
			}
		}
		return true, ""
	default:
		if f1, ok := number(desired); ok {
			f2, ok2 := number(existing)
			return ok2 && f1 == f2, path
		}
		return reflect.DeepEqual(existing, desired), path
	}
}

// exactMaps are maps that hold user content, not server defaults: a key
// the target has and the backup does not is a difference (a stale
// credential in a Secret, say), and an update replaces them whole.
var exactMaps = map[string]bool{".data": true, ".binaryData": true, ".stringData": true}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case int32:
		return float64(n), true
	}
	return 0, false
}

// overlay returns existing with desired laid over it: maps merge
// recursively, lists of equal length merge element by element, anything
// else takes desired's value. Fields the target's API server allocated
// (clusterIP, nodePorts, a Job's selector) survive an update this way.
func overlay(existing, desired any) any { return overlayAt(existing, desired, "") }

func overlayAt(existing, desired any, path string) any {
	if exactMaps[path] {
		return desired
	}
	switch d := desired.(type) {
	case map[string]any:
		e, ok := existing.(map[string]any)
		if !ok {
			return desired
		}
		out := make(map[string]any, len(e))
		for k, v := range e {
			out[k] = v
		}
		for k, v := range d {
			out[k] = overlayAt(e[k], v, path+"."+k)
		}
		return out
	case []any:
		e, ok := existing.([]any)
		if !ok || len(e) != len(d) {
			return desired
		}
		out := make([]any, len(d))
		for i := range d {
			out[i] = overlayAt(e[i], d[i], fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	}
	return desired
}

// allocatedFields are fields the target's API server or controllers set
// on an object and that an update may not take away (immutable once set),
// which a backed-up object lacks because the restore cleared them.
var allocatedFields = map[string][][]string{
	"Service":               {{"spec", "clusterIP"}, {"spec", "clusterIPs"}, {"spec", "healthCheckNodePort"}},
	"Job":                   {{"spec", "selector"}},
	"PersistentVolumeClaim": {{"spec", "volumeName"}},
}

// replacement is what spec.existingResourcePolicy "update" writes: the
// backup's object as it is (so fields it does not set are gone, as with
// kubectl replace), with the live object's metadata bookkeeping, status,
// and the allocated fields the backup lacks.
func replacement(cur, desired *unstructured.Unstructured) *unstructured.Unstructured {
	out := desired.DeepCopy()
	out.SetResourceVersion(cur.GetResourceVersion())
	out.SetUID(cur.GetUID())
	if st, ok := cur.Object["status"]; ok {
		out.Object["status"] = st
	}
	for _, path := range allocatedFields[cur.GetKind()] {
		if _, ok, _ := unstructured.NestedFieldNoCopy(out.Object, path...); ok {
			continue
		}
		if v, ok, _ := unstructured.NestedFieldCopy(cur.Object, path...); ok {
			_ = unstructured.SetNestedField(out.Object, v, path...)
		}
	}
	if cur.GetKind() == "Job" {
		// The selector names the controller-uid label of the template.
		if l, ok, _ := unstructured.NestedStringMap(cur.Object, "spec", "template", "metadata", "labels"); ok {
			dl, _, _ := unstructured.NestedStringMap(out.Object, "spec", "template", "metadata", "labels")
			if dl == nil {
				dl = map[string]string{}
			}
			for _, k := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
				if v, ok := l[k]; ok {
					dl[k] = v
				}
			}
			_ = unstructured.SetNestedStringMap(out.Object, dl, "spec", "template", "metadata", "labels")
		}
	}
	if cur.GetKind() == "Service" {
		// Node ports the backup no longer names stay as the target allocated them.
		cp, _, _ := unstructured.NestedSlice(cur.Object, "spec", "ports")
		dp, _, _ := unstructured.NestedSlice(out.Object, "spec", "ports")
		if len(cp) == len(dp) {
			for i := range dp {
				dm, _ := dp[i].(map[string]any)
				cm, _ := cp[i].(map[string]any)
				if _, ok := dm["nodePort"]; !ok && cm["nodePort"] != nil {
					dm["nodePort"] = cm["nodePort"]
				}
			}
			_ = unstructured.SetNestedSlice(out.Object, dp, "spec", "ports")
		}
	}
	return out
}

// targetOwned lists, per kind, the fields the target's API server or
// controllers set on a restored object that the backup's object does not
// carry (the restore cleared them, or they are allocated per cluster).
// Paths use [*] for any list index. They are not additions by anyone.
var targetOwned = map[string]map[string]bool{
	"Service": {".spec.clusterIP": true, ".spec.clusterIPs": true, ".spec.healthCheckNodePort": true, ".spec.ports[*].nodePort": true},
	"Job": {".spec.selector": true, ".spec.template.metadata.labels.controller-uid": true, ".spec.template.metadata.labels.batch.kubernetes.io/controller-uid": true,
		".spec.template.metadata.labels.job-name": true, ".spec.template.metadata.labels.batch.kubernetes.io/job-name": true,
		".metadata.labels.controller-uid": true, ".metadata.labels.batch.kubernetes.io/controller-uid": true,
		".metadata.labels.job-name": true, ".metadata.labels.batch.kubernetes.io/job-name": true},
	"PersistentVolumeClaim": {".spec.volumeName": true},
	"PersistentVolume":      {".spec.claimRef.uid": true, ".spec.claimRef.resourceVersion": true},
	"Pod":                   {".spec.nodeName": true},
	// The API server sets the requester of a CSR from whoever creates it.
	"CertificateSigningRequest": {".spec.username": true, ".spec.uid": true, ".spec.groups": true, ".spec.extra": true},
}

// targetOwnedAnnotations are annotation keys (or key prefixes, ending in
// "/") that controllers of the target set on restored objects.
var targetOwnedAnnotations = []string{
	"deployment.kubernetes.io/revision", "pv.kubernetes.io/", "volume.kubernetes.io/",
	"volume.beta.kubernetes.io/storage-provisioner", "endpoints.kubernetes.io/last-change-trigger-time",
	"kubernetes.io/service-account.uid", "control-plane.alpha.kubernetes.io/leader",
}

func isTargetOwnedAnnotation(k string) bool {
	for _, p := range targetOwnedAnnotations {
		if k == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(k, p)) {
			return true
		}
	}
	return false
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// pruneAdded returns a copy of live without the fields that desired does
// not set and that nobody but a user adds: every such field is an
// addition in the target (a new label, a privileged securityContext, an
// extra nodeSelector) and its path is appended to added. Server-side
// fields are left alone: metadata other than labels and annotations,
// status, the target-owned fields above, the data of service-account token
// Secrets and the rules of aggregated ClusterRoles (their controllers fill
// them). Lists of different lengths are left whole (contains reports them).
func pruneAdded(live, desired *unstructured.Unstructured) (*unstructured.Unstructured, []string) {
	out := live.DeepCopy()
	var added []string
	owned := targetOwned[live.GetKind()]
	skip := func(path string) bool {
		if owned[listIndex.ReplaceAllString(path, "[*]")] {
			return true
		}
		if strings.HasPrefix(path, ".metadata.annotations.") && isTargetOwnedAnnotation(strings.TrimPrefix(path, ".metadata.annotations.")) {
			return true
		}
		if strings.HasPrefix(path, ".metadata.labels.") && strings.HasPrefix(strings.TrimPrefix(path, ".metadata.labels."), ignoredLabelPrefix) {
			return true
		}
		// ferry's own annotations (a pod volume restore's bookkeeping).
		if strings.HasPrefix(path, ".metadata.annotations.") && strings.HasPrefix(strings.TrimPrefix(path, ".metadata.annotations."), ignoredLabelPrefix) {
			return true
		}
		return false
	}
	for k, v := range out.Object {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			m, _ := v.(map[string]any)
			dm, _ := desired.Object["metadata"].(map[string]any)
			for _, f := range []string{"labels", "annotations"} {
				if lv, ok := m[f]; ok {
					m[f] = pruneValue(lv, dm[f], ".metadata."+f, skip, &added)
				}
			}
			continue
		}
		if k == "data" && live.GetKind() == "Secret" {
			if t, _, _ := unstructured.NestedString(live.Object, "type"); t == "kubernetes.io/service-account-token" {
				continue
			}
		}
		if k == "rules" && live.GetKind() == "ClusterRole" && live.Object["aggregationRule"] != nil {
			continue
		}
		out.Object[k] = pruneValue(v, desired.Object[k], "."+k, skip, &added)
		if m, ok := out.Object[k].(map[string]any); ok && len(m) == 0 && desired.Object[k] == nil {
			delete(out.Object, k)
		}
	}
	sort.Strings(added)
	return out, added
}

func pruneValue(live, desired any, path string, skip func(string) bool, added *[]string) any {
	switch l := live.(type) {
	case map[string]any:
		d, ok := desired.(map[string]any)
		if !ok && desired != nil {
			return live
		}
		for k, v := range l {
			p := path + "." + k
			dv, present := d[k]
			if !present {
				if skip(p) || isEmpty(v) {
					continue
				}
				if vm, ok := v.(map[string]any); ok {
					// A map only the target has may hold fields its
					// controllers own (a Job template's generated labels).
					if rest := pruneValue(vm, nil, p, skip, added).(map[string]any); len(rest) > 0 {
						l[k] = rest
					} else {
						delete(l, k)
					}
					continue
				}
				*added = append(*added, p)
				delete(l, k)
				continue
			}
			l[k] = pruneValue(v, dv, p, skip, added)
		}
		return l
	case []any:
		d, ok := desired.([]any)
		if !ok || len(d) != len(l) {
			return live
		}
		for i := range l {
			l[i] = pruneValue(l[i], d[i], fmt.Sprintf("%s[%d]", path, i), skip, added)
		}
		return l
	}
	return live
}
