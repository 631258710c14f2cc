package transform

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// serverSetAnnotations are written by controllers of the source cluster
// and would be wrong in the target; the target's controllers set their own.
var serverSetAnnotations = []string{
	"deployment.kubernetes.io/revision",
	"kubectl.kubernetes.io/restartedAt-applied", // never set by kubectl itself; harmless
}

// Sanitize removes the fields the source's API server set for its own
// bookkeeping (uid, resourceVersion, creationTimestamp, managedFields,
// generation, selfLink, deletion fields), drops .status unless the
// restore keeps it, and rewrites or drops ownerReferences: an owner that
// this restore created gets its new UID, any other owner is removed
// (docs/design.md#sanitize).
func Sanitize(c *Context, u *unstructured.Unstructured) []string {
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	if ann := u.GetAnnotations(); ann != nil {
		for _, a := range serverSetAnnotations {
			delete(ann, a)
		}
		if len(ann) == 0 {
			ann = nil
		}
		u.SetAnnotations(ann)
	}
	if !c.KeepStatus {
		unstructured.RemoveNestedField(u.Object, "status")
	}
	var notes []string
	refs := u.GetOwnerReferences()
	if len(refs) > 0 {
		kept := refs[:0]
		for _, r := range refs {
			if c.OwnerUIDs != nil {
				if uid, ok := c.OwnerUIDs(string(r.UID)); ok {
					r.UID = typesUID(uid)
					kept = append(kept, r)
					continue
				}
			}
			notes = append(notes, "ownerReference to "+r.Kind+" "+r.Name+" removed: the owner is not in this restore")
		}
		if len(kept) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "ownerReferences")
		} else {
			u.SetOwnerReferences(kept)
		}
	}
	return notes
}

// Labels adds ferry.dev/backup=<backup> and ferry.dev/restore=<restore> to
// every restored object.
func Labels(c *Context, u *unstructured.Unstructured) []string {
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[v1alpha1.LabelBackup] = LabelValue(c.BackupName)
	l[v1alpha1.LabelRestore] = LabelValue(c.RestoreName)
	u.SetLabels(l)
	return nil
}
