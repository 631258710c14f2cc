package transform

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RestoreWaitContainer is the name of the init container a restore adds
// to pods whose volume data it restores (Velero's restore-wait approach).
const RestoreWaitContainer = "ferry-restore-wait"

// restoreMountRoot is where the init container mounts each volume.
const restoreMountRoot = "/restores"

// markerDir is pkg/volumes.MarkerDir: the volume's folder of done-markers.
const markerDir = ".ferry"

// Annotations on a pod that waits for its volume data: what a node agent
// needs to restore it (pkg/volumes.PendingRestores).
const (
	AnnotationRestoreUID      = "ferry.dev/restore-uid"
	AnnotationRestoreBackup   = "ferry.dev/restore-backup"
	AnnotationSourceNamespace = "ferry.dev/source-namespace"
	AnnotationRestoreVolumes  = "ferry.dev/restore-volumes"
	// AnnotationRestoreVolumesBy says who writes the data: one of the
	// RestoreBy* values. Only pods marked RestoreByNodeAgent (or, from
	// before this annotation, unmarked) are taken by a polling node agent.
	AnnotationRestoreVolumesBy = "ferry.dev/restore-volumes-by"
)

// Values of AnnotationRestoreVolumesBy.
const (
	// RestoreByRestore: the restore process itself (restore.PodVolumeOptions).
	RestoreByRestore = "restore"
	// RestoreByNodeAgent: a node agent polling for waiting pods
	// (restore.PodVolumeOptions.ByNodeAgent).
	RestoreByNodeAgent = "node-agent"
	// RestoreByPodVolumeRestore: the server, through PodVolumeRestore
	// objects that the node agent of the pod's node reconciles.
	RestoreByPodVolumeRestore = "PodVolumeRestore"
)

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
	// By is the AnnotationRestoreVolumesBy value (a RestoreBy* constant).
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
		markers = append(markers, path.Join(mp, markerDir, pvr.RestoreUID))
	}
	ic := map[string]any{
		"name":            RestoreWaitContainer,
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
		if m, ok := c.(map[string]any); ok && m["name"] == RestoreWaitContainer {
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
	ann[AnnotationRestoreUID] = pvr.RestoreUID
	ann[AnnotationRestoreBackup] = pvr.Backup
	ann[AnnotationSourceNamespace] = srcNS
	ann[AnnotationRestoreVolumes] = strings.Join(vols, ",")
	if pvr.By != "" {
		ann[AnnotationRestoreVolumesBy] = pvr.By
	}
	u.SetAnnotations(ann)
	return []string{fmt.Sprintf("init container %s added: waits for the data of volumes %s", RestoreWaitContainer, strings.Join(vols, ", "))}
}
