package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubeferry/ferry/pkg/report"
)

const betaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

// claimClass is the storage class a claim names, and whether it names
// one at all (nil spec.storageClassName: the target's default).
func claimClass(pvc *corev1.PersistentVolumeClaim) (string, bool) {
	if c, ok := pvc.Annotations[betaStorageClassAnnotation]; ok {
		return c, true
	}
	if pvc.Spec.StorageClassName == nil {
		return "", false
	}
	return *pvc.Spec.StorageClassName, true
}

// claims are the planned claims, as the move will create them.
func (e *env) claims() []corev1.PersistentVolumeClaim {
	return objectsOf[corev1.PersistentVolumeClaim](e.c, "/PersistentVolumeClaim")
}

// noProvisioner is the provisioner of classes whose volumes are made by
// hand (local volumes): nothing runs for it.
const noProvisioner = "kubernetes.io/no-provisioner"

// provisions reports whether the target runs provisioner p: a CSIDriver
// of that name, or a storage class of the target that names it.
func (e *env) provisions(p string) bool {
	if p == noProvisioner || e.t.csiDrivers[p] {
		return true
	}
	for _, sc := range e.t.storageClasses {
		if sc.Provisioner == p {
			return true
		}
	}
	return false
}

// targetClassNames lists the target's storage classes, for a fix.
func (e *env) targetClassNames() string {
	var names []string
	for n, sc := range e.t.storageClasses {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			n += " (default)"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "the target has no storage class"
	}
	return "the target has " + strings.Join(names, ", ")
}

func (e *env) defaultClass() (storagev1.StorageClass, bool) {
	for _, sc := range e.t.storageClasses {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" || sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
			return sc, true
		}
	}
	return storagev1.StorageClass{}, false
}

// sourceClass is the source's definition of target class name: the
// backup's StorageClass the mapping maps to it, or of that name.
func (e *env) sourceClass(name string) (storagev1.StorageClass, bool) {
	want := map[string]bool{}
	for from, to := range e.o.Restore.Spec.StorageClassMapping {
		if to == name {
			want[from] = true
		}
	}
	if len(want) == 0 {
		want[name] = true
	}
	for _, sc := range objectsOf[storagev1.StorageClass](e.c, "storage.k8s.io/StorageClass") {
		if want[sc.Name] {
			return sc, true
		}
	}
	return storagev1.StorageClass{}, false
}

// checkStorageClasses finds claims whose storage class the target lacks
// (they stay Pending: a blocker), and classes the target has but that
// differ from the source's in binding mode, provisioner or reclaim policy.
func checkStorageClasses(_ context.Context, e *env) {
	planned := map[string]storagev1.StorageClass{}
	for _, sc := range objectsOf[storagev1.StorageClass](e.c, "storage.k8s.io/StorageClass") {
		planned[sc.Name] = sc
	}
	var missing, noDefault, unbound groups
	byClass := map[string][]string{}
	for _, pvc := range e.claims() {
		obj := objectName("persistentvolumeclaims", pvc.Namespace, pvc.Name)
		if e.unbound[pvc.Namespace+"/"+pvc.Name] {
			unbound.add(report.Note, "not bound in the source either: whether the target's storage class can bind them is not checked", "", obj)
			continue
		}
		name, named := claimClass(&pvc)
		switch {
		case pvc.Spec.VolumeName != "":
			// Bound to a PersistentVolume the move restores.
		case !named:
			if sc, ok := e.defaultClass(); ok {
				byClass[sc.Name] = append(byClass[sc.Name], obj)
			} else if pvc.Spec.VolumeName == "" {
				noDefault.add(report.Blocker, "the claim names no storage class and the target has no default one: it stays Pending, and its data cannot be written",
					"spec.storageClassMapping cannot map an unnamed class: mark a class of the target default, or set spec.storageClassName with spec.resourceModifiers ("+e.targetClassNames()+")", obj)
			}
		case name == "":
			// Static provisioning only: bound to a PersistentVolume by name.
		case e.t.storageClasses[name].Name == "" && planned[name].Name == "":
			missing.add(report.Blocker, fmt.Sprintf("storage class %s does not exist in the target: the claim stays Pending, and its data cannot be written", name),
				fmt.Sprintf("spec.storageClassMapping %s:NEW (%s)", name, e.targetClassNames()), obj)
		case e.t.storageClasses[name].Name == "" && !e.provisions(planned[name].Provisioner):
			missing.add(report.Blocker, fmt.Sprintf("storage class %s comes with the move, but its provisioner %s does not run in the target (no such CSIDriver, and no class of the target uses it): the claim stays Pending, and its data cannot be written", name, planned[name].Provisioner),
				fmt.Sprintf("spec.storageClassMapping %s:NEW (%s), or spec.fromCloud and spec.toCloud to give the class the target cloud's provisioner", name, e.targetClassNames()), obj)
		default:
			byClass[name] = append(byClass[name], obj)
		}
	}
	missing.flush(e, "storage-class")
	noDefault.flush(e, "storage-class")
	unbound.flush(e, "storage-class")
	classes := make([]string, 0, len(byClass))
	for n := range byClass {
		classes = append(classes, n)
	}
	sort.Strings(classes)
	for _, name := range classes {
		tsc, ok := e.t.storageClasses[name]
		ssc, sok := e.sourceClass(name)
		if !ok || !sok {
			continue
		}
		compareClasses(e, ssc, tsc, byClass[name])
	}
}

// compareClasses adds the differences between the source's class s and
// the target's t that the claims objs of t will see.
func compareClasses(e *env, s, t storagev1.StorageClass, objs []string) {
	mode := func(sc storagev1.StorageClass) storagev1.VolumeBindingMode {
		if sc.VolumeBindingMode == nil {
			return storagev1.VolumeBindingImmediate
		}
		return *sc.VolumeBindingMode
	}
	reclaim := func(sc storagev1.StorageClass) corev1.PersistentVolumeReclaimPolicy {
		if sc.ReclaimPolicy == nil {
			return corev1.PersistentVolumeReclaimDelete
		}
		return *sc.ReclaimPolicy
	}
	what := "storage class " + t.Name + " of the target"
	if s.Name != t.Name {
		what += " (mapped from the source's " + s.Name + ")"
	}
	if ms, mt := mode(s), mode(t); ms != mt {
		sev, why := report.Note, "volumes are provisioned before their pods are scheduled; in a cluster with zones a pod may be placed away from its volume"
		if mt == storagev1.VolumeBindingWaitForFirstConsumer {
			sev, why = report.Warning, "claims bind only once a pod uses them: ferry's helper pods bind those with data, but a claim no pod mounts stays Pending, and the verification reports it unbound"
		}
		e.add(sev, "storage-class", objs, fmt.Sprintf("%s binds %s, the source's %s: %s", what, mt, ms, why),
			"a target class with volumeBindingMode "+string(ms)+", mapped with spec.storageClassMapping")
	}
	if s.Provisioner != t.Provisioner {
		e.add(report.Note, "storage-class", objs, fmt.Sprintf("%s is provisioned by %s, the source's by %s: the data is copied file by file into new volumes; the provisioner's parameters (disk type, IOPS) are the target's", what, t.Provisioner, s.Provisioner), "")
	}
	if rs, rt := reclaim(s), reclaim(t); rs != rt {
		sev := report.Note
		if rs == corev1.PersistentVolumeReclaimRetain && rt == corev1.PersistentVolumeReclaimDelete {
			sev = report.Warning
		}
		e.add(sev, "storage-class", objs, fmt.Sprintf("%s reclaims %s, the source's %s: deleting a claim in the target %s", what, rt, rs, map[bool]string{true: "deletes its volume and data, which the source kept", false: "keeps its volume, which the source deleted"}[rt == corev1.PersistentVolumeReclaimDelete]),
			"a target class with reclaimPolicy "+string(rs)+", mapped with spec.storageClassMapping")
	}
}

// quotaKeys are the ResourceQuota keys claims count against, for claims
// of storage class sc.
func quotaKeys(sc string) []corev1.ResourceName {
	keys := []corev1.ResourceName{corev1.ResourceRequestsStorage, corev1.ResourcePersistentVolumeClaims}
	if sc != "" {
		keys = append(keys, corev1.ResourceName(sc+".storageclass.storage.k8s.io/requests.storage"), corev1.ResourceName(sc+".storageclass.storage.k8s.io/persistentvolumeclaims"))
	}
	return keys
}

// checkQuotas adds up the claims the move creates in each namespace
// against the ResourceQuotas that will hold there (the target's, and the
// restored ones where the target has none of that name), and checks each
// claim against the PersistentVolumeClaim LimitRanges; a claim beyond
// either is refused (a blocker).
func checkQuotas(_ context.Context, e *env) {
	exists := e.existing()
	quotas := map[string][]corev1.ResourceQuota{}
	names := map[string]bool{}
	for _, q := range e.t.quotas {
		quotas[q.Namespace] = append(quotas[q.Namespace], q)
		names[q.Namespace+"/"+q.Name] = true
	}
	for _, q := range objectsOf[corev1.ResourceQuota](e.c, "/ResourceQuota") {
		if !names[q.Namespace+"/"+q.Name] {
			q.Status.Used = nil // created by the move: nothing in use yet
			quotas[q.Namespace] = append(quotas[q.Namespace], q)
		}
	}
	limits := map[string][]corev1.LimitRange{}
	seen := map[string]bool{}
	for _, l := range e.t.limitRanges {
		limits[l.Namespace] = append(limits[l.Namespace], l)
		seen[l.Namespace+"/"+l.Name] = true
	}
	for _, l := range objectsOf[corev1.LimitRange](e.c, "/LimitRange") {
		if !seen[l.Namespace+"/"+l.Name] {
			limits[l.Namespace] = append(limits[l.Namespace], l)
		}
	}
	type use struct {
		qty  resource.Quantity
		objs []string
	}
	need := map[string]map[corev1.ResourceName]*use{} // namespace → key
	for _, pvc := range e.claims() {
		obj := objectName("persistentvolumeclaims", pvc.Namespace, pvc.Name)
		req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		checkClaimLimits(e, limits[pvc.Namespace], obj, req)
		if exists[obj] {
			continue // the target's claim is kept: it counts already
		}
		sc, named := claimClass(&pvc)
		if !named {
			if d, ok := e.defaultClass(); ok {
				sc = d.Name
			}
		}
		if need[pvc.Namespace] == nil {
			need[pvc.Namespace] = map[corev1.ResourceName]*use{}
		}
		for _, k := range quotaKeys(sc) {
			u := need[pvc.Namespace][k]
			if u == nil {
				u = &use{}
				need[pvc.Namespace][k] = u
			}
			if strings.HasSuffix(string(k), "persistentvolumeclaims") {
				u.qty.Add(*resource.NewQuantity(1, resource.DecimalSI))
			} else {
				u.qty.Add(req)
			}
			u.objs = append(u.objs, obj)
		}
	}
	for ns, keys := range need {
		for _, q := range quotas[ns] {
			for k, u := range keys {
				hard, ok := q.Spec.Hard[k]
				if !ok {
					continue
				}
				total := q.Status.Used[k].DeepCopy()
				total.Add(u.qty)
				if total.Cmp(hard) > 0 {
					used := q.Status.Used[k]
					e.add(report.Blocker, "quota", u.objs, fmt.Sprintf("ResourceQuota %s/%s allows %s of %s; %s is in use and the move adds %s: the claims beyond it are refused", ns, q.Name, hard.String(), k, used.String(), u.qty.String()),
						fmt.Sprintf("raise spec.hard[%s] of ResourceQuota %s/%s in the target (to at least %s), or leave claims out", k, ns, q.Name, total.String()))
				}
			}
		}
	}
}

// checkClaimLimits checks one claim's request against the
// PersistentVolumeClaim limits of its namespace.
func checkClaimLimits(e *env, limits []corev1.LimitRange, obj string, req resource.Quantity) {
	for _, l := range limits {
		for _, it := range l.Spec.Limits {
			if it.Type != corev1.LimitTypePersistentVolumeClaim {
				continue
			}
			if max, ok := it.Max[corev1.ResourceStorage]; ok && req.Cmp(max) > 0 {
				e.add(report.Blocker, "quota", []string{obj}, fmt.Sprintf("requests %s of storage; LimitRange %s/%s allows at most %s per claim: the claim is refused", req.String(), l.Namespace, l.Name, max.String()),
					"raise the LimitRange's max storage in the target, or leave the claim out")
			}
			if min, ok := it.Min[corev1.ResourceStorage]; ok && req.Cmp(min) < 0 {
				e.add(report.Blocker, "quota", []string{obj}, fmt.Sprintf("requests %s of storage; LimitRange %s/%s asks at least %s per claim: the claim is refused", req.String(), l.Namespace, l.Name, min.String()),
					"lower the LimitRange's min storage in the target, or raise the claim's request with spec.resourceModifiers")
			}
		}
	}
}

// existing are the objects the dry run found in the target already.
func (e *env) existing() map[string]bool {
	return existingIn(e.results, true)
}

// existingIn are the objects results found in the target already;
// with updated, those the restore updates too (else only those it keeps).
func existingIn(results *report.Results, updated bool) map[string]bool {
	out := map[string]bool{}
	for _, it := range results.Items {
		if it.Outcome == report.Unchanged || it.Reason == "exists, differs" || (updated && it.Outcome == report.Updated) {
			ns, name := it.Namespace, it.Name
			if it.TargetNamespace != "" {
				ns = it.TargetNamespace
			}
			if it.TargetName != "" {
				name = it.TargetName
			}
			out[objectName(it.Resource, ns, name)] = true
		}
	}
	return out
}
