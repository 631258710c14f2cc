package restore

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// deferOwners takes out of u, a claim created before its owners
// (beforeOwners), its references to the owners in the plan that are not
// restored yet, keeping them in it.adopt, and says so in the changes.
// References to owners already restored, or not in the plan, are left to
// transform.Sanitize.
func (a *applier) deferOwners(it *Item, u *unstructured.Unstructured) []string {
	it.adopt = nil
	var keep []metav1.OwnerReference
	var changes []string
	for _, ref := range u.GetOwnerReferences() {
		owner, ok := a.plan.byUID[string(ref.UID)]
		if !ok || owner.Skip != "" || owner.done.Load() {
			keep = append(keep, ref)
			continue
		}
		it.adopt = append(it.adopt, ref)
		changes = append(changes, fmt.Sprintf("ownerReference to %s %s set once the owner is restored: the claim is created, and its data restored, before its owner", ref.Kind, ref.Name))
	}
	u.SetOwnerReferences(keep)
	if len(keep) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "ownerReferences")
	}
	return changes
}

// adoptClaims gives each claim that was created before its owners the
// references to them, with the owners' UIDs in the target, once the
// owners are restored: a StatefulSet with
// persistentVolumeClaimRetentionPolicy whenDeleted: Delete owns its claims
// in the target as in the source. The patch merges by UID (strategic
// merge), so a reference the owner's controller set meanwhile is kept
// once. An owner that was not restored (it failed, or was held back) is a
// warning: the claim keeps its data and no reference to it.
func (a *applier) adoptClaims(ctx context.Context) {
	for _, it := range a.plan.Items {
		if len(it.adopt) == 0 {
			continue
		}
		ns, name := it.TargetNamespace, it.TargetName
		var refs []metav1.OwnerReference
		for _, ref := range it.adopt {
			owner := a.plan.byUID[string(ref.UID)]
			uid := owner.targetUID.Load()
			if uid == nil {
				a.results.Warnf("claim %s/%s: its owner %s %s was not restored, so the claim has no ownerReference to it (its data is kept)", ns, name, ref.Kind, ref.Name)
				continue
			}
			ref.UID = types.UID(*uid)
			refs = append(refs, ref)
		}
		if len(refs) == 0 {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
		_, err := a.cluster.Typed.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			a.results.Errorf("claim %s/%s: setting its ownerReferences to its restored owners: %v", ns, name, err)
		}
	}
}
