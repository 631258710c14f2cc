package transform

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// restoreMountRoot is where the init container mounts each volume.
const restoreMountRoot = "/restores"

// PodVolumeRestore says which restored pods wait for their volume data.
type PodVolumeRestore struct {
	// RestoreUID names the done-markers: <volume>/.ferry/<RestoreUID>.
	RestoreUID string
	// Image runs the init container; it needs /bin/sh, test and sleep.
	Image string
	// Volumes maps a pod's target "namespace/name" to the names of its
	// volumes whose data the restore writes.
	Volumes map[string][]string
	// Backup is the backup's name; SourceNamespaces maps a target
	// namespace back to its source.
	Backup           string
	SourceNamespaces map[string]string
	// By is the v1alpha1.AnnotationRestoreVolumesBy value (a RestoreBy* constant).
	By string
}

// WaitScript is the init container's shell loop: it returns once every
// marker file exists.
func WaitScript(markers []string) string {
	var tests []string
	for _, m := range markers {
		tests = append(tests, "[ -f '"+m+"' ]")
	}
	return "until " + strings.Join(tests, " && ") + "; do sleep 1; done; echo ferry: volume data restored"
}

// PodVolumes adds the init container ferry-restore-wait, first of the
// pod's init containers, to pods whose volume data the restore writes: it
// mounts each such volume at /restores/<volume> and waits until the
// restore's done-marker /restores/<volume>/.ferry/<restore UID> exists,
// so that no container starts on a half-restored volume.
func PodVolumes(c *Context, u *unstructured.Unstructured) []string {
	pvr := c.PodVolumeRestore
	if pvr == nil {
		return nil
	}
	vols := append([]string(nil), pvr.Volumes[u.GetNamespace()+"/"+u.GetName()]...)
	if len(vols) == 0 {
		return nil
	}
	sort.Strings(vols)
	var mounts []any
	var markers []string
	for _, v := range vols {
		mp := path.Join(restoreMountRoot, v)
		mounts = append(mounts, map[string]any{"name": v, "mountPath": mp})
		markers = append(markers, path.Join(mp, v1alpha1.DoneMarkerDir, pvr.RestoreUID))
	}
	ic := map[string]any{
		"name":            v1alpha1.RestoreWaitContainer,
		"image":           pvr.Image,
		"imagePullPolicy": "IfNotPresent",
		"command":         []any{"/bin/sh", "-c", WaitScript(markers)},
		"volumeMounts":    mounts,
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "10m", "memory": "16Mi"},
			"limits":   map[string]any{"cpu": "100m", "memory": "64Mi"},
		},
	}
	inits, _, _ := unstructured.NestedSlice(u.Object, "spec", "initContainers")
	kept := []any{ic}
	for _, c := range inits {
		if m, ok := c.(map[string]any); ok && m["name"] == v1alpha1.RestoreWaitContainer {
			continue // from an earlier restore of a restored pod
		}
		kept = append(kept, c)
	}
	_ = unstructured.SetNestedSlice(u.Object, kept, "spec", "initContainers")
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	srcNS := u.GetNamespace()
	if s, ok := pvr.SourceNamespaces[srcNS]; ok {
		srcNS = s
	}
	ann[v1alpha1.AnnotationRestoreUID] = pvr.RestoreUID
	ann[v1alpha1.AnnotationRestoreBackup] = pvr.Backup
	ann[v1alpha1.AnnotationSourceNamespace] = srcNS
	ann[v1alpha1.AnnotationRestoreVolumes] = strings.Join(vols, ",")
	if pvr.By != "" {
		ann[v1alpha1.AnnotationRestoreVolumesBy] = pvr.By
	}
	u.SetAnnotations(ann)
	return []string{fmt.Sprintf("init container %s added: waits for the data of volumes %s", v1alpha1.RestoreWaitContainer, strings.Join(vols, ", "))}
}
