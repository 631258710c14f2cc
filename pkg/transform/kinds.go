package transform

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func typesUID(s string) types.UID { return types.UID(s) }

// MapNamespaces applies the namespace mapping to the object's own
// namespace, to Namespace objects' names (and their
// kubernetes.io/metadata.name label), and to the namespaces named by
// RoleBinding/ClusterRoleBinding subjects (docs/design.md#namespace-mapping).
// Namespace selectors are MapNamespaceSelectors'.
func MapNamespaces(c *Context, u *unstructured.Unstructured) []string {
	var notes []string
	if ns := u.GetNamespace(); ns != "" {
		if t := c.MapNamespace(ns); t != ns {
			u.SetNamespace(t)
		}
	}
	switch u.GetKind() {
	case "Namespace":
		if t := c.MapNamespace(u.GetName()); t != u.GetName() {
			u.SetName(t)
			if l := u.GetLabels(); l != nil {
				if _, ok := l["kubernetes.io/metadata.name"]; ok {
					l["kubernetes.io/metadata.name"] = t
					u.SetLabels(l)
				}
			}
		}
	case "RoleBinding", "ClusterRoleBinding":
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		changed := false
		for _, s := range subjects {
			m, ok := s.(map[string]any)
			if !ok {
				continue
			}
			if ns, _ := m["namespace"].(string); ns != "" {
				if t := c.MapNamespace(ns); t != ns {
					m["namespace"] = t
					changed = true
					notes = append(notes, fmt.Sprintf("subject %v/%v: namespace %s mapped to %s", m["kind"], m["name"], ns, t))
				}
			}
		}
		if changed {
			_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
		}
	}
	return notes
}

// Service clears clusterIP and clusterIPs (unless headless, "None") so the
// target allocates its own (docs/design.md#services). Node ports are
// NodePorts'.
func Service(c *Context, u *unstructured.Unstructured) []string {
	ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP")
	if ip == "None" {
		return nil
	}
	unstructured.RemoveNestedField(u.Object, "spec", "clusterIP")
	unstructured.RemoveNestedField(u.Object, "spec", "clusterIPs")
	if ip != "" {
		return []string{"clusterIP " + ip + " cleared: the target allocates one"}
	}
	return nil
}

// jobGeneratedLabels are the labels the Job controller generates.
var jobGeneratedLabels = []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"}

// Job strips the selector and the labels the API server generated for a
// Job, unless the Job uses manualSelector (docs/design.md#jobs).
func Job(c *Context, u *unstructured.Unstructured) []string {
	if manual, _, _ := unstructured.NestedBool(u.Object, "spec", "manualSelector"); manual {
		return nil
	}
	var notes []string
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "selector"); ok {
		unstructured.RemoveNestedField(u.Object, "spec", "selector")
		notes = append(notes, "spec.selector removed: the target's Job controller generates it")
	}
	for _, path := range [][]string{{"spec", "template", "metadata", "labels"}, {"metadata", "labels"}} {
		l, ok, _ := unstructured.NestedStringMap(u.Object, path...)
		if !ok {
			continue
		}
		var removed []string
		for _, k := range jobGeneratedLabels {
			if _, ok := l[k]; ok {
				delete(l, k)
				removed = append(removed, k)
			}
		}
		if len(removed) == 0 {
			continue
		}
		notes = append(notes, fmt.Sprintf("%s: generated labels %s removed", strings.Join(path, "."), strings.Join(removed, ", ")))
		if len(l) == 0 {
			unstructured.RemoveNestedField(u.Object, path...)
		} else {
			_ = unstructured.SetNestedStringMap(u.Object, l, path...)
		}
	}
	return notes
}

// Pod clears nodeName (the target schedules the pod) and removes the
// projected service-account token volume the source's admission added
// (kube-api-access-*), which the target's admission adds again.
func Pod(c *Context, u *unstructured.Unstructured) []string {
	var notes []string
	if n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); n != "" {
		unstructured.RemoveNestedField(u.Object, "spec", "nodeName")
		notes = append(notes, "nodeName "+n+" cleared")
	}
	if ec, _, _ := unstructured.NestedSlice(u.Object, "spec", "ephemeralContainers"); len(ec) > 0 {
		// Debug containers are added to a running pod; the API refuses them on create.
		unstructured.RemoveNestedField(u.Object, "spec", "ephemeralContainers")
		notes = append(notes, fmt.Sprintf("%d ephemeral (debug) containers dropped: they cannot be set on create", len(ec)))
	}
	for _, name := range DropTokenVolumes(u) {
		notes = append(notes, "volume "+name+" dropped: the target's service-account admission injects its own")
	}
	return notes
}

// DropTokenVolumes removes a Pod's projected service-account token
// volumes (kube-api-access-*, added by the ServiceAccount admission
// plugin) and their mounts, and returns their names. It is used on
// restored Pods and, before a comparison, on the target's live Pods, so
// that the token volume each cluster injects is not a difference.
func DropTokenVolumes(u *unstructured.Unstructured) []string {
	vols, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumes")
	var drop = map[string]bool{}
	var names []string
	kept := vols[:0]
	for _, v := range vols {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if strings.HasPrefix(name, "kube-api-access-") {
			drop[name] = true
			names = append(names, name)
			continue
		}
		kept = append(kept, v)
	}
	if len(drop) == 0 {
		return nil
	}
	_ = unstructured.SetNestedSlice(u.Object, kept, "spec", "volumes")
	for _, field := range []string{"containers", "initContainers", "ephemeralContainers"} {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", field)
		for _, ci := range cs {
			cm, _ := ci.(map[string]any)
			mounts, _ := cm["volumeMounts"].([]any)
			km := mounts[:0]
			for _, mt := range mounts {
				mm, _ := mt.(map[string]any)
				if n, _ := mm["name"].(string); drop[n] {
					continue
				}
				km = append(km, mt)
			}
			if len(km) == 0 {
				delete(cm, "volumeMounts")
			} else {
				cm["volumeMounts"] = km
			}
		}
		if len(cs) > 0 {
			_ = unstructured.SetNestedSlice(u.Object, cs, "spec", field)
		}
	}
	return names
}

// PersistentVolume renames the PV when the restore renamed it (a claim in
// a mapped namespace) and clears the claimRef's uid and resourceVersion,
// mapping its namespace, so the PV binds to the restored claim.
func PersistentVolume(c *Context, u *unstructured.Unstructured) []string {
	var notes []string
	if t, ok := c.PVNames[u.GetName()]; ok && t != u.GetName() {
		notes = append(notes, "renamed from "+u.GetName()+" to "+t+": its claim moved to a mapped namespace")
		u.SetName(t)
	}
	if _, ok, _ := unstructured.NestedMap(u.Object, "spec", "claimRef"); ok {
		unstructured.RemoveNestedField(u.Object, "spec", "claimRef", "uid")
		unstructured.RemoveNestedField(u.Object, "spec", "claimRef", "resourceVersion")
		if ns, _, _ := unstructured.NestedString(u.Object, "spec", "claimRef", "namespace"); ns != "" {
			_ = unstructured.SetNestedField(u.Object, c.MapNamespace(ns), "spec", "claimRef", "namespace")
		}
	}
	return notes
}

// pvcBindingAnnotations are set by the PV controller when it binds.
var pvcBindingAnnotations = []string{
	"pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller",
	"volume.beta.kubernetes.io/storage-provisioner", "volume.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/selected-node",
}

// PersistentVolumeClaim points volumeName at the restored PV's target
// name; when the PV is not part of the restore it clears volumeName and
// the binding annotations so that the target provisions a new volume.
func PersistentVolumeClaim(c *Context, u *unstructured.Unstructured) []string {
	vn, _, _ := unstructured.NestedString(u.Object, "spec", "volumeName")
	if vn == "" {
		return nil
	}
	if c.RestoredPVs[vn] {
		// The PV comes back with a claimRef without UID: the target's PV
		// controller must bind the pair again, which it does only for a claim
		// not marked bound (else it sees two claims and marks this one Lost).
		dropAnnotations(u, "pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller")
		if t, ok := c.PVNames[vn]; ok && t != vn {
			_ = unstructured.SetNestedField(u.Object, t, "spec", "volumeName")
			return []string{"volumeName " + vn + " changed to " + t}
		}
		return nil
	}
	unstructured.RemoveNestedField(u.Object, "spec", "volumeName")
	dropAnnotations(u, pvcBindingAnnotations...)
	return []string{"volumeName " + vn + " cleared: the PV is not in this restore, the target provisions a new one"}
}

// ServiceAccountToken drops the data of kubernetes.io/service-account-token
// Secrets: the source cluster signed those tokens, so they are useless in
// the target, whose token controller fills the Secret in again.
func ServiceAccountToken(c *Context, u *unstructured.Unstructured) []string {
	if t, _, _ := unstructured.NestedString(u.Object, "type"); t != "kubernetes.io/service-account-token" {
		return nil
	}
	unstructured.RemoveNestedField(u.Object, "data")
	// The source ServiceAccount's UID would make the target's token
	// controller delete the Secret; without it, it fills the token in.
	dropAnnotations(u, "kubernetes.io/service-account.uid")
	return []string{"token data dropped: the target's token controller issues a new token"}
}

// CertificateSigningRequest drops the requester fields (username, uid,
// groups, extra): the API server always sets them from the caller that
// creates the CSR, so the source's values cannot be kept.
func CertificateSigningRequest(c *Context, u *unstructured.Unstructured) []string {
	var notes []string
	for _, f := range []string{"username", "uid", "groups", "extra"} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", f); ok {
			unstructured.RemoveNestedField(u.Object, "spec", f)
			notes = append(notes, "spec."+f+" dropped: the target's API server sets the requester")
		}
	}
	return notes
}

// AggregatedClusterRole drops the rules of a ClusterRole that has an
// aggregationRule: the target's clusterrole-aggregation controller owns
// them and computes them from the ClusterRoles that match its selectors.
func AggregatedClusterRole(c *Context, u *unstructured.Unstructured) []string {
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "aggregationRule"); !ok {
		return nil
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "rules"); !ok {
		return nil
	}
	unstructured.RemoveNestedField(u.Object, "rules")
	return []string{"rules dropped: aggregated by the target's clusterrole-aggregation controller"}
}

// dropAnnotations removes annotations keys from u.
func dropAnnotations(u *unstructured.Unstructured, keys ...string) {
	ann := u.GetAnnotations()
	if ann == nil {
		return
	}
	for _, k := range keys {
		delete(ann, k)
	}
	if len(ann) == 0 {
		ann = nil
	}
	u.SetAnnotations(ann)
}
